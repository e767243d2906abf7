// Group quantization on the GPU: the engine's detail::quantize_groups (engine/src/quant/
// group_quant.h) operation for operation, so the codes and parameters are the CPU's. Keys per
// channel over groups of tokens (KIVI, the age tiers, KVComp's key blocks), values per token over
// groups of channels. One byte per code on the device. The one copy of these kernels: the device
// quantizers (quant_group.cu), the GPU layer (code_encode.cu) and the bench launch them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "quant/group_quant.h"  // GroupSpec, and through it DType, TensorRole, group_rules.h

namespace kvlab::cuda {

// A group pass's arguments: a GroupSpec's rules for one [tokens][heads][dim] tensor.
struct GroupArgs {
  const void* x = nullptr;  // the first token, in `dtype`
  DType dtype = DType::F16;
  int tokens = 0, heads = 0, dim = 0;
  int bits = 8, key_group = 32, value_width = 32;
  bool relative = false;
  float rel_scale = 0.f, max_code = 255.f;
  rules::ParamDtype params = rules::ParamDtype::F32;
  std::uint8_t* codes = nullptr;  // the first token's first code
  float* steps = nullptr;         // group_units() each, the CPU's unit order
  float* mins = nullptr;
};

// The arguments `spec` gives a tensor of this shape, pointers left null: the value width, the
// largest code and the parameter dtype as the CPU's quantize_groups() derives them.
GroupArgs group_args(const detail::GroupSpec& spec, DType dtype, int tokens, int heads, int dim);

// Units (one step and one minimum each) of a pass: detail::group_unit_count's count.
inline std::size_t group_units(const GroupArgs& a, TensorRole role) {
  if (role == TensorRole::Key) {
    return (static_cast<std::size_t>(a.tokens) + a.key_group - 1) / a.key_group *
           static_cast<std::size_t>(a.heads) * a.dim;
  }
  return static_cast<std::size_t>(a.tokens) * a.heads *
         ((static_cast<std::size_t>(a.dim) + a.value_width - 1) / a.value_width);
}

// Codes, steps and minimums of every token of the pass; nothing for an empty tensor.
cudaError_t launch_group_quantize(const GroupArgs& a, TensorRole role, cudaStream_t stream);
// out[token][head][dim] = min + code * step over the pass's tokens.
cudaError_t launch_group_dequantize(const GroupArgs& a, TensorRole role, float* out,
                                    cudaStream_t stream);

}  // namespace kvlab::cuda
