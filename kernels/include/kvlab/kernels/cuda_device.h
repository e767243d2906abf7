// What the CUDA backend can see. No CUDA headers leak from here.
#pragma once

#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"

namespace kvlab::cuda {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::size_t total_memory = 0;  // bytes
  int sm_major = 0, sm_minor = 0;
};

// The GPUs present, or an error saying why none can be used (no driver, no device).
Result<std::vector<DeviceInfo>> list_devices();

}  // namespace kvlab::cuda
