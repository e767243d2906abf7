// What KIVI's quantizer (engine/src/quant/kivi_quantizer.cpp) stores, as a formula the planner
// can evaluate for any context without quantizing anything.
#pragma once

#include <cstdint>

#include "kvlab/engine/quant/quantizer.h"

namespace kvlab {

struct KiviShape {
  std::uint64_t tokens = 0;
  std::uint64_t heads = 0, dim = 0;
  int bits = 2, group_size = 32, residual = 128;
  int param_bytes = 2;  // each step and minimum: fp16 as KIVI's reference (4 for float32)
};

// Bytes of one K or V tensor of `shape` as the quantizer keeps it: the packed codes of the whole
// groups of (tokens - residual) tokens, a step and minimum per group of param_bytes each (keys per
// channel over group_size tokens, values per token over group_size channels), the rest in fp16, the
// tensor header and the tier bounds. Equal to quantize(...).bytes.total() for every shape.
ByteBreakdown kivi_tensor_bytes(const KiviShape& shape, TensorRole role);

}  // namespace kvlab
