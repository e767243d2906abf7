#include "compression/compression_view.h"

#include <utility>

#include <QComboBox>
#include <QDateTime>
#include <QHBoxLayout>
#include <QLabel>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSignalBlocker>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QVBoxLayout>

#include "common/chart_pair.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/run_controller.h"
#include "common/run_shell.h"
#include "common/source_panel.h"
#include "common/stale_mark.h"
#include "compression/bytes_chart.h"
#include "compression/code_length_panel.h"
#include "compression/codec_ratio_chart.h"
#include "compression/compression_runner.h"
#include "compression/histogram_panel.h"
#include "compression/key_channel_panel.h"
#include "compression/layer_chart.h"
#include "compression/method_panel.h"
#include "compression/report_charts.h"
#include "compression/results_panel.h"
#include "compression/stream_chart.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/io/report_json.h"
#include "kvlab/store/run_records.h"

namespace kvlab::gui {

namespace {

constexpr int kControlsWidth = 360;

}  // namespace

CompressionView::CompressionView(std::shared_ptr<RunsStore> store, QWidget* parent)
    : QWidget(parent) {
  m_model = new CompressionModel(std::move(store), this);
  m_run = m_model->run_controller();
  connect(m_run, &RunController::running_changed, this, &CompressionView::set_running);

  auto* splitter = new QSplitter(Qt::Horizontal, this);
  QWidget* controls = build_controls();
  splitter->addWidget(controls);
  splitter->addWidget(build_charts());
  m_stale->watch(controls);
  splitter->setStretchFactor(0, 0);
  splitter->setStretchFactor(1, 1);
  splitter->setChildrenCollapsible(false);
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(6, 6, 6, 6);
  layout->addWidget(splitter);
  // Names for finding the parts (tests, accessibility tools).
  const std::pair<QWidget*, const char*> names[] = {{m_backend, "backend"},
                                                    {m_results, "results"},
                                                    {m_stale, "stale"},
                                                    {m_bytes_chart, "bytes"},
                                                    {m_layer_chart, "layers"},
                                                    {m_histograms, "histograms"},
                                                    {m_code_lengths, "code_lengths"},
                                                    {m_codec_ratios, "codec_ratios"},
                                                    {m_stream_chart, "stream"},
                                                    {m_key_channels, "key_channels"}};
  for (const auto& [part, name] : names) part->setObjectName(QLatin1String(name));

  connect(m_model, &CompressionModel::report_shown, this, &CompressionView::redraw);
  connect(m_model, &CompressionModel::status_message, this, &CompressionView::status_message);
  connect(m_model, &CompressionModel::run_saved, this, &CompressionView::run_saved);
  connect(m_model, &CompressionModel::error, this, &CompressionView::show_error);
  connect(m_shell, &RunShell::run_requested, this, [this] { run(); });
  connect(m_method, &MethodPanel::changed, this, &CompressionView::update_key_channels);
  connect(m_source, &SourcePanel::changed, this,
          [this] { m_cache_note->setText(m_model->cache_note(m_source->spec())); });
  set_running(false);
}

CompressionView::~CompressionView() = default;

QWidget* CompressionView::build_controls() {
  auto* controls = new QWidget;
  m_source = new SourcePanel(controls);
  m_method = new MethodPanel(controls);

  m_backend = new QComboBox(controls);
  // Auto names the device it would take (make_backend("auto")'s choice).
  {
    auto chosen = make_backend("auto");
    m_backend->addItem(
        chosen ? tr("Auto: %1").arg(QString::fromStdString((*chosen)->id()).toUpper()) : tr("Auto"),
        QStringLiteral("auto"));
  }
  // Each backend named with its device; CUDA without a usable GPU says why and cannot be picked.
  for (const auto& [label, id] : {std::pair{tr("CPU"), QStringLiteral("cpu")},
                                  std::pair{tr("CUDA"), QStringLiteral("cuda")}}) {
    auto made = make_backend(id.toStdString());
    const QString device = made ? QString::fromStdString((*made)->device_name())
                                : QString::fromStdString(made.message());
    m_backend->addItem(made ? tr("%1: %2").arg(label, device) : tr("%1 (unavailable)").arg(label),
                       id);
    const int row = m_backend->count() - 1;
    m_backend->setItemData(row, device, Qt::ToolTipRole);
    if (!made) {
      if (auto* model = qobject_cast<QStandardItemModel*>(m_backend->model())) {
        model->item(row)->setEnabled(false);
      }
    }
  }
  // The device names are long (a CPU's model): the list shows them whole, the box stays narrow.
  m_backend->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  m_backend->setMinimumContentsLength(14);
  m_backend->setToolTip(
      tr("Where the run's stages happen (quantize, code, dequantize, metrics): Auto takes the "
         "GPU when one is usable, else the CPU. A method the GPU lacks a stage of runs on the "
         "CPU's threads; the results say where each stage ran and why a run left the GPU. The "
         "bytes are the same on either."));
  auto* backend_label = new QLabel(tr("Backend:"), controls);
  backend_label->setBuddy(m_backend);
  backend_label->setToolTip(m_backend->toolTip());
  auto* backend = new QHBoxLayout;
  backend->addWidget(backend_label);
  backend->addWidget(m_backend, 1);

  m_shell = new RunShell(
      {tr("Generate or load the cache (kept in memory while only the method changes), compress it "
          "with the method, measure it and save the run"),
       tr("Stop the run; nothing is saved"), tr("How far the run has got, layer by layer")},
      m_run, controls);
  m_cache_note = style::muted_label(tr("The cache will be generated or loaded on Run."), controls);

  auto* layout = new QVBoxLayout(controls);
  layout->setContentsMargins(0, 0, 6, 0);
  layout->addWidget(m_source);
  layout->addWidget(m_method);
  layout->addLayout(backend);
  layout->addWidget(m_shell);
  layout->addWidget(m_cache_note);
  layout->addStretch(1);

  // Scrolls rather than clips when the window is short.
  auto* scroll = new QScrollArea;
  scroll->setWidget(controls);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  scroll->setMinimumWidth(kControlsWidth);
  scroll->setMaximumWidth(kControlsWidth + 120);
  return scroll;
}

QWidget* CompressionView::build_charts() {
  auto* charts = new QWidget;
  m_stale = new StaleMark(m_run, charts);
  m_results = new ResultsPanel(charts);
  m_bytes_chart = new BytesChart;
  m_layer_chart = new LayerChart;
  m_bytes_chart->setToolTip(
      tr("Where the compressed bytes go: codes, scales, zero-points, the fp16 residual and "
         "metadata, keys and values stacked, against the fp16 cache"));
  m_layer_chart->setToolTip(
      tr("Per layer: the attention-output error and the MSE of the reconstruction (above) and "
         "the compression ratio (below)"));
  m_histograms = new HistogramPanel;
  m_code_lengths = new CodeLengthPanel;
  m_codec_ratios = new CodecRatioChart;
  m_stream_chart = new StreamChart;
  m_key_channels = new KeyChannelPanel;
  m_lower_tabs = new QTabWidget;
  m_lower_tabs->setDocumentMode(true);
  m_lower_tabs->addTab(m_histograms, tr("Codes histogram"));
  m_lower_tabs->addTab(m_code_lengths, tr("Code lengths"));
  m_lower_tabs->addTab(m_codec_ratios, tr("Ratio by codec"));
  m_lower_tabs->addTab(m_stream_chart, tr("Decode stream"));
  m_lower_tabs->addTab(m_key_channels, tr("Key channels"));
  m_lower_tabs->setTabToolTip(
      kHistogramTab, tr("How often each quantized code value occurs, per layer and K or V, with "
                        "the entropy an entropy coder could reach"));
  m_lower_tabs->setTabToolTip(kCodeLengthTab,
                              tr("Huffman code length of each code value beside its frequency"));
  m_lower_tabs->setTabToolTip(kCodecRatioTab,
                              tr("Per-layer ratio with each codec and at the entropy bound"));
  m_lower_tabs->setTabToolTip(
      kStreamTab, tr("Streaming cache memory over decode steps: prefill half, then one token a "
                     "step (compressed blocks vs the fp16 buffer)"));
  m_lower_tabs->setTabToolTip(
      kKeyChannelTab, tr("Largest |k| per key channel of a layer, before and after the method's "
                         "rotation (Hadamard when none is chosen)"));
  m_lower_tabs->setTabVisible(kCodecRatioTab, false);
  m_lower_tabs->setTabVisible(kStreamTab, false);
  // Both pickers show the same layer and tensor.
  connect(m_histograms, &HistogramPanel::selection_changed, this,
          [this](int layer, TensorPick tensor) {
            const QSignalBlocker block(m_code_lengths);
            m_code_lengths->select(layer, tensor);
            m_key_channels->select_layer(layer);
            update_key_channels();
          });
  connect(m_code_lengths, &CodeLengthPanel::selection_changed, this,
          [this](int layer, TensorPick tensor) {
            const QSignalBlocker block(m_histograms);
            m_histograms->select(layer, tensor, m_histograms->selected_histogram());
          });
  connect(m_key_channels, &KeyChannelPanel::layer_changed, this,
          &CompressionView::update_key_channels);

  auto* top =
      new ChartPair(m_bytes_chart, tr("Bytes by component"), m_layer_chart, tr("Per layer"));
  auto* vertical = new QSplitter(Qt::Vertical);
  vertical->addWidget(top);
  vertical->addWidget(m_lower_tabs);
  vertical->setChildrenCollapsible(false);
  vertical->setStretchFactor(0, 3);
  vertical->setStretchFactor(1, 2);
  vertical->setSizes({420, 300});

  auto* layout = new QVBoxLayout(charts);
  layout->setContentsMargins(6, 0, 0, 0);
  layout->addWidget(m_stale);
  layout->addWidget(m_results);
  layout->addWidget(vertical, 1);
  return charts;
}

void CompressionView::set_running(bool running) {
  m_source->setEnabled(!running);
  m_method->setEnabled(!running);
  m_backend->setEnabled(!running);
}

bool CompressionView::is_running() const {
  return m_run->running();
}

void CompressionView::set_backend(const QString& id) {
  if (const int i = m_backend->findData(id); i >= 0) m_backend->setCurrentIndex(i);
}

CompressionJob CompressionView::job() const {
  return {m_source->spec(), m_method->config(), m_backend->currentData().toString().toStdString()};
}

bool CompressionView::run() {
  return m_model->run(job());
}

void CompressionView::cancel() {
  m_run->cancel();
}

bool CompressionView::run_and_wait(int timeout_ms) {
  return m_run->run_and_wait([this] { return run(); }, timeout_ms);
}

bool CompressionView::wait_until_done(int timeout_ms) {
  return m_run->wait_until_done(timeout_ms);
}

const QString& CompressionView::last_error() const {
  return m_model->last_error();
}

void CompressionView::show_error(const QString& engine_message) {
  const QString message = in_gui_terms(engine_message);
  emit status_message(message, 0);
  // Non-blocking (open(), not exec()), so scripted runs and tests never hang on it.
  auto* box = new QMessageBox(QMessageBox::Warning, tr("kvlab"), message, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

void CompressionView::redraw(const QString& origin) {
  const CompressionReport& report = *m_model->report();
  if (m_model->compressed_cache()) {  // a fresh run
    m_cache_note->setText(m_model->cache_note_after_run());
  }
  ChartSet set = chart_set_from_report(report);
  m_results->set_summary(set.summary, origin);
  m_bytes_chart->set_data(set.bytes);
  m_layer_chart->set_data(set.layers);
  m_histograms->set_histograms(std::move(set.histograms));
  const bool coded = !set.code_lengths.empty();
  m_code_lengths->set_code_lengths(std::move(set.code_lengths), set.codec_ratios.ran);
  {
    const QSignalBlocker block(m_code_lengths);
    m_code_lengths->select(m_histograms->selected_layer(), m_histograms->selected_tensor());
  }
  if (coded) {
    m_codec_ratios->set_data(set.codec_ratios);
  } else {
    m_codec_ratios->clear_data();
    if (m_lower_tabs->currentIndex() == kCodecRatioTab)
      m_lower_tabs->setCurrentIndex(kHistogramTab);
  }
  m_lower_tabs->setTabVisible(kCodecRatioTab, coded);
  show_stream(m_model->stream());
  m_key_channels->clear(tr("Key channels: run to see them"));
  update_key_channels();
}

void CompressionView::show_stored_run(const CompressionReport& report, const QString& origin) {
  m_method->set_config(report.config);
  const std::string& source = report.source;
  if (source.rfind("synthetic:", 0) == 0) {
    SyntheticConfig synthetic = m_source->spec().synthetic;
    synthetic.preset = source.substr(10);
    const auto preset = find_synthetic_preset(synthetic.preset);
    synthetic.layers =
        preset && preset->shape.layers == report.shape.layers ? 0 : report.shape.layers;
    synthetic.context = report.tokens;
    m_source->set_synthetic(synthetic);
  } else if (source.rfind("file:", 0) == 0) {
    m_source->set_file(QString::fromStdString(source.substr(5)));
  }
  m_model->show_report(report, origin);  // after the controls, so they do not mark it stale
}

void CompressionView::update_key_channels() {
  const std::shared_ptr<const KvCache>& cache = m_model->compressed_cache();
  if (!cache) return;
  m_key_channels->set_layer_count(static_cast<int>(cache->layers.size()));
  const int layer = m_key_channels->selected_layer();
  const MethodConfig method = m_method->config();
  const auto& shown = m_key_channels->stats();
  if (shown && shown->layer == layer && shown->seed == method.rotation_seed &&
      shown->rotation == shown_rotation(method.rotation, shown->dim) &&
      shown->chosen == (method.rotation != RotationKind::None)) {
    return;  // the same statistics
  }
  auto stats = compute_key_channel_stats(*cache, layer, method.rotation, method.rotation_seed);
  if (!stats) {
    m_key_channels->clear(tr("Key channels: %1").arg(QString::fromStdString(stats.message())));
    return;
  }
  m_key_channels->set_stats(std::move(stats).value());
}

void CompressionView::show_stream(const std::optional<StreamReport>& stream) {
  if (stream) {
    m_stream_chart->set_data(stream_series_from_report(*stream));
  } else {
    m_stream_chart->clear_data();
    if (m_lower_tabs->currentIndex() == kStreamTab) m_lower_tabs->setCurrentIndex(kHistogramTab);
  }
  m_lower_tabs->setTabVisible(kStreamTab, stream.has_value());
}

}  // namespace kvlab::gui
