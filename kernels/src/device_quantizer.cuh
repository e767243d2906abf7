// A method's quantizer on the GPU: the device half of a Quantizer (quantizer.h) under the same
// contract. quantize() reads a tensor already on the device, in its stored dtype, and keeps codes
// and parameters in device buffers of its own; dequantize() writes the reconstruction as floats
// into a device buffer; download() gives the QuantizedTensor the CPU quantizer gives for the same
// input, byte for byte (codes packed as the CPU packs them, parameters in the CPU's order), which
// the backend-equivalence tests compare. Everything runs on the caller's stream; only
// histograms() and download() wait for it.
//
// One factory per method family, each in its own .cu file; make_device_quantizer() asks them in
// turn. A family answers null for a configuration it does not run (the CPU then runs the layers).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda_check.cuh"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::cuda {

// A contiguous [tokens][heads][dim] tensor on the device, in its stored dtype.
struct DeviceTensor {
  const void* data = nullptr;
  DType dtype = DType::F16;
  int tokens = 0, heads = 0, dim = 0;
  KVLAB_HOST_DEVICE std::size_t elements() const {
    return static_cast<std::size_t>(tokens) * heads * dim;
  }
};

#if defined(__CUDACC__)
// Element i of a stored tensor as float: exact for fp16, bf16 and float32, as the CPU's
// convert_to_float.
__device__ __forceinline__ float load_element(const void* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::F16:
      return __half2float(__ushort_as_half(static_cast<const std::uint16_t*>(data)[i]));
    case DType::BF16:
      return __bfloat162float(__ushort_as_bfloat16(static_cast<const std::uint16_t*>(data)[i]));
    case DType::F32:
      return static_cast<const float*>(data)[i];
  }
  return 0.f;
}
#endif

class DeviceQuantizer {
 public:
  virtual ~DeviceQuantizer() = default;
  // Quantizes `x` into this object's device buffers (replacing the last tensor's).
  virtual Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t stream) = 0;
  // The last quantized tensor's reconstruction: tokens * heads * dim floats at `out` (device).
  virtual Status dequantize(float* out, cudaStream_t stream) = 0;
  // Quantizer::histograms() of the last tensor. Waits for the stream.
  virtual Result<std::vector<CodeHistogram>> histograms(cudaStream_t stream) = 0;
  // The bytes kept for the last tensor (QuantizedTensor::bytes), known without the data.
  virtual ByteBreakdown bytes() const = 0;
  // The last tensor as the CPU quantizer stores it. Waits for the stream.
  virtual Result<QuantizedTensor> download(cudaStream_t stream) = 0;
  // Byte codes [tokens][heads][dim] on the device, for the entropy coder (KVComp); null for
  // methods whose codes are not coded.
  virtual const std::uint8_t* byte_codes() const { return nullptr; }
};

// The device quantizer of `config` (as method_for_cache gave it), or null when the GPU has none
// for it. Errors only for a configuration no quantizer takes.
Result<std::unique_ptr<DeviceQuantizer>> make_device_quantizer(const MethodConfig& config);

// The families, each answering null for what it does not run.
std::unique_ptr<DeviceQuantizer> make_group_device_quantizer(const MethodConfig& config);
std::unique_ptr<DeviceQuantizer> make_fp8_device_quantizer(const MethodConfig& config);
std::unique_ptr<DeviceQuantizer> make_block_device_quantizer(const MethodConfig& config);
std::unique_ptr<DeviceQuantizer> make_turboquant_device_quantizer(const MethodConfig& config);
std::unique_ptr<DeviceQuantizer> make_kvquant_device_quantizer(const MethodConfig& config);

// Counts of each byte code among codes[0, n) into 2^bits bins (the codes must be below 2^bits),
// read back to the host. Waits for the stream. `scratch` is reused between calls.
Result<std::vector<std::uint64_t>> count_byte_codes(const std::uint8_t* codes, std::size_t n,
                                                    int bits,
                                                    DeviceArray<unsigned long long>& scratch,
                                                    cudaStream_t stream);

// An error naming `who` for a tensor no quantizer takes: a negative dimension, or no data behind
// a non-empty shape.
inline Status check_device_tensor(const DeviceTensor& x, const char* who) {
  if (x.tokens < 0 || x.heads < 0 || x.dim < 0) {
    return make_error(std::string(who) + ": negative tensor shape (tokens " +
                      std::to_string(x.tokens) + ", heads " + std::to_string(x.heads) + ", dim " +
                      std::to_string(x.dim) + ")");
  }
  if (x.elements() > 0 && x.data == nullptr)
    return make_error(std::string(who) + ": null input tensor");
  return Ok{};
}

// Grows `a` to at least n elements (keeping nothing); a no-op when it is large enough.
template <class T>
Status ensure_size(DeviceArray<T>& a, std::size_t n, const char* what) {
  if (a.size() >= n) return Ok{};
  return a.allocate(n, what);
}

}  // namespace kvlab::cuda
