// Runs "load or generate the cache, then compress it" on a worker thread. Progress reaches the
// UI thread through queued calls; cancel() makes the engine's ProgressFn return false. The last
// cache is kept, so running again with only the method changed skips generation.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <QObject>
#include <QString>

#include "kvlab/engine/compress.h"
#include "kvlab/engine/kv_cache.h"
#include "kvlab/engine/method.h"
#include "kvlab/engine/stream_sim.h"
#include "kvlab/gui/source_panel.h"

namespace kvlab::gui {

struct CompressionJob {
  SourceSpec source;
  MethodConfig method;
};

// Loads the cache a source spec names (synthetic generation or a file). Runs on any thread.
Result<KvCache> load_source(const SourceSpec& source, const ProgressFn& progress);

// The decode-stream simulation that follows a KVComp run coded with Huffman or bit packing:
// the first half of the `tokens` as the prefill, the rest one per step, recorded every 16 steps,
// the method's block size and a buffer of two blocks. Empty for other methods and codecs.
std::optional<StreamConfig> stream_config_for(const MethodConfig& method, int tokens);

class CompressionRunner : public QObject {
  Q_OBJECT

 public:
  explicit CompressionRunner(QObject* parent = nullptr);
  ~CompressionRunner() override;  // cancels a running job and waits for its thread

  // False (and nothing happens) while a job is running.
  bool start(const CompressionJob& job);
  void cancel();
  bool busy() const { return m_busy; }
  // Spins an event loop until the running job has finished (its signals delivered) or the
  // timeout passes; true when no job is running any more.
  bool wait_until_done(int timeout_ms);

  // The cache of the last successful load, and whether `source` would reuse it.
  std::shared_ptr<const KvCache> cached_cache() const { return m_cache; }
  bool would_reuse_cache(const SourceSpec& source) const;

 signals:
  void progress(int percent, const QString& stage);
  // Emitted just before succeeded() when the job also simulated the decode stream.
  void stream_simulated(const kvlab::StreamReport& stream);
  void succeeded(const kvlab::CompressionReport& report, bool reused_cache);
  void failed(const QString& message, bool cancelled);
  void finished();

 private:
  struct Outcome;
  void run_job(CompressionJob job, std::shared_ptr<const KvCache> cache, std::string key);
  void finish(const std::shared_ptr<Outcome>& outcome);
  ProgressFn progress_fn(double base, double span);

  std::thread m_thread;
  std::atomic<bool> m_cancel{false};
  bool m_busy = false;
  std::shared_ptr<const KvCache> m_cache;
  std::string m_cache_key;
};

}  // namespace kvlab::gui
