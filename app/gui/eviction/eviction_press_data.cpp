#include "eviction/eviction_press_data.h"

#include <algorithm>

#include <QObject>

namespace kvlab::gui {

int MiniCacheData::merged_layers() const {
  return static_cast<int>(
      std::count_if(partner.begin(), partner.end(), [](int p) { return p >= 0; }));
}

EvictionBudgetData eviction_budget_data(const EvictionReport& report) {
  EvictionBudgetData d;
  if (eviction_schedule(report.config.policy) != EvictionSchedule::Prefill ||
      report.layers.empty()) {
    return d;
  }
  d.kv_heads = static_cast<int>(report.layers.front().heads.size());
  if (d.kv_heads == 0) return d;
  d.layers = static_cast<int>(report.layers.size());
  d.prompt = report.prompt;
  // The policy's label is the map's title above: one short line here leaves room for the chart.
  d.title = QObject::tr("Prompt tokens kept, of %1").arg(report.prompt);
  d.head_kept.assign(static_cast<std::size_t>(d.layers) * d.kv_heads, 0.0);
  for (int l = 0; l < d.layers; ++l) {
    const EvictionLayerResult& layer = report.layers[static_cast<std::size_t>(l)];
    d.layer_ids.push_back(layer.layer);
    // budget_tokens is the prompt's share plus every decoded token.
    d.layer_budget.push_back(std::max(0, layer.budget_tokens - report.steps));
    double sum = 0;
    const int heads = std::min<int>(d.kv_heads, static_cast<int>(layer.heads.size()));
    for (int h = 0; h < heads; ++h) {
      const double kept = layer.heads[static_cast<std::size_t>(h)].prompt_kept;
      d.head_kept[static_cast<std::size_t>(l) * d.kv_heads + h] = kept;
      sum += kept;
    }
    d.layer_kept.push_back(sum / d.kv_heads);
  }
  // A press that keeps the whole prompt (ThinK on channels only, MiniCache) has no budgets to
  // show.
  if (std::all_of(d.head_kept.begin(), d.head_kept.end(),
                  [&](double kept) { return kept >= d.prompt; })) {
    return {};
  }
  return d;
}

EvictionChannelData eviction_channel_data(const EvictionReport& report) {
  EvictionChannelData d;
  for (const EvictionLayerResult& layer : report.layers) {
    for (std::size_t h = 0; h < layer.channel_masks.size(); ++h) {
      const auto& mask = layer.channel_masks[h];
      if (mask.empty()) continue;
      if (d.dim == 0) d.dim = static_cast<int>(mask.size());
      if (static_cast<int>(mask.size()) != d.dim) continue;  // one width per chart
      d.row_layer.push_back(layer.layer);
      d.row_head.push_back(static_cast<int>(h));
      d.kept.insert(d.kept.end(), mask.begin(), mask.end());
      d.kept_per_row.push_back(static_cast<int>(std::count(mask.begin(), mask.end(), 1)));
      d.kv_heads = std::max(d.kv_heads, static_cast<int>(h) + 1);
    }
  }
  d.rows = static_cast<int>(d.row_layer.size());
  if (d.rows > 0) {
    d.title =
        QObject::tr("Key channels kept: %1 of %2 per head").arg(d.kept_per_row.front()).arg(d.dim);
  }
  return d;
}

MiniCacheData minicache_data(const EvictionReport& report) {
  MiniCacheData d;
  const auto merged = std::count_if(report.layers.begin(), report.layers.end(),
                                    [](const EvictionLayerResult& l) { return l.merged; });
  if (merged == 0) return d;
  const int n = static_cast<int>(report.layers.size());
  d.partner.assign(static_cast<std::size_t>(n), -1);
  // MiniCache merges adjacent layers in pairs (the upper half's): consecutive merged layers,
  // taken two by two from the first.
  for (int l = 0; l + 1 < n; ++l) {
    if (report.layers[l].merged && report.layers[l + 1].merged && d.partner[l] < 0) {
      d.partner[l] = l + 1;
      d.partner[l + 1] = l;
      ++l;
    }
  }
  for (const EvictionLayerResult& layer : report.layers) {
    d.layer_ids.push_back(layer.layer);
    d.retained.push_back(layer.merged ? layer.retained : 1.0);
    d.memory_bytes.push_back(layer.memory_bytes);
    d.full_memory_bytes.push_back(layer.full_memory_bytes);
  }
  d.title = QObject::tr("Memory per layer; merged pairs share directions");
  return d;
}

}  // namespace kvlab::gui
