#include "eviction/eviction_runs.h"
#include "kvlab/engine/eviction/eviction_json.h"

#include <string>

#include "kvlab/store/run_records.h"

namespace kvlab::gui {

namespace {

constexpr const char* kComparedArtifact = "compared_with";

}  // namespace

Result<StoredEviction> save_eviction_runs(RunsStore& store, const EvictionReport& report,
                                          const std::optional<EvictionReport>& compare) {
  StoredEviction saved;
  NewRun first = eviction_run(report);
  if (compare) {
    auto id = store.save_run(eviction_run(*compare));
    if (!id) return id.error();
    saved.compare_id = *id;
    first.artifacts.emplace_back(kComparedArtifact, nlohmann::json{{"run_id", *id}});
  }
  auto id = store.save_run(first);
  if (!id) return id.error();
  saved.id = *id;
  saved.report = report;
  saved.compare = compare;
  return saved;
}

Result<EvictionReport> eviction_report_from_record(const RunRecord& record) {
  const std::string where = "run " + std::to_string(record.id) + ": ";
  if (run_kind_from_id(record.kind) != RunKind::Eviction) {
    return make_error(where + "a " + record.kind + " run, not an eviction run");
  }
  auto report = eviction_report_from_json(record.metrics);
  if (!report) return make_error(where + report.message());
  auto config = eviction_config_from_json(record.params);
  if (!config) return make_error(where + config.message());
  report->config = std::move(config).value();
  const auto map = record.artifacts.find(kEvictionMapArtifact);
  if (map == record.artifacts.end()) return make_error(where + "no eviction_map artifact");
  auto maps = eviction_maps_from_json(map->second);
  if (!maps) return make_error(where + maps.message());
  report->maps = std::move(maps).value();
  return report;
}

Result<StoredEviction> load_eviction_run(const RunsStore& store, std::int64_t id) {
  auto record = store.load_run(id);
  if (!record) return record.error();
  auto report = eviction_report_from_record(*record);
  if (!report) return report.error();
  StoredEviction stored;
  stored.id = id;
  stored.report = std::move(report).value();
  const auto link = record->artifacts.find(kComparedArtifact);
  if (link != record->artifacts.end() && link->second.contains("run_id") &&
      link->second["run_id"].is_number_integer()) {
    const auto other_id = link->second["run_id"].get<std::int64_t>();
    auto other = store.load_run(other_id);
    if (other) {  // a deleted partner leaves this run on its own
      auto compare = eviction_report_from_record(*other);
      if (!compare) return compare.error();
      stored.compare = std::move(compare).value();
      stored.compare_id = other_id;
    }
  }
  return stored;
}

}  // namespace kvlab::gui
