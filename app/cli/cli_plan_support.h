// What `kvlab plan`, `plan sweep`, `plan advise`, `models` and `gpus` share: the user's own
// catalogue entries, --model / --scheme / kernel-rate resolution, the options of a deployment,
// and comma-separated lists.
#pragma once

#include <string>
#include <vector>

#include "cli_common.h"
#include "kvlab/planners/serving.h"

namespace kvlab::cli {

// The user's own GPUs and models, from the runs database when it exists (never created here).
struct UserCatalogue {
  std::vector<planners::GpuSpec> gpus;
  std::vector<planners::ModelSpec> models;
};
Result<UserCatalogue> user_catalogue(const DbOption& db);

// --model: a catalogue id, Hugging Face name or alias (built in or imported), or a config.json.
Result<planners::ModelSpec> resolve_model(const std::string& id, const UserCatalogue& user);
// --scheme: a built-in scheme, or run:ID (the bits per value a saved run measured).
Result<planners::Scheme> resolve_scheme(const std::string& id, const DbOption& db);
Result<std::vector<planners::Scheme>> resolve_schemes(const std::string& ids, const DbOption& db);

// The decompression rates for `gpu`: the newest `kvlab bench gpu --save` run of that GPU in the
// database, else the built-in H100 measurement (scaled to the GPU by the latency model).
Result<planners::KernelRates> resolve_rates(const planners::GpuSpec& gpu, const DbOption& db);

// The options every planner command takes, and the scenario they describe.
struct DeploymentOptions {
  std::string model = "llama-3-8b", gpu = "h100-sxm";
  planners::Deployment deployment;
  double reserve_gib = 1.0, host_gib = 256.0;
  double efficiency = 0.8, compute_efficiency = 0.6, link_efficiency = 0.8;
  DbOption db;
  void add_to(CLI::App& cmd);
  // Model, GPU (the first of `gpu` when it is a list), deployment, efficiencies and rates.
  Result<planners::Scenario> scenario(const UserCatalogue& user) const;
};

template <class T>
Result<std::vector<T>> parse_list(const std::string& text, const char* option);
std::vector<std::string> split(const std::string& text);

// "1.2 ms", "350 ms", "2.10 s".
std::string millis(double seconds);

}  // namespace kvlab::cli
