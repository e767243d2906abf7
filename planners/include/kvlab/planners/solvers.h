// Capacity questions over the memory model: does a scenario fit, the largest batch or context
// that fits, the fewest GPUs that fit; time to first token, time per output token and tokens/s
// from the latency model (latency.h); and sweeps of many scenarios at once.
//
// Every number says what it counts: "per GPU" is one GPU of the most loaded pipeline stage,
// "per sequence" one request, "deployment" all TP × PP GPUs together, "model" the whole model as
// if on one GPU. The JSON names say the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/planners/kv_memory.h"
#include "kvlab/planners/latency.h"

namespace kvlab::planners {

struct Scenario {
  ModelSpec model;
  GpuSpec gpu;
  Scheme scheme;
  Deployment deployment;
  std::int64_t context = 4096;        // tokens per sequence (the prompt, for time to first token)
  int batch = 1;                      // sequences at once
  double bandwidth_efficiency = 0.8;  // achieved / peak memory bandwidth
  double compute_efficiency = 0.6;    // achieved / peak dense tensor throughput
  double link_efficiency = 0.8;       // achieved / peak host-link bandwidth
  KernelRates rates = default_kernel_rates();
  Efficiencies efficiencies() const {
    return {bandwidth_efficiency, compute_efficiency, link_efficiency};
  }
  Status validate() const;  // batch ≥ 1, context within the model's limit, ...
};

struct PlanResult {
  double kv_bytes_per_token_model = 0;              // whole model, one token: the headline number
  std::uint64_t kv_bytes_per_sequence_per_gpu = 0;  // on the most loaded GPU, pages included
  std::uint64_t kv_bytes_batch_per_gpu = 0;         // the batch, on that GPU
  std::uint64_t kv_bytes_batch_deployment = 0;      // the batch on all GPUs (replicas counted)
  std::uint64_t host_kv_bytes_per_gpu = 0;          // offload: kept in host memory
  std::uint64_t weights_bytes_per_gpu = 0;
  std::uint64_t reserve_bytes = 0;      // per GPU
  std::uint64_t usable_bytes = 0;       // per GPU: memory × utilization
  std::uint64_t kv_capacity_bytes = 0;  // per GPU: usable − weights − reserve (0 when negative)
  std::uint64_t gpu_bytes = 0;          // one GPU's whole memory
  bool fits = false;
  std::int64_t max_batch = 0;    // at the context
  std::int64_t max_context = 0;  // at the batch (0: not even one token; capped by the model)
  int gpus = 1;                  // tp × pp of the scenario
  int min_gpus = 0, min_tp = 0, min_pp = 0;  // fewest that fit; 0 when nothing up to 8 nodes
  Latency latency;
  DecompressionRate decompression;
  // Shorthands of `latency`.
  double ttft_s = 0, tpot_s = 0;
  double tokens_per_s_per_user = 0, tokens_per_s_per_gpu = 0, tokens_per_s_deployment = 0;
  std::string formula;
};

Result<PlanResult> plan(const Scenario& s);

// What one GPU of the deployment offers the KV cache: its weights, memory × utilization, what is
// left for KV (0 when nothing), and that plus host memory for a scheme that offloads.
struct KvBudget {
  std::uint64_t weights = 0, usable = 0, capacity = 0, with_host = 0;
};
KvBudget kv_budget(const ModelSpec& m, const GpuSpec& g, const Deployment& d, bool offload);

// One scheme's result as JSON, for `kvlab plan --json` and stored plan runs.
nlohmann::json plan_result_to_json(const Scheme& scheme, const PlanResult& r);

// The cheap core of plan() (no min_gpus, no max_context, no formula), for sweeps.
struct QuickPlan {
  bool fits = false;
  std::uint64_t kv_bytes_batch_per_gpu = 0;
  std::int64_t max_batch = 0;
  double tpot_s = 0, ttft_s = 0;
  double tokens_per_s_per_user = 0, tokens_per_s_per_gpu = 0;
};
QuickPlan quick_plan(const Scenario& s);

// Every combination, in the order gpu, scheme, context, batch (batch fastest).
struct SweepSpec {
  ModelSpec model;
  Deployment deployment;
  std::vector<GpuSpec> gpus;
  std::vector<Scheme> schemes;
  std::vector<std::int64_t> contexts;
  std::vector<int> batches;
  double bandwidth_efficiency = 0.8, compute_efficiency = 0.6, link_efficiency = 0.8;
  KernelRates rates = default_kernel_rates();
};
struct SweepRow {
  int gpu = 0, scheme = 0;  // indices into the spec
  std::int64_t context = 0;
  int batch = 0;
  QuickPlan plan;
};
Result<std::vector<SweepRow>> sweep(const SweepSpec& spec);
// CSV with a header: gpu,scheme,context,batch,fits,kv_bytes_batch_per_gpu,max_batch,ttft_ms,
// tpot_ms,tokens_per_s_per_user,tokens_per_s_per_gpu
std::string sweep_to_csv(const SweepSpec& spec, const std::vector<SweepRow>& rows);

}  // namespace kvlab::planners
