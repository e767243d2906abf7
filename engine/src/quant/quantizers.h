// Constructors of the concrete quantizers; make_quantizer() (method.cpp) validates the
// configuration and picks one. Private to the engine.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::detail {

using ::kvlab::kTensorHeaderBytes;  // quantizer.h

std::unique_ptr<Quantizer> make_symmetric_quantizer(int bits);

// Age tiers, oldest first. Tokens are split from the newest end: `residual` newest tokens stay
// fp16; then each tier (newest to oldest) takes up to `tokens` (the oldest takes the rest),
// every boundary a multiple of `group_size` so key groups never straddle a boundary.
struct AgeTier {
  int bits = 4;
  int tokens = 0;  // 0 for the oldest tier: everything older
};
// Token boundaries of the tiers over `tokens` tokens: tier i covers [b[i], b[i+1]), the fp16
// residual [b[n], b[n+1] = tokens); every boundary below the residual a multiple of
// `group_size`. The CPU and the GPU quantizers (kernels/src/quant_group.cu) both cut so.
std::vector<int> age_tier_boundaries(const std::vector<AgeTier>& tiers, int group_size,
                                     int residual, int tokens);

// `params`: the dtype each group's step and minimum is stored in (group_quant.h).
std::unique_ptr<Quantizer> make_tiered_quantizer(std::string label, std::vector<AgeTier> tiers,
                                                 int group_size, int residual, DType params);

// KIVI's bits-bit keys per channel and values per token, groups of `group_size`, `residual`
// newest tokens in fp16 (kivi_quantizer.cpp).
std::unique_ptr<Quantizer> make_kivi_quantizer(std::string label, int bits, int group_size,
                                               int residual, DType params);
std::unique_ptr<Quantizer> make_fp8_quantizer(Fp8Format format, bool per_head);
std::unique_ptr<Quantizer> make_kvcomp_quantizer(int block_size, double rel_scale, DType params);

}  // namespace kvlab::detail
