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

const QColor kWeights{120, 120, 120};
const QColor kReserve{230, 170, 60};
const QColor kKv{52, 101, 164};
const QColor kKvOver{200, 55, 55};
const QColor kFree{200, 225, 200};
constexpr double kGiB = 1024.0 * 1024 * 1024;

QString planner_explanation() {
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

}  // namespace

LearnPlannerPage::LearnPlannerPage(QWidget* parent)
    : LearnPage(tr("What fits on my GPU?"), planner_explanation(),
                QStringLiteral("Kwon et al., \"Efficient Memory Management for Large Language "
                               "Model Serving with PagedAttention\", SOSP 2023 (arXiv:2309.06180)"),
                tr("Open in the Planner view"), parent) {
  full_view_button()->setToolTip(
      tr("Open the Planner view with this model, GPU, context, batch and KV storage, to add "
         "parallelism, more schemes and throughput"));
  m_model_combo = catalog_combo(m_model.models());
  m_model_combo->setToolTip(
      tr("The model (planner catalogue): its parameters decide the weights, "
         "its layers × KV heads × head_dim the KV bytes per token"));
  m_gpu = catalog_combo(m_model.gpus());
  m_gpu->setToolTip(tr("One GPU (planner catalogue) and its memory as the driver reports it"));
  m_scheme = scheme_combo(LearnFitModel::scheme_ids());
  m_scheme->setToolTip(
      tr("How the KV cache is stored: fp16, or a compressed scheme (bytes "
         "counted as the planner counts them, scales and fp16 windows included)"));
  m_context = new IntField;
  m_context->setRange(1, 1 << 22);
  m_context->setValue(static_cast<int>(m_model.scenario().context));
  m_context->setSuffix(tr(" tokens"));
  m_context->setToolTip(
      tr("Tokens per sequence (prompt + generated), at most the model's "
         "context length"));
  m_batch = new IntField;
  m_batch->setRange(1, 1000000);
  m_batch->setValue(static_cast<int>(m_model.scenario().batch));
  m_batch->setToolTip(tr("Sequences served at once, each with its own KV cache"));
  for (auto* s : {m_context, m_batch}) s->setKeyboardTracking(false);

  auto* form = new QFormLayout;
  add_form_row(form, tr("Model"), m_model_combo);
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

  m_schemes_table = new QTableWidget(static_cast<int>(LearnFitModel::scheme_ids().size()), 5);
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

  m_model_combo->setCurrentIndex(m_model.model_index());
  m_gpu->setCurrentIndex(m_model.gpu_index());
  for (auto* c : {m_model_combo, m_gpu, m_scheme}) {
    connect(c, &QComboBox::currentIndexChanged, this, &LearnPlannerPage::recompute);
  }
  for (auto* s : {m_context, m_batch}) {
    connect(s, &QSpinBox::valueChanged, this, &LearnPlannerPage::recompute);
  }
  recompute();
}

void LearnPlannerPage::set_model(const QString& id) {
  const int i = m_model_combo->findData(id);
  if (i >= 0) m_model_combo->setCurrentIndex(i);
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

void LearnPlannerPage::recompute() {
  m_model.set_model(m_model_combo->currentIndex());
  m_model.set_gpu(m_gpu->currentIndex());
  m_model.set_scheme(m_scheme->currentData().toString().toStdString());
  const int limit = m_model.scenario().model.max_context;
  if (limit > 0 && m_context->maximum() != limit) {
    const QSignalBlocker block(m_context);
    m_context->setMaximum(limit);  // clamps the value too
  }
  m_model.set_context(m_context->value());
  m_model.set_batch(m_batch->value());
  m_error->setText(m_model.error_text());
  m_answer->setText(m_model.answer());
  if (const auto& r = m_model.result()) {
    m_answer->setStyleSheet(
        QStringLiteral("color: %1;").arg((r->fits ? style::kFits : style::kDoesNotFit).name()));
  }
  m_detail->setText(m_model.detail());
  m_max_batch->setText(m_model.max_batch_text());
  m_max_context->setText(m_model.max_context_text());
  fill_schemes_table();
  draw_chart();
}

void LearnPlannerPage::fill_schemes_table() {
  if (!m_model.result()) {
    m_schemes_table->clearContents();
    return;
  }
  const auto rows = m_model.scheme_rows();
  for (int row = 0; row < static_cast<int>(rows.size()); ++row) {
    const LearnFitModel::SchemeRow& r = rows[static_cast<std::size_t>(row)];
    for (int c = 0; c < m_schemes_table->columnCount(); ++c) {
      auto* item = new QTableWidgetItem(c < r.cells.size() ? r.cells[c] : QString());
      item->setTextAlignment(Qt::AlignCenter);
      if (r.current) {
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      if (c == 2 && r.fits) item->setForeground(*r.fits ? style::kFits : style::kDoesNotFit);
      m_schemes_table->setItem(row, c, item);
    }
  }
}

void LearnPlannerPage::draw_chart() {
  QCustomPlot* plot = m_chart;
  plot->clearPlottables();
  plot->clearItems();
  if (!m_model.result()) {
    plot->replot();
    return;
  }
  const planners::PlanResult& r = *m_model.result();
  const double used =
      static_cast<double>(r.weights_bytes_per_gpu + r.reserve_bytes + r.kv_bytes_batch_per_gpu);
  const auto color = [](LearnFitModel::Part::Kind kind) {
    switch (kind) {
      case LearnFitModel::Part::Kind::Weights:
        return kWeights;
      case LearnFitModel::Part::Kind::Reserve:
        return kReserve;
      case LearnFitModel::Part::Kind::Kv:
        return kKv;
      case LearnFitModel::Part::Kind::KvOver:
        return kKvOver;
      case LearnFitModel::Part::Kind::Free:
        break;
    }
    return kFree;
  };
  QCPBars* below = nullptr;
  for (const auto& part : m_model.memory_parts()) {
    auto* bars = new QCPBars(plot->yAxis, plot->xAxis);  // horizontal: keys on the y-axis
    bars->setName(tr("%1 %2").arg(part.name, format_byte_count(part.bytes)));
    bars->setBrush(color(part.kind));
    bars->setPen(QPen(color(part.kind).darker(130)));
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

}  // namespace kvlab::gui
