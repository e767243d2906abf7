// What eviction costs step by step: the full-cache attention mass the kept tokens still hold
// (left axis) and the attention-output relative error (right axis), one pair of curves per
// policy (the first solid, the compared one dashed). The last step of a synthetic source is
// the needle query and is marked as such: its numbers are not those of ordinary decoding.
#pragma once

#include <array>
#include <vector>

#include <qcustomplot.h>

#include "common/chart_style.h"
#include "eviction/eviction_chart_data.h"

namespace kvlab::gui {

class EvictionSeriesChart : public QCustomPlot {
  Q_OBJECT

 public:
  static constexpr int kMaxSeries = 2;

  explicit EvictionSeriesChart(QWidget* parent = nullptr);

  // One or two policies; `scope` ("all layers", "layer 3") goes in the title.
  void set_data(const std::vector<EvictionSeriesData>& series, const QString& scope);
  void clear_data();

  const std::vector<EvictionSeriesData>& data() const { return m_data; }
  QString title() const { return m_title->text(); }
  // For finding them: the first policy's curves are the graphs named "mass_graph" and
  // "error_graph", the compared policy's "compared_mass_graph" and "compared_error_graph".
  // At the last step when it is the needle query (EvictionSeriesData::last_step_is_needle), a
  // line named "needle_marker" and its label "needle_marker_label".

 private:
  QCPTextElement* m_title = nullptr;
  std::array<QCPGraph*, kMaxSeries> m_mass{};
  std::array<QCPGraph*, kMaxSeries> m_error{};
  VerticalMarker m_needle_marker;
  QCPItemStraightLine* m_needle = nullptr;
  QCPItemText* m_needle_label = nullptr;
  std::vector<EvictionSeriesData> m_data;
};

}  // namespace kvlab::gui
