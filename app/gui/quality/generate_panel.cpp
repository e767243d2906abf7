#include "quality/generate_panel.h"

#include <qcustomplot.h>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardItemModel>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "common/chart_style.h"
#include "kvlab/engine/core/backend.h"
#include "quality/generate_model.h"

namespace kvlab::gui {

namespace {

const char* const kDefaultPrompt =
    "The lighthouse keeper wrote in his log every evening: the wind, the colour of the sea, the "
    "ships that passed, and whether the lamp had needed new oil that day. On the last page he "
    "wrote";

}  // namespace

GeneratePanel::GeneratePanel(std::function<QString()> model_path, std::shared_ptr<RunsStore> store,
                             QWidget* parent)
    : QWidget(parent),
      m_model_path(std::move(model_path)),
      m_model(new GenerateModel(std::move(store), this)) {
  connect(m_model, &GenerateModel::run_saved, this, &GeneratePanel::run_saved);
  m_prompt = new QPlainTextEdit(QString::fromUtf8(kDefaultPrompt), this);
  m_prompt->setToolTip(tr("The prompt the model continues greedily, once per cache"));
  m_prompt->setMaximumHeight(52);
  m_tokens = new QSpinBox(this);
  m_tokens->setRange(1, 4096);
  m_tokens->setValue(48);
  m_tokens->setToolTip(tr("Tokens each cache generates after the prompt"));
  m_batch = new QSpinBox(this);
  m_batch->setRange(0, 1 << 16);
  m_batch->setSingleStep(128);
  m_batch->setSpecialValueText(tr("whole"));
  m_batch->setValue(0);
  m_batch->setToolTip(
      tr("Prompt tokens per forward pass, as llama.cpp's micro-batches (kvlab generate --batch): "
         "a long prompt's activations stay a batch's size and each later batch attends over the "
         "cache as stored; per-tensor scales and KVComp's codebooks then come from the first "
         "batch. \"whole\": the prompt in one pass, as the methods' papers run it"));
  // Where decode steps attend: the GPU only where one is usable (kvlab generate --backend auto).
  m_backend = new QComboBox(this);
  m_backend->addItem(tr("CPU"), QStringLiteral("cpu"));
  m_backend->addItem(tr("GPU"), QStringLiteral("auto"));  // where it can: auto
  auto gpu = make_backend("cuda");
  const QString gpu_note =
      gpu ? tr("GPU: each decode step of an fp16, FP8 E4M3, q8_0, q4_0 or NVFP4 cache "
               "attends on %1, over a copy of the stored rows the cache hands it as it writes "
               "them; the other caches, the model's layers and the prompt stay on the CPU")
                .arg(QString::fromStdString((*gpu)->device_name()))
          : tr("GPU: not available here (%1)").arg(QString::fromStdString(gpu.message()));
  if (!gpu) {
    if (auto* item = qobject_cast<QStandardItemModel*>(m_backend->model())->item(1)) {
      item->setEnabled(false);
    }
  }
  m_backend->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_backend->setToolTip(tr("Where each decode step's attention runs (kvlab generate --backend). ") +
                        gpu_note);
  m_methods = new QListWidget(this);
  m_methods->setFlow(QListView::LeftToRight);
  m_methods->setWrapping(true);
  m_methods->setMaximumHeight(50);
  m_methods->setToolTip(
      tr("The caches to generate with besides fp16, each stored as its reference engine stores "
         "it (kvlab generate --method M)"));
  for (const GenerateChoice& c : generate_choices()) {
    auto* item = new QListWidgetItem(c.name, m_methods);
    item->setFlags(Qt::ItemIsUserCheckable | Qt::ItemIsEnabled);
    item->setToolTip(
        tr("%1, stored as its reference engine keeps a cache it appends to: %2")
            .arg(c.name, QString::fromUtf8(
                             method_reference(c.config.kind).data(),
                             static_cast<qsizetype>(method_reference(c.config.kind).size()))));
    const bool on = c.name == "q4_0" || c.name == "kivi-2" || c.name == "kvcomp + huffman";
    item->setCheckState(on ? Qt::Checked : Qt::Unchecked);
  }
  m_generate = new QPushButton(tr("Generate"), this);
  m_generate->setToolTip(tr("Run the prompt with fp16 and then each checked cache"));
  m_cancel = new QPushButton(tr("Cancel"), this);
  m_cancel->setEnabled(false);
  m_cancel->setToolTip(tr("Stop the generation; the caches finished so far stay shown"));
  m_progress = new QProgressBar(this);
  m_progress->setRange(0, 100);
  m_progress->setTextVisible(true);
  m_error = new QLabel(this);
  m_error->setWordWrap(true);
  m_error->setStyleSheet(QStringLiteral("color: #b02020"));
  m_error->hide();

  m_chart = new QCustomPlot(this);
  add_title(m_chart, tr("Cache memory as it grows"));
  m_chart->xAxis->setLabel(tr("tokens in the cache"));
  m_chart->yAxis->setLabel(tr("MiB held (all layers, K and V)"));
  m_chart->legend->setVisible(true);
  m_chart->setMinimumSize(320, 260);
  add_legend_row(m_chart, m_chart->legend, m_chart->plotLayout()->rowCount());
  m_chart->legend->setWrap(3);
  style_plot(m_chart);
  m_summary = new QLabel(this);
  m_summary->setWordWrap(true);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  QFont small = m_summary->font();
  small.setPointSizeF(small.pointSizeF() * 0.9);
  m_summary->setFont(small);
  m_texts = new QTextBrowser(this);
  m_texts->setToolTip(tr("Each cache's text; red from the token where it departs from fp16's"));

  auto* controls = new QHBoxLayout;
  auto* tokens_label = new QLabel(tr("Tokens"), this);
  tokens_label->setBuddy(m_tokens);
  tokens_label->setToolTip(m_tokens->toolTip());
  controls->addWidget(tokens_label);
  controls->addWidget(m_tokens);
  auto* batch_label = new QLabel(tr("Batch"), this);
  batch_label->setBuddy(m_batch);
  batch_label->setToolTip(m_batch->toolTip());
  controls->addWidget(batch_label);
  controls->addWidget(m_batch);
  controls->addStretch(1);
  controls->addWidget(m_generate);
  controls->addWidget(m_cancel);
  auto* results = new QSplitter(Qt::Horizontal, this);
  results->addWidget(m_chart);
  results->addWidget(m_texts);
  results->setStretchFactor(0, 3);
  results->setStretchFactor(1, 2);
  results->setSizes({420, 260});
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  layout->addWidget(m_prompt);
  layout->addLayout(controls);
  // Where decode steps attend and the caches on a row of their own, so that neither row needs
  // more than a laptop window's width.
  auto* caches = new QHBoxLayout;
  auto* backend_label = new QLabel(tr("Attend on"), this);
  backend_label->setBuddy(m_backend);
  backend_label->setToolTip(m_backend->toolTip());
  caches->addWidget(backend_label);
  caches->addWidget(m_backend);
  caches->addWidget(m_methods, 1);
  layout->addLayout(caches);
  layout->addWidget(m_progress);
  layout->addWidget(m_error);
  layout->addWidget(results, 1);
  layout->addWidget(m_summary);

  const std::pair<QWidget*, const char*> names[] = {
      {m_prompt, "prompt"},   {m_tokens, "tokens"},     {m_batch, "batch"},
      {m_backend, "backend"}, {m_methods, "methods"},   {m_generate, "generate"},
      {m_cancel, "cancel"},   {m_progress, "progress"}, {m_chart, "chart"},
      {m_summary, "summary"}, {m_texts, "texts"},       {m_error, "error"}};
  for (const auto& [part, name] : names) part->setObjectName(QLatin1String(name));

  connect(m_generate, &QPushButton::clicked, this, [this] { generate(); });
  connect(m_cancel, &QPushButton::clicked, m_model, &GenerateModel::cancel);
  connect(m_model->runner(), &GenerateRunner::progress, this,
          [this](int percent, const QString& stage) {
            m_progress->setValue(percent);
            m_progress->setFormat(QStringLiteral("%p% ") + stage);
          });
  connect(m_model, &GenerateModel::changed, this, &GeneratePanel::redraw);
  connect(m_model, &GenerateModel::finished, this, [this] {
    m_generate->setEnabled(true);
    m_cancel->setEnabled(false);
    m_cancel->setToolTip(tr("Stop the generation; the caches finished so far stay shown"));
    if (m_model->error().isEmpty()) {
      m_progress->setValue(100);
      m_progress->setFormat(tr("done"));
      emit status_message(tr("Generated with %1 caches").arg(m_model->series().size()), 5000);
    }
  });
  redraw();
}

void GeneratePanel::set_prompt(const QString& text) {
  m_prompt->setPlainText(text);
}

void GeneratePanel::set_tokens(int tokens) {
  m_tokens->setValue(tokens);
}

void GeneratePanel::set_batch(int tokens) {
  m_batch->setValue(tokens);
}

void GeneratePanel::set_checked(const QStringList& names) {
  for (int i = 0; i < m_methods->count(); ++i) {
    QListWidgetItem* item = m_methods->item(i);
    item->setCheckState(names.contains(item->text()) ? Qt::Checked : Qt::Unchecked);
  }
}

bool GeneratePanel::generate() {
  GenerateJob job;
  job.model = m_model_path().toStdString();
  job.prompt = m_prompt->toPlainText().toStdString();
  job.tokens = m_tokens->value();
  job.batch = m_batch->value();
  job.backend = m_backend->currentData().toString().toStdString();
  const std::vector<GenerateChoice> choices = generate_choices();
  for (int i = 0; i < m_methods->count(); ++i) {
    if (m_methods->item(i)->checkState() == Qt::Checked) job.methods.push_back(choices[i]);
  }
  QString error;
  if (!m_model->start(job, &error)) {
    m_error->setText(error);
    m_error->show();
    return false;
  }
  m_error->hide();
  m_generate->setEnabled(false);
  m_cancel->setEnabled(true);
  m_progress->setValue(0);
  return true;
}

bool GeneratePanel::wait_until_done(int timeout_ms) {
  return m_model->wait_until_done(timeout_ms);
}

void GeneratePanel::redraw() {
  const std::vector<GenerateSeries>& series = m_model->series();
  m_chart->clearGraphs();
  double top = 0, right = 0;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const GenerateSeries& s = series[i];
    QCPGraph* g = m_chart->addGraph();
    g->setName(s.name);
    g->setObjectName(QStringLiteral("cache_line"));
    QPen pen(i == 0 ? QColor(30, 30, 30) : palette::series(i - 1), 2);
    if (i == 0) pen.setStyle(Qt::DashLine);
    g->setPen(pen);
    g->setData(QVector<double>(s.tokens.begin(), s.tokens.end()),
               QVector<double>(s.mib.begin(), s.mib.end()), true);
    for (double y : s.mib) top = std::max(top, y);
    for (double x : s.tokens) right = std::max(right, x);
  }
  m_chart->xAxis->setRange(0, std::max(right * 1.02, 1.0));
  m_chart->yAxis->setRange(0, std::max(top * 1.1, 0.01));
  m_chart->replot();

  QString html;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const GenerateSeries& s = series[i];
    html += QStringLiteral("<p><b>%1</b>").arg(s.name.toHtmlEscaped());
    if (i > 0 && s.agree >= 0 && s.agree < static_cast<int>(s.ids.size())) {
      html += tr(" (departs at token %1)").arg(s.agree + 1);
    }
    html += QStringLiteral(": ");
    for (int t = 0; t < static_cast<int>(s.pieces.size()); ++t) {
      const QString piece = s.pieces[t].toHtmlEscaped();
      const bool departed = i > 0 && s.agree >= 0 && t >= s.agree;
      html +=
          departed ? QStringLiteral("<span style=\"color:#c03030\">%1</span>").arg(piece) : piece;
    }
    html += QStringLiteral("</p>");
  }
  m_texts->setHtml(html);
  m_summary->setText(m_model->summary().join(QLatin1Char('\n')));
  if (!m_model->error().isEmpty()) {
    m_error->setText(m_model->error());
    m_error->show();
  }
}

}  // namespace kvlab::gui
