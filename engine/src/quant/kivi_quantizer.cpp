// KIVI (Liu et al. 2024, "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache",
// arXiv:2402.02750, Sec. 3.2-3.3; reference code github.com/jy-yuan/KIVI): keys quantized per
// channel over groups of G consecutive tokens, values per token over groups of G channels, each
// group with its own step and minimum ((max - min) / (2^bits - 1), round to nearest), and the
// newest R tokens (the residual) kept in fp16 until a whole group of them is ready.
//
// It is the one-tier case of the age-tiered quantizer (tiered_quantizer.cpp), whose group
// arithmetic is group_quant.h's; this file is where the method and its parameters are named.
//
// Known difference from the reference, kept for now (issue 22): the reference stores each
// group's scale and minimum in fp16; here they are float32, counted as 4 bytes each.
#include <string>

#include "kvlab/engine/quant/kivi.h"
#include "quant/quantizers.h"

namespace kvlab {

ByteBreakdown kivi_tensor_bytes(const KiviShape& s, TensorRole role) {
  const std::uint64_t g = static_cast<std::uint64_t>(s.group_size);
  const std::uint64_t r = static_cast<std::uint64_t>(s.residual);
  const std::uint64_t q = (s.tokens > r ? s.tokens - r : 0) / g * g;  // whole groups quantized
  const std::uint64_t units =
      role == TensorRole::Key ? q / g * s.heads * s.dim : q * s.heads * ((s.dim + g - 1) / g);
  ByteBreakdown b;
  b.codes = (q * s.heads * s.dim * static_cast<std::uint64_t>(s.bits) + 7) / 8;
  b.scales = units * sizeof(float);
  b.zero_points = units * sizeof(float);
  b.residual = (s.tokens - q) * s.heads * s.dim * sizeof(std::uint16_t);
  b.metadata = kTensorHeaderBytes + 3 * sizeof(std::uint32_t);  // one tier: three bounds
  return b;
}

}  // namespace kvlab

namespace kvlab::detail {

std::unique_ptr<Quantizer> make_kivi_quantizer(std::string label, int bits, int group_size,
                                               int residual) {
  return make_tiered_quantizer(std::move(label), {{bits, 0}}, group_size, residual);
}

}  // namespace kvlab::detail
