// The Planner page: a model, a GPU, a context, a batch, schemes and parallelism; everything is
// recomputed as any control changes (plan() per scheme): the formula with the numbers, one GPU's
// memory per scheme (weights, KV, reserve, free; red when it does not fit), KV memory against
// context with the capacity line, and a table of max batch, max context, fewest GPUs and decode
// throughput. A scenario saves to the runs store as a "plan" run, reopens from the Runs page,
// and can be pinned to compare with the next one.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include <QWidget>
#include <nlohmann/json.hpp>

#include "kvlab/planners/solvers.h"
#include "kvlab/store/runs_store.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QSpinBox;
class QTableView;
class QCustomPlot;

namespace kvlab::gui {

class PlannerTableModel;

class PlannerView : public QWidget {
  Q_OBJECT
 public:
  explicit PlannerView(std::shared_ptr<RunsStore> store, QWidget* parent = nullptr);

  // The scenario the controls describe (scheme = the first checked one) and the checked schemes.
  planners::Scenario scenario() const;
  std::vector<planners::Scheme> schemes() const;
  // The results shown, one per checked scheme (empty when the scenario is invalid).
  const std::vector<planners::PlanResult>& results() const { return m_results; }
  QString error_text() const;
  double last_recompute_ms() const { return m_recompute_ms; }

  // Controls, for tests and for reopening runs.
  void set_model(const QString& id);
  void set_gpu(const QString& id);
  void set_context(int tokens);
  void set_batch(int batch);
  void set_schemes(const QStringList& ids);
  void set_parallelism(int tp, int pp);
  // Imports a config.json into the model list (and the store); false with an error shown.
  bool import_config(const QString& path);
  bool add_gpu(const planners::GpuSpec& gpu);

  // Saves the scenario as a "plan" run; the run id, or 0 with the error shown.
  std::int64_t save();
  // Restores the controls from a stored plan run's params.
  bool restore(const nlohmann::json& params);
  // Pins the current numbers as the comparison column.
  void pin();

  QCustomPlot* memory_chart() const { return m_memory_chart; }
  QCustomPlot* context_chart() const { return m_context_chart; }
  QTableView* table() const { return m_table; }
  PlannerTableModel* table_model() const { return m_table_model; }
  QPlainTextEdit* formula() const { return m_formula; }
  QLabel* timing_label() const { return m_timing; }

 signals:
  void status_message(const QString& text, int timeout_ms);
  void run_saved(std::int64_t id);

 public slots:
  void recompute();

 private:
  void reload_catalogues();
  void fill_table();
  void draw_memory_chart();
  void draw_context_chart();

  std::shared_ptr<RunsStore> m_store;
  std::vector<planners::ModelSpec> m_models;
  std::vector<planners::GpuSpec> m_gpus;
  std::vector<planners::Scheme> m_measured;  // from saved compression runs
  QComboBox *m_model = nullptr, *m_gpu = nullptr, *m_evict = nullptr;
  QSpinBox *m_context = nullptr, *m_batch = nullptr, *m_tp = nullptr, *m_pp = nullptr;
  QSpinBox* m_page = nullptr;
  QDoubleSpinBox *m_util = nullptr, *m_reserve = nullptr, *m_efficiency = nullptr;
  QListWidget* m_scheme_list = nullptr;
  QComboBox* m_formula_scheme = nullptr;
  QPlainTextEdit* m_formula = nullptr;
  QTableView* m_table = nullptr;
  PlannerTableModel* m_table_model = nullptr;
  QCustomPlot *m_memory_chart = nullptr, *m_context_chart = nullptr;
  QLabel *m_timing = nullptr, *m_error = nullptr;
  std::vector<planners::Scheme> m_shown_schemes;
  std::vector<planners::PlanResult> m_results;
  // The pinned scenario: its description and per-scheme results.
  QString m_pinned_title;
  std::vector<std::pair<planners::Scheme, planners::PlanResult>> m_pinned;
  double m_recompute_ms = 0;
  bool m_restoring = false;
};

}  // namespace kvlab::gui
