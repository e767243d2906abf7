// One decode step split into what the latency model charges, for a few schemes side by side:
// reading the weights, the dense (matrix) compute, reading the KV cache, the attention compute,
// decompressing the KV, and the whole step. The step is not their sum: each half waits on its
// slower side, max(weights, dense) + max(KV, attention + decompression), which the chart's note
// says; bars in milliseconds, one GPU of the most loaded stage, the whole batch.
#pragma once

#include <vector>

#include <qcustomplot.h>

#include "planner/planner_chart_data.h"

namespace kvlab::gui {

class PlannerStepChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit PlannerStepChart(QWidget* parent = nullptr);

  void set_data(const std::vector<StepParts>& schemes);
  // The parts on the x-axis, in order ("weights read", ..., "whole step").
  static QStringList part_names();
  // For finding them: one bar series per scheme, same order as the data, each named
  // "scheme_bars"; values in ms.

 private:
  QCPBarsGroup* m_group = nullptr;
  std::vector<QCPBars*> m_bars;
};

}  // namespace kvlab::gui
