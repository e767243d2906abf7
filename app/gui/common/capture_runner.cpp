#include "common/capture_runner.h"

#include <utility>

namespace kvlab::gui {

CaptureRunner::CaptureRunner(QObject* parent) : WorkerRunner(parent) {}

bool CaptureRunner::start(const CaptureJob& job) {
  // The progress function is made here, on the UI thread; the work below touches only its
  // arguments and it.
  ProgressFn progress = progress_fn(0.0, 1.0);
  return launch([this, job, progress = std::move(progress)]() -> Completion {
    auto loaded = load_model(job.model);
    if (!loaded) {
      return [this, message = QString::fromStdString(loaded.message())] {
        emit failed(message, false);
      };
    }
    auto captured = capture_kv_cache(*loaded, job.prompt, job.config, progress);
    if (!captured) {
      const bool cancelled = captured.message() == kCancelledMessage;
      return [this, message = QString::fromStdString(captured.message()), cancelled] {
        emit failed(message, cancelled);
      };
    }
    CaptureOutcome outcome;
    outcome.cache = std::make_shared<const KvCache>(std::move(captured->cache));
    outcome.prompt_tokens = captured->prompt_tokens;
    outcome.generated = QString::fromStdString(captured->generated);
    outcome.job = job;
    return [this, outcome = std::move(outcome)] { emit succeeded(outcome); };
  });
}

}  // namespace kvlab::gui
