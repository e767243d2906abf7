// The Quality page: pick a real model (llama2.c or Hugging Face), a text (a file, or the model's
// own sampled text) and the configurations to compare; Run measures each on a worker thread with
// compression in the model's loop (perplexity change, next-token agreement, KL) and saves it as a
// "quality" run, as `kvlab quality --save` does. The chart shows error against memory ratio (or
// bits per value) for every stored run of the same model and text, the Pareto frontier drawn as
// a step line, and a table of every run's numbers; hovering a point names it in the status bar.
// A second tab charts passkey retrieval against the eviction budget from the stored "needle"
// runs (`kvlab quality --needle --save`), one line per policy. The state and the commands are the
// page model's (quality_model.h); this is the widgets over it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <QString>
#include <QStringList>
#include <QWidget>

#include "common/run_shell.h"
#include "kvlab/store/runs_store.h"
#include "quality/quality_model.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QProgressBar;
class QPushButton;
class QRadioButton;
class QDoubleSpinBox;
class QSpinBox;
class QTabWidget;
class QTableView;

namespace kvlab::gui {

class GeneratePanel;
class QualityChart;
class RunController;
class RetrievalChart;

class QualityView : public QWidget {
  Q_OBJECT

 public:
  // `store` may be null (the store could not be opened): runs are then shown but not saved.
  explicit QualityView(std::shared_ptr<RunsStore> store, QWidget* parent = nullptr);
  ~QualityView() override;

  void set_model_path(const QString& path);
  // A model used elsewhere in the app (the Compression page's capture): taken when the field is
  // empty or holds an earlier offer, never over a model the person chose here.
  void offer_model_path(const QString& path);
  void set_sampled_text(int tokens, std::uint64_t seed);
  void set_text_file(const QString& path);
  // Tokens per window, BOS included; 0: the model's context (`kvlab quality --window`).
  void set_window(int tokens);
  // Stop scoring windows once the perplexity change's standard error is at most this many
  // percentage points; 0: every window (`kvlab quality --target-se`).
  void set_target_se(double points);
  // Checks exactly the configurations with these ids (quality_choices()).
  void set_checked(const QStringList& ids);
  QStringList checked_ids() const;

  // Starts measuring the checked configurations; false when one is running or the input is
  // incomplete (the error is shown).
  bool run();
  void cancel();
  bool is_running() const;
  // Runs and waits (processing events) until every configuration is measured and saved.
  bool run_and_wait(int timeout_ms = 10 * 60 * 1000);
  bool wait_until_done(int timeout_ms);

  // Reads the runs of the current model and text from the store again; with neither chosen yet,
  // those of the newest quality run (and the controls take its model and text).
  void reload_from_store();
  // Shows the stored run among the runs of its model and text; false when it cannot.
  bool show_stored_run(std::int64_t id);

  // What the page shows and does: the key, the points, the table, the run going.
  QualityModel* model() const { return m_page; }
  // The job the controls name now.
  QualityJob job() const;
  const QString& last_error() const;

  // "quality against memory" | "passkey retrieval against budget"
  QTabWidget* chart_tabs() const { return m_chart_tabs; }
  static constexpr int kRetrievalTab = 1;
  // "generate from a compressed cache": the model on the left continuing a prompt with its cache
  // stored by each checked method (generate_panel.h).
  static constexpr int kGenerateTab = 2;
  GeneratePanel* generate_panel() const { return m_generate; }
  // The controls and results are named for finding them: "model", "sampled", "file",
  // "sample_tokens", "seed", "window", "target_se", "text_file", "methods", "error", "heading",
  // the axes "x" and "y", "log_y", "reset_zoom", the charts "chart" and "retrieval", "table".
  QProgressBar* progress_bar() const { return m_shell->progress_bar(); }
  QPushButton* run_button() const { return m_shell->run_button(); }
  QPushButton* cancel_button() const { return m_shell->cancel_button(); }

 signals:
  void status_message(const QString& text, int timeout_ms);
  void run_saved(qint64 id);

 protected:
  void showEvent(QShowEvent* event) override;

 private:
  QWidget* build_controls();
  // The charts and the Generate tab, which saves its runs into `store`.
  QWidget* build_results(const std::shared_ptr<RunsStore>& store);
  void set_running(bool running);
  void show_error(const QString& message);
  // The key of what the controls name (tokens and windows left to the stored runs).
  QualityKey controls_key() const;
  QualityText controls_text() const;
  void controls_changed();
  void set_controls(const QualityKey& key);
  void redraw();

  QualityModel* m_page = nullptr;
  QLineEdit* m_model_path = nullptr;
  QRadioButton* m_sampled = nullptr;
  QRadioButton* m_file = nullptr;
  QSpinBox* m_sample_tokens = nullptr;
  QSpinBox* m_seed = nullptr;
  QSpinBox* m_window = nullptr;
  QDoubleSpinBox* m_target_se = nullptr;
  QLineEdit* m_text_file = nullptr;
  QListWidget* m_methods = nullptr;
  RunController* m_run = nullptr;  // the model's: start, progress, cancel, wait
  RunShell* m_shell = nullptr;     // its Run, Cancel, progress and stage
  QLabel* m_error = nullptr;
  QLabel* m_heading = nullptr;
  QComboBox* m_x = nullptr;
  QComboBox* m_y = nullptr;
  // Logarithmic y (used when every value is positive); set on for perplexity and KL, off for
  // agreement, whenever the y axis changes.
  QCheckBox* m_log_y = nullptr;
  QPushButton* m_reset_zoom = nullptr;
  QualityChart* m_chart = nullptr;
  QTabWidget* m_chart_tabs = nullptr;
  RetrievalChart* m_retrieval = nullptr;
  GeneratePanel* m_generate = nullptr;
  QTableView* m_table = nullptr;

  QString m_offered_model;  // the last offer_model_path() taken
  bool m_syncing = false;   // the controls are being set from a stored run
};

}  // namespace kvlab::gui
