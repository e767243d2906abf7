#include "quality/generate_model.h"

#include <fmt/format.h>

#include <QMetaObject>
#include <algorithm>

#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/model/generate.h"
#include "kvlab/engine/model/kv_store.h"

namespace kvlab::gui {

namespace {

MethodConfig config_of(MethodKind kind, int bits = 2) {
  MethodConfig c;
  c.kind = kind;
  c.bits = bits;
  return c;
}

}  // namespace

std::vector<GenerateChoice> generate_choices() {
  MethodConfig huffman = config_of(MethodKind::KvComp);
  huffman.codec = CodecKind::Huffman;
  MethodConfig bitpack = config_of(MethodKind::KvComp);
  bitpack.codec = CodecKind::BitPack;
  bitpack.rel_scale = 0.0667;
  // Per-tensor INT4 with its keys rotated first (QuaRot's randomized Hadamard): the store holds
  // them rotated and turns the query instead.
  MethodConfig int4_hadamard = config_of(MethodKind::Int4);
  int4_hadamard.rotation = RotationKind::Hadamard;
  return {{"kvcomp + huffman", huffman},
          {"kvcomp + bitpack", bitpack},
          {"kivi-2", config_of(MethodKind::Kivi, 2)},
          {"kivi-4", config_of(MethodKind::Kivi, 4)},
          {"int8", config_of(MethodKind::Int8)},
          {"int4", config_of(MethodKind::Int4)},
          {"int4 + hadamard", int4_hadamard},
          {"fp8-e4m3", config_of(MethodKind::Fp8E4M3)},
          {"q8_0", config_of(MethodKind::Q8_0)},
          {"q4_0", config_of(MethodKind::Q4_0)},
          {"nvfp4", config_of(MethodKind::Nvfp4)},
          {"mxfp4", config_of(MethodKind::Mxfp4)}};
}

struct GenerateRunner::Loaded {
  std::string path;
  LoadedModel model;
};

GenerateRunner::GenerateRunner(QObject* parent) : WorkerRunner(parent) {}

bool GenerateRunner::start(const GenerateJob& job) {
  std::shared_ptr<const Loaded> ready = m_loaded;
  if (ready && ready->path != job.model) ready.reset();
  return launch([this, job, ready]() -> Completion {
    // On the worker thread: only the job, progress_fn and queued signals.
    std::shared_ptr<const Loaded> loaded = ready;
    const ProgressFn progress = progress_fn(0.0, 1.0);
    const auto work = [&]() -> Status {
      if (!report_progress(progress, 0.0, "loading the model")) {
        return make_error(std::string(kCancelledMessage));
      }
      if (!loaded) {
        auto model = load_model(job.model);
        if (!model) return model.error();
        loaded = std::make_shared<const Loaded>(Loaded{job.model, std::move(*model)});
      }
      const LoadedModel& m = loaded->model;
      auto ids = m.encode(job.prompt);
      if (!ids) return ids.error();
      if (ids->empty()) return make_error("the prompt has no tokens");
      const int limit = m.model.config().seq_len;
      const int max_tokens = static_cast<int>(ids->size()) + job.tokens;
      if (max_tokens > limit) {
        return make_error(fmt::format("{} prompt tokens and {} more pass the model's {} positions",
                                      ids->size(), job.tokens, limit));
      }
      const int count = static_cast<int>(job.methods.size()) + 1;
      for (int i = 0; i < count; ++i) {
        const std::string name =
            i == 0 ? std::string("fp16") : job.methods[i - 1].name.toStdString();
        auto made = make_store_on(
            job.backend, m.model.config(),
            i == 0 ? std::nullopt : std::optional<MethodConfig>(job.methods[i - 1].config),
            max_tokens);
        if (!made) return make_error(fmt::format("{}: {}", name, made.message()));
        std::shared_ptr<KvStore> store = std::move(*made);
        const auto stage = [&](int step) {
          return report_progress(
              progress, (i + static_cast<double>(step) / std::max(job.tokens, 1)) / count,
              fmt::format("{} ({} of {}): {}", name, i + 1, count,
                          step == 0 ? std::string("prompt")
                                    : fmt::format("token {} of {}", step, job.tokens)));
        };
        // A prompt in micro-batches reports each one (and can be cancelled between them).
        const int prompt_tokens = static_cast<int>(ids->size());
        if (!stage(0)) return make_error(std::string(kCancelledMessage));
        auto state = m.model.new_state();
        state.kv_store = store;
        GreedyConfig config;
        config.tokens = job.tokens;
        config.eos = m.eos;
        config.prefill_chunk = job.batch;
        TokenTextStream text(m.decode, ids->back());
        GreedyHooks hooks;
        hooks.on_prefill = [&](int done, const std::vector<float>&) {
          return done == prompt_tokens ||
                 report_progress(progress, static_cast<double>(i) / count,
                                 fmt::format("{} ({} of {}): prompt, {} of {} tokens", name, i + 1,
                                             count, done, prompt_tokens));
        };
        hooks.on_token = [&](int step, int next) {
          const QString piece = QString::fromStdString(text.push(next));
          const int stored = store->tokens(0);
          const auto bytes = static_cast<qulonglong>(store->bytes());
          const auto fp16 = static_cast<qulonglong>(store->fp16_bytes());
          QMetaObject::invokeMethod(
              this,
              [this, i, step, next, piece, stored, bytes, fp16] {
                emit token(i, step, next, piece, stored, bytes, fp16);
              },
              Qt::QueuedConnection);
          return stage(step + 1);
        };
        auto run = generate_greedy(m.model, state, *ids, config, hooks);
        if (!run) {
          if (run.message() == kCancelledMessage) return run.error();
          return make_error(fmt::format("{}: {}", name, run.message()));
        }
        GenerateMeasurement measured;
        measured.model = job.model;
        measured.prompt_ids = *ids;
        measured.generated_ids = run->generated;
        measured.text = m.decode(run->generated);
        measured.prefill_seconds = run->prefill_s, measured.decode_seconds = run->decode_s;
        measured.prefill_batch = job.batch;
        measured.decode_steps = run->steps;
        measured.threads = worker_threads();
        measured.cache = store->label();
        measured.cache_bytes = store->bytes(), measured.fp16_bytes = store->fp16_bytes();
        measured.decode_attention = store->decode_attention();
        measured.decode_copy_bytes = store->decode_copy_bytes();
        QMetaObject::invokeMethod(
            this, [this, i, measured] { emit method_done(i, measured); }, Qt::QueuedConnection);
      }
      return Ok{};
    };
    const Status status = work();
    const QString error = status ? QString() : QString::fromStdString(status.message());
    const bool cancelled = !status && status.message() == kCancelledMessage;
    return [this, loaded, error, cancelled] {
      if (loaded) m_loaded = loaded;
      emit ended(error, cancelled);
    };
  });
}

GenerateModel::GenerateModel(std::shared_ptr<RunsStore> store, QObject* parent)
    : QObject(parent), m_store(std::move(store)), m_runner(new GenerateRunner(this)) {
  connect(m_runner, &GenerateRunner::token, this, &GenerateModel::on_token);
  connect(m_runner, &GenerateRunner::method_done, this, &GenerateModel::on_method_done);
  connect(m_runner, &GenerateRunner::ended, this, [this](const QString& error, bool cancelled) {
    m_error = cancelled ? tr("Cancelled.") : error;
    emit changed();
    emit finished();
  });
}

bool GenerateModel::start(const GenerateJob& job, QString* error) {
  const auto refuse = [&](const QString& why) {
    if (error) *error = why;
    return false;
  };
  if (m_runner->busy()) return refuse(tr("A generation is running."));
  if (job.model.empty()) return refuse(tr("Choose a model first (the Model field on the left)."));
  if (job.prompt.empty()) return refuse(tr("Write a prompt to continue."));
  if (job.tokens < 1) return refuse(tr("Generate at least one token."));
  m_series.assign(1 + job.methods.size(), GenerateSeries{});
  m_series[0].name = tr("fp16");
  m_configs.assign(1, std::nullopt);
  for (std::size_t i = 0; i < job.methods.size(); ++i) {
    m_series[i + 1].name = job.methods[i].name;
    m_configs.emplace_back(job.methods[i].config);
  }
  m_error.clear();
  if (!m_runner->start(job)) return refuse(tr("A generation is running."));
  emit changed();
  return true;
}

void GenerateModel::cancel() {
  m_runner->cancel();
}

bool GenerateModel::busy() const {
  return m_runner->busy();
}

bool GenerateModel::wait_until_done(int timeout_ms) {
  return m_runner->wait_until_done(timeout_ms);
}

void GenerateModel::on_token(int method, int step, int id, const QString& piece, int stored,
                             qulonglong bytes, qulonglong fp16_bytes) {
  if (method < 0 || method >= static_cast<int>(m_series.size())) return;
  GenerateSeries& s = m_series[static_cast<std::size_t>(method)];
  if (step != static_cast<int>(s.ids.size())) return;  // out of order: never, by the queue
  constexpr double kMiB = 1024.0 * 1024.0;
  s.ids.push_back(id);
  s.pieces.push_back(piece);
  s.tokens.push_back(stored);
  s.mib.push_back(bytes / kMiB);
  s.fp16_mib = fp16_bytes / kMiB;
  if (method == 0) {
    for (int m = 1; m < static_cast<int>(m_series.size()); ++m) update_agreement(m);
  } else {
    update_agreement(method);
  }
  emit changed();
}

// The method's speeds, and its run stored beside fp16's (which runs first) as `kvlab generate
// --compare --save` stores it.
void GenerateModel::on_method_done(int method, const GenerateMeasurement& measured) {
  if (method < 0 || method >= static_cast<int>(m_series.size())) return;
  GenerateSeries& s = m_series[static_cast<std::size_t>(method)];
  const GenerateSeries& fp16 = m_series.front();
  const GenerateMeasurement* baseline = method > 0 && fp16.measured ? &*fp16.measured : nullptr;
  const nlohmann::json result = generate_result(measured, baseline);
  s.prefill_tps = result["prefill_tokens_per_second"].get<double>();
  s.decode_tps = result["decode_tokens_per_second"].get<double>();
  s.measured = measured;
  s.done = true;
  if (m_store) {
    auto id = m_store->save_run(generate_run(result, m_configs[static_cast<std::size_t>(method)]));
    if (id) {
      s.run_id = *id;
      emit run_saved(*id);
    } else {
      m_error =
          tr("%1 ran but could not be saved: %2").arg(s.name, QString::fromStdString(id.message()));
    }
  }
  emit changed();
}

void GenerateModel::update_agreement(int method) {
  const GenerateSeries& fp16 = m_series.front();
  GenerateSeries& s = m_series[static_cast<std::size_t>(method)];
  if (fp16.ids.empty() || s.ids.empty()) return;
  s.agree = tokens_agreeing(fp16.ids, s.ids);
}

QStringList GenerateModel::summary() const {
  QStringList lines;
  if (m_series.empty() || !m_series.front().done) return lines;
  const GenerateSeries& fp16 = m_series.front();
  const auto saved = [this](const GenerateSeries& s) {
    return s.run_id > 0 ? tr(", run #%1").arg(s.run_id) : QString();
  };
  // Where a cache's decode steps attended, when not on the CPU (GenerateJob::backend).
  const auto where = [this](const GenerateSeries& s) {
    const std::string at = s.measured ? s.measured->decode_attention : std::string("cpu");
    return at == "cpu" ? QString() : tr(", decode steps on %1").arg(QString::fromStdString(at));
  };
  lines << tr("fp16: %1 MiB held, prefill %2 tokens/s, decode %3 tokens/s%4%5")
               .arg(fp16.mib.empty() ? 0.0 : fp16.mib.back(), 0, 'f', 2)
               .arg(fp16.prefill_tps, 0, 'f', 1)
               .arg(fp16.decode_tps, 0, 'f', 1)
               .arg(where(fp16), saved(fp16));
  for (std::size_t i = 1; i < m_series.size(); ++i) {
    const GenerateSeries& s = m_series[i];
    if (!s.done || s.mib.empty()) continue;
    const double ratio = s.fp16_mib / std::max(s.mib.back(), 1e-12);
    const QString agree =
        s.agree == static_cast<int>(s.ids.size())
            ? tr("agrees with fp16 for all %1 tokens").arg(s.ids.size())
            : tr("departs from fp16 at token %1 of %2").arg(s.agree + 1).arg(s.ids.size());
    lines << tr("%1: %2 MiB held (%3x smaller), decodes at %4x fp16's speed, %5%6%7")
                 .arg(s.name)
                 .arg(s.mib.back(), 0, 'f', 2)
                 .arg(ratio, 0, 'f', 2)
                 .arg(s.decode_tps / std::max(fp16.decode_tps, 1e-9), 0, 'f', 2)
                 .arg(agree, where(s), saved(s));
  }
  return lines;
}

}  // namespace kvlab::gui
