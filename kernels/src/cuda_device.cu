#include <cuda_runtime.h>

#include <fmt/format.h>

#include "kvlab/kernels/cuda_device.h"

namespace kvlab::cuda {

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    return make_error(fmt::format("CUDA: no usable GPU ({})", cudaGetErrorString(err)));
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t err = cudaGetDeviceProperties(&prop, i); err != cudaSuccess) {
      return make_error(
          fmt::format("CUDA: reading device {} failed ({})", i, cudaGetErrorString(err)));
    }
    out.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return out;
}

}  // namespace kvlab::cuda
