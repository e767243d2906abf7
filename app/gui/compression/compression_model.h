// The Compression page's model (QtCore only): it runs a job (a source, a method and a backend)
// through its runner and run controller (cache_run_model.h), holds what the page shows (the
// report, the decode-stream simulation, the cache the run compressed), saves every successful run
// to the runs store, and takes a stored run back. The page's widgets (compression_view.h) build
// the job from their panels and redraw when the shown report changes.
#pragma once

#include <memory>
#include <optional>

#include <QString>

#include "common/cache_run_model.h"
#include "compression/compression_runner.h"
#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/quant/compress.h"

namespace kvlab::gui {

class CompressionModel : public CacheRunModel {
  Q_OBJECT

 public:
  // `store` may be null (the store could not be opened): runs are then shown but not saved.
  explicit CompressionModel(std::shared_ptr<RunsStore> store, QObject* parent = nullptr);

  // Starts the job; false when a run is going.
  bool run(const CompressionJob& job);

  // Shows a report (fresh or loaded from the store); `origin` is the results heading's "computed
  // in 0.8 s" or "stored run #12 from …". A stored report has no stream and no cache in memory.
  void show_report(const CompressionReport& report, const QString& origin);

  const std::optional<CompressionReport>& report() const { return m_report; }
  // The decode-stream simulation of the last fresh kvcomp + huffman/bitpack run; empty after
  // any other run or a report reopened from the store.
  const std::optional<StreamReport>& stream() const { return m_stream; }
  // The cache the shown run compressed: null for a report reopened from the store.
  const std::shared_ptr<const KvCache>& compressed_cache() const { return m_cache; }
  bool would_reuse_cache(const SourceSpec& source) const override;

 signals:
  // The shown report (and stream and cache) changed: the page redraws; `origin` for the heading.
  void report_shown(const QString& origin);

 private:
  void on_succeeded(const CompressionReport& report, bool reused_cache);

  CompressionRunner* m_runner;
  std::optional<CompressionReport> m_report;
  std::optional<StreamReport> m_stream;
  std::optional<StreamReport> m_pending_stream;  // from the runner, until its report is shown
  std::shared_ptr<const KvCache> m_cache;
};

}  // namespace kvlab::gui
