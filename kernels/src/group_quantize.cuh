// Group quantization on the GPU, the engine's rule (engine/src/group_quant.h) operation for
// operation so the codes are the CPU's: keys per channel over groups of tokens (KIVI, KVComp's key
// blocks), values per token over groups of channels. One byte per code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kvlab::cuda {

struct GroupQuantArgs {
  const std::uint16_t* x = nullptr;  // fp16 [tokens][heads][dim]
  int tokens = 0, heads = 0, dim = 0;
  int bits = 8;
  int key_group_tokens = 64;
  int value_group_channels = 0;  // 0: whole head
  bool relative = true;
  float rel_scale = 0.05f;
  std::uint8_t* codes = nullptr;  // [tokens][heads][dim]
  float* steps = nullptr;         // group_unit_count() each, the engine's order
  float* mins = nullptr;
};

std::size_t gpu_group_units(const GroupQuantArgs& a, bool keys);
cudaError_t launch_group_quantize_keys(const GroupQuantArgs& a, cudaStream_t stream);
cudaError_t launch_group_quantize_values(const GroupQuantArgs& a, cudaStream_t stream);

}  // namespace kvlab::cuda
