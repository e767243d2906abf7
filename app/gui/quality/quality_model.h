// The Quality page's model (QtCore only): whose stored runs the page shows (a model and a text),
// those runs as points with their Pareto frontier on the chosen axes, the table over them, the
// passkey-retrieval curves of the model, and the run that measures configurations and saves each
// as a "quality" run as soon as it is measured. The page's widgets (quality_view.h) set the key
// and the axes from their controls and redraw when the points change.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <QObject>
#include <QString>

#include "kvlab/store/runs_store.h"
#include "quality/needle_runs.h"
#include "quality/quality_results.h"
#include "quality/quality_runner.h"
#include "quality/quality_runs.h"

namespace kvlab::gui {

class RunController;

class QualityModel : public QObject {
  Q_OBJECT

 public:
  // `store` may be null (the store could not be opened): runs are then measured and shown but
  // not saved.
  explicit QualityModel(std::shared_ptr<RunsStore> store, QObject* parent = nullptr);

  // The runs shown are those of `key`'s model and text; nothing happens when they are already
  // (or while a run is going, which sets the key itself).
  void set_key(const QualityKey& key);
  const std::optional<QualityKey>& key() const { return m_key; }
  // Reads the runs of the key from the store again; with no key yet, takes the newest quality
  // run's (key_changed tells the controls).
  void reload();
  // Shows the stored run among the runs of its model and text; false (and error()) when it
  // cannot.
  bool show_stored_run(std::int64_t id);

  // The axes the frontier, the chart and the table's Pareto column follow.
  void set_axes(QualityX x, QualityY y, bool log_y);
  const std::vector<QualityPoint>& points() const { return m_points; }
  QualityTableModel* table() const { return m_table; }
  QualityChartData chart_data() const;
  // Why there is no point to draw, when there is none.
  QString empty_message() const;
  // "3 configurations; 1024 tokens predicted in 1 window; exact perplexity 7.123; 2 on the
  // Pareto frontier", or the key's model and text when no run is stored.
  QString heading() const;
  // The passkey-retrieval runs of the key's model, or why they could not be read.
  const RetrievalChartData& retrieval() const { return m_retrieval; }
  const QString& retrieval_error() const { return m_retrieval_error; }

  // Measures the job's configurations; false when a run is going or the job is incomplete (no
  // configuration, no text file: error() says which).
  bool run(const QualityJob& job);
  RunController* run_controller() const { return m_run; }
  const std::vector<std::int64_t>& last_saved_run_ids() const { return m_saved_ids; }
  const QString& last_error() const;

 signals:
  // The key changed by the model's own doing (a stored run opened, the newest run taken, a run
  // measured): the controls follow.
  void key_changed(const kvlab::gui::QualityKey& key);
  // The points, the table and the retrieval curves changed: the page redraws.
  void points_changed();
  void status_message(const QString& text, int timeout_ms);
  void error(const QString& message);
  void run_saved(qint64 id);

 private:
  void on_measured(const QualityReport& report, int index, int count);
  void on_ended(const QString& error, bool cancelled, int failed_index);
  void refresh_table();
  void reload_retrieval();
  void fail(const QString& message);

  std::shared_ptr<RunsStore> m_store;
  QualityRunner* m_runner;
  RunController* m_run;
  QualityTableModel* m_table;
  std::optional<QualityKey> m_key;  // whose runs are shown
  std::vector<QualityPoint> m_points;
  int m_older_duplicates = 0;
  QualityX m_x = QualityX::Ratio;
  QualityY m_y = QualityY::PerplexityChange;
  bool m_log_y = true;
  RetrievalChartData m_retrieval;
  QString m_retrieval_error;
  QualityJob m_job;  // the running (or last) job
  int m_measured = 0;
  std::vector<std::int64_t> m_saved_ids;
};

}  // namespace kvlab::gui
