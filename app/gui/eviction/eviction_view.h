// The Eviction page: pick a source, a policy with its budget and options (and optionally a second
// policy to compare with), run the decode-time simulation on a worker thread, and see the
// eviction maps side by side (one layer and KV head, the needle marked), attention mass retained
// and attention-output error over the steps, and the numbers of each policy. Tabs beside the
// curves show what a prefill press did, when the run has it: the prompt tokens kept per layer
// and KV head, ThinK's kept key channels, MiniCache's merged layers. Every successful
// run is saved to the runs store; a stored run is shown again from its JSON without recomputing.
// The state and the commands are the page model's (eviction_model.h); this is the widgets over it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <QString>
#include <QWidget>

#include "common/run_shell.h"
#include "eviction/eviction_model.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/store/runs_store.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QTabWidget;

namespace kvlab::gui {

class ChartPair;
class EvictionBudgetChart;
class EvictionChannelChart;
class EvictionMapChart;
class EvictionMetricsPanel;
class EvictionPolicyPanel;
class EvictionSeriesChart;
class LayerPicker;
class MiniCacheChart;
class SourcePanel;
class RunController;
class StaleMark;

class EvictionView : public QWidget {
  Q_OBJECT

 public:
  // `store` may be null (the store could not be opened): runs are then shown but not saved.
  explicit EvictionView(std::shared_ptr<RunsStore> store, QWidget* parent = nullptr);
  ~EvictionView() override;

  // Starts a run with the panels' current settings; false when one is running.
  bool run();
  void cancel();
  bool is_running() const;
  // Runs and waits (processing events) until the result is shown and saved; true on success.
  bool run_and_wait(int timeout_ms = 10 * 60 * 1000);
  bool wait_until_done(int timeout_ms);

  // Redraws everything from the reports (fresh or loaded from the store); `origin` is shown in
  // the results heading.
  void show_reports(const EvictionReport& report, const std::optional<EvictionReport>& compare,
                    const QString& origin);
  // Shows what is selected: layer and KV head of the maps; the curves and numbers over all
  // layers or the selected one.
  void select(int layer, int kv_head);
  void set_all_layers(bool all);

  // What the page shows and does: the reports, the last saved run, the run going.
  EvictionModel* model() const { return m_model; }
  // The job the panels name now.
  EvictionJob job() const;
  const QString& last_error() const;

  SourcePanel* source_panel() const { return m_source; }
  EvictionPolicyPanel* policy_panel() const { return m_policy; }
  EvictionMapChart* map_chart() const { return m_map; }
  // The other parts are named for finding them: the stale mark shown over the results when a
  // setting changed after they were computed ("stale"), the error label ("error"), "metrics",
  // the layer and KV head picker ("picker"), the scope combo ("scope": all layers | selected
  // layer, what the curves and numbers cover), "reset_zoom", the maps ("map", "compare_map") and
  // the charts "series", "budgets", "channels" and "minicache".
  // The curves, then the press tabs (hidden when the shown run has no such data).
  enum ChartTab { kStepsTab = 0, kBudgetTab = 1, kChannelTab = 2, kMiniCacheTab = 3 };
  QTabWidget* chart_tabs() const { return m_tabs; }
  QProgressBar* progress_bar() const { return m_shell->progress_bar(); }
  QPushButton* run_button() const { return m_shell->run_button(); }
  QPushButton* cancel_button() const { return m_shell->cancel_button(); }

 signals:
  void status_message(const QString& text, int timeout_ms);
  void run_saved(qint64 id);

 private:
  QWidget* build_controls();
  QWidget* build_results();
  void set_running(bool running);
  // The model's reports are new: the pickers, maps and press tabs follow them.
  void reports_shown();
  void show_error(const QString& message);
  void redraw();
  void draw_press_tabs();
  void sync_zoom(EvictionMapChart* from, EvictionMapChart* to);

  EvictionModel* m_model = nullptr;
  SourcePanel* m_source = nullptr;
  EvictionPolicyPanel* m_policy = nullptr;
  RunController* m_run = nullptr;  // the model's: start, progress, cancel, wait, stale
  RunShell* m_shell = nullptr;     // its Run, Cancel, progress and stage
  QLabel* m_cache_note = nullptr;
  QLabel* m_error = nullptr;
  StaleMark* m_stale = nullptr;
  EvictionMetricsPanel* m_metrics = nullptr;
  LayerPicker* m_picker = nullptr;
  QComboBox* m_scope = nullptr;
  QPushButton* m_reset_zoom = nullptr;
  EvictionMapChart* m_map = nullptr;
  EvictionMapChart* m_compare_map = nullptr;
  ChartPair* m_maps = nullptr;  // the two maps: side by side, or tabs when narrow
  EvictionSeriesChart* m_series = nullptr;
  QTabWidget* m_tabs = nullptr;
  EvictionBudgetChart* m_budgets = nullptr;
  EvictionChannelChart* m_channels = nullptr;
  MiniCacheChart* m_minicache = nullptr;

  bool m_syncing_zoom = false;
};

}  // namespace kvlab::gui
