#include "learn/learn_pays_page.h"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QSlider>
#include <QVBoxLayout>

#include "common/gui_format.h"
#include "common/gui_style.h"
#include "planner/planner_step_chart.h"

namespace kvlab::gui {
namespace {

constexpr const char* kCompressed[] = {"fp8", "int8", "int4", "kivi4", "kivi2", "kvcomp"};
constexpr int kMaxUsersLog2 = 10;  // 1 to 1,024 users
constexpr double kMinGain = 0.10;  // as `kvlab plan advise` and the Planner's matrix
constexpr double kGiB = 1024.0 * 1024 * 1024;

QString explanation() {
  return QObject::tr(
      "<p>Generating one token for every user is one <b>decode step</b>: the GPU reads all the "
      "<b>weights</b> once for the whole batch, and every user's <b>KV cache</b>. With few "
      "users the weights dominate: a smaller cache saves little, and decompressing it costs "
      "time. With many users of long contexts the cache dominates and decides how many users "
      "fit at once: a compressed cache holds more of them, so each read of the weights serves "
      "more tokens, unless decompressing is slower than reading fp16 would have been. Move the "
      "users and the context and watch which wins.</p>");
}

QLabel* rate_label() {
  auto* l = new QLabel;
  l->setTextFormat(Qt::RichText);
  l->setAlignment(Qt::AlignCenter);
  l->setFrameShape(QFrame::StyledPanel);
  l->setMinimumHeight(56);
  return l;
}

QString ms(double seconds) {
  return QStringLiteral("%1 ms").arg(seconds * 1e3, 0, 'f', seconds < 0.01 ? 2 : 1);
}

QString percent(double fraction) {
  return QStringLiteral("%1%2 %").arg(fraction >= 0 ? "+" : "").arg(fraction * 100, 0, 'f', 0);
}

}  // namespace

LearnPaysPage::LearnPaysPage(QWidget* parent)
    : LearnPage(tr("When does compression pay?"), explanation(),
                QStringLiteral("Williams, Waterman and Patterson, \"Roofline: an insightful visual "
                               "performance model for multicore architectures\", CACM 2009; "
                               "Liu et al., \"KIVI\", ICML 2024 (arXiv:2402.02750)"),
                tr("Open in the Planner view"), parent),
      m_models(planners::builtin_models()),
      m_gpus(planners::builtin_gpus()) {
  full_view_button()->setToolTip(
      tr("Open the Planner view with this model, GPU, context, users as the batch, fp16 and the "
         "compressed scheme: its frontier, roofline and the whole advice matrix"));
  m_model = new QComboBox;
  for (const auto& m : m_models) {
    m_model->addItem(QString::fromStdString(m.name), QString::fromStdString(m.id));
  }
  m_model->setToolTip(
      tr("The model: its weights are read once per step, its layers × KV heads "
         "× head_dim decide each user's KV bytes"));
  m_gpu = new QComboBox;
  for (const auto& g : m_gpus) {
    m_gpu->addItem(QString::fromStdString(g.name), QString::fromStdString(g.id));
  }
  m_gpu->setToolTip(tr("The GPU: its memory bandwidth, tensor throughput and memory"));
  m_tp = new QComboBox;
  for (int tp : {1, 2, 4, 8}) m_tp->addItem(QString::number(tp), tp);
  m_tp->setToolTip(
      tr("GPUs sharing the model by tensor parallelism: each holds 1 ÷ TP of the "
         "weights and of the KV heads"));
  m_scheme = new QComboBox;
  for (const char* id : kCompressed) {
    m_schemes.push_back(planners::parse_scheme(id).value());
    m_scheme->addItem(QString::fromStdString(m_schemes.back().label), QString::fromLatin1(id));
  }
  m_scheme->setToolTip(tr("The compressed KV cache to weigh against fp16"));
  m_context = new QSlider(Qt::Horizontal);
  m_context->setToolTip(tr("Tokens per sequence, in powers of two up to the model's limit"));
  m_users = new QSlider(Qt::Horizontal);
  m_users->setRange(0, kMaxUsersLog2);
  m_users->setPageStep(1);
  m_users->setTickPosition(QSlider::TicksBelow);
  m_users->setToolTip(
      tr("Users served at once (concurrent sequences), 1 to 1,024: as many as "
         "fit in memory share each decode step"));
  m_context_value = new QLabel;
  m_users_value = new QLabel;
  for (QLabel* l : {m_context_value, m_users_value}) l->setMinimumWidth(90);
  m_context_value->setToolTip(m_context->toolTip());
  m_users_value->setToolTip(m_users->toolTip());
  const auto slider_row = [](QSlider* s, QLabel* value) {
    auto* w = new QWidget;
    auto* row = new QHBoxLayout(w);
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(s, 1);
    row->addWidget(value);
    w->setToolTip(s->toolTip());
    return w;
  };

  auto* form = new QFormLayout;
  add_form_row(form, tr("Model"), m_model);
  add_form_row(form, tr("GPU"), m_gpu);
  add_form_row(form, tr("GPUs (TP)"), m_tp);
  add_form_row(form, tr("Compressed"), m_scheme);
  add_form_row(form, tr("Context"), slider_row(m_context, m_context_value));
  add_form_row(form, tr("Users"), slider_row(m_users, m_users_value));
  auto* assumptions = style::muted_label(
      tr("Bandwidth efficiency 0.8, compute efficiency 0.6, 90 % of memory for the server; a "
         "scheme must gain 10 % to pay for its quality cost."),
      nullptr);
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
  controls_box->setFixedWidth(300);

  m_verdict = new QLabel;
  QFont big = m_verdict->font();
  big.setPointSize(big.pointSize() + 8);
  big.setBold(true);
  m_verdict->setFont(big);
  m_verdict->setToolTip(tr("The planner's verdict for this one cell (planners::advise)"));
  m_sentence = new QLabel;
  m_sentence->setWordWrap(true);
  m_sentence->setTextFormat(Qt::PlainText);
  m_sentence->setToolTip(tr("Why, from the latency model's numbers for these two schemes"));
  m_fp16_rate = rate_label();
  m_compressed_rate = rate_label();
  m_fp16_rate->setToolTip(
      tr("fp16: tokens/s per GPU (all users' tokens ÷ GPUs), and the users "
         "its KV memory holds at once"));
  m_compressed_rate->setToolTip(
      tr("The compressed scheme: tokens/s per GPU, and the users its "
         "KV memory holds at once"));
  auto* rates = new QHBoxLayout;
  rates->addWidget(m_fp16_rate, 1);
  rates->addWidget(m_compressed_rate, 1);
  m_chart = new PlannerStepChart;
  // Kept to the top of a laptop's screen: the Learn view is taller than 700 pixels.
  m_chart->setFixedHeight(250);

  auto* right = new QVBoxLayout;
  right->addWidget(m_verdict);
  right->addWidget(m_sentence);
  right->addLayout(rates);
  right->addWidget(m_chart);
  right->addStretch(1);
  auto* row = new QHBoxLayout;
  row->addWidget(controls_box);
  row->addLayout(right, 1);
  body()->addLayout(row, 1);

  set_model(QStringLiteral("llama-3-8b"));
  set_gpu(QStringLiteral("h100-sxm"));
  set_scheme(QStringLiteral("kivi2"));
  update_context_range();
  set_context(8192);
  set_users(32);
  connect(m_model, &QComboBox::currentIndexChanged, this, [this] {
    update_context_range();
    recompute();
  });
  for (auto* c : {m_gpu, m_tp, m_scheme}) {
    connect(c, &QComboBox::currentIndexChanged, this, &LearnPaysPage::recompute);
  }
  for (auto* s : {m_context, m_users}) {
    connect(s, &QSlider::valueChanged, this, &LearnPaysPage::recompute);
  }
  recompute();
}

void LearnPaysPage::set_model(const QString& id) {
  if (const int i = m_model->findData(id); i >= 0) m_model->setCurrentIndex(i);
}
void LearnPaysPage::set_gpu(const QString& id) {
  if (const int i = m_gpu->findData(id); i >= 0) m_gpu->setCurrentIndex(i);
}
void LearnPaysPage::set_gpus(int tp) {
  if (const int i = m_tp->findData(tp); i >= 0) m_tp->setCurrentIndex(i);
}
void LearnPaysPage::set_scheme(const QString& id) {
  if (const int i = m_scheme->findData(id); i >= 0) m_scheme->setCurrentIndex(i);
}

void LearnPaysPage::set_context(std::int64_t tokens) {
  int best = 0;
  for (int i = 0; i < static_cast<int>(m_contexts.size()); ++i) {
    const auto d = [&](int k) { return std::abs(std::log2(double(m_contexts[k]) / tokens)); };
    if (d(i) < d(best)) best = i;
  }
  m_context->setValue(best);
}

void LearnPaysPage::set_users(int users) {
  m_users->setValue(
      std::clamp(static_cast<int>(std::lround(std::log2(std::max(1, users)))), 0, kMaxUsersLog2));
}

std::int64_t LearnPaysPage::context() const {
  return m_contexts.empty() ? 1 : m_contexts[static_cast<std::size_t>(m_context->value())];
}

int LearnPaysPage::users() const {
  return 1 << m_users->value();
}

const planners::Scheme& LearnPaysPage::compressed_scheme() const {
  return m_schemes[static_cast<std::size_t>(std::max(0, m_scheme->currentIndex()))];
}

void LearnPaysPage::update_context_range() {
  const std::int64_t keep = context();
  const auto& m = m_models[static_cast<std::size_t>(std::max(0, m_model->currentIndex()))];
  m_contexts.clear();
  for (std::int64_t c = 512; c < m.max_context; c *= 2) m_contexts.push_back(c);
  m_contexts.push_back(m.max_context);
  const QSignalBlocker block(m_context);
  m_context->setRange(0, static_cast<int>(m_contexts.size()) - 1);
  m_context->setPageStep(1);
  m_context->setTickPosition(QSlider::TicksBelow);
  set_context(keep);
}

planners::Scenario LearnPaysPage::scenario() const {
  planners::Scenario s;
  s.model = m_models[static_cast<std::size_t>(std::max(0, m_model->currentIndex()))];
  s.gpu = m_gpus[static_cast<std::size_t>(std::max(0, m_gpu->currentIndex()))];
  s.scheme = planners::parse_scheme("fp16").value();
  s.deployment.tp = m_tp->currentData().toInt();
  s.context = context();
  s.batch = users();
  return s;
}

QString LearnPaysPage::sentence() const {
  return m_sentence->text();
}

QString LearnPaysPage::error_text() const {
  return m_error->text();
}

void LearnPaysPage::recompute() {
  m_context_value->setText(tr("%1 tokens").arg(QLocale().toString(qlonglong(context()))));
  m_users_value->setText(users() == 1 ? tr("1 user")
                                      : tr("%1 users").arg(QLocale().toString(users())));
  const planners::Scenario s = scenario();
  planners::AdviceSpec spec;
  spec.base = s;
  spec.schemes = {s.scheme, compressed_scheme()};
  spec.contexts = {s.context};
  spec.concurrencies = {users()};
  spec.min_gain = kMinGain;
  auto advice = planners::advise(spec);
  m_cell.reset();
  m_steps.clear();
  if (!advice) {
    m_error->setText(in_gui_terms(QString::fromStdString(advice.message())));
    m_verdict->setText(tr("—"));
    m_sentence->clear();
    m_fp16_rate->clear();
    m_compressed_rate->clear();
    m_chart->set_data({});
    return;
  }
  m_error->clear();
  m_cell = advice->cells.front();
  for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
    const planners::SchemeOutcome& o = m_cell->outcomes[k];
    const QString id = QString::fromStdString(spec.schemes[k].id);
    planners::Scenario at = s;
    at.scheme = spec.schemes[k];
    at.batch = std::max(1, o.served);
    const auto r = planners::plan(at);
    StepParts none;  // not one sequence fits: an empty bar group under the scheme's name
    none.scheme = id;
    m_steps.push_back(r && o.served > 0 ? step_parts(id, o.served, r->latency) : none);
    QLabel* label = k == 0 ? m_fp16_rate : m_compressed_rate;
    label->setText(o.served > 0
                       ? tr("%1: <span style='font-size:16pt'><b>%2</b></span> tok/s per GPU<br>"
                            "%3 of %4 users at once")
                             .arg(id, QLocale().toString(o.tokens_per_s_per_gpu, 'f', 0),
                                  QLocale().toString(o.served), QLocale().toString(users()))
                       : tr("%1: not one user fits").arg(id));
  }
  const int rec = m_cell->recommended;
  m_verdict->setText(
      rec < 0    ? tr("Nothing fits")
      : rec == 0 ? tr("Don't compress")
                 : tr("Compress with %1").arg(QString::fromStdString(compressed_scheme().id)));
  m_verdict->setStyleSheet(QStringLiteral("color: %1;")
                               .arg((rec > 0   ? style::kFits
                                     : rec < 0 ? style::kDoesNotFit
                                               : style::kMutedText)
                                        .name()));
  m_sentence->setText(explain(*m_cell));
  m_chart->set_data(m_steps);
}

// The numbers behind the verdict, in words.
QString LearnPaysPage::explain(const planners::AdviceCell& c) const {
  const QString comp = QString::fromStdString(compressed_scheme().id);
  const auto& fo = c.outcomes[0];
  const auto& co = c.outcomes[1];
  const StepParts& fs = m_steps[0];
  const StepParts& cs = m_steps[1];
  const QString n = QLocale().toString(users());
  const QString tokens = QLocale().toString(qlonglong(context()));
  if (c.recommended < 0) {
    return tr("Not one sequence of %1 tokens fits beside the weights, in fp16 or %2: this model "
              "needs more GPUs here.")
        .arg(tokens, comp);
  }
  if (fo.served == 0) {
    return tr("fp16 cannot hold even one sequence of %1 tokens; %2 holds %3 of the %4 users, "
              "%5 tok/s per GPU: compressing is the only way to serve this context here.")
        .arg(tokens, comp, QLocale().toString(co.served), n)
        .arg(co.tokens_per_s_per_gpu, 0, 'f', 0);
  }
  QString why;
  if (fo.served < users()) {
    // Memory-limited: the larger batch shares each weight read.
    why = tr("fp16's KV for %1 users of %2 tokens would need %3 % of the KV memory, so it holds "
             "only %4 at once; %5 holds %6. Every step reads the weights once for the whole "
             "batch, so the larger batch gets more tokens from each read: %7 against %8 tok/s "
             "per GPU (%9).")
              .arg(n, tokens)
              .arg(c.memory_pressure * 100, 0, 'f', 0)
              .arg(QLocale().toString(fo.served), comp, QLocale().toString(co.served))
              .arg(co.tokens_per_s_per_gpu, 0, 'f', 0)
              .arg(fo.tokens_per_s_per_gpu, 0, 'f', 0)
              .arg(percent(co.gain));
    if (cs.decompression > cs.kv_read) {
      why += tr(" %1's step then waits on its decompression (%2 of its %3 step).")
                 .arg(comp, ms(cs.decompression), ms(cs.step));
    }
  } else {
    // Both hold everyone: the step times decide.
    why = tr("fp16 holds %1 (%2 % of the KV memory). Its step waits on %3: the weights take "
             "%4 and the KV %5 of the %6 step.")
              .arg(users() == 1 ? tr("the one user") : tr("all %1 users").arg(n))
              .arg(c.memory_pressure * 100, 0, 'f', 0)
              .arg(fs.bound_by, ms(fs.weights_read), ms(fs.kv_read), ms(fs.step));
    why += cs.decompression > cs.kv_read
               ? tr(" %1 reads its KV in %2 but then waits %3 on decompressing it, %4 than "
                    "fp16's %5 read,")
                     .arg(comp, ms(cs.kv_read), ms(cs.decompression),
                          cs.decompression < fs.kv_read ? tr("less") : tr("more"), ms(fs.kv_read))
               : tr(" %1 reads its KV in %2 (decompressing, %3, hides under the reads),")
                     .arg(comp, ms(cs.kv_read), ms(cs.decompression));
    why += tr(" so its step takes %1: %2 tok/s per GPU.").arg(ms(cs.step), percent(co.gain));
  }
  if (c.recommended > 0) return why + tr(" Compress.");
  if (co.gain > 0) {
    return why + tr(" Less than the %1 % that pays for the quality cost: don't compress.")
                     .arg(kMinGain * 100, 0, 'f', 0);
  }
  return why + tr(" Compressing loses here: don't compress.");
}

LearnLink LearnPaysPage::link() const {
  const planners::Scenario s = scenario();
  LearnLink link;
  link.target = LearnLink::Target::Planner;
  link.planner =
      nlohmann::json{{"model", planners::model_to_json(s.model)},
                     {"gpu", planners::gpu_to_json(s.gpu)},
                     {"context", s.context},
                     {"batch", s.batch},
                     {"schemes", {"fp16", compressed_scheme().id}},
                     {"evict", "none"},
                     {"tp", s.deployment.tp},
                     {"pp", s.deployment.pp},
                     {"util", s.deployment.gpu_memory_utilization},
                     {"reserve_gib", static_cast<double>(s.deployment.reserve_bytes) / kGiB},
                     {"page_tokens", s.deployment.page_tokens},
                     {"efficiency", s.bandwidth_efficiency},
                     {"compute_efficiency", s.compute_efficiency}};
  return link;
}

}  // namespace kvlab::gui
