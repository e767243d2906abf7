// Bar chart of how often each quantized code occurs in one histogram (one layer, K or V, one
// group of equal-width codes).
#pragma once

#include <qcustomplot.h>

#include "common/chart_data.h"

namespace kvlab::gui {

class HistogramChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit HistogramChart(QWidget* parent = nullptr);

  // Bar i is code i; `title` says which layer, role and histogram it is.
  void set_histogram(const HistogramData& histogram, const QString& title);
  void clear_data(const QString& message);
  // The counts are drawn as the bars named "bars" (key = code).

 private:
  QCPTextElement* m_title = nullptr;
  QCPBars* m_bars = nullptr;
};

}  // namespace kvlab::gui
