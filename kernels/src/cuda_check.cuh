// Error handling and device memory for the kernels: every CUDA call is checked and a failure
// becomes an Error naming the op, never an abort. No fmt here: nvcc cannot compile fmt's
// compile-time format checks, and .cu files include this header.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "kvlab/engine/core/host_device.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::cuda {

// An Error naming `what` for a failed call. The runtime's last error is read (cleared) here, so
// that a later cudaGetLastError() check does not report this failure again; a sticky error (the
// context lost) stays, as it must.
inline Status cuda_status(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Ok{};
  (void)cudaGetLastError();
  return make_error(std::string("CUDA: ") + what + " failed: " + cudaGetErrorString(err) + " (" +
                    cudaGetErrorName(err) + ")");
}

// Returns from the enclosing function (which returns a Status or Result) on a CUDA error.
#define KVLAB_CUDA_TRY(call, what)                                                            \
  do {                                                                                        \
    if (::kvlab::Status kvlab_st_ = ::kvlab::cuda::cuda_status((call), (what)); !kvlab_st_) { \
      return kvlab_st_.error();                                                               \
    }                                                                                         \
  } while (0)
// After a kernel launch: the launch error, then (synchronously) any execution error.
#define KVLAB_CUDA_LAUNCH(what)                    \
  do {                                             \
    KVLAB_CUDA_TRY(cudaGetLastError(), what);      \
    KVLAB_CUDA_TRY(cudaDeviceSynchronize(), what); \
  } while (0)
#define KVLAB_TRY_STATUS(expr)                              \
  do {                                                      \
    if (::kvlab::Status kvlab_st2_ = (expr); !kvlab_st2_) { \
      return kvlab_st2_.error();                            \
    }                                                       \
  } while (0)

// Typed device allocation, freed on destruction. Move-only.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  ~DeviceArray() { reset(); }
  DeviceArray(DeviceArray&& o) noexcept
      : m_ptr(std::exchange(o.m_ptr, nullptr)), m_size(std::exchange(o.m_size, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      reset();
      m_ptr = std::exchange(o.m_ptr, nullptr);
      m_size = std::exchange(o.m_size, 0);
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  Status allocate(std::size_t n, const char* what) {
    reset();
    if (n == 0) return Ok{};
    void* p = nullptr;
    KVLAB_CUDA_TRY(cudaMalloc(&p, n * sizeof(T)), what);
    m_ptr = static_cast<T*>(p);
    m_size = n;
    return Ok{};
  }
  Status upload(const T* host, std::size_t n, const char* what) {
    KVLAB_TRY_STATUS(allocate(n, what));
    if (n) KVLAB_CUDA_TRY(cudaMemcpy(m_ptr, host, n * sizeof(T), cudaMemcpyHostToDevice), what);
    return Ok{};
  }
  Status download(T* host, std::size_t n, const char* what) const {
    if (n > m_size) return make_error(std::string("CUDA: ") + what + ": reading past the buffer");
    if (n) KVLAB_CUDA_TRY(cudaMemcpy(host, m_ptr, n * sizeof(T), cudaMemcpyDeviceToHost), what);
    return Ok{};
  }
  // Zeroes the buffer before any later work on any stream: cudaMemset runs on the legacy stream
  // and may return first, which a non-blocking stream's kernels do not wait for.
  Status zero(const char* what) {
    if (m_size) {
      KVLAB_CUDA_TRY(cudaMemset(m_ptr, 0, m_size * sizeof(T)), what);
      KVLAB_CUDA_TRY(cudaStreamSynchronize(cudaStreamLegacy), what);
    }
    return Ok{};
  }
  void reset() {
    if (m_ptr) cudaFree(m_ptr);
    m_ptr = nullptr;
    m_size = 0;
  }
  T* get() const { return m_ptr; }
  std::size_t size() const { return m_size; }
  std::size_t bytes() const { return m_size * sizeof(T); }

 private:
  T* m_ptr = nullptr;
  std::size_t m_size = 0;
};

}  // namespace kvlab::cuda
