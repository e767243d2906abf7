// Eviction runs in the runs store: kind "eviction", method = the policy id, label = the policy
// label, params = eviction_params_json, metrics = eviction_report_to_json, artifact
// "eviction_map" = eviction_maps_to_json. A compared pair is two runs: the compared policy is
// saved first, then the first policy with an artifact "compared_with" {"run_id": N}, so opening
// the first redraws both side by side, and each stays a run of its own.
#pragma once

#include <cstdint>
#include <optional>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

struct StoredEviction {
  std::int64_t id = 0;
  EvictionReport report;
  std::optional<EvictionReport> compare;
  std::int64_t compare_id = 0;  // 0 without a comparison
};

// Saves the pair; returns the ids (id of the first policy, and of the compared one or 0).
Result<StoredEviction> save_eviction_runs(RunsStore& store, const EvictionReport& report,
                                          const std::optional<EvictionReport>& compare);
// The report of a stored eviction run, with its configuration and maps, without recomputing.
Result<EvictionReport> eviction_report_from_record(const RunRecord& record);
// Loads run `id` and the run it was compared with (skipped when that one was deleted).
Result<StoredEviction> load_eviction_run(const RunsStore& store, std::int64_t id);

}  // namespace kvlab::gui
