#include "eviction/eviction_runner.h"

#include "compression/compression_runner.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::gui {

struct EvictionRunner::JobResult {
  std::optional<EvictionOutcome> outcome;
  QString error;
  bool cancelled = false;
  std::shared_ptr<const KvCache> cache;  // set when this job loaded a new cache
  std::string cache_key;
  bool reused_cache = false;
};

EvictionJob make_eviction_job(const SourceSpec& source, const EvictionConfig& policy,
                              const std::optional<EvictionConfig>& compare) {
  EvictionJob job{source, policy, compare};
  if (source.kind == SourceSpec::Kind::Synthetic) {
    job.source.synthetic.queries = policy.steps;
    const int needle = synthetic_landmarks(job.source.synthetic).needle;
    job.policy.needle = needle;
    if (job.compare) job.compare->needle = needle;
  }
  if (job.compare) job.compare->steps = policy.steps;  // the same decode steps for both
  return job;
}

std::string eviction_cache_key(const SourceSpec& source) {
  const std::string key = source.cache_key();
  if (source.kind != SourceSpec::Kind::Synthetic) return key;
  return key + ":queries " + std::to_string(source.synthetic.queries);
}

EvictionRunner::EvictionRunner(QObject* parent) : WorkerRunner(parent) {}

bool EvictionRunner::would_reuse_cache(const SourceSpec& source) const {
  return m_cache && eviction_cache_key(source) == m_cache_key;
}

bool EvictionRunner::start(const EvictionJob& job) {
  std::string key = eviction_cache_key(job.source);
  std::shared_ptr<const KvCache> cache = key == m_cache_key ? m_cache : nullptr;
  return launch([this, job, cache = std::move(cache), key = std::move(key)]() -> Completion {
    auto result = run_job(job, cache, key);
    return [this, result] { finish(result); };
  });
}

// On the worker thread: touches only its arguments and the progress functions.
std::shared_ptr<EvictionRunner::JobResult> EvictionRunner::run_job(
    const EvictionJob& job, std::shared_ptr<const KvCache> cache, const std::string& key) {
  auto result = std::make_shared<JobResult>();
  result->reused_cache = cache != nullptr;
  const auto fail = [&](const std::string& message) {
    result->cancelled = message == kCancelledMessage;
    result->error = QString::fromStdString(message);
  };
  if (!cache) {
    auto loaded = load_source(job.source, progress_fn(0.0, 0.3));
    if (!loaded) {
      fail(loaded.message());
      return result;
    }
    cache = std::make_shared<const KvCache>(std::move(loaded).value());
    result->cache = cache;
    result->cache_key = key;
  }
  const double base = result->reused_cache ? 0.0 : 0.3;
  const double span = (1.0 - base) / (job.compare ? 2.0 : 1.0);
  auto first = simulate_eviction(*cache, job.policy, progress_fn(base, span));
  if (!first) {
    fail(first.message());
    return result;
  }
  EvictionOutcome outcome{std::move(first).value(), std::nullopt};
  if (job.compare) {
    auto second = simulate_eviction(*cache, *job.compare, progress_fn(base + span, span));
    if (!second) {
      fail(second.message());
      return result;
    }
    outcome.compare = std::move(second).value();
  }
  result->outcome = std::move(outcome);
  return result;
}

void EvictionRunner::finish(const std::shared_ptr<JobResult>& result) {
  if (result->cache) {
    m_cache = result->cache;
    m_cache_key = result->cache_key;
  }
  if (result->outcome) {
    emit succeeded(*result->outcome, result->reused_cache);
  } else {
    emit failed(result->error, result->cancelled);
  }
}

}  // namespace kvlab::gui
