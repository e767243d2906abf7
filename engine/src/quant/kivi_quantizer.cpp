// KIVI (Liu et al. 2024, "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache",
// arXiv:2402.02750, Sec. 3.2-3.3; reference code github.com/jy-yuan/KIVI): keys quantized per
// channel over groups of G consecutive tokens, values per token over groups of G channels, each
// group with its own step and minimum ((max - min) / (2^bits - 1), round to nearest), and the
// newest R tokens (the residual) kept in fp16 until a whole group of them is ready.
//
// It is the one-tier case of the age-tiered quantizer (tiered_quantizer.cpp), whose group
// arithmetic is group_quant.h's; this file is where the method and its parameters are named.
//
// Parameter precision as the reference: its quantizer (quant/new_pack.py,
// triton_quantize_and_pack_along_last_dim, and the per-token quant_and_pack_vcache) computes each
// group's min and scale = (max - min) / (2^bits - 1) in the tensor's dtype and keeps them so:
// fp16 for the fp16 models of the paper. Here they are rounded to fp16 (to nearest even) before
// the codes are computed and counted as 2 bytes each; --param-dtype bf16 / fp32 stores them
// otherwise. The element arithmetic is float32 (the reference's is fp16), and ties round half up
// (torch.round: half to even), so a code can differ by one on an exact tie.
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
  b.scales = units * s.param_bytes;
  b.zero_points = units * s.param_bytes;
  b.residual = (s.tokens - q) * s.heads * s.dim * sizeof(std::uint16_t);
  b.metadata = kTensorHeaderBytes + 3 * sizeof(std::uint32_t);  // one tier: three bounds
  return b;
}

}  // namespace kvlab

namespace kvlab::detail {

std::unique_ptr<Quantizer> make_kivi_quantizer(std::string label, int bits, int group_size,
                                               int residual, DType params) {
  return make_tiered_quantizer(std::move(label), {{bits, 0}}, group_size, residual, params);
}

}  // namespace kvlab::detail
