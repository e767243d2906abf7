// Plain value structs the Eviction view's charts draw from, and the one place they are made from
// an engine EvictionReport (fresh or reloaded from the runs store). The charts never call the
// engine.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <QString>

#include "kvlab/engine/eviction/eviction.h"

namespace kvlab::gui {

// One KV head's eviction map: steps × positions cells, each a CellState value (0..4).
struct EvictionMapData {
  QString title;  // "h2o budget 25% recent 50% · layer 3, KV head 1"
  int steps = 0, positions = 0, prompt = 0;
  std::vector<std::uint8_t> cells;  // row-major: cells[step * positions + position]
  std::optional<int> needle;        // position of the planted needle, when known
  std::uint8_t at(int step, int position) const {
    return cells[static_cast<std::size_t>(step) * positions + position];
  }
};

// One policy's per-step curves (over all layers, or one layer).
struct EvictionSeriesData {
  QString label;  // the policy label, for the legend
  std::vector<double> step;
  std::vector<double> mass_retained;  // full-cache attention on tokens still held
  std::vector<double> rel_error;      // attention-output relative error
  // The last step is the needle query (a synthetic source's question): its mass drops and its
  // error jumps, so the chart marks it.
  bool last_step_is_needle = false;
};

// The numbers of the metrics box for one policy (over all layers, or one layer).
struct EvictionSummary {
  QString label;
  QString scope;    // "all layers" or "layer 3"
  int context = 0;  // tokens the sequence has at the last step
  double kept_tokens = 0;
  double memory_bytes = 0, full_memory_bytes = 0;
  double mass_retained = 0, rel_error = 0, cosine = 1;
  // The same without the last step, the needle query (all layers only, when there is one).
  std::optional<double> mass_without_needle_step, rel_error_without_needle_step;
  std::optional<double> needle_retained, needle_in_top_k;  // fraction of KV heads
  double seconds = 0;
};

// A policy label broken at spaces into lines of at most `width` characters, for chart titles: a
// press's label ("adakv budget 25% of prompt by pyramidkv window 32 ...") on one line would
// make the chart, and the page, wider than a laptop's window.
QString wrapped_label(const std::string& label, int width = 44);

// `layer` < 0: over all layers. Out-of-range layers or heads give an empty map.
EvictionMapData eviction_map_data(const EvictionReport& report, int layer, int kv_head);
EvictionSeriesData eviction_series_data(const EvictionReport& report, int layer);
EvictionSummary eviction_summary(const EvictionReport& report, int layer);

}  // namespace kvlab::gui
