// Float buffers whose data starts on a 64-byte boundary (a cache line; an AVX-512 register).
//
// Why: Eigen's vectorised reductions and products peel their first elements up to an aligned
// address, so the order in which they add floats, and with it the last bits of the result,
// depends on where the heap happened to put a buffer. For the model runner that made the same
// quality run give different numbers in two processes (perplexity in the sixth digit, and the
// chaotic greedy and quantized paths far more). Every buffer the runner computes in starts
// aligned, so its results depend on the inputs alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

namespace kvlab {

template <class T, std::size_t Alignment = 64>
struct AlignedAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, Alignment>;
  };
  AlignedAllocator() noexcept = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, Alignment>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(Alignment)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ::operator delete(p, n * sizeof(T), std::align_val_t(Alignment));
  }
  template <class U>
  bool operator==(const AlignedAllocator<U, Alignment>&) const noexcept {
    return true;
  }
};

using AlignedFloats = std::vector<float, AlignedAllocator<float>>;

namespace detail {
// Buffers of at least kHugeBufferBytes get an anonymous mapping of their own, aligned to and
// advised to use 2 MiB huge pages: first touching them then faults once per 2 MiB instead of
// once per 4 KiB, and giving them back unmaps 512 times fewer page-table entries (on this
// project's machines both about halve: docs/PERFORMANCE.md). The mapping reads as zeros.
inline constexpr std::size_t kHugeBufferBytes = std::size_t{4} << 20;
void* map_huge_buffer(std::size_t bytes);  // throws std::bad_alloc
void unmap_huge_buffer(void* p, std::size_t bytes) noexcept;
// What HugePageAllocator maps and unmaps through: while a KeepFreedBuffers lives, up to 8 freed
// buffers stay mapped, their pages written, for the next request of the same length (a run's
// next layer), which then neither faults nor zeroes them again. Their contents are stale.
void* take_huge_buffer(std::size_t bytes);  // throws std::bad_alloc
void give_huge_buffer(void* p, std::size_t bytes) noexcept;
// Alive for a run that frees and asks for buffers of the same lengths over and over; when the
// last one ends, every kept buffer is unmapped.
class KeepFreedBuffers {
 public:
  KeepFreedBuffers();
  ~KeepFreedBuffers();
  KeepFreedBuffers(const KeepFreedBuffers&) = delete;
  KeepFreedBuffers& operator=(const KeepFreedBuffers&) = delete;
};
}  // namespace detail

// For large working buffers written before they are read (a layer's floats at long context):
// huge pages from kHugeBufferBytes up, the 64-byte aligned heap below; no zero-fill on resize.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= detail::kHugeBufferBytes) return static_cast<T*>(detail::take_huge_buffer(bytes));
    return static_cast<T*>(::operator new(bytes, std::align_val_t(64)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= detail::kHugeBufferBytes) {
      detail::give_huge_buffer(p, bytes);
    } else {
      ::operator delete(p, bytes, std::align_val_t(64));
    }
  }
  // resize() leaves new elements uninitialised: these buffers are written before they are
  // read, and zero-filling 134 MB (a layer at 32K) costs as much as writing it.
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    if constexpr (sizeof...(Args) == 0) {
      ::new (static_cast<void*>(p)) U;
    } else {
      ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

using HugePageFloats = std::vector<float, HugePageAllocator<float>>;
using HugePageBytes = std::vector<std::uint8_t, HugePageAllocator<std::uint8_t>>;

}  // namespace kvlab
