// The Compression page's "Key channels" tab: a layer and which KV heads (the max over them, their
// mean, or one head) above the Key channel magnitudes chart. It holds one layer's statistics;
// the page computes them (on a run, a layer change or a new rotation) and passes them in.
#pragma once

#include <optional>

#include <QWidget>

#include "compression/key_channel_data.h"

namespace kvlab::gui {

class KeyChannelChart;
class LayerPicker;

class KeyChannelPanel : public QWidget {
  Q_OBJECT

 public:
  explicit KeyChannelPanel(QWidget* parent = nullptr);

  void set_layer_count(int layers);
  void set_stats(KeyChannelStats stats);
  // No statistics; `why` is the chart's title.
  void clear(const QString& why);

  // Picks the layer without emitting; clamped.
  void select_layer(int layer);
  int selected_layer() const;
  // kMaxOverHeads, kMeanOverHeads or a head index.
  int selected_heads() const;
  void select_heads(int heads_pick);

  // The chart is named "chart", the layer picker's spin box "layer", for finding them.
  const std::optional<KeyChannelStats>& stats() const { return m_stats; }

 signals:
  // A person picked another layer.
  void layer_changed(int layer);

 private:
  void refill_heads(int heads);
  void redraw();

  LayerPicker* m_picker = nullptr;
  KeyChannelChart* m_chart = nullptr;
  std::optional<KeyChannelStats> m_stats;
  int m_heads_listed = -1;
};

}  // namespace kvlab::gui
