// Exports of a stored run for users' scripts and spreadsheets.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "kvlab/store/runs_store.h"

namespace kvlab {

// {id, created_at, kind, source, method, label, notes, tags, params, metrics, artifacts{name: data}}
nlohmann::json run_to_json(const RunRecord& run);

// RFC 4180 CSV (CRLF line ends; a field with a comma, quote, CR or LF is quoted, quotes
// doubled). Header "key,value", then the run's fields (id, created_at, kind, source, method,
// label, notes, tags), then params and metrics flattened to dotted keys: "params.bits",
// "metrics.error.mse", "metrics.per_layer.3.ratio". Strings are written bare, null as an
// empty field, an empty object or array as {} or []. Artifacts are left to the JSON export.
std::string run_to_csv(const RunRecord& run);

}  // namespace kvlab
