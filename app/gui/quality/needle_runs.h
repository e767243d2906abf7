// Passkey-retrieval runs in the runs store (kind "needle", saved by `kvlab quality --needle
// --save`), read back as plain points for the Quality view's "retrieval against budget" chart:
// one line per eviction policy (and per quantization method with it), the prefill presses run
// with the question before the press drawn apart from those that saw it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <QString>

#include "kvlab/engine/core/result.h"
#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

struct NeedlePoint {
  std::int64_t run_id = 0;
  std::string model, policy_id, policy, method;
  double budget_fraction = 1, accuracy = 0;
  // What budget_fraction is a share of: "tokens" (of the prompt), "key channels" (ThinK), or
  // "none" (MiniCache, a count of tokens: drawn at 100%). Runs saved before it say nothing:
  // tokens.
  std::string budget_of = "tokens";
  bool press_before_question = false;
};

// The point of a stored needle run, or nothing when it is not one with every number.
std::optional<NeedlePoint> needle_point(const RunSummary& run);

// One line of the chart: a policy's accuracy at each budget, by budget.
struct RetrievalLine {
  QString name;  // "snapkv", "snapkv, pressed before the question", "h2o + int8"
  std::string policy_id;
  bool press_before_question = false;
  std::vector<double> budget, accuracy;
  std::vector<std::int64_t> run_ids;
};

struct RetrievalChartData {
  QString title;
  std::string model;
  std::vector<RetrievalLine> lines;
  // The full cache's accuracy (a run without eviction or quantization), when stored.
  std::optional<double> full_accuracy;
};

// The needle runs of `model` (resolved paths compare equal), or of the newest needle run's
// model when `model` is empty or has none; the newest run of each (line, budget).
Result<RetrievalChartData> load_retrieval(const RunsStore& store, const std::string& model);

}  // namespace kvlab::gui
