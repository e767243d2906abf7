// Several stored runs side by side: their per-layer and per-step curves on shared axes, and the
// parameters in which they differ. compare_runs() turns records into plain values; the
// RunsComparePanel draws them (overlay charts and a table) and never reads the store itself.
#pragma once

#include <vector>

#include <QString>
#include <QWidget>

#include "kvlab/store/runs_store.h"

class QComboBox;
class QCustomPlot;
class QLabel;
class QTableWidget;

namespace kvlab::gui {

// One metric across runs: a curve per run (empty where a run has none), against layer or step.
struct ComparedSeries {
  QString name;                             // "ratio", "attention mass retained"
  std::vector<std::vector<double>> curves;  // [run][layer or step]
};

struct RunsComparison {
  std::vector<QString> runs;  // "#12 kivi · kivi-2 G=32 R=128"
  std::vector<ComparedSeries> per_layer, per_step;
  // The numbers the runs stored (run_metrics: "decode tokens/s", "ratio vs fp16"), every one any
  // of them has, in their kinds' reading order: what each run measured, side by side.
  std::vector<QString> measured;
  std::vector<std::vector<QString>> measured_values;  // [metric][run]; "" where a run has none
  // The parameters (and source, kind, context) whose values are not all the same.
  std::vector<QString> differing;
  std::vector<std::vector<QString>> values;  // [parameter][run]; "" where a run has none
};

RunsComparison compare_runs(const std::vector<RunRecord>& runs);

class RunsComparePanel : public QWidget {
  Q_OBJECT

 public:
  explicit RunsComparePanel(QWidget* parent = nullptr);
  void set_comparison(const RunsComparison& comparison);
  void clear();

  // The parts are named "layer_metric", "step_metric", "layer_plot", "step_plot" and
  // "differences", for finding them.

 private:
  void draw(QCustomPlot* plot, const std::vector<ComparedSeries>& series, int which,
            const QString& x_label);

  RunsComparison m_comparison;
  QLabel* m_hint = nullptr;
  QComboBox* m_layer_metric = nullptr;
  QComboBox* m_step_metric = nullptr;
  QCustomPlot* m_layer_plot = nullptr;
  QCustomPlot* m_step_plot = nullptr;
  QTableWidget* m_differences = nullptr;
};

}  // namespace kvlab::gui
