#include "eviction/eviction_model.h"

#include <utility>

#include "common/gui_format.h"
#include "common/run_controller.h"
#include "eviction/eviction_runs.h"

namespace kvlab::gui {

EvictionModel::EvictionModel(std::shared_ptr<RunsStore> store, QObject* parent)
    : CacheRunModel(std::move(store), tr("policy"), parent) {
  m_runner = new EvictionRunner(this);
  set_runner(m_runner);
  connect(m_runner, &EvictionRunner::succeeded, this, &EvictionModel::on_succeeded);
  connect(m_runner, &EvictionRunner::failed, this, &EvictionModel::failed);
}

bool EvictionModel::would_reuse_cache(const SourceSpec& source) const {
  return m_runner->would_reuse_cache(source);
}

bool EvictionModel::run(const EvictionJob& job) {
  return start([&] { return m_runner->start(job); }, job.source,
               tr("Simulating %1 on %2…")
                   .arg(QString::fromStdString(eviction_label(job.policy)), job.source.describe()));
}

void EvictionModel::on_succeeded(const EvictionOutcome& outcome, bool reused_cache) {
  succeeded(reused_cache);
  double seconds = outcome.report.seconds;
  if (outcome.compare) seconds += outcome.compare->seconds;
  show(outcome.report, outcome.compare, tr("computed in %1").arg(format_seconds(seconds)), true);
  save(tr("%1: %2 kept, %3 of attention retained")
           .arg(QString::fromStdString(m_report->label))
           .arg(m_report->kept_tokens, 0, 'f', 1)
           .arg(format_percent(m_report->attention_mass_retained)),
       [this](RunsStore& store) -> Result<std::int64_t> {
         auto saved = save_eviction_runs(store, *m_report, m_compare);
         if (!saved) return make_error(saved.message());
         return saved->id;
       });
}

void EvictionModel::show_reports(const EvictionReport& report,
                                 const std::optional<EvictionReport>& compare,
                                 const QString& origin) {
  show(report, compare, origin, false);
}

void EvictionModel::show(const EvictionReport& report, const std::optional<EvictionReport>& compare,
                         const QString& origin, bool fresh) {
  m_fresh = fresh;
  m_report = report;
  m_compare = compare;
  m_origin = origin;
  run_controller()->results_shown();
  emit reports_shown();
}

}  // namespace kvlab::gui
