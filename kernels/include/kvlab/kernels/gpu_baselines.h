// The fast baselines the compressed kernels are measured against, on the GPU: attention over an
// uncompressed fp16 cache through cuBLAS (the plain GEMV a serving stack would run), and fused
// attention over an FP8 cache (vLLM's kv_cache_dtype=fp8: one scale per KV head), and the fused
// decode kernel over fp16 and over compressed row formats. Host arrays in
// and out; the benchmark drives the device-side launchers directly (src/*.cuh).
#pragma once

#include <cstdint>
#include <span>

#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/row_decode.h"

namespace kvlab::cuda {

// Opens cuBLAS, which only the cuBLAS baseline below uses, if this process has not yet: an error
// naming the library when it cannot be loaded. Needs no GPU.
Status cublas_available();

// Shapes and meaning as kvlab::fp16_attention_logits / _values (fused_attention.h).
Status fp16_attention_logits(const Fp16KvView& kv, std::span<const float> q, int q_heads,
                             std::span<float> logits);
Status fp16_attention_values(const Fp16KvView& kv, std::span<const float> probs, int q_heads,
                             std::span<float> out);

// Decode attention out = softmax(q.K^T / sqrt(head_dim)) V in one fused launch, the
// FlashAttention-class baseline (src/decode_attention.cuh): `batch` sequences stored back to back
// in kv.keys / kv.values ([batch][tokens][kv_heads][head_dim] fp16), q and out
// [batch][q_heads][head_dim]. head_dim 64, 128 or 256, 1 to 8 query heads per KV head. `splits`,
// when given, receives the token chunks per KV head the launch used. Each call launches twice on
// one prepared kernel object, the output poisoned with NaN before each, and returns the second
// launch's output (a later launch must find the split merge's counters reset).
Status fp16_decode_attention(const Fp16KvView& kv, int batch, std::span<const float> q, int q_heads,
                             std::span<float> out, int* splits = nullptr);

// A cache stored in a compressed row format (row_decode.h), read in place by the same fused
// decode kernel: rows [batch][tokens][kv_heads] of row_decode::row_bytes(format, head_dim) bytes
// (NVFP4: its nibbles in keys / values, head_dim / 2 bytes a row, and its block scales in
// key_scales / value_scales, head_dim / 16 a row, with the global scales); FP8 E4M3 with one scale
// per KV head; Packed4: each sequence's KVComp BitPack payload of width 4 (docs/FORMAT.md) back to
// back, with its key steps and minimums [token block][head][dim] and value steps and minimums
// [token][head], sequences back to back; KIVI-2/4: the quantized tokens' rows of packed codes
// (the KIVI quantizer's QuantizedTensor::codes), key steps and minimums [group][head][dim] over
// groups of block_size tokens, value ones [token][head][group] over groups of
// value_group_channels channels, and each sequence's newest window_tokens in fp16 after them.
// head_dim 64, 128 or 256; 1, 2, 4 or 8 query heads per KV head.
struct StoredKvView {
  row_decode::Format format = row_decode::Format::Q4_0;
  int tokens = 0, kv_heads = 0, head_dim = 0;
  std::span<const std::uint8_t> keys{}, values{};
  std::span<const std::uint8_t> key_scales{}, value_scales{};     // NVFP4
  std::span<const float> key_head_scales{}, value_head_scales{};  // FP8, one per KV head
  float key_global = 1.f, value_global = 1.f;                     // NVFP4
  std::span<const float> key_steps{}, key_mins{}, value_steps{}, value_mins{};  // Packed4, KIVI
  int block_size = 0;                                             // Packed4, KIVI keys
  int value_group_channels = 0;                                   // KIVI values
  int window_tokens = 0;                                          // KIVI
  std::span<const std::uint16_t> window_keys{}, window_values{};  // KIVI, fp16
};
Status decode_attention(const StoredKvView& kv, int batch, std::span<const float> q, int q_heads,
                        std::span<float> out, int* splits = nullptr);

// An FP8 cache: codes [tokens][kv_heads][head_dim], value = fp8_to_float(code) * scale[head].
struct Fp8KvView {
  int tokens = 0, kv_heads = 0, head_dim = 0;
  Fp8Format format = Fp8Format::E4M3;
  std::span<const std::uint8_t> keys, values;
  std::span<const float> key_scales, value_scales;  // one per KV head
};
Status fp8_attention_logits(const Fp8KvView& kv, std::span<const float> q, int q_heads,
                            std::span<float> logits);
Status fp8_attention_values(const Fp8KvView& kv, std::span<const float> probs, int q_heads,
                            std::span<float> out);

}  // namespace kvlab::cuda
