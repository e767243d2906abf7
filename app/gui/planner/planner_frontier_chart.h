// The throughput frontier (the curve aiconfigurator draws): tokens/s each user sees against
// tokens/s per GPU, one curve per scheme, the batch growing along it (1, 2, 4, ... up to the
// largest that fits). Up and to the right is better; a TPOT target is a vertical line (a user
// needs at least 1000 ÷ TPOT tokens/s), and the best choice under the targets is starred.
#pragma once

#include <qcustomplot.h>

#include "planner/planner_chart_data.h"

namespace kvlab::gui {

class PlannerFrontierChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit PlannerFrontierChart(QWidget* parent = nullptr);

  void set_data(const FrontierChartData& data);
  const FrontierChartData& data() const { return m_data; }
  // For finding them: one graph per curve of the data, same order, each named "curve_graph".

 private:
  FrontierChartData m_data;
  QCPTextElement* m_subtitle = nullptr;
};

}  // namespace kvlab::gui
