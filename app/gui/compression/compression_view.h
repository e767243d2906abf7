// The Compression page: pick a source, a method and a backend (Auto, CPU, CUDA), run it on a
// worker thread, and see the ratio, the errors, the memory formula, bytes by component, per-layer
// error and ratio, and the histogram of quantized codes; when KVComp's codes were entropy-coded,
// the Huffman code lengths and the per-layer ratio of each codec; and the largest |k| per key
// channel of a layer before and after the method panel's rotation (from the cache in memory). Every
// successful run is saved to the runs store; a stored run can be shown again from its JSON without
// recomputing. The state and the commands are the page model's (compression_model.h); this is the
// widgets over it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include <QString>
#include <QWidget>

#include "common/run_shell.h"
#include "compression/compression_model.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/store/runs_store.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QTabWidget;

namespace kvlab::gui {

class BytesChart;
class CodecRatioChart;
class CodeLengthPanel;
class HistogramPanel;
class KeyChannelPanel;
class LayerChart;
class MethodPanel;
class ResultsPanel;
class RunController;
class RunController;
class StaleMark;
class SourcePanel;
class StreamChart;

class CompressionView : public QWidget {
  Q_OBJECT

 public:
  // `store` may be null (the store could not be opened): runs are then shown but not saved.
  explicit CompressionView(std::shared_ptr<RunsStore> store, QWidget* parent = nullptr);
  ~CompressionView() override;

  // Starts a run with the panels' current source and method; false when one is running.
  bool run();
  void cancel();
  bool is_running() const;
  // Runs and waits (processing events) until the result is shown and saved; true on success.
  bool run_and_wait(int timeout_ms = 10 * 60 * 1000);
  // Processes events until the running run (if any) has finished; true when none is running.
  bool wait_until_done(int timeout_ms);

  // A stored run: its report, with the controls set to its settings (the method, and the
  // synthetic preset, layers and context or the file it read), so what is shown matches them.
  void show_stored_run(const CompressionReport& report, const QString& origin);

  // What the page shows and does: the report, its stream, the last saved run, the run going.
  CompressionModel* model() const { return m_model; }
  // The job the panels name now.
  CompressionJob job() const;
  const QString& last_error() const;

  SourcePanel* source_panel() const { return m_source; }
  MethodPanel* method_panel() const { return m_method; }
  void set_backend(const QString& id);
  // The parts are named for finding them: the backend combo ("backend": Auto, CPU, CUDA, item
  // data make_backend()'s id), "results", the stale mark shown over the results when a setting
  // changed after they were computed ("stale"), the charts "bytes", "layers", "histograms",
  // "code_lengths", "codec_ratios", "stream" and "key_channels".
  // The lower charts: "Codes histogram" | "Code lengths" | "Ratio by codec" (shown only when a
  // codec ran) | "Decode stream" (shown only after a fresh kvcomp + huffman/bitpack run) |
  // "Key channels".
  QTabWidget* lower_tabs() const { return m_lower_tabs; }
  enum LowerTab {
    kHistogramTab = 0,
    kCodeLengthTab = 1,
    kCodecRatioTab = 2,
    kStreamTab = 3,
    kKeyChannelTab = 4
  };
  QProgressBar* progress_bar() const { return m_shell->progress_bar(); }
  QPushButton* run_button() const { return m_shell->run_button(); }
  QPushButton* cancel_button() const { return m_shell->cancel_button(); }

 signals:
  void status_message(const QString& text, int timeout_ms);
  void run_saved(qint64 id);

 private:
  QWidget* build_controls();
  QWidget* build_charts();
  void set_running(bool running);
  // Draws the model's report, stream and key channels; `origin` heads the results.
  void redraw(const QString& origin);
  void show_stream(const std::optional<StreamReport>& stream);
  void show_error(const QString& message);
  // Recomputes the key channel statistics when the layer, the rotation or its seed changed.
  void update_key_channels();

  CompressionModel* m_model = nullptr;
  SourcePanel* m_source = nullptr;
  MethodPanel* m_method = nullptr;
  QComboBox* m_backend = nullptr;
  RunController* m_run = nullptr;  // the model's: start, progress, cancel, wait, stale
  RunShell* m_shell = nullptr;     // its Run, Cancel, progress and stage
  QLabel* m_cache_note = nullptr;
  ResultsPanel* m_results = nullptr;
  StaleMark* m_stale = nullptr;
  BytesChart* m_bytes_chart = nullptr;
  LayerChart* m_layer_chart = nullptr;
  HistogramPanel* m_histograms = nullptr;
  CodeLengthPanel* m_code_lengths = nullptr;
  CodecRatioChart* m_codec_ratios = nullptr;
  StreamChart* m_stream_chart = nullptr;
  KeyChannelPanel* m_key_channels = nullptr;
  QTabWidget* m_lower_tabs = nullptr;
};

}  // namespace kvlab::gui
