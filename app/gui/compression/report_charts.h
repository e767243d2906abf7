// Turns an engine CompressionReport into the plain structs the charts draw. The one place the
// charts' data meets the engine and the planners' memory formula.
#pragma once

#include "common/chart_data.h"
#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/quant/compress.h"

namespace kvlab::gui {

ChartSet chart_set_from_report(const CompressionReport& report);
StreamSeriesData stream_series_from_report(const StreamReport& report);

}  // namespace kvlab::gui
