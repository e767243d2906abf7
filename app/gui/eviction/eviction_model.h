// The Eviction page's model (QtCore only): it runs a job (a source, a policy and the policy
// compared with it) through its runner and run controller (cache_run_model.h), holds the reports
// the page shows, saves each successful run to the runs store, and takes stored runs back. The
// page's widgets (eviction_view.h) build the job from their panels and redraw when the shown
// reports change.
#pragma once

#include <memory>
#include <optional>

#include <QString>

#include "common/cache_run_model.h"
#include "eviction/eviction_runner.h"
#include "kvlab/engine/eviction/eviction.h"

namespace kvlab::gui {

class EvictionModel : public CacheRunModel {
  Q_OBJECT

 public:
  // `store` may be null (the store could not be opened): runs are then shown but not saved.
  explicit EvictionModel(std::shared_ptr<RunsStore> store, QObject* parent = nullptr);

  // Starts the job; false when a run is going.
  bool run(const EvictionJob& job);

  // Shows reports loaded from the store; `origin` heads the results.
  void show_reports(const EvictionReport& report, const std::optional<EvictionReport>& compare,
                    const QString& origin);

  const std::optional<EvictionReport>& report() const { return m_report; }
  const std::optional<EvictionReport>& compare() const { return m_compare; }
  const QString& origin() const { return m_origin; }
  // Whether the shown reports come from a run just made (not from the store).
  bool fresh() const { return m_fresh; }
  bool would_reuse_cache(const SourceSpec& source) const override;

 signals:
  // The shown reports changed: the page redraws.
  void reports_shown();

 private:
  void on_succeeded(const EvictionOutcome& outcome, bool reused_cache);
  void show(const EvictionReport& report, const std::optional<EvictionReport>& compare,
            const QString& origin, bool fresh);

  EvictionRunner* m_runner;
  std::optional<EvictionReport> m_report, m_compare;
  QString m_origin;
  bool m_fresh = false;
};

}  // namespace kvlab::gui
