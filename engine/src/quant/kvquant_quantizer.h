// KVQuant (Hooper et al. 2024, "KVQuant: Towards 10 Million Context Length LLM Inference with KV
// Cache Quantization", arXiv:2401.18079): keys per channel and before RoPE (Sec. 3.1-3.2), values
// per token, non-uniform per-layer levels fitted offline (Sec. 3.3, "nuq", or NormalFloat), the
// largest values of each side kept exactly in a sparse table (Sec. 3.4, dense-and-sparse), and the
// first token(s) kept in fp16 (attention-sink aware, the reference's --first_few_fp16).
//
// What is stored, and in what precision, follows the reference (github.com/SqueezeAILab/KVQuant):
// - keys: per channel (head × dim) the calibrated lower and upper outlier thresholds in fp16
//   (QuantK.load_lookup_table: quantizer[0], quantizer[1] `.half()`); they are also the range:
//   offset = (upper + lower) / 2, scale = (upper − lower) / 2 (quant_fn_nuq_recon). A key entry
//   above upper or below lower is an outlier (get_outliers).
// - values: per token, over all heads of the token as the reference's v_proj output, the k
//   largest and k smallest entries are outliers and the largest and smallest left set the range,
//   kept as two fp16 numbers (QuantV.forward_fused_sparse: topk(k + 1), maxval / minval).
// - one codebook per tensor (a layer's K or V): 2^b levels in [-1, 1], fp32 (the reference's
//   `lut` is torch float after sklearn's float64 centroids).
// - the sparse table: CSR over tokens (rows) × head·dim (columns), int32 row pointers and int32
//   column indices as deployment's `to_sparse_csr().crow_indices().int()` / `col_indices().int()`;
//   the values as fp16 (exact for fp16 caches; the reference's GPU kernels hold them in fp32).
// - the first `sink_tokens` tokens as fp16, no codes (deployment keeps first_few_fp16 tokens
//   apart; the simulation marks them all outliers).
// - codes: b bits each, LSB first in one stream (bitpack.h's layout; 3-bit codes straddle bytes).
//
// QuantizedTensor layout (method-defined fields of quantizer.h), Tq = tokens − sinks, C = heads ·
// dim, L = 2^bits:
//   codes    packed codes of tokens [sinks, tokens), [Tq][heads][dim], bits each
//   params   L levels; then keys: C lower, C upper (fp16 values); values: Tq lower, Tq upper
//   residual sinks · C fp16 values, then nnz fp16 sparse values (row-major order)
//   bounds   sinks, nnz, Tq + 1 row pointers, nnz column indices (each an int32)
//   bytes    codes = ceil(Tq·C·b/8); scales = 2·(C or Tq) (upper); zero_points = 2·(C or Tq)
//            (lower); residual = 2·(sinks·C + nnz); metadata = 16 (header) + 4·L (levels)
//            + 8 (sinks, nnz) + 4·(Tq + 1) + 4·nnz
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"
#include "quant/kvquant_calibration.h"

namespace kvlab::detail {

enum class KvQuantLevels : std::uint8_t { KMeans, NormalFloat };
// Sample weights of the k-means. KVQuant weighs each calibration entry by its Fisher information
// (the squared gradient of the loss, from a backward pass); kvlab has no gradients, so the
// default is the reference's own fallback without --fisher: every entry weighs 1. SquaredMagnitude
// weighs an entry by x² (its size before normalisation): large entries move q·k most, so their
// levels get more say; an option to compare, not the paper's method.
enum class KvQuantWeighting : std::uint8_t { Uniform, SquaredMagnitude };

struct KvQuantConfig {
  int bits = 3;  // 2, 3, 4 as the paper; up to 8 accepted (tests)
  KvQuantLevels levels = KvQuantLevels::KMeans;
  KvQuantWeighting weighting = KvQuantWeighting::Uniform;
  double outlier_fraction = 0.01;  // kept exactly, half from each tail; 0: dense only (min-max)
  int sink_tokens = 1;             // first tokens kept in fp16; 0: none
  int calibration_tokens = 0;      // prefill tokens (after the sinks) calibrate() reads; 0: all
  // Enabled: keys arrive post-RoPE by this spec; they are turned back, calibrated and quantized
  // pre-RoPE (Sec. 3.1), and dequantize() turns them forward again (RoPE after dequantization).
  RopeSpec rope;
};

// The quantizer configuration of a method's (method.h) KVQuant fields.
KvQuantConfig kvquant_config(const MethodConfig& config);
// An error naming the field when the configuration cannot work.
Status check_kvquant_config(const KvQuantConfig& config);

// What calibrate() fits for one layer's K or V: the levels and, for keys, the per-channel
// thresholds (fp16 bits), plus how long it took.
struct KvQuantCalibration {
  TensorRole role = TensorRole::Key;
  int heads = 0, dim = 0;
  std::vector<float> levels;                // 2^bits, ascending, in [-1, 1]
  std::vector<std::uint16_t> lower, upper;  // keys: [heads · dim] fp16; values: empty
  double seconds = 0.0;
};

class KvQuantQuantizer final : public Quantizer {
 public:
  explicit KvQuantQuantizer(KvQuantConfig config);

  // "kvquant-3 nuq 1% sink1 keys pre-RoPE" or "... keys as given".
  std::string name() const override;
  const KvQuantConfig& config() const { return m_config; }
  // Keys are quantized before RoPE: turned back by the RopeSpec, forward again after dequant.
  bool keys_pre_rope() const { return m_config.rope.enabled(); }

  // The offline step (SimQuant.quantize): on a calibration prefill [tokens, heads, dim] (keys
  // turned back to pre-RoPE when keys_pre_rope()), from its token sinks_tokens on, at most
  // calibration_tokens: keys: per channel the (f/2, 1 − f/2) percentiles (numpy's linear rule) as
  // thresholds; values: each token split by select_token_tails(); then the levels: k-means over the
  // normalised entries inside [-1, 1] (outliers left out), or NormalFloat.
  Result<KvQuantCalibration> calibrate(const TensorView& prefill, TensorRole role) const;
  // The online step with a calibration of the same role and heads × dim.
  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role,
                                   const KvQuantCalibration& calibration) const;
  // What quantize(x, role) calibrates on `x` itself (its prefill is the tensor): calibrate(), or,
  // with no token past the sinks, NormalFloat levels and empty thresholds.
  Result<KvQuantCalibration> self_calibration(const TensorView& x, TensorRole role) const;
  // Calibrates on `x` itself, then quantizes it.
  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override;
  // Keys turned forward by RoPE again when keys_pre_rope(); sinks and sparse entries exact (to
  // fp16, before RoPE).
  void dequantize(const QuantizedTensor& q, std::span<float> out) const override;
  // One histogram of the dense codes, the entries of the sparse table left out.
  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override;

 private:
  KvQuantConfig m_config;
};

std::unique_ptr<KvQuantQuantizer> make_kvquant_quantizer(const KvQuantConfig& config);

// What the CPU quantizer and the GPU's (kernels/src/quant_kvquant.cu) share beyond the rules
// (kvquant_rules.h):
// The midpoints between adjacent levels, which the codes count.
std::vector<float> kvquant_midpoints(const std::vector<float>& levels);
// A key calibration's per-channel ranges as the codes use them: the fp16 thresholds as floats and
// each channel's normaliser (kvquant_rules::normaliser).
struct KvQuantKeyRanges {
  std::vector<float> lower, upper, inv, bias;
};
KvQuantKeyRanges kvquant_key_ranges(const KvQuantCalibration& calibration);
// b-bit codes, LSB first, code i at bit (first + i)·b of `out` (bitpack.h's layout, which covers
// b = 1, 2, 4, 8; the others straddle bytes and are written here). `out` is zero where written.
void kvquant_pack(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out,
                  std::size_t first);
// The bytes a tensor keeps with `nnz` sparse entries (the layout above).
ByteBreakdown kvquant_bytes(TensorRole role, int tokens, int heads, int dim, int sinks, int bits,
                            std::size_t nnz);
// The cos and sin, [tokens][rotary_dims / 2] each, that the CPU quantizer turns each key token by:
// back before RoPE (inverse) as quantize() loads the sinks and then kvquant_rules::kChunkTokens
// tokens at a time, or forward as dequantize() turns the whole tensor.
void kvquant_key_rope_angles(const RopeSpec& rope, int tokens, int sinks, bool inverse,
                             float* cos_out, float* sin_out);

}  // namespace kvlab::detail
