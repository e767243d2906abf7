// Runs "load or generate the cache, then compress it" on a worker thread (WorkerRunner: progress,
// cancel, waiting). The last cache is kept, so running again with only the method changed skips
// generation.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <QString>

#include "common/source_spec.h"
#include "common/worker_runner.h"
#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab::gui {

struct CompressionJob {
  SourceSpec source;
  MethodConfig method;
  std::string backend = "auto";  // make_backend()'s id: "auto", "cpu" or "cuda"
};

// Loads the cache a source spec names (synthetic generation, a file, or a copy of the Source
// panel's model capture). Runs on any thread.
Result<KvCache> load_source(const SourceSpec& source, const ProgressFn& progress);

// The decode-stream simulation that follows a KVComp run coded with Huffman or bit packing:
// the first half of the `tokens` as the prefill, the rest one per step, recorded every 16 steps,
// the method's block size and a buffer of two blocks. Empty for other methods and codecs.
std::optional<StreamConfig> stream_config_for(const MethodConfig& method, int tokens);

class CompressionRunner : public WorkerRunner {
  Q_OBJECT

 public:
  explicit CompressionRunner(QObject* parent = nullptr);

  // False (and nothing happens) while a job is running.
  bool start(const CompressionJob& job);

  // The cache of the last successful load, and whether `source` would reuse it.
  std::shared_ptr<const KvCache> cached_cache() const { return m_cache; }
  bool would_reuse_cache(const SourceSpec& source) const;

 signals:
  // Emitted just before succeeded() when the job also simulated the decode stream.
  void stream_simulated(const kvlab::StreamReport& stream);
  void succeeded(const kvlab::CompressionReport& report, bool reused_cache);
  void failed(const QString& message, bool cancelled);

 private:
  struct Outcome;
  std::shared_ptr<Outcome> run_job(const CompressionJob& job, std::shared_ptr<const KvCache> cache,
                                   const std::string& key);
  void finish(const std::shared_ptr<Outcome>& outcome);

  std::shared_ptr<const KvCache> m_cache;
  std::string m_cache_key;
};

}  // namespace kvlab::gui
