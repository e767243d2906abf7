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

QString pays_explanation() {
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

}  // namespace

LearnPaysPage::LearnPaysPage(QWidget* parent)
    : LearnPage(tr("When does compression pay?"), pays_explanation(),
                QStringLiteral("Williams, Waterman and Patterson, \"Roofline: an insightful visual "
                               "performance model for multicore architectures\", CACM 2009; "
                               "Liu et al., \"KIVI\", ICML 2024 (arXiv:2402.02750)"),
                tr("Open in the Planner view"), parent) {
  full_view_button()->setToolTip(
      tr("Open the Planner view with this model, GPU, context, users as the batch, fp16 and the "
         "compressed scheme: its frontier, roofline and the whole advice matrix"));
  m_model_combo = catalog_combo(m_model.models());
  m_model_combo->setToolTip(
      tr("The model: its weights are read once per step, its layers × KV heads "
         "× head_dim decide each user's KV bytes"));
  m_gpu = catalog_combo(m_model.gpus());
  m_gpu->setToolTip(tr("The GPU: its memory bandwidth, tensor throughput and memory"));
  m_tp = new QComboBox;
  for (int tp : LearnPaysModel::tp_choices()) m_tp->addItem(QString::number(tp), tp);
  m_tp->setToolTip(
      tr("GPUs sharing the model by tensor parallelism: each holds 1 ÷ TP of the "
         "weights and of the KV heads"));
  m_scheme = scheme_combo(LearnPaysModel::scheme_ids());
  m_scheme->setToolTip(tr("The compressed KV cache to weigh against fp16"));
  m_context = new QSlider(Qt::Horizontal);
  m_context->setToolTip(tr("Tokens per sequence, in powers of two up to the model's limit"));
  m_users = new QSlider(Qt::Horizontal);
  m_users->setRange(0, LearnPaysModel::kMaxUsersLog2);
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
  add_form_row(form, tr("Model"), m_model_combo);
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

  m_context->setPageStep(1);
  m_context->setTickPosition(QSlider::TicksBelow);
  m_model_combo->setCurrentIndex(m_model.model_index());
  m_gpu->setCurrentIndex(m_model.gpu_index());
  m_scheme->setCurrentIndex(m_model.scheme_index());
  connect(m_model_combo, &QComboBox::currentIndexChanged, this, [this](int i) {
    m_model.set_model(i);
    update_view();
  });
  connect(m_gpu, &QComboBox::currentIndexChanged, this, [this](int i) {
    m_model.set_gpu(i);
    update_view();
  });
  connect(m_tp, &QComboBox::currentIndexChanged, this, [this] {
    m_model.set_tp(m_tp->currentData().toInt());
    update_view();
  });
  connect(m_scheme, &QComboBox::currentIndexChanged, this, [this](int i) {
    m_model.set_scheme(i);
    update_view();
  });
  connect(m_context, &QSlider::valueChanged, this, [this](int i) {
    m_model.set_context_index(i);
    update_view();
  });
  connect(m_users, &QSlider::valueChanged, this, [this](int log2) {
    m_model.set_users_log2(log2);
    update_view();
  });
  update_view();
}

void LearnPaysPage::set_model(const QString& id) {
  if (const int i = m_model_combo->findData(id); i >= 0) m_model_combo->setCurrentIndex(i);
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
  m_model.set_context(tokens);
  update_view();
}
void LearnPaysPage::set_users(int users) {
  m_model.set_users(users);
  update_view();
}

void LearnPaysPage::sync_sliders() {
  const QSignalBlocker block_context(m_context), block_users(m_users);
  m_context->setRange(0, static_cast<int>(m_model.contexts().size()) - 1);
  m_context->setValue(m_model.context_index());
  m_users->setValue(m_model.users_log2());
}

void LearnPaysPage::update_view() {
  sync_sliders();
  m_context_value->setText(tr("%1 tokens").arg(QLocale().toString(qlonglong(m_model.context()))));
  m_users_value->setText(m_model.users() == 1
                             ? tr("1 user")
                             : tr("%1 users").arg(QLocale().toString(m_model.users())));
  m_error->setText(m_model.error_text());
  m_verdict->setText(m_model.verdict());
  m_sentence->setText(m_model.sentence());
  m_fp16_rate->setText(m_model.rate_text(0));
  m_compressed_rate->setText(m_model.rate_text(1));
  m_chart->set_data(m_model.steps());
  if (const auto& cell = m_model.cell()) {
    const int rec = cell->recommended;
    m_verdict->setStyleSheet(QStringLiteral("color: %1;")
                                 .arg((rec > 0   ? style::kFits
                                       : rec < 0 ? style::kDoesNotFit
                                                 : style::kMutedText)
                                          .name()));
  }
}

}  // namespace kvlab::gui
