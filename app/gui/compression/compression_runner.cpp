#include "compression/compression_runner.h"

#include <chrono>

#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::gui {

struct CompressionRunner::Outcome {
  std::optional<CompressionReport> report;
  std::optional<StreamReport> stream;
  QString error;
  bool cancelled = false;
  std::shared_ptr<const KvCache> cache;  // set when this job loaded a new cache
  std::string cache_key;
  bool reused_cache = false;
};

Result<KvCache> load_source(const SourceSpec& source, const ProgressFn& progress) {
  if (source.kind == SourceSpec::Kind::Model) {  // captured by the Source panel already
    if (!source.captured) {
      return make_error("no model capture yet: press Capture in the Source panel first");
    }
    return KvCache(*source.captured);
  }
  if (source.kind == SourceSpec::Kind::File) {
    if (source.file.isEmpty()) return make_error("no file chosen: pick a KV cache file first");
    return load_cache_file(std::filesystem::path(source.file.toStdString()), progress);
  }
  return generate_synthetic(source.synthetic, progress);
}

std::optional<StreamConfig> stream_config_for(const MethodConfig& method, int tokens) {
  if (method.kind != MethodKind::KvComp || !method.codec) return std::nullopt;
  if (*method.codec == CodecKind::VarWidth) return std::nullopt;
  StreamConfig c;
  c.prefill_tokens = tokens / 2;
  c.block_size = method.block_size;
  c.buffer_size = 2 * method.block_size;
  c.rel_scale = method.rel_scale;
  c.codec = *method.codec;
  c.record_every = 16;
  return c;
}

CompressionRunner::CompressionRunner(QObject* parent) : WorkerRunner(parent) {}

bool CompressionRunner::would_reuse_cache(const SourceSpec& source) const {
  return m_cache && source.cache_key() == m_cache_key;
}

bool CompressionRunner::start(const CompressionJob& job) {
  std::string key = job.source.cache_key();
  std::shared_ptr<const KvCache> cache = key == m_cache_key ? m_cache : nullptr;
  return launch([this, job, cache = std::move(cache), key = std::move(key)]() -> Completion {
    auto outcome = run_job(job, cache, key);
    return [this, outcome] { finish(outcome); };
  });
}

// On the worker thread: touches only its arguments and the progress functions.
std::shared_ptr<CompressionRunner::Outcome> CompressionRunner::run_job(
    const CompressionJob& job, std::shared_ptr<const KvCache> cache, const std::string& key) {
  const auto start = std::chrono::steady_clock::now();
  const auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  auto outcome = std::make_shared<Outcome>();
  outcome->reused_cache = cache != nullptr;
  const auto fail = [&](const std::string& message) {
    outcome->cancelled = message == kCancelledMessage;
    outcome->error = QString::fromStdString(message);
  };
  // Made here, off the GUI thread: starting a GPU's driver can take a while.
  auto backend = make_backend(job.backend);
  if (!backend) {
    fail("backend " + job.backend + ": " + backend.message());
    return outcome;
  }
  if (!cache) {
    auto loaded = load_source(job.source, progress_fn(0.0, 0.5));
    if (loaded) {
      cache = std::make_shared<const KvCache>(std::move(loaded).value());
      outcome->cache = cache;
      outcome->cache_key = key;
    } else {
      fail(loaded.message());
    }
  }
  const double source_seconds = since_start();
  if (cache) {
    const double base = outcome->reused_cache ? 0.0 : 0.5;
    const auto stream_config = stream_config_for(job.method, cache->tokens());
    // The stream simulation appends every token to every layer: about as long as compressing.
    const double span = (1.0 - base) * (stream_config ? 0.5 : 1.0);
    auto report = compress_cache(*cache, job.method, progress_fn(base, span), backend->get());
    if (report) {
      outcome->report = std::move(report).value();
    } else {
      fail(report.message());
    }
    if (outcome->report && stream_config) {
      auto stream =
          simulate_stream(*cache, *stream_config, progress_fn(base + span, 1.0 - base - span));
      if (stream) {
        outcome->stream = std::move(stream).value();
      } else {
        outcome->report.reset();
        fail(stream.message());
      }
    }
    if (outcome->report) {  // the time the user waited: backend, source and stream included
      outcome->report->source_seconds = source_seconds;
      outcome->report->wall_seconds = since_start();
    }
  }
  return outcome;
}

void CompressionRunner::finish(const std::shared_ptr<Outcome>& outcome) {
  if (outcome->cache) {
    m_cache = outcome->cache;
    m_cache_key = outcome->cache_key;
  }
  if (outcome->report) {
    if (outcome->stream) emit stream_simulated(*outcome->stream);
    emit succeeded(*outcome->report, outcome->reused_cache);
  } else {
    emit failed(outcome->error, outcome->cancelled);
  }
}

}  // namespace kvlab::gui
