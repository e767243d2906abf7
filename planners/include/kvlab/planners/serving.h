// Serving answers over the latency model: the throughput frontier as the batch grows, the best
// scheme and batch under service-level targets, and the advice matrix — whether compressing pays
// for a context and a concurrency, and with which scheme — every cell computed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/planners/solvers.h"

namespace kvlab::planners {

// One point of the frontier: tokens/s for each user against tokens/s per GPU at one batch
// (the curve aiconfigurator draws; up and to the right is better).
struct FrontierPoint {
  int batch = 0;
  double tokens_per_s_per_user = 0, tokens_per_s_per_gpu = 0;
  double tpot_s = 0;
};
// Batches 1, 2, 4, ... up to the largest that fits, and that largest itself. Empty when not one
// sequence fits.
std::vector<FrontierPoint> frontier(const Scenario& base);

// Service-level targets; 0 means no target.
struct Slo {
  double ttft_ms = 0, tpot_ms = 0;
};
struct SloChoice {
  bool found = false;
  int scheme = -1;  // index into the schemes given
  int batch = 0;
  double tokens_per_s_per_gpu = 0, tokens_per_s_per_user = 0, ttft_ms = 0, tpot_ms = 0;
  std::string reason;  // why this one, or why none
};
// The scheme and batch with the most tokens/s per GPU that fit memory and meet both targets.
Result<SloChoice> best_under_slo(const Scenario& base, const std::vector<Scheme>& schemes,
                                 const Slo& slo);

// What each scheme does for `concurrency` users of `context` tokens each.
struct SchemeOutcome {
  int served = 0;  // sequences held at once: the concurrency, or the most that fit
  double tokens_per_s_per_gpu = 0, tokens_per_s_per_user = 0, tpot_ms = 0;
  bool compute_bound = false;
  std::string bound_by, attention_bound_by;
  double gain = 0;  // tokens/s per GPU over fp16's, minus 1 (−0.2: 20% fewer)
};
struct AdviceCell {
  std::int64_t context = 0;
  int concurrency = 0;
  int recommended = -1;        // index into the schemes; -1: nothing fits
  double memory_pressure = 0;  // fp16 KV the users need / KV capacity, per GPU
  std::vector<SchemeOutcome> outcomes;
  std::string verdict;  // "don't compress", "compress: fp8", "nothing fits"
  std::string reason;   // the numbers behind it, one sentence or two
};
// What the advice weighs when not told otherwise (`kvlab plan advise` and the Planner page):
// schemes in order of quality cost, fp16 first; contexts (capped at the model's limit by the
// caller); concurrent sequences.
inline const std::vector<std::string> kDefaultAdviceSchemes{"fp16",  "fp8",   "int8",
                                                            "kivi4", "kivi2", "kvcomp"};
inline const std::vector<std::int64_t> kDefaultAdviceContexts{2048, 8192, 32768, 131072};
inline const std::vector<int> kDefaultAdviceConcurrencies{1, 8, 32, 128, 512};

struct AdviceSpec {
  Scenario base;  // model, GPU, deployment, efficiencies, rates (context and batch ignored)
  std::vector<Scheme> schemes;  // the first must be the uncompressed baseline (fp16)
  std::vector<std::int64_t> contexts;
  std::vector<int> concurrencies;
  // A compressed scheme must beat fp16 by this much to be worth its quality cost.
  double min_gain = 0.10;
  // Quality cost per scheme (same order), from stored quality runs; empty: none known.
  std::vector<std::string> quality;
  // The perplexity change each scheme measured (same order; nullopt: not measured), and the most
  // a recommended scheme may have (nullopt: no limit). A scheme over the limit, or unmeasured
  // while a limit is set, is shown but not recommended.
  std::vector<std::optional<double>> perplexity_change;
  // Its standard error (same order; nullopt: the run stored none). Where the 95% interval of the
  // change holds the limit, the limit cannot tell which side the scheme is on: the scheme is
  // still judged by its measured change, and the advice says it is within noise of the limit.
  std::vector<std::optional<double>> perplexity_change_se;
  std::optional<double> max_perplexity_change;
};
struct Advice {
  std::vector<AdviceCell> cells;  // contexts outer, concurrencies inner
  std::vector<std::string> scheme_ids, scheme_labels;
  std::vector<std::int64_t> contexts;
  std::vector<int> concurrencies;
  std::vector<std::string> quality;
  std::vector<bool> allowed;  // per scheme: within the quality limit
  // Per scheme: its perplexity change is within noise of the limit (see AdviceSpec).
  std::vector<bool> limit_within_noise;
  std::string rates_source;
};
Result<Advice> advise(const AdviceSpec& spec);
nlohmann::json advice_to_json(const Advice& a);

}  // namespace kvlab::planners
