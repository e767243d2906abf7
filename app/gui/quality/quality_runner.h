// Runs "load the model, get the text, then measure each chosen configuration" on a worker
// thread (WorkerRunner: progress, cancel, waiting). Each configuration's report is handed to the
// UI thread as soon as it is measured, so a cancelled or failed job keeps what it finished. The
// last model and text are kept, so a second run on them starts measuring at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <QString>

#include "common/worker_runner.h"
#include "kvlab/engine/model/model_quality.h"
#include "quality/quality_configs.h"
#include "quality/quality_runs.h"

namespace kvlab::gui {

struct QualityJob {
  std::string model;  // llama2.c .bin (its tok*.bin beside it) or Hugging Face folder: load_model()
  QualityText text;
  std::vector<QualityChoice> choices;
  int window = 0;  // tokens per window; 0: the model's context
  // Above 0: windows are scored in text order only until the standard error of each
  // configuration's perplexity change is at most this (a fraction; `kvlab quality --target-se`).
  double target_se = 0;
};

class QualityRunner : public WorkerRunner {
  Q_OBJECT

 public:
  explicit QualityRunner(QObject* parent = nullptr);

  // False (and nothing happens) while a job is running.
  bool start(const QualityJob& job);

 signals:
  // Configuration `index` (of `count`) of the running job was measured.
  void measured(const kvlab::QualityReport& report, int index, int count);
  // The job is over: `error` is empty when every configuration was measured; `failed_index` is
  // the configuration being measured when it failed or was cancelled (-1: while loading).
  void ended(const QString& error, bool cancelled, int failed_index);

 private:
  struct Prepared;
  struct JobResult;
  std::shared_ptr<JobResult> run_job(const QualityJob& job, std::shared_ptr<const Prepared> ready);
  void finish(const std::shared_ptr<JobResult>& result);

  std::shared_ptr<const Prepared> m_prepared;  // the last model and its tokens of text
};

}  // namespace kvlab::gui
