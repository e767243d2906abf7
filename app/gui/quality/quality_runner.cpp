#include "quality/quality_runner.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/model/model_capture.h"

namespace kvlab::gui {

namespace {

constexpr double kPrepareSpan = 0.1;  // of the progress bar: loading the model and the text

}  // namespace

struct QualityRunner::Prepared {
  std::string model_path, text;
  LoadedModel model;
  std::vector<int> tokens;  // without BOS: every window adds its own
};

struct QualityRunner::JobResult {
  std::shared_ptr<const Prepared> prepared;  // set when this job loaded them
  QString error;
  bool cancelled = false;
  int failed_index = -1;
};

QualityRunner::QualityRunner(QObject* parent) : WorkerRunner(parent) {}

bool QualityRunner::start(const QualityJob& job) {
  std::shared_ptr<const Prepared> ready = m_prepared;
  if (ready && (ready->model_path != job.model || ready->text != job.text.describe())) {
    ready.reset();
  }
  return launch([this, job, ready = std::move(ready)]() -> Completion {
    auto result = run_job(job, ready);
    return [this, result] { finish(result); };
  });
}

// On the worker thread: touches only its arguments, progress_fn and queued signals.
std::shared_ptr<QualityRunner::JobResult> QualityRunner::run_job(
    const QualityJob& job, std::shared_ptr<const Prepared> ready) {
  auto result = std::make_shared<JobResult>();
  int at = -1;  // the configuration being measured
  const auto fail = [&](const std::string& message) {
    result->failed_index = at;
    result->cancelled = message == kCancelledMessage;
    result->error = QString::fromStdString(message);
    return result;
  };
  if (!ready) {
    auto prepare_progress = progress_fn(0.0, kPrepareSpan);
    if (!report_progress(prepare_progress, 0.0, "loading the model")) {
      return fail(std::string(kCancelledMessage));
    }
    auto model = load_model(job.model);
    if (!model) return fail(model.message());
    auto prepared =
        std::make_shared<Prepared>(Prepared{job.model, job.text.describe(), std::move(*model), {}});
    const LlamaModel& m = prepared->model.model;
    if (job.text.kind == QualityText::Kind::Sampled) {
      // Sampling takes a forward step per token: a choice the text cannot serve fails first.
      for (std::size_t i = 0; i < job.choices.size(); ++i) {
        QualityConfig config = job.choices[i].config;
        config.window = job.window;
        config.target_se = job.target_se;
        config.bos = prepared->model.bos;
        auto plan = plan_quality(m.config(), config, static_cast<std::size_t>(job.text.tokens));
        if (!plan) {
          at = static_cast<int>(i);
          return fail(plan.message());
        }
      }
      report_progress(prepare_progress, 0.5, "sampling the model's own text");
      auto sampled =
          sample_text(m, job.text.tokens, job.text.seed, prepared->model.bos, prepared->model.eos);
      if (!sampled) return fail(sampled.message());
      prepared->tokens = std::move(*sampled);
    } else {
      std::ifstream in(job.text.path);
      if (!in) return fail(fmt::format("text file {}: cannot open it", job.text.path));
      std::stringstream ss;
      ss << in.rdbuf();
      const std::string text = ss.str();
      if (auto utf8 = check_utf8(text, fmt::format("text file {}", job.text.path)); !utf8) {
        return fail(utf8.message());
      }
      auto ids = prepared->model.encode(text);
      if (!ids) return fail(ids.message());
      // Windows start from BOS themselves; a tokenizer that adds none (GGUF files can say so)
      // keeps its first token.
      const bool has_bos = !ids->empty() && ids->front() == prepared->model.bos;
      prepared->tokens.assign(ids->begin() + (has_bos ? 1 : 0), ids->end());
    }
    ready = prepared;
    result->prepared = ready;
  }
  const int count = static_cast<int>(job.choices.size());
  const double span = (1.0 - kPrepareSpan) / std::max(count, 1);
  for (int i = 0; i < count; ++i) {
    at = i;
    QualityConfig config = job.choices[static_cast<std::size_t>(i)].config;
    config.window = job.window;
    config.target_se = job.target_se;
    config.bos = ready->model.bos;
    const QualityChoice& choice = job.choices[static_cast<std::size_t>(i)];
    const std::string name = fmt::format("{} ({} of {})", choice.name.toStdString(), i + 1, count);
    const ProgressFn inner = progress_fn(kPrepareSpan + i * span, span);
    const ProgressFn progress = [&inner, &name](double fraction, std::string_view stage) {
      return inner(fraction, fmt::format("{}: {}", name, stage));
    };
    if (!report_progress(progress, 0.0, "starting")) return fail(std::string(kCancelledMessage));
    auto report = measure_quality(ready->model.model, ready->tokens, config, progress);
    if (!report) return fail(report.message());
    QMetaObject::invokeMethod(
        this, [this, r = std::move(*report), i, count] { emit measured(r, i, count); },
        Qt::QueuedConnection);
  }
  return result;
}

void QualityRunner::finish(const std::shared_ptr<JobResult>& result) {
  if (result->prepared) m_prepared = result->prepared;
  emit ended(result->error, result->cancelled, result->failed_index);
}

}  // namespace kvlab::gui
