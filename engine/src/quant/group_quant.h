// Asymmetric group quantization: the one mechanism behind KIVI, the age-tiered quantizer and
// KVComp's blockwise quantizer. Each unit (a group of elements sharing statistics) gets a
// minimum and a step; code = round((x - min) / step), x_hat = min + code * step, so
// |x - x_hat| <= step / 2 for every element.
//  - keys: per channel, over groups of `key_group_tokens` consecutive tokens (KIVI Sec. 3.2,
//    KVComp's key blocks); the last group may be shorter;
//  - values: per token, over groups of `value_group_channels` channels of one head (0 = the whole
//    head, as KVComp's per-token values).
// Private to the engine.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/quant/group_rules.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::detail {

enum class StepRule {
  Levels,    // step = (max - min) / (2^bits - 1): the range spans every code (KIVI)
  Relative,  // step = rel_scale * (max - min): an error bound relative to the range (KVComp)
};

struct GroupSpec {
  int bits = 2;
  int key_group_tokens = 32;
  int value_group_channels = 32;  // 0: whole head
  StepRule rule = StepRule::Levels;
  double rel_scale = 0.0;
  // The precision each step and minimum is stored in. They are rounded to it (fp16 and bf16:
  // to nearest even, fp16 saturating at +-65504) before any code is computed, so the codes are
  // those the stored parameters reconstruct. KIVI's reference keeps them in the tensor's dtype
  // (fp16); KVComp's in float32.
  DType params = DType::F32;
};

// A parameter value as `spec.params` stores it (exactly representable in that dtype):
// group_rules.h's round_param.
float round_param(float v, DType params);
rules::ParamDtype param_dtype(DType params);

// KVComp's blockwise quantizer (Sec. 3.2): 8-bit codes, a step of rel_scale times the unit's
// range, keys per channel over blocks of `block_size` tokens, values per token over the whole
// head. The one spec of the quantizer (kvcomp_quantizer.cpp), the streaming cache and the GPU's.
inline GroupSpec kvcomp_group_spec(int block_size, double rel_scale, DType params = DType::F32) {
  return GroupSpec{8, block_size, 0, StepRule::Relative, rel_scale, params};
}

// KIVI and the age tiers: `bits` levels, keys per channel over `group` tokens, values per token
// over `group` channels. The one spec of tiered_quantizer.cpp, the stored KIVI cache and the GPU's.
inline GroupSpec tier_group_spec(int bits, int group, DType params) {
  return GroupSpec{bits, group, group, StepRule::Levels, 0.0, params};
}

// Channels a value unit spans: G, or the whole head where G is 0 or above head_dim (the last
// unit of a head is narrower where G does not divide head_dim).
int value_group_width(const GroupSpec& spec, int dim);

// Number of units (each has one step and one minimum) for a tensor of this shape.
std::size_t group_unit_count(const GroupSpec& spec, TensorRole role, int tokens, int heads,
                             int dim);

// An upper bound of every code quantize_groups() gives under `spec`, whatever the data: 2^bits - 1
// for Levels; for Relative the unit's maximum lands on (max - min) / step = 1 / rel_scale, rounded
// (with a margin for the float arithmetic), and never above 2^bits - 1. With parameters rounded
// to fp16 or bf16 the step may round down a little, so the maximum can land above that bound:
// the code is then clamped to 2^bits - 1, the Relative bound gains one code of margin.
int largest_code(const GroupSpec& spec);

// Quantizes every token of `x`. `codes` receives packed_bytes(elements, bits) bytes starting at
// code index `first_code`; `steps` and `mins` receive group_unit_count() floats each.
void quantize_groups(const TensorView& x, TensorRole role, const GroupSpec& spec,
                     std::uint8_t* codes, std::size_t first_code, float* steps, float* mins);

// out[i] = min + code * step for the n codes from code index `first` of a packed stream
// (codec/bitpack.h; bits 1, 2, 4 or 8), with a minimum and a step per code (per_channel: mn[i],
// step[i]) or one pair for all (mn[0], step[0]); the multiply-add is one fused rounding. The one
// reconstruction of group codes: dequantize_groups() and the stored KIVI cache
// (model/kv_method_store.cpp) call it, reading the codes where they lie.
void group_decode_row(const std::uint8_t* packed, std::size_t first, std::size_t n, int bits,
                      const float* mn, const float* step, bool per_channel, float* out);

// Writes token rows [first, last) of the reconstruction, [token][head][dim], into `out`
// ((last - first) * heads * dim floats): any range, so a caller can hold a tile of a tensor's
// reconstruction at a time (Quantizer::dequantize_tokens); [0, tokens) is the whole tensor.
void dequantize_groups(const std::uint8_t* codes, std::size_t first_code, const float* steps,
                       const float* mins, TensorRole role, const GroupSpec& spec, int heads,
                       int dim, int first, int last, float* out);

}  // namespace kvlab::detail
