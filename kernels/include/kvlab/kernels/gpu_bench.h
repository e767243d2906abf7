// `kvlab bench gpu`: times the GPU kernels on a Llama-3-8B-shaped layer (8 KV heads, 32 query
// heads, head_dim 128) at several context lengths, with CUDA events around many launches.
#pragma once

#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"

namespace kvlab::cuda {

struct GpuBenchOptions {
  std::vector<int> contexts{2048, 8192, 16384, 32768};
  int kv_heads = 8, q_heads = 32, head_dim = 128;
  int block_size = 64;
  double rel_scale = 0.05;  // KVComp step for the Huffman streams
  int repeats = 200;        // timed launches per kernel (median of batches reported)
  unsigned seed = 1;
};

// One kernel at one context length.
struct GpuBenchRow {
  std::string kernel;  // "huffman_qk", "huffman_sv", "packed4_qk", ..., "cublas_fp16_qk", ...
  int context = 0;
  double microseconds = 0;     // median time per launch
  double bytes_read = 0;       // compressed (or fp16 / fp8) bytes the kernel reads
  double fp16_bytes = 0;       // the same K or V in fp16
  double gbps_read = 0;        // bytes_read / time
  double gbps_fp16_equiv = 0;  // fp16_bytes / time
  double speedup_vs_fp16 = 0;  // cuBLAS fp16 time of the same op / this time
};

struct GpuBenchReport {
  std::string device;
  double copy_gbps = 0;  // device-to-device copy, bytes read + written, the bandwidth ceiling
  std::vector<GpuBenchRow> rows;
  // GPU compression (quantize + Huffman encode of K and V) in GB/s of fp16 input, per context.
  std::vector<std::pair<int, double>> encode_gbps;
};

Result<GpuBenchReport> run_gpu_bench(const GpuBenchOptions& options);

}  // namespace kvlab::cuda
