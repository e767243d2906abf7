// The eviction map of one KV head as a heatmap: x the token position, y the decode step, one
// discrete colour per cell state (absent, kept, evicted, merged, sink) with a legend row, and the
// planted needle's position as a dashed vertical line. Drag pans, the wheel zooms (both axes),
// reset_zoom() shows the whole map again.
#pragma once

#include <array>

#include <QColor>

#include <qcustomplot.h>

#include "common/chart_style.h"
#include "eviction/eviction_chart_data.h"

namespace kvlab::gui {

inline constexpr int kCellStateCount = 5;
// Colours of CellState 0..4, and their legend names.
const std::array<QColor, kCellStateCount>& cell_state_colors();
const std::array<QString, kCellStateCount>& cell_state_names();

class EvictionMapChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit EvictionMapChart(QWidget* parent = nullptr);

  void set_data(const EvictionMapData& data);
  void clear_data(const QString& message);
  void reset_zoom();

  const EvictionMapData& data() const { return m_data; }
  // Cell (position, step) of the colour map holds the CellState value.
  // Visible only when the needle's position is known.
  QString title() const { return m_title->text(); }

 private:
  QCPTextElement* m_title = nullptr;
  QCPColorMap* m_map = nullptr;
  VerticalMarker m_needle_marker;
  QCPItemStraightLine* m_needle = nullptr;
  QCPItemText* m_needle_label = nullptr;
  EvictionMapData m_data;
};

}  // namespace kvlab::gui
