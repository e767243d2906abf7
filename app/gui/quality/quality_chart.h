// Quality against compression, one labelled point per configuration: the dominated ones as open
// circles, the Pareto-optimal ones filled, and the frontier drawn as a step line through them.
// Receives plain values (QualityChartData, quality_results.h); hovering a point emits its index.
// Drag pans, the wheel zooms; at every replot the labels are placed again so they do not overlap.
#pragma once

#include <vector>

#include <qcustomplot.h>

#include "quality/quality_results.h"

namespace kvlab::gui {

class QualityChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit QualityChart(QWidget* parent = nullptr);

  void set_data(const QualityChartData& data);
  // No points; `message` says why.
  void clear_data(const QString& message);
  // Rings point `index` (-1: none), e.g. the table's selected run.
  void set_highlight(int index);
  void reset_zoom();

  const QualityChartData& data() const { return m_data; }
  int point_count() const { return static_cast<int>(m_data.points.size()); }
  // The point drawn within a few pixels of `pixel`, nearest first; -1 when none.
  int point_at(const QPointF& pixel) const;
  // The point's position on the widget, in pixels.
  QPointF point_pixel(int index) const;
  // The graphs are named "dominated_graph" and "frontier_graph", the step curve "step_line".
  QString label_text(int index) const;
  // Where point `index`'s label is drawn, in pixels; empty when it is hidden (no free place).
  QRectF label_rect(int index) const;
  QString title() const { return m_title->text(); }

 signals:
  void point_hovered(int index);  // -1 when the mouse leaves the points

 protected:
  void mouseMoveEvent(QMouseEvent* event) override;
  void leaveEvent(QEvent* event) override;

 private:
  void place_labels();

  QCPTextElement* m_title = nullptr;
  QCPGraph* m_dominated = nullptr;
  QCPGraph* m_frontier = nullptr;
  QCPGraph* m_highlight = nullptr;
  QCPCurve* m_steps = nullptr;
  QCPItemText* m_message = nullptr;
  std::vector<QCPItemText*> m_labels;
  std::vector<QCPItemLine*> m_error_bars;  // one per point with an interval
  QSharedPointer<QCPAxisTicker> m_linear_ticker;
  QSharedPointer<QCPAxisTickerLog> m_log_ticker;
  QualityChartData m_data;
  int m_hovered = -1;
  bool m_placing = false;
};

}  // namespace kvlab::gui
