// The JSON of the streaming simulation (stream_sim.h): its configuration and its report, for
// run records and `kvlab stream --json`.
#pragma once

#include <nlohmann/json.hpp>

#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

nlohmann::json stream_config_to_json(const StreamConfig& config);
nlohmann::json stream_to_json(const StreamReport& report);
Result<StreamReport> stream_from_json(const nlohmann::json& j);

}  // namespace kvlab
