// The JSON of a method configuration (method.h): its id and the parameters that apply to it,
// as run records and reports store them.
#pragma once

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {

nlohmann::json method_params_json(const MethodConfig& config);
Result<MethodConfig> method_config_from_json(const nlohmann::json& j);

}  // namespace kvlab
