// Decode attention as a FlashAttention-class decode kernel runs it (FlashDecoding's split over
// the tokens, FlashInfer's GQA-aware decode), over an fp16 cache (the baseline a serving engine
// already has, and the one the compressed kernels must beat, issue 46) and over caches stored in
// a compressed row format, read in place (issue 46 part 2): FP8 E4M3 with a scale per KV head,
// llama.cpp's Q8_0 and Q4_0 blocks, NVFP4, KVComp's bit-packed 4-bit streams (its key steps
// folded into the query once per block, its value steps applied per row), and KIVI-2/4 (its key
// steps folded per group of tokens, value steps per group of channels, its fp16 window of newest
// tokens a second launch whose chunks merge with the quantized ones'). The formats'
// arithmetic is row_decode.h's, shared with the CPU test that holds it to the engine's
// dequantizers.
//
// One launch computes out = softmax(q.K^T / sqrt(d)) V for every query head of every sequence.
// The grid is (chunks of tokens) x (KV heads) x (sequences); a block streams its chunk's K and V
// rows once (cp.async, in the format's stored bytes), computes q.k for all G query heads of the
// KV head's group from the same loads, keeps an online softmax (running max and sum, base 2) and
// accumulates the weighted V rows in registers, decoding each thread's eight channels of a row
// from shared memory as it reads them. Each block writes one partial (max, sum, G x d
// accumulators); the block that finishes a KV head's last chunk merges that head's partials (a
// counter per head, no second launch). Each stored K and V byte is read once from memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.cuh"
#include "kvlab/engine/quant/row_decode.h"

namespace kvlab::cuda {

// Tuning (measured on an H200 with `kvlab bench gpu` and Nsight Compute; docs/PERFORMANCE.md,
// fp16_fused rows): 256 threads; tiles of 64 tokens (32 at d = 256) copied to shared memory by
// cp.async in three stages, so two tiles (64 KiB of fp16 at d = 128) are in flight per block
// while one is computed; a grid of one wave of resident blocks. The first version loaded each
// tile into registers (then one tile ahead) and read q from shared memory: 128 registers, 4 warps
// per scheduler, stalls on shared-memory loads, 35% of the DRAM bandwidth at 32K. The compressed
// formats run the same policy (their tiles take fewer bytes); they are not tuned apart yet.
struct DecodeAttentionPolicy {
  static constexpr int kThreads = 256;
  static constexpr int kTile = 64;
  static constexpr int kStages = 3;
  static constexpr int kMaxGroup = 8;
};

using DecodeFormat = row_decode::Format;

// head_dim 64, 128 or 256; fp16: 1 to DecodeAttentionPolicy::kMaxGroup query heads per KV head,
// the other formats 1, 2, 4 or 8.
bool decode_attention_supported(DecodeFormat format, int head_dim, int group);

// One of K or V on the device, rows [batch][tokens][kv_heads] of row_decode::row_bytes(format,
// head_dim) bytes each (NVFP4: the rows' nibbles here, their block scales in `scales`, rows of
// head_dim / 16 bytes in the same order). Aligned to 16 bytes. Packed4: each sequence's KVComp
// BitPack payload (docs/FORMAT.md, width 4), `batch_bytes` apart, with its steps and minimums
// (keys [token block][head][dim], values [token][head], sequences back to back).
struct DecodeTensor {
  const void* data = nullptr;
  const void* scales = nullptr;        // NVFP4's block scales
  const float* head_scales = nullptr;  // FP8: one per KV head (device)
  float global = 1.f;                  // NVFP4's global scale
  const float* steps = nullptr;        // Packed4
  const float* mins = nullptr;
  int block_size = 0;             // Packed4: tokens per block; KIVI keys: tokens per group
  std::uint64_t batch_bytes = 0;  // Packed4: one sequence's payload bytes
  int group_channels = 0;         // KIVI values: channels per group (a multiple of 8)
};

struct DecodeAttentionArgs {
  DecodeFormat format = DecodeFormat::Fp16;
  int batch = 1, tokens = 0, kv_heads = 0, q_heads = 0, head_dim = 0;
  DecodeTensor k, v;
  // KIVI: its newest `window` tokens of each sequence, kept in fp16 ([batch][window][kv_heads]
  // [head_dim]), after its `tokens` quantized ones.
  int window = 0;
  DecodeTensor k_window, v_window;
  const float* q = nullptr;  // [batch][q_heads][head_dim]
  float* out = nullptr;      // [batch][q_heads][head_dim]

  // Arguments of this format and shape, every pointer null.
  static DecodeAttentionArgs of_shape(DecodeFormat format, int batch, int tokens, int kv_heads,
                                      int q_heads, int head_dim) {
    DecodeAttentionArgs a;
    a.format = format;
    a.batch = batch;
    a.tokens = tokens;
    a.kv_heads = kv_heads;
    a.q_heads = q_heads;
    a.head_dim = head_dim;
    return a;
  }
};

// Owns the partials and the per-head counters. prepare() allocates for a shape (and may be called
// again for a larger one); launch() then allocates nothing and synchronises nothing.
class DecodeAttention {
 public:
  Status prepare(const DecodeAttentionArgs& a);
  // An unsupported or unprepared shape, q_heads not a multiple of kv_heads, a null or misaligned
  // pointer: cudaErrorInvalidValue, nothing launched. tokens == 0 writes zeros.
  cudaError_t launch(const DecodeAttentionArgs& a, cudaStream_t stream);
  // Token chunks per KV head of the last launch (1 when the whole range fits one block).
  int last_splits() const { return m_last_splits; }

 private:
  DeviceArray<float> m_partials;
  DeviceArray<unsigned> m_counters;
  int m_last_splits = 0;
};

}  // namespace kvlab::cuda
