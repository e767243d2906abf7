// The compression methods a user can pick, their parameters, and the factory that builds the
// quantizer for a configuration (validating every parameter with a clear message).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab {

enum class MethodKind {
  Int8,
  Int4,
  Kivi,
  Fp8E4M3,
  Fp8E5M2,
  Tiered,
  KvComp,
  // llama.cpp's KV cache types (-ctk / -ctv), blocks of 32 values as ggml stores them.
  Q8_0,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  IQ4_NL,
  Nvfp4,       // E2M1 values, an E4M3 scale per 16 and an fp32 global scale (TensorRT-LLM, vLLM)
  Mxfp4,       // E2M1 values, an E8M0 scale per 32 (OCP MX; llama.cpp's block_mxfp4)
  KvQuant,     // Hooper et al. 2024: per-channel keys, non-uniform levels, sparse outliers
  TurboQuant,  // Zandieh et al. 2025: random rotation + Lloyd-Max levels, optional QJL bit
};

// A rotation of every head vector before the quantizer (rotated_quantizer.cpp).
enum class RotationKind { None, Hadamard, Orthogonal };
std::string_view rotation_id(RotationKind kind);  // "none", "hadamard", "orthogonal"
Result<RotationKind> parse_rotation(std::string_view id);

struct MethodConfig {
  MethodKind kind = MethodKind::Kivi;
  // KIVI (Liu et al. 2024): bits 2 or 4, group size G, recent R tokens in fp16.
  int bits = 2;
  int group_size = 32;
  int residual = 128;
  // FP8: one scale per tensor, or one per KV head.
  bool per_head_scale = false;
  // Age-tiered: the newest `residual` tokens fp16, the next `int8_tokens` INT8, older ones at
  // `old_bits` (4 or 2); groups as KIVI's.
  int int8_tokens = 512;
  int old_bits = 4;
  // KVComp (Jiang et al. 2025): key blocks of `block_size` tokens, per-channel inside a block;
  // values per token; step = rel_scale * (max - min) of the unit.
  int block_size = 64;
  double rel_scale = 0.05;
  // Entropy coding of KVComp's byte codes (KVComp Sec. 3.3), in blocks of `block_size` tokens
  // with one Huffman codebook per layer and K/V built from that tensor's histogram; none when
  // empty.
  std::optional<CodecKind> codec;
  // The dtype each group's step and minimum is stored in (kivi, tiered, kvcomp); empty: the
  // method's reference (method_param_dtype()).
  std::optional<DType> param_dtype;
  // llama.cpp's block types: the Hadamard rotation llama.cpp applies to Q/K and V of a quantized
  // cache by default (attn_rot; off as with LLAMA_ATTN_ROT_DISABLE=1).
  bool llama_rotation = true;
  // FP8: scales calibrated once from the first `calib_tokens` tokens (vLLM's
  // calculate_kv_scales: amax / 200 for keys, / 100 for values) and kept for every later token;
  // 0: one scale from the whole tensor's max|x| / 448. KVQuant: the prefill tokens its levels and
  // key thresholds are fitted on (0: the whole tensor).
  int calib_tokens = 0;
  // KVQuant: levels fitted by k-means on the tensor's calibration (false) or NormalFloat levels
  // (true); the fraction of values kept exactly in the sparse outlier table.
  bool normal_float = false;
  double outlier_fraction = 0.01;
  // KVQuant: keys quantized before RoPE (the paper's Sec. 3.2) wherever key_rope says how RoPE
  // turned them; false: as stored (after RoPE).
  bool pre_rope = true;
  // How RoPE turned the keys the method will see. Not a user's choice: compress_cache, the model
  // loops and the eviction simulation fill it from the source (method_for_cache); disabled when
  // unknown (synthetic presets) or when the keys are stored before RoPE already.
  RopeSpec key_rope;
  // TurboQuant: the last of `bits` is a 1-bit QJL sketch of the residual.
  bool qjl = false;
  // A rotation before the quantizer: keys (and values with rotate_values), one matrix per KV
  // head from the seed. TurboQuant always rotates: Hadamard here picks its fast variant.
  RotationKind rotation = RotationKind::None;
  std::uint64_t rotation_seed = 0;
  bool rotate_values = false;
};

// Whether a rotation wraps the method's quantizer (quant/rotated_quantizer.h): one is set and the
// method is not TurboQuant, whose rotation is part of the method.
inline bool wraps_rotation(const MethodConfig& c) {
  return c.kind != MethodKind::TurboQuant && c.rotation != RotationKind::None;
}

// The paper or reference each method follows, one line ("KIVI (Liu et al. 2024,
// arXiv:2402.02750)").
std::string_view method_reference(MethodKind kind);

// The parameter dtype `config` stores its steps and minimums in: its param_dtype, or the
// reference's: fp16 for kivi and tiered (KIVI's reference keeps them in the tensor's dtype),
// float32 for kvcomp; float32 for the other methods (one scale per tensor or head).
DType method_param_dtype(const MethodConfig& config);
// True when the method has a per-group parameter dtype to choose (kivi, tiered, kvcomp).
bool method_has_param_dtype(MethodKind kind);
// True for llama.cpp's block types (q8_0 ... iq4_nl), whose llama_rotation applies.
bool method_is_llama_block(MethodKind kind);
// The ggml type of a llama.cpp block method (q8_0 ... iq4_nl); nullopt for the others.
std::optional<GgmlType> method_ggml_type(MethodKind kind);
// True for the methods calib_tokens applies to (fp8-e4m3, fp8-e5m2, kvquant).
bool method_takes_calib_tokens(MethodKind kind);
// True for the FP8 methods (per_head_scale applies).
bool method_is_fp8(MethodKind kind);

std::string_view method_id(MethodKind kind);  // "int8", "kivi", "fp8-e4m3", ...
std::vector<std::string_view> method_ids();
Result<MethodKind> parse_method(std::string_view id);
// "none" (no entropy coding), "bitpack", "varwidth" or "huffman".
Result<std::optional<CodecKind>> parse_codec_option(std::string_view id);

// Only the parameters that matter for the method, as JSON (for run records).
std::string method_label(const MethodConfig& config);  // "kivi-2 G=32 R=128"

Result<std::unique_ptr<Quantizer>> make_quantizer(const MethodConfig& config);
// `config` for this cache's keys: key_rope from the cache, unless its keys are stored pre-RoPE.
MethodConfig method_for_cache(MethodConfig config, const KvCache& cache);

// Bytes the quantizer of `config` keeps for one K or V tensor of this shape, as a formula the
// planner can evaluate for any context without quantizing: equal to quantize(...).bytes.total()
// for every shape where the count does not depend on the data. Data-dependent parts are
// nominal: KVQuant's key outliers count outlier_fraction of the values. Empty for the methods
// whose bytes are all data-dependent (kvcomp with a codec: a measured run gives them) and tiered.
std::optional<std::uint64_t> method_tensor_bytes(const MethodConfig& config, TensorRole role,
                                                 std::uint64_t tokens, int heads, int dim);

}  // namespace kvlab
