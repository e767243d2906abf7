// JSON of the eviction simulation's configuration and report (eviction.h), for run records and
// `kvlab evict --json`; the maps go to a separate artifact, their cells base64-packed.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/eviction/eviction.h"

namespace kvlab {

nlohmann::json eviction_params_json(const EvictionConfig& config);
Result<EvictionConfig> eviction_config_from_json(const nlohmann::json& params);

nlohmann::json eviction_report_to_json(const EvictionReport& report);
Result<EvictionReport> eviction_report_from_json(const nlohmann::json& metrics);
nlohmann::json eviction_maps_to_json(const EvictionReport& report);
Result<std::vector<std::vector<EvictionMap>>> eviction_maps_from_json(const nlohmann::json& j);

}  // namespace kvlab
