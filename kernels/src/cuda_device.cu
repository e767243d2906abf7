#include <cuda_runtime.h>

#include <string>

#include "kvlab/kernels/cuda_device.h"

namespace kvlab::cuda {

Result<std::vector<DeviceInfo>> list_devices() {
  int count = 0;
  if (const cudaError_t err = cudaGetDeviceCount(&count); err != cudaSuccess) {
    cudaGetLastError();
    return make_error(std::string("CUDA: no usable GPU (") + cudaGetErrorString(err) + ")");
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t err = cudaGetDeviceProperties(&prop, i); err != cudaSuccess) {
      return make_error("CUDA: reading device " + std::to_string(i) + " failed (" +
                        cudaGetErrorString(err) + ")");
    }
    out.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor});
  }
  return out;
}

}  // namespace kvlab::cuda
