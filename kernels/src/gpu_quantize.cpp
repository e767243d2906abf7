// quantize_on_gpu (gpu_quantize.h): upload, quantize, read back, on a stream of its own.
#include "kvlab/kernels/gpu_quantize.h"

#include <cuda_runtime.h>

#include "device_quantizer.cuh"
#include "kvlab/kernels/gpu_kv.h"

namespace kvlab::cuda {

Result<std::optional<GpuQuantized>> quantize_on_gpu(const Tensor& x, TensorRole role,
                                                    const MethodConfig& config) {
  KVLAB_TRY_STATUS(require_gpu());
  auto made = make_device_quantizer(config);
  if (!made) return made.error();
  if (!*made) return std::optional<GpuQuantized>();
  DeviceQuantizer& q = **made;
  DeviceArray<std::byte> stored;
  KVLAB_TRY_STATUS(stored.upload(x.data(), x.nbytes(), "GPU quantize: uploading"));
  DeviceArray<float> recon;
  KVLAB_TRY_STATUS(recon.allocate(std::max<std::size_t>(x.elements(), 1), "GPU quantize"));
  // A blocking stream: its work waits for the uploads above, which ran on the legacy stream
  // (a cudaMemcpy from pageable memory may return before its data reaches the device).
  cudaStream_t s = nullptr;
  KVLAB_CUDA_TRY(cudaStreamCreate(&s), "GPU quantize: stream");
  const auto run = [&]() -> Result<GpuQuantized> {
    const DeviceTensor dx{stored.get(), x.dtype(), x.tokens(), x.heads(), x.dim()};
    KVLAB_TRY(q.quantize(dx, role, s));
    KVLAB_TRY(q.dequantize(recon.get(), s));
    GpuQuantized out;
    auto h = q.histograms(s);
    if (!h) return h.error();
    out.histograms = std::move(*h);
    auto t = q.download(s);
    if (!t) return t.error();
    out.tensor = std::move(*t);
    out.reconstruction.resize(x.elements());
    KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU quantize");
    KVLAB_TRY_STATUS(recon.download(out.reconstruction.data(), x.elements(), "GPU quantize"));
    return out;
  };
  auto out = run();
  cudaStreamDestroy(s);
  if (!out) return out.error();
  return std::optional<GpuQuantized>(std::move(*out));
}

}  // namespace kvlab::cuda
