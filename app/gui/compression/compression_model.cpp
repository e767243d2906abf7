#include "compression/compression_model.h"

#include <utility>

#include "common/gui_format.h"
#include "common/run_controller.h"
#include "kvlab/engine/codec/stream_sim_json.h"
#include "kvlab/store/run_records.h"

namespace kvlab::gui {

CompressionModel::CompressionModel(std::shared_ptr<RunsStore> store, QObject* parent)
    : CacheRunModel(std::move(store), tr("method"), parent) {
  m_runner = new CompressionRunner(this);
  set_runner(m_runner);
  connect(m_runner, &CompressionRunner::stream_simulated, this,
          [this](const StreamReport& stream) { m_pending_stream = stream; });
  connect(m_runner, &CompressionRunner::succeeded, this, &CompressionModel::on_succeeded);
  connect(m_runner, &CompressionRunner::failed, this,
          [this](const QString& message, bool cancelled) {
            m_pending_stream.reset();
            failed(message, cancelled);
          });
}

bool CompressionModel::would_reuse_cache(const SourceSpec& source) const {
  return m_runner->would_reuse_cache(source);
}

bool CompressionModel::run(const CompressionJob& job) {
  return start([&] { return m_runner->start(job); }, job.source,
               tr("Running %1 on %2…")
                   .arg(QString::fromStdString(method_label(job.method)), job.source.describe()));
}

void CompressionModel::on_succeeded(const CompressionReport& report, bool reused_cache) {
  succeeded(reused_cache);
  m_report = report;
  m_stream = std::exchange(m_pending_stream, std::nullopt);
  m_cache = m_runner->cached_cache();
  run_controller()->results_shown();
  // The device line says how many threads ran; this says where the time went.
  emit report_shown(tr("computed in %1 (source %2, compression %3)")
                        .arg(format_seconds(report.wall_seconds),
                             format_seconds(report.source_seconds),
                             format_seconds(report.total_seconds)));
  save(tr("%1: ratio %2, %3 bits/value, on %4")
           .arg(QString::fromStdString(report.method_label), format_ratio(report.ratio),
                format_bits_per_value(report.bits_per_value),
                QString::fromStdString(report.backend + ": " + report.device)),
       [&](RunsStore& store) {
         const nlohmann::json stream = m_stream ? stream_to_json(*m_stream) : nlohmann::json();
         return store.save_run(compression_run(report, {}, m_stream ? &stream : nullptr));
       });
}

void CompressionModel::show_report(const CompressionReport& report, const QString& origin) {
  m_report = report;
  m_stream.reset();
  m_cache.reset();
  run_controller()->results_shown();
  emit report_shown(origin);
}

}  // namespace kvlab::gui
