// `kvlab bench gpu`: times the GPU kernels on a Llama-3-8B-shaped layer (8 KV heads, 32 query
// heads, head_dim 128) at several context lengths, with CUDA events around many launches.
#pragma once

#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"

namespace kvlab::cuda {

struct GpuBenchOptions {
  std::vector<int> contexts{2048, 8192, 16384, 32768};
  std::vector<int> batches{
      1, 8};  // sequences per step (launches back to back where a kernel takes one layer)
  int kv_heads = 8, q_heads = 32, head_dim = 128;
  int block_size = 64;
  double rel_scale = 0.05;  // KVComp step for the Huffman streams
  int repeats = 200;        // timed launches per kernel (median of batches reported)
  unsigned seed = 1;
};

// One kernel at one context length.
struct GpuBenchRow {
  // "huffman_qk", "huffman_sv", "rans_qk" (the same codes as rANS streams), "packed4_qk", ...,
  // "cublas_fp16_qk", ...; "fp16_fused" (the
  // FlashAttention-class decode kernel: q.K, softmax and .V in one pass); "<format>_attn" (the
  // format's q.K and .V kernels together, the time one decode step's attention takes).
  std::string kernel;
  int context = 0;
  int batch = 1;               // sequences per launch
  double microseconds = 0;     // median time per launch
  double bytes_read = 0;       // compressed (or fp16 / fp8) bytes the kernel reads
  double fp16_bytes = 0;       // the same K or V in fp16
  double gbps_read = 0;        // bytes_read / time
  double gbps_fp16_equiv = 0;  // fp16_bytes / time
  double speedup_vs_fp16 = 0;  // cuBLAS fp16 time of the same op / this time
  // fp16_fused time of the same context and batch / this time ("_attn" and "fp16_fused" rows;
  // 0 for the single ops).
  double speedup_vs_fused = 0;
  double copy_fraction = 0;  // gbps_read / the device-to-device copy rate (read + written)
};

struct GpuBenchReport {
  std::string device;
  double copy_gbps = 0;  // device-to-device copy, bytes read + written, the bandwidth ceiling
  std::vector<GpuBenchRow> rows;
  // GPU compression (quantize + Huffman encode of K and V) in GB/s of fp16 input, per context.
  std::vector<std::pair<int, double>> encode_gbps;
  // Parts left out because their kernels failed: "rans at 32768 tokens: <the error>".
  std::vector<std::string> skipped;
};

Result<GpuBenchReport> run_gpu_bench(const GpuBenchOptions& options);

}  // namespace kvlab::cuda
