// Plain value structs for the Eviction view's prefill-press charts, made from an engine
// EvictionReport (fresh or reloaded): the prompt tokens kept per layer and KV head (PyramidKV's
// pyramid, Ada-KV's spread over heads), ThinK's kept key channels, and MiniCache's merged layer
// pairs. Each is empty when the run has no such data, so the view hides its tab.
#pragma once

#include <cstdint>
#include <vector>

#include <QString>

#include "kvlab/engine/eviction/eviction.h"

namespace kvlab::gui {

// Prompt tokens kept, per layer and per KV head, by a prefill policy.
struct EvictionBudgetData {
  QString title;
  int layers = 0, kv_heads = 0, prompt = 0;
  std::vector<int> layer_ids;
  std::vector<double> layer_budget;  // prompt tokens the layer's budget allows
  std::vector<double> layer_kept;    // prompt tokens kept, mean over the layer's KV heads
  std::vector<double> head_kept;     // [layer * kv_heads + head]
  bool empty() const { return layers == 0 || kv_heads == 0; }
  double head(int layer, int kv_head) const {
    return head_kept[static_cast<std::size_t>(layer) * kv_heads + kv_head];
  }
};

// ThinK's key-channel masks: one row per (layer, KV head), one column per channel.
struct EvictionChannelData {
  QString title;
  int rows = 0, dim = 0, kv_heads = 0;
  std::vector<int> row_layer, row_head;
  std::vector<std::uint8_t> kept;  // rows × dim, row-major, 1 = kept
  std::vector<int> kept_per_row;
  bool empty() const { return rows == 0 || dim == 0; }
  bool at(int row, int channel) const {
    return kept[static_cast<std::size_t>(row) * dim + channel] != 0;
  }
};

// MiniCache: which layers share directions, the share retained unmerged, memory per layer.
struct MiniCacheData {
  QString title;
  std::vector<int> layer_ids;
  std::vector<int> partner;      // the layer index it is merged with, -1 when not merged
  std::vector<double> retained;  // share of prompt tokens kept unmerged (merged layers)
  std::vector<double> memory_bytes, full_memory_bytes;  // at the last step
  bool empty() const { return layer_ids.empty(); }
  int merged_layers() const;
};

// Prefill policies that drop prompt tokens only (a decode policy keeps no prompt budget apart).
EvictionBudgetData eviction_budget_data(const EvictionReport& report);
// Layers with channel masks only; empty when no layer has them.
EvictionChannelData eviction_channel_data(const EvictionReport& report);
// Empty unless some layer is merged.
MiniCacheData minicache_data(const EvictionReport& report);

}  // namespace kvlab::gui
