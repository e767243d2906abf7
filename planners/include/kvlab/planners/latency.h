// The planner's latency model: both rooflines, and the compute a compressed cache costs.
//
// Prefill (time to first token) of one prompt of `context` tokens, alone on the deployment:
//   compute: 2 × active parameters × tokens (dense layers) + causal attention,
//            4 × query heads × head_dim × Σ over the prompt's tokens of the keys each one sees
//            (a window or chunk caps that on its layers; none on linear-attention layers),
//            against the GPU's dense tensor throughput for the weights' dtype × efficiency;
//   memory:  the weights once and the KV written, against bandwidth × efficiency;
//   TTFT = max(compute, memory) + compressing the new KV (a pass over it: the fp16 values read and
//          the stored bytes written, or the engine's measured encode rate where slower).
// Decode step of a batch of B sequences at `context` tokens each, on one GPU of the most loaded
// pipeline stage (× PP, the stages taking turns):
//   dense part:     max(weights bytes read / bandwidth,  2 × active params × B / compute)
//                   (mixture of experts: only the experts the batch's tokens route to are read;
//                   kv_memory.h, weights_read_fraction)
//   attention part: max(KV bytes / bandwidth, attention FLOPs / compute,
//                       values to decompress / decompression rate,
//                       KV bytes kept in host memory / host link)
//   TPOT = PP × (dense + attention).
// The decompression rate is how many fp16 values per second the engine's own fused attention
// kernel for the scheme reads from its stored bytes, decoding them, q·K and softmax·V in one
// pass (`kvlab bench gpu`, or `kvlab bench cpu` for a CPU entered as a device): measured on the
// device when a run is stored, else the H100 measurement in docs/PERFORMANCE.md scaled by the
// device's FP32 throughput. Its time holds the attention's arithmetic, so it is weighed against
// the attention compute, not added to it (on a GPU the arithmetic is microseconds; on a CPU it is
// as long as the decoding, and the sum charged it twice). When it is faster than memory the work
// hides under the reads; when slower, it is what the step waits on.
//
// What is not modelled: tensor-parallel all-reduces and pipeline bubbles; kernel launch latency;
// queueing (TTFT is one prompt alone); prefill and decode sharing a GPU (chunked prefill).
// References: the roofline model (Williams, Waterman and Patterson, CACM 2009); the decode
// arithmetic of "LLM Inference Unveiled" (Yuan et al., 2024) and of kipply's "Transformer
// inference arithmetic" (2022); KV offloading over the host link as in FlexGen (Sheng et al.,
// 2023).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/result.h"
#include "kvlab/planners/kv_memory.h"

namespace kvlab::planners {

// Decompression throughput of the engine's kernels on one GPU, fp16 values per second (K and V
// of one layer averaged), at the longest context measured: the streaming case serving is in.
struct KernelRates {
  std::string gpu_id;         // the catalogue GPU the measurement belongs to
  std::string device;         // as the driver named it
  std::string source;         // where the numbers come from
  double fp32_tflops = 0;     // of that GPU, to scale the rates to another
  double fp8 = 0;             // FP8 E4M3, one scale per head
  double packed = 0;          // packed low-bit codes (int4, KIVI-2/4; int8 assumed like FP8)
  double huffman = 0;         // KVComp Huffman streams
  double huffman_encode = 0;  // compressing at prefill, fp16 values per second
  int context = 0;            // tokens of the measurement
  bool measured = false;      // true: a stored run; false: the built-in default
};

// The built-in default: `kvlab bench gpu` on an H100 80GB HBM3 (h100-sxm) at 32K tokens, from
// docs/PERFORMANCE.md (the FP8 and packed rows after the tensor-core rewrite; Huffman and encode
// from bench/results/gpu_h100_2026-11-23.json).
const KernelRates& default_kernel_rates();

// Rates from `kvlab bench gpu --json` output, at its longest context. Errors name the field.
Result<KernelRates> kernel_rates_from_bench(const nlohmann::json& bench, std::string gpu_id,
                                            double fp32_tflops, std::string source);
nlohmann::json kernel_rates_to_json(const KernelRates& r);

// The rate one scheme decompresses at on `gpu` (0: nothing to decompress), and what it rests on.
struct DecompressionRate {
  double values_per_s = 0;
  double encode_values_per_s = 0;  // 0: a memory pass
  std::string source;
};
DecompressionRate decompression_rate(const Scheme& s, const GpuSpec& gpu, const KernelRates& r);

struct Efficiencies {
  double bandwidth = 0.8;  // achieved / peak memory bandwidth
  double compute = 0.6;    // achieved / peak dense tensor throughput (model FLOPs utilisation)
  double host_link = 0.8;  // achieved / peak host-link bandwidth
  Status validate() const;
};

// One decode step, per GPU of the most loaded stage. Bytes and FLOPs are for the whole batch.
struct StepCost {
  double weights_bytes = 0, kv_bytes = 0, host_bytes = 0;  // host: KV streamed over the link
  double dense_flops = 0, attention_flops = 0, decompress_values = 0;
  double t_weights = 0, t_dense = 0, t_kv = 0, t_attention = 0, t_decompress = 0, t_host = 0;
  double seconds = 0;  // the whole step (× PP)
  // What the step waits on most: "weights read", "dense compute", "KV read", "attention
  // compute", "decompression" or "host link".
  std::string bound_by;
  std::string attention_bound_by;  // what the attention part alone waits on
  bool compute_bound = false;      // the compute side outweighs the memory side, over both parts
  // The roofline point: the model's FLOPs (dense and attention; the same for every scheme)
  // per byte read, and FLOP/s achieved over the whole step. Decompression is not maths the
  // model does: it shows as a longer step, so a scheme that waits on it sits below the roof.
  double intensity() const;
  double achieved_flops() const;
};

struct PrefillCost {
  double flops = 0, bytes = 0;
  double t_compute = 0, t_memory = 0, t_compress = 0;
  double seconds = 0;
  bool compute_bound = false;
};

struct Latency {
  PrefillCost prefill;
  StepCost step;
  double ttft_s = 0, tpot_s = 0;
  double tokens_per_s_per_user = 0;    // one sequence: 1 / TPOT
  double tokens_per_s_deployment = 0;  // the batch: B / TPOT
  double tokens_per_s_per_gpu = 0;     // the deployment's over its TP × PP GPUs
};

// What a decode step costs that does not depend on the batch, and the prefill: computed once per
// (GPU, scheme, context) so that a sweep over batches is a few multiplications per scenario.
struct LatencyInputs {
  PrefillCost prefill;
  double weights_bytes = 0, kv_bytes_per_sequence = 0;  // per GPU of the most loaded stage
  WeightsRead weights_read;  // mixture of experts: the share of weights_bytes a batch reads
  double dense_flops_per_sequence = 0, attention_flops_per_sequence = 0;
  double decompress_values_per_sequence = 0;
  double bw = 0, dense_peak = 0, attention_peak = 0, link = 0;  // achieved, per second
  double decompress_rate = 0;
  int tp = 1, pp = 1;
  bool offload = false;
};
LatencyInputs latency_inputs(const ModelSpec& m, const GpuSpec& g, const Scheme& s,
                             const Deployment& d, std::int64_t context,
                             const DecompressionRate& rate, const Efficiencies& e);
Latency decode_latency(const LatencyInputs& in, int batch, std::uint64_t kv_gpu_capacity);

// Host offload: KV beyond what the GPUs hold is kept in host memory and read over the host link
// every step. `kv_gpu_capacity` is one GPU's KV budget; `kv_total` the batch's KV on that GPU.
Latency estimate_latency(const ModelSpec& m, const GpuSpec& g, const Scheme& s, const Deployment& d,
                         std::int64_t context, int batch, const DecompressionRate& rate,
                         const Efficiencies& e, std::uint64_t kv_gpu_capacity);

// Σ over a prompt's tokens of the keys each one attends to, on one layer of the kind.
double causal_pairs(const ModelSpec& m, LayerKind kind, std::int64_t prompt);

}  // namespace kvlab::planners
