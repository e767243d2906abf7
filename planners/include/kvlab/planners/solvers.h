// Capacity questions over the memory model: does a scenario fit, the largest batch or context
// that fits, the fewest GPUs that fit, and decode throughput from the memory-bandwidth roofline;
// and sweeps of many scenarios at once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/planners/kv_memory.h"

namespace kvlab::planners {

struct Scenario {
  ModelSpec model;
  GpuSpec gpu;
  Scheme scheme;
  Deployment deployment;
  std::int64_t context = 4096;
  int batch = 1;
  double bandwidth_efficiency = 0.8;  // achieved / peak memory bandwidth
  Status validate() const;            // batch ≥ 1, context within the model's limit, ...
};

struct PlanResult {
  double kv_bytes_per_token = 0;            // whole model, the headline number
  std::uint64_t kv_bytes_per_sequence = 0;  // on the most loaded GPU, pages included
  std::uint64_t kv_bytes_total = 0;         // the batch, on that GPU
  std::uint64_t weights_bytes = 0;          // on that GPU
  std::uint64_t reserve_bytes = 0;
  std::uint64_t usable_bytes = 0;       // memory × utilization
  std::uint64_t kv_capacity_bytes = 0;  // usable − weights − reserve (0 when negative)
  std::uint64_t gpu_bytes = 0;          // the GPU's whole memory
  bool fits = false;
  std::int64_t max_batch = 0;    // at the context
  std::int64_t max_context = 0;  // at the batch (0: not even one token; capped by the model)
  int gpus = 1;                  // tp × pp of the scenario
  int min_gpus = 0, min_tp = 0, min_pp = 0;  // fewest that fit; 0 when nothing up to 8 nodes
  double decode_seconds_per_step = 0;
  double decode_tokens_per_s_per_sequence = 0, decode_tokens_per_s = 0;  // aggregate
  std::string formula;
};

Result<PlanResult> plan(const Scenario& s);

// One scheme's result as JSON, for `kvlab plan --json` and stored plan runs.
nlohmann::json plan_result_to_json(const Scheme& scheme, const PlanResult& r);

// The cheap core of plan() (no min_gpus, no max_context, no formula), for sweeps.
struct QuickPlan {
  bool fits = false;
  std::uint64_t kv_bytes_total = 0;
  std::int64_t max_batch = 0;
  double decode_tokens_per_s = 0;
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
  double bandwidth_efficiency = 0.8;
};
struct SweepRow {
  int gpu = 0, scheme = 0;  // indices into the spec
  std::int64_t context = 0;
  int batch = 0;
  QuickPlan plan;
};
Result<std::vector<SweepRow>> sweep(const SweepSpec& spec);
// CSV with a header: gpu,scheme,context,batch,fits,kv_bytes_total,max_batch,decode_tokens_per_s
std::string sweep_to_csv(const SweepSpec& spec, const std::vector<SweepRow>& rows);

}  // namespace kvlab::planners
