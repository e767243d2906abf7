// What the planner takes from a runs database: the quality cost of its schemes for one model,
// from the quality runs it holds (`kvlab quality --save`: the newest run of the same model with
// the same method), and the decompression rates measured on a GPU (`kvlab bench gpu --save`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/planners/catalog.h"
#include "kvlab/planners/kv_memory.h"
#include "kvlab/planners/latency.h"
#include "kvlab/store/runs_store.h"

namespace kvlab {

// Whether a quality run's model (a file or folder path) is the catalogue model: the file's name
// starts with one of the model's names (id, alias, Hugging Face name), compared as canonical ids.
bool quality_run_is_model(const std::string& run_model, const planners::ModelSpec& model);

// The quality run method a planner scheme stands for ("fp8" → fp8-e4m3 or e5m2, "kivi2" → KIVI
// with 2 bits, "kvcomp" → KVComp with Huffman codes); false for fp16 and for schemes with
// eviction or offload, which a quality run of the method alone does not measure.
bool quality_run_is_scheme(const nlohmann::json& run_params, const planners::Scheme& scheme);

// Per scheme (same order): a text, "perplexity +0.8 %, KL 0.003 (run 12, 2048 tokens)", "exact"
// for fp16, or empty where the database has no such run; and the perplexity change it measured
// (0 for fp16).
struct SchemeQuality {
  std::string text;
  std::optional<double> perplexity_change;
  std::optional<double> perplexity_change_se;  // where the run stored one
};
Result<std::vector<SchemeQuality>> scheme_quality(const RunsStore& store,
                                                  const planners::ModelSpec& model,
                                                  const std::vector<planners::Scheme>& schemes);

// The kernel rates of the newest `kvlab bench gpu --save` (or `bench cpu --save`) run of `gpu`
// (params.gpu_id), or nullopt when there is none. A stored run that cannot give rates is an error
// naming the run.
Result<std::optional<planners::KernelRates>> stored_kernel_rates(const RunsStore& store,
                                                                 const planners::GpuSpec& gpu);

}  // namespace kvlab
