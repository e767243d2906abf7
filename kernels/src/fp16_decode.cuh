// Decode attention over an uncompressed fp16 cache as a FlashAttention-class decode kernel runs
// it (FlashDecoding's split over the tokens, FlashInfer's GQA-aware decode): the baseline a
// serving engine already has, and the one the compressed kernels must beat (issue 46).
//
// One launch computes out = softmax(q.K^T / sqrt(d)) V for every query head of every sequence.
// The grid is (chunks of tokens) x (KV heads) x (sequences); a block streams its chunk's K and V
// rows once with 16-byte loads, computes q.k for all G query heads of the KV head's group from the
// same loads, keeps an online softmax (running max and sum, base 2) and accumulates the weighted V
// rows in registers. Each block writes one partial (max, sum, G x d accumulators); the block that
// finishes a KV head's last chunk merges that head's partials (a counter per head, no second
// launch). Each K and V byte is read once from memory; only the partials are written.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.cuh"

namespace kvlab::cuda {

// Tuning (measured on an H200 with `kvlab bench gpu` and Nsight Compute; docs/PERFORMANCE.md,
// fp16_fused rows): 256 threads; tiles of 64 tokens (32 at d = 256) copied to shared memory by
// cp.async in three stages, so two tiles (64 KiB at d = 128) are in flight per block while one is
// computed; a grid of one wave of resident blocks. The first version loaded each tile into
// registers (then one tile ahead) and read q from shared memory: 128 registers, 4 warps per
// scheduler, stalls on shared-memory loads, 35% of the DRAM bandwidth at 32K.
struct Fp16DecodePolicy {
  static constexpr int kThreads = 256;
  static constexpr int kTile = 64;
  static constexpr int kStages = 3;
  static constexpr int kMaxGroup = 8;
};

// head_dim 64, 128 or 256; 1 to Fp16DecodePolicy::kMaxGroup query heads per KV head.
bool fp16_decode_supported(int head_dim, int group);

struct Fp16DecodeArgs {
  int batch = 1, tokens = 0, kv_heads = 0, q_heads = 0, head_dim = 0;
  const std::uint16_t* k = nullptr;  // [batch][tokens][kv_heads][head_dim] fp16, 16-byte aligned
  const std::uint16_t* v = nullptr;  // as k
  const float* q = nullptr;          // [batch][q_heads][head_dim]
  float* out = nullptr;              // [batch][q_heads][head_dim]
};

// Owns the partials and the per-head counters. prepare() allocates for a shape (and may be called
// again for a larger one); launch() then allocates nothing and synchronises nothing.
class Fp16Decode {
 public:
  Status prepare(const Fp16DecodeArgs& a);
  // An unsupported or unprepared shape, q_heads not a multiple of kv_heads, a null or misaligned
  // pointer: cudaErrorInvalidValue, nothing launched. tokens == 0 writes zeros.
  cudaError_t launch(const Fp16DecodeArgs& a, cudaStream_t stream);
  // Token chunks per KV head of the last launch (1 when the whole range fits one block).
  int last_splits() const { return m_last_splits; }

 private:
  DeviceArray<float> m_partials;
  DeviceArray<unsigned> m_counters;
  int m_last_splits = 0;
};

}  // namespace kvlab::cuda
