#include "kvlab/engine/core/aligned.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace kvlab::detail {

namespace {
constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}
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

}  // namespace kvlab::detail
