#include "kvlab/engine/quant/method_about.h"

#include <fmt/format.h>

namespace kvlab {

std::string_view method_summary(MethodKind kind) {
  switch (kind) {
    case MethodKind::Int8:
      return "Symmetric INT8, one scale max|x|/127 per tensor: the naive baseline.";
    case MethodKind::Int4:
      return "Symmetric INT4, one scale max|x|/7 per tensor: the naive baseline.";
    case MethodKind::Kivi:
      return "KIVI: keys per channel over groups of G tokens, values per token; the newest R "
             "tokens stay fp16.";
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      return "FP8 with a per-tensor (or per-head) scale, from the whole tensor or calibrated on "
             "the first tokens.";
    case MethodKind::Tiered:
      return "Age-tiered: newest tokens fp16, the next ones INT8, the oldest at fewer bits.";
    case MethodKind::KvComp:
      return "KVComp blockwise, error-bounded: step = rel_scale x (max - min) of each block "
             "channel (keys) or token (values); uint8 codes, entropy-coded when a codec is chosen "
             "(Huffman, BitPack or VarWidth).";
    case MethodKind::Q8_0:
      return "llama.cpp q8_0: blocks of 32 values, int8 codes and an fp16 scale (8.5 "
             "bits/value).";
    case MethodKind::Q4_0:
      return "llama.cpp q4_0: blocks of 32 values, 4-bit codes and an fp16 scale (4.5 "
             "bits/value).";
    case MethodKind::Q4_1:
      return "llama.cpp q4_1: blocks of 32 values, 4-bit codes, an fp16 scale and minimum (5 "
             "bits/value).";
    case MethodKind::Q5_0:
      return "llama.cpp q5_0: blocks of 32 values, 5-bit codes and an fp16 scale (5.5 "
             "bits/value).";
    case MethodKind::Q5_1:
      return "llama.cpp q5_1: blocks of 32 values, 5-bit codes, an fp16 scale and minimum (6 "
             "bits/value).";
    case MethodKind::IQ4_NL:
      return "llama.cpp iq4_nl: blocks of 32 values, 4-bit indexes into a fixed non-linear "
             "table and an fp16 scale (4.5 bits/value).";
    case MethodKind::Nvfp4:
      return "NVFP4: E2M1 values, an E4M3 scale per 16 values and one fp32 scale per tensor "
             "(4.5 bits/value).";
    case MethodKind::Mxfp4:
      return "MXFP4: E2M1 values and a power-of-two E8M0 scale per 32 values (4.25 bits/value).";
    case MethodKind::KvQuant:
      return "KVQuant: keys per channel before RoPE, values per token, on non-uniform levels "
             "(k-means or NormalFloat); the largest values kept exactly in a sparse table.";
    case MethodKind::TurboQuant:
      return "TurboQuant: each head vector's norm, then its randomly rotated direction on "
             "Lloyd-Max levels; optionally a 1-bit QJL sketch of the residual.";
  }
  return {};
}

std::string_view method_when_to_use(MethodKind kind) {
  switch (kind) {
    case MethodKind::Int8:
    case MethodKind::Int4:
      return "As a floor to compare against: one scale per tensor lets a single outlier channel "
             "set the step for everything, so real methods should beat it at the same bits.";
    case MethodKind::Kivi:
      return "The research baseline for 2- and 4-bit caches: per-channel keys tame the outlier "
             "channels that RoPE-ed keys have. Pick 4 bits when quality matters, 2 bits when "
             "memory does; the fp16 window (R) protects the tokens attention reads most.";
    case MethodKind::Fp8E4M3:
      return "What vLLM, SGLang and TensorRT-LLM ship (kv_cache_dtype fp8): halves the cache "
             "with errors most models do not notice, and Hopper and later GPUs read it at full "
             "speed. E4M3 keeps more precision, E5M2 more range.";
    case MethodKind::Fp8E5M2:
      return "FP8 with two more exponent bits than E4M3 and one fewer mantissa bit: for caches "
             "whose values span a wide range without a calibrated scale.";
    case MethodKind::Tiered:
      return "When old tokens matter less than new ones: fewer bits for the oldest tokens buys "
             "memory where it costs the least attention.";
    case MethodKind::KvComp:
      return "When memory is what limits you and the error must stay bounded: the step follows "
             "each block's range, and an entropy coder (--codec huffman) squeezes the codes "
             "further.";
    case MethodKind::Q8_0:
      return "llama.cpp's -ctk/-ctv q8_0: nearly lossless at 8.5 bits, the safe choice there.";
    case MethodKind::Q4_0:
    case MethodKind::Q4_1:
    case MethodKind::Q5_0:
    case MethodKind::Q5_1:
      return "To know what llama.cpp's quantized cache types do to your model before you serve "
             "with them (they need flash attention there for V); q5 types cost a bit more "
             "memory for noticeably less error than q4.";
    case MethodKind::IQ4_NL:
      return "llama.cpp's 4-bit type with a non-linear table: less error than q4_0 at the same "
             "4.5 bits for bell-shaped values.";
    case MethodKind::Nvfp4:
      return "Blackwell's native 4-bit format (TensorRT-LLM, vLLM): the cache a B200 reads at "
             "tensor-core speed, with fine 16-value scales.";
    case MethodKind::Mxfp4:
      return "The OCP microscaling 4-bit format: power-of-two scales are cheap in hardware but "
             "coarser than NVFP4's; compare the two on your data.";
    case MethodKind::KvQuant:
      return "When 2-3 bits must still work: pre-RoPE per-channel keys, non-uniform levels and "
             "exact outliers give the lowest error at those bits, at the cost of a calibration "
             "pass and a sparse table to read.";
    case MethodKind::TurboQuant:
      return "Data-oblivious and calibration-free: the random rotation makes every head vector "
             "look alike, so one fixed codebook serves any model; strong at 3-4 bits.";
  }
  return {};
}

std::string method_page(MethodKind kind) {
  std::string params;
  switch (kind) {
    case MethodKind::Kivi:
      params = "--bits (2 or 4), --group-size G, --residual R, --param-dtype";
      break;
    case MethodKind::Tiered:
      params = "--int8-tokens, --old-bits, --group-size, --residual, --param-dtype";
      break;
    case MethodKind::KvComp:
      params = "--block-size, --rel-scale, --codec, --param-dtype";
      break;
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      params = "--per-head-scale, --calib-tokens";
      break;
    case MethodKind::KvQuant:
      params = "--bits (2, 3 or 4), --calib-tokens";
      break;
    case MethodKind::TurboQuant:
      params = "--bits (1 to 4, the QJL bit included)";
      break;
    default:
      params = "none of its own";
      break;
  }
  return fmt::format("{}\n\nStores: {}\n\nReference: {}\n\nWhen to use it: {}\n\nParameters: {}.\n",
                     method_id(kind), method_summary(kind), method_reference(kind),
                     method_when_to_use(kind), params);
}

}  // namespace kvlab
