// Per-layer chart in two panes sharing the layer axis: above, the error of each layer
// (attention-output relative error on the left axis, MSE on the right); below, its ratio.
#pragma once

#include <qcustomplot.h>

#include "common/chart_data.h"

namespace kvlab::gui {

class LayerChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit LayerChart(QWidget* parent = nullptr);

  void set_data(const LayerSeriesData& data);
  void clear_data();
  // The graphs are named "rel_error_graph" and "mse_graph", the bars "ratio_bars".

 private:
  QCPAxisRect* m_error_rect = nullptr;
  QCPAxisRect* m_ratio_rect = nullptr;
  QCPGraph* m_rel_error = nullptr;
  QCPGraph* m_mse = nullptr;
  QCPBars* m_ratio = nullptr;
};

}  // namespace kvlab::gui
