// The Planner page's model (QtCore only): the catalogues (built-in and imported models and GPUs,
// the measured schemes of stored compression runs, the decompression rates per GPU), the plan of
// every chosen scheme for the scenario the controls describe, the best choice under TTFT / TPOT
// targets, the "Should I compress?" advice (computed again only when what it depends on
// changes), the pinned scenario, the results table, and saving a scenario as a "plan" run. The
// page's widgets (planner_view.h) describe the scenario and draw what this computes.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <QObject>
#include <QString>
#include <QStringList>

#include "kvlab/planners/serving.h"
#include "kvlab/store/run_records.h"
#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

class PlannerTableModel;

// What the controls say, beside the scenario.
struct PlannerInputs {
  planners::Scenario scenario;                    // its scheme is the first of `schemes`
  std::vector<planners::Scheme> schemes;          // the checked ones, in the list's order
  double ttft_target_ms = 0, tpot_target_ms = 0;  // 0: none
  double advice_min_gain = 0;
  std::optional<double> advice_max_perplexity_change;
};

class PlannerModel : public QObject {
  Q_OBJECT

 public:
  // `store` may be null: the built-in catalogues only, and nothing saved.
  explicit PlannerModel(std::shared_ptr<RunsStore> store, QObject* parent = nullptr);

  // Reads the imported models and GPUs and the measured schemes from the store again.
  void reload_catalogues();
  const std::vector<planners::ModelSpec>& models() const { return m_models; }
  const std::vector<planners::GpuSpec>& gpus() const { return m_gpus; }
  const std::vector<planners::Scheme>& measured() const { return m_measured; }
  // The schemes `ids` name, each capped by the eviction choice `evict` ("none", "25%"...).
  std::vector<planners::Scheme> schemes_for(const QStringList& ids, const QString& evict) const;
  // The decompression rates for `gpu`: the newest `kvlab bench gpu --save` run of it in the
  // store, else the built-in H100 measurement (as the command line's planner does).
  const planners::KernelRates& rates_for(const planners::GpuSpec& gpu) const;
  // A model or GPU only this page knows (a stored scenario's); true when it was new.
  bool add_model_if_new(const planners::ModelSpec& model);
  bool add_gpu_if_new(const planners::GpuSpec& gpu);

  // Plans every scheme; then the targets' best choice and the advice.
  void recompute(const PlannerInputs& inputs);
  const planners::Scenario& scenario() const { return m_scenario; }
  const std::vector<planners::Scheme>& shown_schemes() const { return m_shown_schemes; }
  const std::vector<planners::PlanResult>& results() const { return m_results; }
  // Why there are no results ("Check at least one scheme.", the planner's error); empty when
  // there are.
  const QString& error() const { return m_error; }
  const std::optional<planners::SloChoice>& slo_choice() const { return m_slo; }
  // "Best under the targets: …", "No targets: …", or why the search failed.
  const QString& slo_text() const { return m_slo_text; }
  // The advice, or why it could not be given; its question and note ("Left out, beyond …").
  const std::optional<planners::Advice>& advice() const { return m_advice; }
  const QString& advice_error() const { return m_advice_error; }
  const QString& advice_question() const { return m_advice_question; }
  const QString& advice_note() const { return m_advice_note; }
  // Counts the times the advice was computed: it is computed only when what it rests on changed.
  int advice_version() const { return m_advice_version; }
  PlannerTableModel* table() const { return m_table; }

  // Adds a model from a Hugging Face config.json or a .gguf file (kept in the store); its id, or
  // the error.
  Result<std::string> import_config(const QString& path);
  // Adds a GPU (kept in the store); the error when it is not valid.
  Result<std::string> add_gpu(const planners::GpuSpec& gpu);
  // Saves the shown results as a "plan" run; its id, or the error.
  Result<std::int64_t> save(const PlanRunContext& context);
  // The shown results become the comparison rows of the table.
  void pin();

 signals:
  void catalogues_changed();
  // The results, the table, the targets' choice and the advice are new.
  void recomputed();
  void status_message(const QString& text, int timeout_ms);
  void run_saved(qint64 id);

 private:
  void fill_table();
  void update_slo(double ttft_ms, double tpot_ms);
  void update_advice(const PlannerInputs& inputs);

  std::shared_ptr<RunsStore> m_store;
  std::vector<planners::ModelSpec> m_models;
  std::vector<planners::GpuSpec> m_gpus;
  std::vector<planners::Scheme> m_measured;                      // from saved compression runs
  mutable std::map<std::string, planners::KernelRates> m_rates;  // by GPU id
  PlannerTableModel* m_table;

  planners::Scenario m_scenario;
  std::vector<planners::Scheme> m_shown_schemes;
  std::vector<planners::PlanResult> m_results;
  QString m_error;
  std::optional<planners::SloChoice> m_slo;
  QString m_slo_text;
  std::string m_advice_key;  // what the advice was computed for
  std::optional<planners::Advice> m_advice;
  QString m_advice_error, m_advice_question, m_advice_note;
  int m_advice_version = 0;
  // The pinned scenario: its description and per-scheme results.
  QString m_pinned_title;
  std::vector<std::pair<planners::Scheme, planners::PlanResult>> m_pinned;
};

}  // namespace kvlab::gui
