#include "learn/learn_planner_page.h"

#include <qcustomplot.h>

#include <algorithm>

#include <QComboBox>
#include <QFormLayout>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSpinBox>
#include <QTableWidget>

#include "common/chart_style.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/number_fields.h"

namespace kvlab::gui {
namespace {

constexpr const char* kSchemes[] = {"fp16", "fp8", "int8", "int4", "kivi4", "kivi2"};
const QColor kWeights{120, 120, 120};
const QColor kReserve{230, 170, 60};
const QColor kKv{52, 101, 164};
const QColor kKvOver{200, 55, 55};
const QColor kFree{200, 225, 200};
constexpr double kGiB = 1024.0 * 1024 * 1024;

QString explanation() {
  return QObject::tr(
      "<p>A GPU serving a model holds three things: the <b>weights</b> (parameters × bytes "
      "each), some <b>reserve</b> for activations and the runtime, and the <b>KV cache</b> of "
      "every sequence in the batch. Only what is left after weights and reserve, out of the "
      "share of memory the server may use (90 % here), is for KV.</p>"
      "<p>Serving engines such as vLLM allocate the cache in fixed pages (16 tokens here) "
      "instead of one slab per sequence at its longest, so memory is wasted only in each "
      "sequence's last page (PagedAttention). Pick a model and a GPU: the page answers whether "
      "the batch fits, and the largest batch and context that would.</p>");
}

QLabel* stat_label() {
  auto* l = new QLabel;
  l->setTextFormat(Qt::RichText);
  l->setAlignment(Qt::AlignCenter);
  l->setFrameShape(QFrame::StyledPanel);
  l->setMinimumHeight(70);
  return l;
}

QString thousands(qlonglong n) {
  return QLocale().toString(n);
}

}  // namespace

LearnPlannerPage::LearnPlannerPage(QWidget* parent)
    : LearnPage(tr("What fits on my GPU?"), explanation(),
                QStringLiteral("Kwon et al., \"Efficient Memory Management for Large Language "
                               "Model Serving with PagedAttention\", SOSP 2023 (arXiv:2309.06180)"),
                tr("Open in the Planner view"), parent),
      m_models(planners::builtin_models()),
      m_gpus(planners::builtin_gpus()) {
  full_view_button()->setToolTip(
      tr("Open the Planner view with this model, GPU, context, batch and KV storage, to add "
         "parallelism, more schemes and throughput"));
  m_model = new QComboBox;
  for (const auto& m : m_models) {
    m_model->addItem(QString::fromStdString(m.name), QString::fromStdString(m.id));
  }
  m_model->setToolTip(
      tr("The model (planner catalogue): its parameters decide the weights, "
         "its layers × KV heads × head_dim the KV bytes per token"));
  m_gpu = new QComboBox;
  for (const auto& g : m_gpus) {
    m_gpu->addItem(QString::fromStdString(g.name), QString::fromStdString(g.id));
  }
  m_gpu->setToolTip(tr("One GPU (planner catalogue) and its memory as the driver reports it"));
  m_scheme = new QComboBox;
  for (const char* id : kSchemes) {
    m_scheme->addItem(QString::fromStdString(planners::parse_scheme(id).value().label),
                      QString::fromLatin1(id));
  }
  m_scheme->setToolTip(
      tr("How the KV cache is stored: fp16, or a compressed scheme (bytes "
         "counted as the planner counts them, scales and fp16 windows included)"));
  m_context = new IntField;
  m_context->setRange(1, 1 << 22);
  m_context->setValue(8192);
  m_context->setSuffix(tr(" tokens"));
  m_context->setToolTip(
      tr("Tokens per sequence (prompt + generated), at most the model's "
         "context length"));
  m_batch = new IntField;
  m_batch->setRange(1, 1000000);
  m_batch->setValue(32);
  m_batch->setToolTip(tr("Sequences served at once, each with its own KV cache"));
  for (auto* s : {m_context, m_batch}) s->setKeyboardTracking(false);

  auto* form = new QFormLayout;
  add_form_row(form, tr("Model"), m_model);
  add_form_row(form, tr("GPU"), m_gpu);
  add_form_row(form, tr("KV stored as"), m_scheme);
  add_form_row(form, tr("Context"), m_context);
  add_form_row(form, tr("Batch"), m_batch);
  auto* assumptions =
      new QLabel(tr("One GPU, 90 % of its memory for the server, 1 GiB reserve, "
                    "KV pages of 16 tokens, the model's own weights dtype."));
  assumptions->setWordWrap(true);
  assumptions->setToolTip(tr("The Planner view's defaults; change them there"));
  m_error = new QLabel;
  m_error->setWordWrap(true);
  style::make_error_text(m_error);
  auto* controls = new QVBoxLayout;
  controls->addLayout(form);
  controls->addWidget(assumptions);
  controls->addWidget(m_error);
  controls->addStretch(1);
  auto* controls_box = new QWidget;
  controls_box->setLayout(controls);
  controls_box->setFixedWidth(320);

  m_answer = new QLabel;
  QFont big = m_answer->font();
  big.setPointSize(big.pointSize() + 14);
  big.setBold(true);
  m_answer->setFont(big);
  m_answer->setToolTip(
      tr("Does weights + reserve + the batch's KV cache fit in the usable "
         "memory? (planners' plan())"));
  m_detail = new QLabel;
  m_detail->setWordWrap(true);
  m_detail->setTextFormat(Qt::RichText);
  m_detail->setToolTip(tr("The sum behind the answer"));
  m_max_batch = stat_label();
  m_max_batch->setToolTip(
      tr("The most sequences of this context whose KV fits beside the "
         "weights (planners' solver)"));
  m_max_context = stat_label();
  m_max_context->setToolTip(
      tr("The longest context that fits for this batch, capped at the "
         "model's own context length (planners' solver)"));
  auto* stats = new QHBoxLayout;
  stats->addWidget(m_max_batch, 1);
  stats->addWidget(m_max_context, 1);

  m_chart = new QCustomPlot;
  style_plot(m_chart);
  m_chart->setMinimumHeight(170);
  m_chart->setMaximumHeight(230);
  add_title(m_chart, tr("One GPU's memory"));
  add_legend_row(m_chart, m_chart->legend, 2);
  m_chart->legend->setWrap(3);  // two short lines fit a laptop window
  m_chart->setToolTip(
      tr("Weights, reserve, the batch's KV cache (red where it does not fit) "
         "and what is left, against the usable memory (dashed)"));

  m_schemes_table = new QTableWidget(static_cast<int>(std::size(kSchemes)), 5);
  m_schemes_table->setHorizontalHeaderLabels({tr("KV stored as"), tr("KV of the batch"), tr("fits"),
                                              tr("largest batch"), tr("longest context")});
  const QString tips[] = {
      tr("The KV storage scheme of the row (the current one in bold)"),
      tr("KV bytes of the whole batch at this context on the GPU, pages included"),
      tr("Whether weights + reserve + this KV fit in the usable memory"),
      tr("The most sequences of this context that fit with this storage"),
      tr("The longest context that fits for this batch with this storage (capped at the model's "
         "context length)")};
  for (int c = 0; c < 5; ++c) m_schemes_table->horizontalHeaderItem(c)->setToolTip(tips[c]);
  m_schemes_table->verticalHeader()->setVisible(false);
  m_schemes_table->verticalHeader()->setDefaultSectionSize(24);
  m_schemes_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_schemes_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_schemes_table->setSelectionMode(QAbstractItemView::NoSelection);
  m_schemes_table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_schemes_table->setFixedHeight(m_schemes_table->horizontalHeader()->sizeHint().height() +
                                  m_schemes_table->rowCount() * 24 + 4);
  m_schemes_table->setToolTip(
      tr("The same model, GPU, context and batch with each way of "
         "storing the KV cache (planners' plan() per scheme)"));

  auto* right = new QVBoxLayout;
  right->addWidget(m_answer);
  right->addWidget(m_detail);
  right->addWidget(m_chart);
  right->addLayout(stats);
  right->addWidget(m_schemes_table);
  right->addStretch(1);
  auto* row = new QHBoxLayout;
  row->addWidget(controls_box);
  row->addLayout(right, 1);
  body()->addLayout(row, 1);

  set_model(QStringLiteral("llama-3-8b"));
  set_gpu(QStringLiteral("h100-sxm"));
  for (auto* c : {m_model, m_gpu, m_scheme}) {
    connect(c, &QComboBox::currentIndexChanged, this, &LearnPlannerPage::recompute);
  }
  for (auto* s : {m_context, m_batch}) {
    connect(s, &QSpinBox::valueChanged, this, &LearnPlannerPage::recompute);
  }
  recompute();
}

void LearnPlannerPage::set_model(const QString& id) {
  const int i = m_model->findData(id);
  if (i >= 0) m_model->setCurrentIndex(i);
}
void LearnPlannerPage::set_gpu(const QString& id) {
  const int i = m_gpu->findData(id);
  if (i >= 0) m_gpu->setCurrentIndex(i);
}
void LearnPlannerPage::set_scheme(const QString& id) {
  const int i = m_scheme->findData(id);
  if (i >= 0) m_scheme->setCurrentIndex(i);
}
void LearnPlannerPage::set_context(int tokens) {
  m_context->setValue(tokens);
}
void LearnPlannerPage::set_batch(int batch) {
  m_batch->setValue(batch);
}

QString LearnPlannerPage::error_text() const {
  return m_error->text();
}

planners::Scenario LearnPlannerPage::scenario() const {
  planners::Scenario s;
  s.model = m_models[static_cast<std::size_t>(std::max(0, m_model->currentIndex()))];
  s.gpu = m_gpus[static_cast<std::size_t>(std::max(0, m_gpu->currentIndex()))];
  s.scheme = planners::parse_scheme(m_scheme->currentData().toString().toStdString()).value();
  s.context = m_context->value();
  s.batch = m_batch->value();
  return s;
}

void LearnPlannerPage::recompute() {
  const planners::ModelSpec& model =
      m_models[static_cast<std::size_t>(std::max(0, m_model->currentIndex()))];
  if (model.max_context > 0 && m_context->maximum() != model.max_context) {
    const QSignalBlocker block(m_context);
    m_context->setMaximum(model.max_context);  // clamps the value too
  }
  const planners::Scenario s = scenario();
  auto r = planners::plan(s);
  m_result.reset();
  if (!r) {
    m_error->setText(QString::fromStdString(r.message()));
    m_answer->setText(tr("—"));
    m_detail->clear();
    m_max_batch->clear();
    m_max_context->clear();
    m_schemes_table->clearContents();
    draw_chart();
    return;
  }
  m_error->clear();
  m_result = *r;
  const planners::PlanResult& p = *m_result;
  m_answer->setText(p.fits ? tr("✔ Fits") : tr("✘ Does not fit"));
  m_answer->setStyleSheet(
      QStringLiteral("color: %1;").arg((p.fits ? style::kFits : style::kDoesNotFit).name()));
  const double used = static_cast<double>(p.weights_bytes_per_gpu + p.reserve_bytes) +
                      static_cast<double>(p.kv_bytes_batch_per_gpu);
  QString sum =
      tr("%1 weights + %2 reserve + %3 KV (%4 × %5 tokens in %6) = <b>%7</b> of <b>%8</b> usable "
         "(%9 % of the GPU's %10).")
          .arg(format_byte_count(static_cast<double>(p.weights_bytes_per_gpu)),
               format_byte_count(static_cast<double>(p.reserve_bytes)),
               format_byte_count(static_cast<double>(p.kv_bytes_batch_per_gpu)), thousands(s.batch),
               thousands(s.context), QString::fromStdString(s.scheme.label),
               format_byte_count(used), format_byte_count(static_cast<double>(p.usable_bytes)))
          .arg(s.deployment.gpu_memory_utilization * 100, 0, 'f', 0)
          .arg(format_byte_count(static_cast<double>(p.gpu_bytes)));
  if (p.weights_bytes_per_gpu + p.reserve_bytes > p.usable_bytes) {
    sum +=
        tr(" The weights alone leave no room for any KV cache: this model needs more GPUs "
           "(tensor or pipeline parallelism, in the Planner view).");
  }
  m_detail->setText(sum);
  m_max_batch->setText(tr("Largest batch at %1 tokens<br><span style='font-size:20pt'><b>%2</b>"
                          "</span>")
                           .arg(thousands(s.context), thousands(p.max_batch)));
  const bool capped = p.max_context >= s.model.max_context;
  m_max_context->setText(
      tr("Longest context at batch %1<br><span style='font-size:20pt'><b>%2</b></span> "
         "tokens%3")
          .arg(thousands(s.batch), thousands(p.max_context),
               capped ? tr(" (the model's limit)") : QString()));
  fill_schemes_table(s);
  draw_chart();
}

void LearnPlannerPage::fill_schemes_table(const planners::Scenario& s) {
  for (int row = 0; row < static_cast<int>(std::size(kSchemes)); ++row) {
    planners::Scenario other = s;
    other.scheme = planners::parse_scheme(kSchemes[row]).value();
    const auto r = planners::plan(other);
    const QStringList cells =
        r ? QStringList{QString::fromStdString(other.scheme.label),
                        format_byte_count(static_cast<double>(r->kv_bytes_batch_per_gpu)),
                        r->fits ? tr("yes") : tr("no"), thousands(r->max_batch),
                        thousands(r->max_context)}
          : QStringList{QString::fromStdString(other.scheme.label),
                        QString::fromStdString(r.message())};
    for (int c = 0; c < m_schemes_table->columnCount(); ++c) {
      auto* item = new QTableWidgetItem(c < cells.size() ? cells[c] : QString());
      item->setTextAlignment(Qt::AlignCenter);
      if (other.scheme.id == s.scheme.id) {
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      if (c == 2 && r) item->setForeground(r->fits ? style::kFits : style::kDoesNotFit);
      m_schemes_table->setItem(row, c, item);
    }
  }
}

void LearnPlannerPage::draw_chart() {
  QCustomPlot* plot = m_chart;
  plot->clearPlottables();
  plot->clearItems();
  if (!m_result) {
    plot->replot();
    return;
  }
  const planners::PlanResult& r = *m_result;
  QCPBars* below = nullptr;
  const double used =
      static_cast<double>(r.weights_bytes_per_gpu + r.reserve_bytes + r.kv_bytes_batch_per_gpu);
  const struct {
    QString name;
    double bytes;
    QColor color;
  } parts[] = {
      {tr("weights"), static_cast<double>(r.weights_bytes_per_gpu), kWeights},
      {tr("reserve"), static_cast<double>(r.reserve_bytes), kReserve},
      {r.fits ? tr("KV cache") : tr("KV cache (does not fit)"),
       static_cast<double>(r.kv_bytes_batch_per_gpu), r.fits ? kKv : kKvOver},
      {tr("free"), std::max(0.0, static_cast<double>(r.usable_bytes) - used), kFree},
  };
  for (const auto& part : parts) {
    auto* bars = new QCPBars(plot->yAxis, plot->xAxis);  // horizontal: keys on the y-axis
    bars->setName(tr("%1 %2").arg(part.name, format_byte_count(part.bytes)));
    bars->setBrush(part.color);
    bars->setPen(QPen(part.color.darker(130)));
    bars->setWidth(0.5);
    if (below) bars->moveAbove(below);
    bars->addData(0, part.bytes / kGiB);
    below = bars;
  }
  const double usable = static_cast<double>(r.usable_bytes) / kGiB;
  auto* line = new QCPItemStraightLine(plot);
  line->point1->setCoords(usable, 0);
  line->point2->setCoords(usable, 1);
  line->setPen(QPen(Qt::black, 1.5, Qt::DashLine));
  auto* label = new QCPItemText(plot);
  label->position->setCoords(usable, 0.3);
  label->setPositionAlignment(Qt::AlignRight | Qt::AlignBottom);
  label->setPadding(QMargins(0, 0, 6, 0));
  label->setText(tr("usable %1").arg(format_byte_count(static_cast<double>(r.usable_bytes))));
  const double total = static_cast<double>(r.gpu_bytes) / kGiB;
  auto* gpu_line = new QCPItemStraightLine(plot);
  gpu_line->point1->setCoords(total, 0);
  gpu_line->point2->setCoords(total, 1);
  gpu_line->setPen(QPen(QColor(90, 90, 90), 1.5));
  auto* gpu_label = new QCPItemText(plot);
  gpu_label->position->setCoords(total, -0.3);
  gpu_label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
  gpu_label->setPadding(QMargins(0, 0, 6, 0));
  gpu_label->setText(tr("GPU %1").arg(format_byte_count(static_cast<double>(r.gpu_bytes))));
  plot->yAxis->setTicker(QSharedPointer<QCPAxisTickerText>(new QCPAxisTickerText));
  plot->yAxis->setTickLabels(false);
  plot->yAxis->setRange(-0.5, 0.5);
  plot->xAxis->setLabel(tr("GiB"));
  plot->xAxis->setRange(0, std::max(used, static_cast<double>(r.gpu_bytes)) / kGiB * 1.04);
  plot->replot();
}

LearnLink LearnPlannerPage::link() const {
  const planners::Scenario s = scenario();
  LearnLink link;
  link.target = LearnLink::Target::Planner;
  link.planner =
      nlohmann::json{{"model", planners::model_to_json(s.model)},
                     {"gpu", planners::gpu_to_json(s.gpu)},
                     {"context", s.context},
                     {"batch", s.batch},
                     {"schemes", {s.scheme.id}},
                     {"evict", "none"},
                     {"tp", s.deployment.tp},
                     {"pp", s.deployment.pp},
                     {"util", s.deployment.gpu_memory_utilization},
                     {"reserve_gib", static_cast<double>(s.deployment.reserve_bytes) / kGiB},
                     {"page_tokens", s.deployment.page_tokens},
                     {"efficiency", s.bandwidth_efficiency}};
  return link;
}

}  // namespace kvlab::gui
