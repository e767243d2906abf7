// The JSON of a quality report (model_quality.h), as run records store it.
#pragma once

#include <nlohmann/json.hpp>

#include "kvlab/engine/model/model_quality.h"

namespace kvlab {

nlohmann::json quality_report_to_json(const QualityReport& r);

}  // namespace kvlab
