// The roofline of one GPU (Williams, Waterman and Patterson, CACM 2009), log-log: arithmetic
// intensity (FLOP per byte read) against attainable TFLOP/s, the roof min(bf16 peak × compute
// efficiency, intensity × bandwidth × bandwidth efficiency), and each scheme's decode step at
// (StepCost::intensity(), StepCost::achieved_flops()). Fewer bytes read moves a point right;
// every scheme does the model's same FLOPs, and decompression only lengthens the step, so a
// scheme waiting on its decompression sits below the roof.
#pragma once

#include <qcustomplot.h>

#include "planner/planner_chart_data.h"

namespace kvlab::gui {

class PlannerRooflineChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit PlannerRooflineChart(QWidget* parent = nullptr);

  void set_data(const RooflineData& data);
  const RooflineData& data() const { return m_data; }
  // For finding them: one graph per point of the data (one scheme each), same order, each named
  // "point_graph"; the roof is the graph named "roof_graph".

 private:
  RooflineData m_data;
  QCPTextElement* m_subtitle = nullptr;
  QCPGraph* m_roof = nullptr;
};

}  // namespace kvlab::gui
