#include "kvlab/engine/core/aligned.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

namespace kvlab::detail {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}
// Buffers freed while a KeepFreedBuffers is alive, by their length, for the next request of the
// same length.
struct FreedBuffers {
  std::mutex mutex;
  int keepers = 0;
  std::vector<std::pair<void*, std::size_t>> kept;
};
FreedBuffers& freed() {
  static FreedBuffers f;
  return f;
}
constexpr std::size_t kKeptBuffers = 8;
}  // namespace

void* map_huge_buffer(std::size_t bytes) {
  // Map one huge page more than needed, then unmap what lies before the first huge-page
  // boundary and after the buffer, so the buffer alone stays mapped and starts aligned.
  const std::size_t length = round_up(bytes, kHugePage);
  void* mapping = ::mmap(nullptr, length + kHugePage, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<std::uintptr_t>(mapping);
  const std::uintptr_t start = round_up(base, kHugePage);
  if (start > base) ::munmap(mapping, start - base);
  const std::uintptr_t end = base + length + kHugePage;
  if (end > start + length) ::munmap(reinterpret_cast<void*>(start + length), end - start - length);
  void* p = reinterpret_cast<void*>(start);
  ::madvise(p, length, MADV_HUGEPAGE);  // advice only: without huge pages it still works
  return p;
}

void unmap_huge_buffer(void* p, std::size_t bytes) noexcept {
  ::munmap(p, round_up(bytes, kHugePage));
}

void* take_huge_buffer(std::size_t bytes) {
  {
    FreedBuffers& f = freed();
    const std::lock_guard lock(f.mutex);
    const auto same = std::find_if(f.kept.begin(), f.kept.end(),
                                   [&](const auto& b) { return b.second == bytes; });
    if (same != f.kept.end()) {
      void* p = same->first;
      f.kept.erase(same);
      return p;
    }
  }
  return map_huge_buffer(bytes);
}

void give_huge_buffer(void* p, std::size_t bytes) noexcept {
  {
    FreedBuffers& f = freed();
    const std::lock_guard lock(f.mutex);
    if (f.keepers > 0 && f.kept.size() < kKeptBuffers) {
      f.kept.emplace_back(p, bytes);
      return;
    }
  }
  unmap_huge_buffer(p, bytes);
}

KeepFreedBuffers::KeepFreedBuffers() {
  FreedBuffers& f = freed();
  const std::lock_guard lock(f.mutex);
  ++f.keepers;
}

KeepFreedBuffers::~KeepFreedBuffers() {
  std::vector<std::pair<void*, std::size_t>> gone;
  {
    FreedBuffers& f = freed();
    const std::lock_guard lock(f.mutex);
    if (--f.keepers == 0) gone.swap(f.kept);
  }
  for (const auto& [p, bytes] : gone) unmap_huge_buffer(p, bytes);
}

}  // namespace kvlab::detail
