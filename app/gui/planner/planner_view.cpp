// The Planner page (see planner_view.h); the charts are drawn in planner_charts.cpp.
#include "planner/planner_view.h"

#include <qcustomplot.h>

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

}  // namespace

PlannerView::PlannerView(std::shared_ptr<RunsStore> store, QWidget* parent)
    : QWidget(parent), m_store(std::move(store)) {
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

  auto* import = new QPushButton(tr("Import config.json…"));
  auto* add_gpu_button = new QPushButton(tr("Add GPU…"));
  auto* save_button = new QPushButton(tr("Save scenario"));
  auto* pin_button = new QPushButton(tr("Pin to compare"));
  m_model->setToolTip(
      tr("The model whose KV cache and weights are sized: layers, KV heads, head_dim, sliding "
         "window, MLA latent and weights from the catalogue or an imported config.json"));
  import->setToolTip(
      tr("Add a model from a Hugging Face config.json (KV heads from num_key_value_heads, "
         "head_dim, sliding window, MLA); it is kept in the runs database"));
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
  m_formula->setToolTip(
      tr("The KV memory formula for the chosen scheme with the scenario's numbers substituted, "
         "one step per line"));
  m_formula->setReadOnly(true);
  m_formula->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_formula->setMaximumHeight(96);
  m_table = new QTableView;
  m_table_model = new PlannerTableModel(m_table);
  m_table->setModel(m_table_model);
  // The scheme heads each row (the model's vertical header), so it stays in sight while the
  // table scrolls sideways to the capacity and memory columns; its own column is hidden.
  m_table->verticalHeader()->setVisible(true);
  m_table->verticalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->setColumnHidden(kPlannerScheme, true);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setMinimumHeight(122);  // the header and three rows, whatever the tabs below need
  m_memory_chart = new QCustomPlot;
  m_context_chart = new QCustomPlot;
  for (auto* p : {m_memory_chart, m_context_chart}) {
    style_plot(p);
    p->setMinimumHeight(220);
  }
  m_frontier_chart = new PlannerFrontierChart;
  m_roofline_chart = new PlannerRooflineChart;
  m_advice_panel = new PlannerAdvicePanel;
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

  reload_catalogues();
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
    const QString path = QFileDialog::getOpenFileName(this, tr("A Hugging Face config.json"), {},
                                                      tr("config.json (*.json)"));
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

std::vector<planners::Scheme> PlannerView::schemes() const {
  std::vector<planners::Scheme> out;
  const QString evict = m_evict->currentText();
  for (int i = 0; i < m_scheme_list->count(); ++i) {
    const auto* item = m_scheme_list->item(i);
    if (item->checkState() != Qt::Checked) continue;
    const std::string id = item->data(Qt::UserRole).toString().toStdString();
    std::optional<planners::Scheme> s;
    if (id.rfind("run:", 0) == 0) {
      for (const auto& m : m_measured) {
        if (m.id == id) s = m;
      }
    } else {
      const std::string full =
          evict == QLatin1String("none") ? id : id + "+evict:" + evict.toStdString();
      if (auto parsed = planners::parse_scheme(full)) s = *parsed;
    }
    if (s && s->kind == planners::SchemeKind::Measured && evict != QLatin1String("none")) {
      s->evict_fraction = evict.chopped(1).toDouble() / 100;
      s->label += " + evict to " + evict.toStdString();
    }
    if (s) out.push_back(*s);
  }
  return out;
}

planners::Scenario PlannerView::scenario() const {
  planners::Scenario s;
  const int mi = m_model->currentIndex(), gi = m_gpu->currentIndex();
  if (mi >= 0) s.model = m_models[static_cast<std::size_t>(mi)];
  if (gi >= 0) s.gpu = m_gpus[static_cast<std::size_t>(gi)];
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
  s.rates = rates_for(s.gpu);
  return s;
}

QString PlannerView::error_text() const {
  return m_error->text();
}

void PlannerView::recompute() {
  if (m_restoring) return;
  QElapsedTimer timer;
  timer.start();
  m_results.clear();
  m_shown_schemes = schemes();
  m_error->clear();
  planners::Scenario s = scenario();
  if (m_shown_schemes.empty()) m_error->setText(tr("Check at least one scheme."));
  for (const auto& scheme : m_shown_schemes) {
    s.scheme = scheme;
    auto r = planners::plan(s);
    if (!r) {
      m_error->setText(in_gui_terms(QString::fromStdString(r.message())));
      m_results.clear();
      break;
    }
    m_results.push_back(*r);
  }
  if (m_results.empty()) m_shown_schemes.clear();
  {
    const QSignalBlocker b(m_formula_scheme);
    const int keep = m_formula_scheme->currentIndex();
    m_formula_scheme->clear();
    for (const auto& sc : m_shown_schemes)
      m_formula_scheme->addItem(QString::fromStdString(sc.label));
    m_formula_scheme->setCurrentIndex(
        std::clamp(keep, 0, std::max(0, m_formula_scheme->count() - 1)));
  }
  const int f = m_formula_scheme->currentIndex();
  m_formula->setPlainText(f >= 0 && f < static_cast<int>(m_results.size())
                              ? QString::fromStdString(m_results[f].formula)
                              : m_error->text());
  fill_table();
  draw_memory_chart();
  draw_context_chart();
  update_serving(s);
  m_recompute_ms = timer.nsecsElapsed() / 1e6;
  m_timing->setText(tr("recomputed in %1 ms").arg(m_recompute_ms, 0, 'f', 1));
}

}  // namespace kvlab::gui
