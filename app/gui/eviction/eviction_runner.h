// Runs "load or generate the cache, then simulate one policy (and the one compared with it)" on
// a worker thread (WorkerRunner: progress, cancel, waiting). The last cache is kept, so changing
// only the policy skips generation.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <QString>

#include "common/source_spec.h"
#include "common/worker_runner.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/eviction/eviction.h"

namespace kvlab::gui {

struct EvictionJob {
  SourceSpec source;
  EvictionConfig policy;
  std::optional<EvictionConfig> compare;  // a second policy on the same cache
};

// What a finished job hands back.
struct EvictionOutcome {
  EvictionReport report;
  std::optional<EvictionReport> compare;
};

// The job the Eviction view runs for a source and its settings: a synthetic source generates
// one decode-time query per step, and both policies learn where its needle is planted.
EvictionJob make_eviction_job(const SourceSpec& source, const EvictionConfig& policy,
                              const std::optional<EvictionConfig>& compare);

class EvictionRunner : public WorkerRunner {
  Q_OBJECT

 public:
  explicit EvictionRunner(QObject* parent = nullptr);

  // False (and nothing happens) while a job is running.
  bool start(const EvictionJob& job);
  bool would_reuse_cache(const SourceSpec& source) const;

 signals:
  void succeeded(const kvlab::gui::EvictionOutcome& outcome, bool reused_cache);
  void failed(const QString& message, bool cancelled);

 private:
  struct JobResult;
  std::shared_ptr<JobResult> run_job(const EvictionJob& job, std::shared_ptr<const KvCache> cache,
                                     const std::string& key);
  void finish(const std::shared_ptr<JobResult>& result);

  std::shared_ptr<const KvCache> m_cache;
  std::string m_cache_key;
};

// The cache key of an eviction source: the source's own key plus the queries it is generated
// with (a synthetic cache made for 64 steps differs from one made for 128).
std::string eviction_cache_key(const SourceSpec& source);

}  // namespace kvlab::gui
