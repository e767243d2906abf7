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
#include <new>
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

}  // namespace kvlab
