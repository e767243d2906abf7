// The Planner page (see planner_view.h): its controls, table, formula and charts over the page
// model.
#include "planner/planner_view.h"

#include <qcustomplot.h>
#include <cmath>
#include "planner/planner_chart_data.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>

#include "common/chart_style.h"
#include "common/explain.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/number_fields.h"
#include "planner/planner_advice_panel.h"
#include "planner/planner_frontier_chart.h"
#include "planner/planner_roofline_chart.h"
#include "planner/planner_table_model.h"

namespace kvlab::gui {
namespace {

constexpr const char* kEvictChoices[] = {"none", "50%", "25%", "10%"};

QSpinBox* spin(int lo, int hi, int value, const QString& suffix = {}) {
  auto* s = new IntField;
  s->setRange(lo, hi);
  s->setValue(value);
  s->setSuffix(suffix);
  s->setKeyboardTracking(false);
  return s;
}

QDoubleSpinBox* dspin(double lo, double hi, double value, double step, int decimals) {
  auto* s = new RealField;
  s->setRange(lo, hi);
  s->setValue(value);
  s->setSingleStep(step);
  s->setDecimals(decimals);
  s->setKeyboardTracking(false);
  return s;
}

QDoubleSpinBox* target_spin(const QString& tip) {
  auto* s = new RealField;
  s->setRange(0, 1e6);
  s->setDecimals(0);
  s->setSingleStep(10);
  s->setValue(0);
  s->setSuffix(QObject::tr(" ms"));
  s->setSpecialValueText(QObject::tr("none"));
  s->setKeyboardTracking(false);
  s->setToolTip(tip);
  return s;
}

const QColor kWeights{120, 120, 120};
const QColor kKv{52, 101, 164};
const QColor kKvOver{200, 55, 55};
const QColor kReserve{230, 170, 60};
const QColor kFree{200, 225, 200};

QCPBars* stacked(QCustomPlot* plot, const QString& name, const QColor& color, QCPBars* below) {
  auto* b = new QCPBars(plot->xAxis, plot->yAxis);
  b->setName(name);
  b->setBrush(color);
  b->setPen(QPen(color.darker(130)));
  b->setWidth(0.6);
  if (below) b->moveAbove(below);
  return b;
}

}  // namespace

PlannerView::PlannerView(std::shared_ptr<RunsStore> store, QWidget* parent) : QWidget(parent) {
  m_plan = new PlannerModel(std::move(store), this);
  m_model = new QComboBox;
  m_gpu = new QComboBox;
  m_context = spin(1, 1 << 22, 8192, tr(" tokens"));
  m_batch = spin(1, 1000000, 64);
  m_tp = spin(1, 64, 1);
  m_pp = spin(1, 64, 1);
  m_page = spin(1, 4096, 16, tr(" tokens"));
  m_util = dspin(0.05, 1.0, 0.9, 0.05, 2);
  m_reserve = dspin(0, 64, 1.0, 0.5, 1);
  m_reserve->setSuffix(tr(" GiB"));
  m_efficiency = dspin(0.05, 1.0, 0.8, 0.05, 2);
  m_compute_efficiency = dspin(0.05, 1.0, 0.6, 0.05, 2);
  m_evict = new QComboBox;
  for (const char* e : kEvictChoices) m_evict->addItem(QString::fromLatin1(e));
  m_scheme_list = new QListWidget;
  m_scheme_list->setMaximumHeight(120);

  auto* import = new QPushButton(tr("Import config.json or GGUF…"));
  auto* add_gpu_button = new QPushButton(tr("Add GPU…"));
  auto* save_button = new QPushButton(tr("Save scenario"));
  auto* pin_button = new QPushButton(tr("Pin to compare"));
  m_model->setToolTip(
      tr("The model whose KV cache and weights are sized: layers, KV heads, head_dim, sliding "
         "window, MLA latent and weights from the catalogue, an imported config.json or a GGUF "
         "file"));
  import->setToolTip(
      tr("Add a model from a Hugging Face config.json (KV heads from num_key_value_heads, "
         "head_dim, sliding window, MLA) or a .gguf file (its shape, and its weights' bytes as "
         "stored); it is kept in the runs database"));
  m_gpu->setToolTip(tr("The GPU: its memory (as the driver reports it) and peak memory bandwidth"));
  add_gpu_button->setToolTip(
      tr("Add your own GPU: id, memory in GiB and bandwidth in GB/s; it is kept in the runs "
         "database"));
  m_context->setToolTip(
      tr("Tokens per sequence whose K and V are held (prompt and generated), at most the "
         "model's limit"));
  m_batch->setToolTip(tr("Sequences held at once: their KV is batch × KV per sequence"));
  m_scheme_list->setToolTip(
      tr("The storage schemes to compare, one table row and bar each; compression runs add "
         "their measured bits per value"));
  m_evict->setToolTip(
      tr("Cap every layer's tokens at this share of the context (an eviction budget), applied "
         "to every scheme"));
  m_tp->setToolTip(
      tr("Tensor parallelism: each GPU holds kv_heads ÷ TP KV heads (one, replicated, when TP > "
         "kv_heads; an MLA latent is not split) and 1 ÷ (TP × PP) of the weights"));
  m_pp->setToolTip(
      tr("Pipeline parallelism: the layers split into PP stages, the largest stage must fit one "
         "GPU, and a decode step passes through every stage in turn"));
  m_util->setToolTip(
      tr("Share of the GPU's memory the serving engine may use (as vLLM's "
         "gpu_memory_utilization)"));
  m_reserve->setToolTip(
      tr("Memory per GPU kept for activations, CUDA graphs and the runtime: not for the KV "
         "cache"));
  m_page->setToolTip(
      tr("KV is allocated in pages of this many tokens (vLLM's block size): each layer's tokens "
         "round up to whole pages"));
  m_efficiency->setToolTip(
      tr("Achieved ÷ peak memory bandwidth: every byte the latency model reads (weights, KV) "
         "moves at bandwidth × this"));
  m_compute_efficiency->setToolTip(
      tr("Achieved ÷ peak dense tensor throughput (model FLOPs utilisation): the matrix and "
         "attention FLOPs of prefill and decode run at the GPU's peak for the weights' dtype × "
         "this"));
  save_button->setToolTip(
      tr("Save the scenario and every scheme's results as a plan run; the Runs page reopens it"));
  pin_button->setToolTip(
      tr("Keep the current rows in the table (shaded) to compare with after changing the "
         "scenario"));

  auto* form = new QFormLayout;
  form->addRow(tr("Model"), m_model);
  form->addRow(QString(), import);
  form->addRow(tr("GPU"), m_gpu);
  form->addRow(QString(), add_gpu_button);
  form->addRow(tr("Context"), m_context);
  form->addRow(tr("Batch"), m_batch);
  form->addRow(tr("Schemes"), m_scheme_list);
  form->addRow(tr("Eviction budget"), m_evict);
  form->addRow(tr("Tensor parallel"), m_tp);
  form->addRow(tr("Pipeline parallel"), m_pp);
  form->addRow(tr("GPU memory use"), m_util);
  form->addRow(tr("Reserve per GPU"), m_reserve);
  form->addRow(tr("KV page"), m_page);
  form->addRow(tr("Bandwidth efficiency"), m_efficiency);
  form->addRow(tr("Compute efficiency"), m_compute_efficiency);
  style::share_with_captions(form);
  auto* controls = new QGroupBox(tr("Scenario"));
  auto* cl = new QVBoxLayout(controls);
  cl->addLayout(form);
  auto* buttons = new QHBoxLayout;  // side by side: the page fits a 700-pixel-high window
  buttons->addWidget(save_button);
  buttons->addWidget(pin_button);
  cl->addLayout(buttons);
  m_timing = new QLabel;
  m_timing->setObjectName(QStringLiteral("timing"));
  m_timing->setToolTip(
      tr("Time to recompute every scheme's plan, the table, the charts and the advice"));
  m_error = new QLabel;
  m_error->setWordWrap(true);
  style::make_error_text(m_error);
  cl->addWidget(m_error);
  cl->addWidget(m_timing);
  cl->addStretch(1);
  controls->setMaximumWidth(360);

  m_formula_scheme = new QComboBox;
  m_formula_scheme->setToolTip(tr("The scheme whose memory formula is written out below"));
  m_formula = new QPlainTextEdit;
  m_formula->setObjectName(QStringLiteral("formula"));
  m_formula->setToolTip(
      tr("The KV memory formula for the chosen scheme with the scenario's numbers substituted, "
         "one step per line"));
  m_formula->setReadOnly(true);
  m_formula->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_formula->setMaximumHeight(96);
  m_table = new QTableView;
  m_table->setModel(m_plan->table());
  // The scheme heads each row (the model's vertical header), so it stays in sight while the
  // table scrolls sideways to the capacity and memory columns; its own column is hidden.
  m_table->verticalHeader()->setVisible(true);
  m_table->verticalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->setColumnHidden(kPlannerScheme, true);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setMinimumHeight(122);  // the header and three rows, whatever the tabs below need
  m_memory_chart = new QCustomPlot;
  m_memory_chart->setObjectName(QStringLiteral("memory_chart"));
  m_context_chart = new QCustomPlot;
  m_context_chart->setObjectName(QStringLiteral("context_chart"));
  for (auto* p : {m_memory_chart, m_context_chart}) {
    style_plot(p);
    p->setMinimumHeight(220);
  }
  m_frontier_chart = new PlannerFrontierChart;
  m_frontier_chart->setObjectName(QStringLiteral("frontier"));
  m_roofline_chart = new PlannerRooflineChart;
  m_roofline_chart->setObjectName(QStringLiteral("roofline"));
  m_advice_panel = new PlannerAdvicePanel;
  m_advice_panel->setObjectName(QStringLiteral("advice"));
  m_tabs = new QTabWidget;
  m_tabs->setDocumentMode(true);
  const struct {
    QWidget* widget;
    QString name, tip;
  } tabs[] = {
      {m_memory_chart, tr("Memory"), tr("One GPU's memory per scheme: weights, reserve, KV, free")},
      {m_context_chart, tr("Context"), tr("The batch's KV on one GPU as the context grows")},
      {make_frontier_tab(), tr("Frontier"),
       tr("Tokens/s per user against tokens/s per GPU as the batch grows, one curve per scheme; "
          "optional TTFT and TPOT targets pick the best scheme and batch")},
      {m_roofline_chart, tr("Roofline"),
       tr("Arithmetic intensity against attainable TFLOP/s on one GPU, with each scheme's decode "
          "step")},
      {m_advice_panel, tr("Should I compress?"),
       tr("The advice matrix: for each context and number of concurrent users, whether a "
          "compressed KV cache serves more tokens/s per GPU than fp16, and with which scheme")},
  };
  for (const auto& t : tabs) {
    m_tabs->addTab(t.widget, t.name);
    m_tabs->setTabToolTip(m_tabs->count() - 1, t.tip);
  }
  // The tabs take the height left, not the height their tallest page would like: the page's
  // scroll area sizes it by that wish, which would not fit a 700-pixel-high laptop window.
  QSizePolicy tabs_policy(QSizePolicy::Expanding, QSizePolicy::Ignored);
  tabs_policy.setHeightForWidth(false);
  m_tabs->setSizePolicy(tabs_policy);
  m_memory_chart->setToolTip(explain::planner_memory_chart());
  m_context_chart->setToolTip(explain::planner_context_chart());
  add_title(m_memory_chart, tr("One GPU's memory per scheme"));
  add_title(m_context_chart, tr("KV memory against context"));
  add_legend_row(m_memory_chart, m_memory_chart->legend, 2);
  m_memory_chart->legend->setWrap(2);  // four entries: two short lines fit a laptop window
  add_legend_row(m_context_chart, m_context_chart->legend, 2);
  m_context_chart->legend->setWrap(2);  // scheme labels are long: two a line

  auto* formula_row = new QHBoxLayout;
  auto* formula_label = new QLabel(tr("Formula for"));
  formula_label->setBuddy(m_formula_scheme);
  formula_label->setToolTip(m_formula_scheme->toolTip());
  formula_row->addWidget(formula_label);
  formula_row->addWidget(m_formula_scheme, 1);
  // The table and the charts share the height through a splitter: a person who wants more rows
  // (pinned scenarios, many schemes) drags it down.
  m_table_split = new QSplitter(Qt::Vertical);
  m_table_split->addWidget(m_table);
  m_table_split->addWidget(m_tabs);
  m_table_split->setStretchFactor(1, 1);
  m_table_split->setChildrenCollapsible(false);
  m_table_split->setSizes({m_table->minimumHeight(), 10'000});  // the rows, the rest to the tabs
  auto* right = new QVBoxLayout;
  right->addLayout(formula_row);
  right->addWidget(m_formula);
  right->addWidget(m_table_split, 1);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(controls);
  layout->addLayout(right, 1);

  fill_catalogues();
  connect(m_plan, &PlannerModel::catalogues_changed, this, &PlannerView::fill_catalogues);
  connect(m_plan, &PlannerModel::status_message, this, &PlannerView::status_message);
  connect(m_plan, &PlannerModel::run_saved, this, &PlannerView::run_saved);
  set_model(QStringLiteral("llama-3-8b"));
  set_gpu(QStringLiteral("h100-sxm"));
  set_schemes({QStringLiteral("fp16"), QStringLiteral("fp8"), QStringLiteral("kivi2")});

  for (auto* c : {m_model, m_gpu, m_evict, m_formula_scheme}) {
    connect(c, &QComboBox::currentIndexChanged, this, &PlannerView::recompute);
  }
  for (auto* s : {m_context, m_batch, m_tp, m_pp, m_page}) {
    connect(s, &QSpinBox::valueChanged, this, &PlannerView::recompute);
  }
  for (auto* s : {m_util, m_reserve, m_efficiency, m_compute_efficiency}) {
    connect(s, &QDoubleSpinBox::valueChanged, this, &PlannerView::recompute);
  }
  connect(m_scheme_list, &QListWidget::itemChanged, this, &PlannerView::recompute);
  connect(m_advice_panel, &PlannerAdvicePanel::options_changed, this, &PlannerView::recompute);
  connect(import, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(
        this, tr("A Hugging Face config.json or a GGUF model"), {},
        tr("Model configs and GGUF files (*.json *.gguf);;config.json (*.json);;GGUF (*.gguf)"));
    if (!path.isEmpty()) import_config(path);
  });
  connect(add_gpu_button, &QPushButton::clicked, this, [this] {
    bool ok = false;
    const QString text = QInputDialog::getText(
        this, tr("Add GPU"), tr("id, memory in GiB, bandwidth in GB/s (e.g. my-gpu, 48, 960):"),
        QLineEdit::Normal, {}, &ok);
    const QStringList parts = text.split(QLatin1Char(','));
    if (!ok || parts.size() != 3) return;
    planners::GpuSpec g;
    g.id = g.name = parts[0].trimmed().toStdString();
    g.memory_bytes = static_cast<std::uint64_t>(parts[1].trimmed().toDouble() * (1ull << 30));
    g.bandwidth_gbs = parts[2].trimmed().toDouble();
    g.memory_stated = parts[1].trimmed().toStdString() + " GiB (given by the user)";
    g.user = true;
    add_gpu(g);
  });
  connect(save_button, &QPushButton::clicked, this, [this] { save(); });
  connect(pin_button, &QPushButton::clicked, this, &PlannerView::pin);
  recompute();
}

QStringList PlannerView::checked_scheme_ids() const {
  QStringList ids;
  for (int i = 0; i < m_scheme_list->count(); ++i) {
    const auto* item = m_scheme_list->item(i);
    if (item->checkState() == Qt::Checked) ids << item->data(Qt::UserRole).toString();
  }
  return ids;
}

std::vector<planners::Scheme> PlannerView::schemes() const {
  return m_plan->schemes_for(checked_scheme_ids(), m_evict->currentText());
}

planners::Scenario PlannerView::scenario() const {
  planners::Scenario s;
  const int mi = m_model->currentIndex(), gi = m_gpu->currentIndex();
  if (mi >= 0 && mi < static_cast<int>(m_plan->models().size())) {
    s.model = m_plan->models()[static_cast<std::size_t>(mi)];
  }
  if (gi >= 0 && gi < static_cast<int>(m_plan->gpus().size())) {
    s.gpu = m_plan->gpus()[static_cast<std::size_t>(gi)];
  }
  const auto sc = schemes();
  if (!sc.empty()) s.scheme = sc.front();
  s.context = m_context->value();
  s.batch = m_batch->value();
  s.deployment.tp = m_tp->value();
  s.deployment.pp = m_pp->value();
  s.deployment.page_tokens = m_page->value();
  s.deployment.gpu_memory_utilization = m_util->value();
  s.deployment.reserve_bytes = static_cast<std::uint64_t>(m_reserve->value() * (1ull << 30));
  s.bandwidth_efficiency = m_efficiency->value();
  s.compute_efficiency = m_compute_efficiency->value();
  s.rates = m_plan->rates_for(s.gpu);
  return s;
}

QString PlannerView::error_text() const {
  return m_error->text();
}

void PlannerView::recompute() {
  if (m_restoring) return;
  QElapsedTimer timer;
  timer.start();
  PlannerInputs inputs;
  inputs.scenario = scenario();
  inputs.schemes = schemes();
  inputs.ttft_target_ms = m_ttft_target->value();
  inputs.tpot_target_ms = m_tpot_target->value();
  inputs.advice_min_gain = m_advice_panel->min_gain();
  inputs.advice_max_perplexity_change = m_advice_panel->max_perplexity_change();
  m_plan->recompute(inputs);
  const auto& results = m_plan->results();
  m_error->setText(m_plan->error());
  {
    const QSignalBlocker b(m_formula_scheme);
    const int keep = m_formula_scheme->currentIndex();
    m_formula_scheme->clear();
    for (const auto& sc : m_plan->shown_schemes())
      m_formula_scheme->addItem(QString::fromStdString(sc.label));
    m_formula_scheme->setCurrentIndex(
        std::clamp(keep, 0, std::max(0, m_formula_scheme->count() - 1)));
  }
  const int f = m_formula_scheme->currentIndex();
  m_formula->setPlainText(f >= 0 && f < static_cast<int>(results.size())
                              ? QString::fromStdString(results[f].formula)
                              : m_error->text());
  m_table->resizeColumnsToContents();
  m_table->horizontalHeader()->setStretchLastSection(true);
  draw_memory_chart();
  draw_context_chart();
  draw_serving();
  const double ms = timer.nsecsElapsed() / 1e6;
  m_timing->setText(tr("recomputed in %1 ms").arg(ms, 0, 'f', 1));
}

void PlannerView::fill_catalogues() {
  const QString model = m_model->currentData().toString(), gpu = m_gpu->currentData().toString();
  const QStringList checked = checked_scheme_ids();
  const QSignalBlocker b1(m_model), b2(m_gpu), b3(m_scheme_list);
  m_model->clear();
  for (const auto& m : m_plan->models()) {
    m_model->addItem(QString::fromStdString(m.name), QString::fromStdString(m.id));
  }
  m_gpu->clear();
  for (const auto& g : m_plan->gpus()) {
    m_gpu->addItem(QString::fromStdString(g.name), QString::fromStdString(g.id));
  }
  m_scheme_list->clear();
  const auto add_scheme = [&](const QString& id, const QString& label) {
    auto* item = new QListWidgetItem(label, m_scheme_list);
    item->setData(Qt::UserRole, id);
    item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
    item->setCheckState(checked.contains(id) ? Qt::Checked : Qt::Unchecked);
    item->setToolTip(explain::planner_scheme(id));
  };
  for (const std::string_view id : planners::scheme_ids()) {  // every one the planner knows
    add_scheme(QString::fromUtf8(id.data(), static_cast<qsizetype>(id.size())),
               QString::fromStdString(planners::parse_scheme(id).value().label));
  }
  for (const auto& s : m_plan->measured()) {
    add_scheme(QString::fromStdString(s.id), QString::fromStdString(s.label));
  }
  if (!model.isEmpty()) set_model(model);
  if (!gpu.isEmpty()) set_gpu(gpu);
}

void PlannerView::set_model(const QString& id) {
  const int i = m_model->findData(id);
  if (i >= 0) m_model->setCurrentIndex(i);
}
void PlannerView::set_gpu(const QString& id) {
  const int i = m_gpu->findData(id);
  if (i >= 0) m_gpu->setCurrentIndex(i);
}
void PlannerView::set_context(int tokens) {
  m_context->setValue(tokens);
}
void PlannerView::set_batch(int batch) {
  m_batch->setValue(batch);
}
void PlannerView::set_parallelism(int tp, int pp) {
  const QSignalBlocker b(m_tp);
  m_tp->setValue(tp);
  m_pp->setValue(pp);
  recompute();
}
void PlannerView::set_schemes(const QStringList& ids) {
  {
    const QSignalBlocker b(m_scheme_list);
    for (int i = 0; i < m_scheme_list->count(); ++i) {
      auto* item = m_scheme_list->item(i);
      item->setCheckState(ids.contains(item->data(Qt::UserRole).toString()) ? Qt::Checked
                                                                            : Qt::Unchecked);
    }
  }
  recompute();
}

bool PlannerView::import_config(const QString& path) {
  auto id = m_plan->import_config(path);
  if (!id) {
    m_error->setText(in_gui_terms(QString::fromStdString(id.message())));
    return false;
  }
  set_model(QString::fromStdString(*id));
  return true;
}

bool PlannerView::add_gpu(const planners::GpuSpec& gpu) {
  auto id = m_plan->add_gpu(gpu);
  if (!id) {
    m_error->setText(in_gui_terms(QString::fromStdString(id.message())));
    return false;
  }
  set_gpu(QString::fromStdString(*id));
  return true;
}

std::int64_t PlannerView::save() {
  PlanRunContext context;
  for (const QString& id : checked_scheme_ids()) context.scheme_ids.push_back(id.toStdString());
  context.reserve_gib = m_reserve->value();
  context.evict = m_evict->currentText().toStdString();
  auto id = m_plan->save(context);
  if (!id) {
    m_error->setText(in_gui_terms(QString::fromStdString(id.message())));
    return 0;
  }
  return *id;
}

bool PlannerView::restore(const nlohmann::json& p) {
  try {
    auto model = planners::model_from_json(p.at("model"));
    auto gpu = planners::gpu_from_json(p.at("gpu"));
    if (!model || !gpu) {
      m_error->setText(
          in_gui_terms(QString::fromStdString(!model ? model.message() : gpu.message())));
      return false;
    }
    m_restoring = true;
    if (m_plan->add_model_if_new(*model)) {
      m_model->addItem(QString::fromStdString(model->name), QString::fromStdString(model->id));
    }
    if (m_plan->add_gpu_if_new(*gpu)) {
      m_gpu->addItem(QString::fromStdString(gpu->name), QString::fromStdString(gpu->id));
    }
    set_model(QString::fromStdString(model->id));
    set_gpu(QString::fromStdString(gpu->id));
    m_context->setValue(p.at("context").get<int>());
    m_batch->setValue(p.at("batch").get<int>());
    m_tp->setValue(p.value("tp", 1));
    m_pp->setValue(p.value("pp", 1));
    m_util->setValue(p.value("util", 0.9));
    m_reserve->setValue(p.value("reserve_gib", 1.0));
    m_page->setValue(p.value("page_tokens", 16));
    m_efficiency->setValue(p.value("efficiency", 0.8));
    m_compute_efficiency->setValue(p.value("compute_efficiency", 0.6));
    m_evict->setCurrentText(QString::fromStdString(p.value("evict", std::string("none"))));
    QStringList ids;
    for (const auto& id : p.at("schemes")) ids << QString::fromStdString(id.get<std::string>());
    m_restoring = false;
    set_schemes(ids);
  } catch (const nlohmann::json::exception& e) {
    m_restoring = false;
    m_error->setText(tr("The stored scenario cannot be read: %1").arg(e.what()));
    return false;
  }
  return m_error->text().isEmpty();
}

void PlannerView::pin() {
  m_plan->pin();
  m_table->resizeColumnsToContents();
}

QWidget* PlannerView::make_frontier_tab() {
  m_ttft_target = target_spin(
      tr("Time to first token target: a scheme whose prefill of one prompt of this context "
         "takes longer is ruled out (none: no target)"));
  m_tpot_target = target_spin(
      tr("Time per output token target: the largest batch whose decode step is at most this "
         "long (each user then gets at least 1000 ÷ target tokens/s; none: no target)"));
  m_slo_label = new QLabel;
  m_slo_label->setObjectName(QStringLiteral("slo"));
  m_slo_label->setWordWrap(true);
  m_slo_label->setToolTip(
      tr("Among the checked schemes, the scheme and batch with the most tokens/s per GPU that "
         "fit memory and meet both targets (planners' best_under_slo)"));
  auto* row = new QHBoxLayout;
  for (auto [caption, spin] :
       {std::pair{tr("TTFT ≤"), m_ttft_target}, std::pair{tr("TPOT ≤"), m_tpot_target}}) {
    auto* label = new QLabel(caption);
    label->setBuddy(spin);
    label->setToolTip(spin->toolTip());
    row->addWidget(label);
    row->addWidget(spin);
  }
  row->addStretch(1);
  auto* tab = new QWidget;
  auto* layout = new QVBoxLayout(tab);
  layout->setContentsMargins(0, 4, 0, 0);
  layout->addLayout(row);
  layout->addWidget(m_slo_label);
  layout->addWidget(m_frontier_chart, 1);
  for (auto* s : {m_ttft_target, m_tpot_target}) {
    connect(s, &QDoubleSpinBox::valueChanged, this, &PlannerView::recompute);
  }
  return tab;
}

void PlannerView::set_compute_efficiency(double fraction) {
  m_compute_efficiency->setValue(fraction);
}

void PlannerView::set_targets(double ttft_ms, double tpot_ms) {
  {
    const QSignalBlocker b(m_ttft_target);
    m_ttft_target->setValue(ttft_ms);
  }
  m_tpot_target->setValue(tpot_ms);
  recompute();
}

void PlannerView::draw_serving() {
  const planners::Scenario& s = m_plan->scenario();
  m_slo_label->setText(m_plan->slo_text());
  if (m_plan->results().empty()) {
    m_frontier_chart->set_data({});
    m_roofline_chart->set_data({});
  } else {
    FrontierChartData frontier = frontier_data(s, m_plan->shown_schemes());
    frontier.tpot_target_ms = m_tpot_target->value();
    if (const auto& c = m_plan->slo_choice(); c && c->found) {
      frontier.chosen =
          FrontierMark{c->scheme, c->tokens_per_s_per_user, c->tokens_per_s_per_gpu, QString()};
    }
    m_frontier_chart->set_data(frontier);
    m_roofline_chart->set_data(roofline_data(s, m_plan->shown_schemes(), m_plan->results()));
  }
  if (m_plan->advice_version() == m_shown_advice_version) return;
  m_shown_advice_version = m_plan->advice_version();
  if (m_plan->advice()) {
    m_advice_panel->set_advice(*m_plan->advice(), m_plan->advice_question(), m_plan->advice_note());
  } else {
    m_advice_panel->set_error(m_plan->advice_question(), m_plan->advice_error());
  }
}

void PlannerView::draw_memory_chart() {
  QCustomPlot* p = m_memory_chart;
  p->clearPlottables();
  p->clearItems();
  const double gib = 1024.0 * 1024 * 1024;
  auto* weights = stacked(p, tr("weights"), kWeights, nullptr);
  auto* reserve = stacked(p, tr("reserve"), kReserve, weights);
  auto* kv = stacked(p, tr("KV cache (fits)"), kKv, reserve);
  auto* over = stacked(p, tr("KV cache (does not fit)"), kKvOver, kv);
  auto* free = stacked(p, tr("free"), kFree, over);
  QSharedPointer<QCPAxisTickerText> ticker(new QCPAxisTickerText);
  double top = 0, capacity = 0;
  for (std::size_t i = 0; i < m_plan->results().size(); ++i) {
    const auto& r = m_plan->results()[i];
    const double x = static_cast<double>(i);
    weights->addData(x, r.weights_bytes_per_gpu / gib);
    reserve->addData(x, r.reserve_bytes / gib);
    (r.fits ? kv : over)->addData(x, r.kv_bytes_batch_per_gpu / gib);
    const double used =
        r.weights_bytes_per_gpu + r.reserve_bytes + static_cast<double>(r.kv_bytes_batch_per_gpu);
    free->addData(x, std::max(0.0, r.usable_bytes - used) / gib);
    ticker->addTick(
        x, QString::fromStdString(m_plan->shown_schemes()[i].label).replace(" + ", "\n+ "));
    top = std::max(top, std::max(used, static_cast<double>(r.usable_bytes)) / gib);
    capacity = r.usable_bytes / gib;
  }
  p->xAxis->setTicker(ticker);
  p->xAxis->setRange(-0.6, std::max<double>(1.0, m_plan->results().size()) - 0.4);
  p->yAxis->setLabel(tr("GiB on one GPU"));
  p->yAxis->setRange(0, std::max(1.0, top * 1.1));
  if (!m_plan->results().empty()) {
    auto* line = new QCPItemStraightLine(p);
    line->point1->setCoords(0, capacity);
    line->point2->setCoords(1, capacity);
    line->setPen(QPen(Qt::black, 1.5, Qt::DashLine));
    auto* label = new QCPItemText(p);
    label->position->setCoords(-0.55, capacity);
    label->setPositionAlignment(Qt::AlignLeft | Qt::AlignBottom);
    label->setText(tr("usable: %1 GiB").arg(capacity, 0, 'f', 1));
  }
  p->legend->setVisible(true);
  p->replot();
}

void PlannerView::draw_context_chart() {
  QCustomPlot* p = m_context_chart;
  p->clearGraphs();
  p->clearItems();
  if (m_plan->results().empty()) {
    p->replot();
    return;
  }
  const planners::Scenario& base = m_plan->scenario();
  const double gib = 1024.0 * 1024 * 1024;
  const double max_ctx = base.model.max_context;
  const double min_ctx = std::min(512.0, max_ctx);
  double top = m_plan->results().front().kv_capacity_bytes / gib;
  for (std::size_t i = 0; i < m_plan->shown_schemes().size(); ++i) {
    auto* g = p->addGraph();
    g->setName(QString::fromStdString(m_plan->shown_schemes()[i].label));
    g->setPen(QPen(planner_series_color(static_cast<int>(i)), 2));
    for (int k = 0; k <= 48; ++k) {
      const double ctx = std::round(min_ctx * std::pow(max_ctx / min_ctx, k / 48.0));
      const double bytes =
          planners::kv_bytes_per_sequence(base.model, m_plan->shown_schemes()[i], base.deployment,
                                          static_cast<std::int64_t>(ctx)) *
          static_cast<double>(base.batch);
      g->addData(ctx, bytes / gib);
      top = std::max(top, bytes / gib);
    }
  }
  auto* cap = p->addGraph();
  cap->setName(tr("KV capacity at this batch"));
  cap->setPen(QPen(Qt::black, 1.5, Qt::DashLine));
  cap->addData(min_ctx, m_plan->results().front().kv_capacity_bytes / gib);
  cap->addData(max_ctx, m_plan->results().front().kv_capacity_bytes / gib);
  p->xAxis->setScaleType(QCPAxis::stLogarithmic);
  p->xAxis->setTicker(QSharedPointer<QCPAxisTickerLog>(new QCPAxisTickerLog));
  p->xAxis->setRange(min_ctx, max_ctx);
  p->xAxis->setLabel(tr("context (tokens per sequence)"));
  p->yAxis->setLabel(tr("KV GiB for the batch, one GPU"));
  p->yAxis->setRange(0, top * 1.1);
  p->legend->setVisible(true);
  p->replot();
}

}  // namespace kvlab::gui
