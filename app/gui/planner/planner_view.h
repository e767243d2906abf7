// The Planner page: a model, a GPU, a context, a batch, schemes and parallelism; everything is
// recomputed as any control changes (plan() per scheme): the formula with the numbers, a table
// of KV memory (whole model, per sequence, per GPU, deployment), max batch, max context, fewest
// GPUs, TTFT, TPOT and tokens/s (per user, per GPU, deployment) and what the decode step waits
// on; and tabs of charts: one GPU's memory per scheme, KV memory against context, the throughput
// frontier (with the best choice under optional TTFT / TPOT targets), the roofline with each
// scheme's decode step, and "Should I compress?", the advice matrix over contexts × users
// (planners::advise) for the page's model, GPU and parallelism. A scenario saves to the runs
// store as a "plan" run, reopens from the Runs page, and can be pinned to compare with the next.
// What is computed is the page model's (planner_model.h); this is the widgets over it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <QWidget>
#include <nlohmann/json.hpp>

#include "kvlab/planners/serving.h"
#include "kvlab/store/runs_store.h"
#include "planner/planner_model.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;
class QSplitter;
class QTabWidget;
class QTableView;
class QCustomPlot;

namespace kvlab::gui {

class PlannerAdvicePanel;
class PlannerFrontierChart;
class PlannerRooflineChart;

class PlannerView : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerView(std::shared_ptr<RunsStore> store, QWidget* parent = nullptr);

  // The scenario the controls describe (scheme = the first checked one) and the checked schemes.
  planners::Scenario scenario() const;
  std::vector<planners::Scheme> schemes() const;
  // What the page computes: the results (one per checked scheme, none when the scenario is
  // invalid), the targets' best choice, the advice, the table.
  PlannerModel* model() const { return m_plan; }
  QString error_text() const;

  // Controls, for tests and for reopening runs.
  void set_model(const QString& id);
  void set_gpu(const QString& id);
  void set_context(int tokens);
  void set_batch(int batch);
  void set_schemes(const QStringList& ids);
  void set_parallelism(int tp, int pp);
  void set_compute_efficiency(double fraction);
  // Service-level targets for the frontier's best choice; 0 means none.
  void set_targets(double ttft_ms, double tpot_ms);
  // Imports a config.json or a .gguf file into the model list (and the store); false with an
  // error shown.
  bool import_config(const QString& path);
  bool add_gpu(const planners::GpuSpec& gpu);

  // Saves the scenario as a "plan" run; the run id, or 0 with the error shown.
  std::int64_t save();
  // Restores the controls from a stored plan run's params.
  bool restore(const nlohmann::json& params);
  // Pins the current numbers as the comparison column.
  void pin();

  QTableView* table() const { return m_table; }
  QTabWidget* chart_tabs() const { return m_tabs; }
  // The parts are named for finding them: "memory_chart", "context_chart", "formula", the
  // recompute time ("timing"), "frontier", "roofline", "advice" and the sentence on the best
  // scheme and batch under the targets ("slo").

 signals:
  void status_message(const QString& text, int timeout_ms);
  void run_saved(std::int64_t id);

 public slots:
  void recompute();

 private:
  // The model, GPU and scheme lists from the page model's catalogues, keeping the choices.
  void fill_catalogues();
  QStringList checked_scheme_ids() const;
  void draw_memory_chart();
  void draw_context_chart();
  // The frontier tab with its targets; the frontier, the roofline and the advice drawn.
  QWidget* make_frontier_tab();
  void draw_serving();

  PlannerModel* m_plan = nullptr;
  QComboBox *m_model = nullptr, *m_gpu = nullptr, *m_evict = nullptr;
  QSpinBox *m_context = nullptr, *m_batch = nullptr, *m_tp = nullptr, *m_pp = nullptr;
  QSpinBox* m_page = nullptr;
  QDoubleSpinBox *m_util = nullptr, *m_reserve = nullptr, *m_efficiency = nullptr;
  QDoubleSpinBox* m_compute_efficiency = nullptr;
  QDoubleSpinBox *m_ttft_target = nullptr, *m_tpot_target = nullptr;
  QListWidget* m_scheme_list = nullptr;
  QComboBox* m_formula_scheme = nullptr;
  QPlainTextEdit* m_formula = nullptr;
  QTableView* m_table = nullptr;
  QCustomPlot *m_memory_chart = nullptr, *m_context_chart = nullptr;
  QLabel *m_timing = nullptr, *m_error = nullptr, *m_slo_label = nullptr;
  QTabWidget* m_tabs = nullptr;
  QSplitter* m_table_split = nullptr;
  PlannerFrontierChart* m_frontier_chart = nullptr;
  PlannerRooflineChart* m_roofline_chart = nullptr;
  PlannerAdvicePanel* m_advice_panel = nullptr;
  int m_shown_advice_version = -1;
  bool m_restoring = false;
};

}  // namespace kvlab::gui
