// Runs "load a model, run the prompt through it, continue it greedily" on a worker thread
// (WorkerRunner: progress, cancel, waiting) for the Source panel's model capture. The engine does
// the work (model_capture.h); this only carries it off the UI thread and back.
#pragma once

#include <memory>
#include <string>

#include <QString>

#include "common/worker_runner.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/model/model_capture.h"

namespace kvlab::gui {

struct CaptureJob {
  std::string model;     // a llama2.c .bin (tokenizer next to it) or a Hugging Face folder
  std::string prompt;    // the text; BOS is added
  CaptureConfig config;  // max tokens, pre-RoPE keys
};

// What a finished capture hands back: the cache (shared, never changed again) and what made it.
struct CaptureOutcome {
  std::shared_ptr<const KvCache> cache;
  int prompt_tokens = 0;
  QString generated;
  CaptureJob job;
};

class CaptureRunner : public WorkerRunner {
  Q_OBJECT

 public:
  explicit CaptureRunner(QObject* parent = nullptr);

  // False (and nothing happens) while a capture is running.
  bool start(const CaptureJob& job);

 signals:
  void succeeded(const kvlab::gui::CaptureOutcome& outcome);
  void failed(const QString& message, bool cancelled);
};

}  // namespace kvlab::gui
