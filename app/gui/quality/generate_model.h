// The Quality page's Generate tab (issue 47, part 3): a real model continues a prompt greedily
// with its cache held in each chosen method's stored form (kv_store.h, as `kvlab generate
// --method M` does), one method after another, fp16 first as the baseline. GenerateRunner runs the
// job on a worker thread and posts every token as it comes; GenerateModel keeps what the tab
// shows: each method's text so far, its cache bytes after every token (the chart), its speeds,
// and the token where its greedy text departs from fp16's. Each finished method is stored as a
// generate run (run_records.h, as `kvlab generate --save` stores one), for the Runs page and
// the planner.
#pragma once

#include <QObject>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/worker_runner.h"
#include "kvlab/engine/model/model_capture.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/store/run_records.h"
#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

// A method the tab offers: its name as the CLI spells the options, and its configuration.
struct GenerateChoice {
  QString name;  // "q4_0", "kivi-2", "kvcomp + huffman", ...
  MethodConfig config;
};
// Every method the runner stores, in the order the tab lists them.
std::vector<GenerateChoice> generate_choices();

struct GenerateJob {
  std::string model;  // a .gguf file, llama2.c checkpoint or HF folder: load_model()
  std::string prompt;
  int tokens = 64;
  int batch = 0;  // prompt tokens per forward pass, as llama.cpp's micro-batch (0: all at once)
  std::vector<GenerateChoice> methods;  // fp16 runs first, before these
  // Where decode steps attend (make_store_on): "cpu", or "auto" (the GPU for each cache whose
  // rows its decode kernel reads, the CPU for the others).
  std::string backend = "cpu";
};

class GenerateRunner : public WorkerRunner {
  Q_OBJECT

 public:
  explicit GenerateRunner(QObject* parent = nullptr);
  // False (and nothing happens) while a job is running.
  bool start(const GenerateJob& job);

 signals:
  // Method `method` (0: fp16) generated token `id` (its text `piece`) as its `step`-th token
  // (0-based); its cache holds `stored` tokens in `bytes`, for `fp16_bytes` of fp16.
  void token(int method, int step, int id, const QString& piece, int stored, qulonglong bytes,
             qulonglong fp16_bytes);
  // Method `method` finished: what it measured.
  void method_done(int method, const GenerateMeasurement& measured);
  void ended(const QString& error, bool cancelled);

 private:
  struct Loaded;
  std::shared_ptr<const Loaded> m_loaded;  // the last model, kept for the next job
};

// One method's run as the tab shows it.
struct GenerateSeries {
  QString name;
  std::vector<int> ids;
  QStringList pieces;
  std::vector<double> tokens;  // stored tokens after each generated one (x of the chart)
  std::vector<double> mib;     // cache MiB held then (y)
  double fp16_mib = 0;         // the same tokens as fp16
  double prefill_tps = 0, decode_tps = 0;
  bool done = false;
  std::optional<GenerateMeasurement> measured;  // once done
  std::int64_t run_id = 0;                      // the stored run; 0: not stored
  // Generated tokens equal to fp16's before the first that differs (all of them when none does);
  // -1 until both have tokens.
  int agree = -1;
};

class GenerateModel : public QObject {
  Q_OBJECT

 public:
  // `store`: where each finished method's run is saved; none keeps them here only.
  explicit GenerateModel(std::shared_ptr<RunsStore> store, QObject* parent = nullptr);

  // Starts the job; false with an error message when the input is incomplete or a job runs.
  bool start(const GenerateJob& job, QString* error);
  void cancel();
  bool busy() const;
  bool wait_until_done(int timeout_ms);
  GenerateRunner* runner() const { return m_runner; }

  // fp16 first, then the job's methods, each as far as it has run.
  const std::vector<GenerateSeries>& series() const { return m_series; }
  // "q4_0: 3.56x smaller than fp16, decodes at 0.98x, agrees for 12 of 64 tokens, run #7", one
  // line a finished method.
  QStringList summary() const;
  const QString& error() const { return m_error; }

 signals:
  void changed();
  void finished();
  void run_saved(qint64 id);

 private:
  void on_token(int method, int step, int id, const QString& piece, int stored, qulonglong bytes,
                qulonglong fp16_bytes);
  void update_agreement(int method);
  void on_method_done(int method, const GenerateMeasurement& measured);

  std::shared_ptr<RunsStore> m_store;
  GenerateRunner* m_runner;
  std::vector<std::optional<MethodConfig>> m_configs;  // each series' method (fp16: none)
  std::vector<GenerateSeries> m_series;
  QString m_error;
};

}  // namespace kvlab::gui
