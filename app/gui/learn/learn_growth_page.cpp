#include "learn/learn_growth_page.h"

#include <qcustomplot.h>

#include <algorithm>

#include <QComboBox>
#include <QFontDatabase>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTimer>

#include "common/chart_style.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/number_fields.h"
#include "kvlab/planners/catalog.h"

namespace kvlab::gui {
namespace {

constexpr const char* kCompressedSchemes[] = {"kivi2", "kivi4", "int4", "int8", "fp8"};
constexpr int kTickMs = 80;
constexpr int kChartPoints = 240;
const QColor kProjection{170, 170, 170};

QString explanation() {
  return QObject::tr(
      "<p>While a model decodes, every new token attends to all the tokens before it, so each "
      "layer keeps the <b>key</b> and <b>value</b> vector of every token it has seen: the "
      "<i>KV cache</i>. Prefill writes the whole prompt at once; after that, every decode step "
      "appends one more token's K and V to every layer.</p>"
      "<p>The cache therefore grows by the same amount with every token: "
      "<b>bytes = 2 (K and V) × layers × kv_heads × head_dim × tokens × bytes per value</b>. "
      "Press <b>Play</b> (or <b>Step</b>) to decode and watch the bytes and the formula "
      "follow. Grouped-query attention (fewer KV heads than query heads) and compression (fewer "
      "bytes per value) are the two ways to flatten the line.</p>");
}

}  // namespace

LearnGrowthPage::LearnGrowthPage(QWidget* parent)
    : LearnPage(tr("How the KV cache grows"), explanation(),
                QStringLiteral("Pope et al., \"Efficiently Scaling Transformer Inference\", "
                               "MLSys 2023 (arXiv:2211.05102)"),
                tr("Open in the Planner view"), parent),
      m_models(planners::builtin_models()) {
  full_view_button()->setToolTip(
      tr("Open the Planner with this model and the current number of tokens as the context, "
         "fp16 and the compressed scheme checked"));
  m_fp16 = planners::parse_scheme("fp16").value();

  m_model = new QComboBox;
  for (const auto& m : m_models) {
    m_model->addItem(QString::fromStdString(m.name), QString::fromStdString(m.id));
  }
  m_model->setToolTip(
      tr("A model from the planner's catalogue: its layers, KV heads and head_dim decide how "
         "many bytes each token adds"));
  m_scheme_combo = new QComboBox;
  for (const char* id : kCompressedSchemes) {
    m_scheme_combo->addItem(QString::fromStdString(planners::parse_scheme(id).value().label),
                            QString::fromLatin1(id));
  }
  m_scheme_combo->setToolTip(
      tr("The compressed storage drawn beside fp16, counted as the planner counts it (KIVI: "
         "codes, a scale and a minimum per group, the newest 128 tokens kept in fp16)"));
  m_prompt = new IntField;
  m_prompt->setRange(0, 1 << 20);
  m_prompt->setValue(512);
  m_prompt->setSuffix(tr(" tokens"));
  m_prompt->setToolTip(
      tr("Prompt length: prefill writes these tokens' K and V in one go, so the "
         "cache starts here"));
  m_target = new IntField;
  m_target->setRange(1, 1 << 22);
  m_target->setValue(8192);
  m_target->setSuffix(tr(" tokens"));
  m_target->setToolTip(
      tr("Decode until the cache holds this many tokens (at most the model's "
         "context length); the chart's x-axis ends here"));
  m_step_tokens = new IntField;
  m_step_tokens->setRange(1, 1 << 16);
  m_step_tokens->setValue(64);
  m_step_tokens->setToolTip(
      tr("Tokens decoded per step: a real decode step adds one token; more per step just makes "
         "the animation quicker"));
  for (auto* s : {m_prompt, m_target, m_step_tokens}) s->setKeyboardTracking(false);

  m_playback = new PlaybackControls(
      {tr("Decode step after step until the target length; press again to pause"),
       tr("Decode one step (the tokens per step set on the left)"),
       tr("Back to the cache right after prefill (the prompt only)")},
      kTickMs);
  m_playback->set_at_end([this] { return m_tokens >= m_target->value(); });

  auto* form = new QFormLayout;
  add_form_row(form, tr("Model"), m_model);
  add_form_row(form, tr("Compressed"), m_scheme_combo);
  add_form_row(form, tr("Prompt"), m_prompt);
  add_form_row(form, tr("Decode until"), m_target);
  add_form_row(form, tr("Tokens per step"), m_step_tokens);
  m_error = new QLabel;
  m_error->setWordWrap(true);
  style::make_error_text(m_error);
  auto* controls = new QVBoxLayout;
  controls->addLayout(form);
  controls->addWidget(m_playback);
  controls->addWidget(m_error);
  controls->addStretch(1);
  auto* controls_box = new QWidget;
  controls_box->setLayout(controls);
  controls_box->setFixedWidth(330);

  m_chart = new QCustomPlot;
  style_plot(m_chart);
  m_chart->setMinimumHeight(260);
  m_chart->setToolTip(
      tr("KV bytes of one sequence against the tokens in the cache: solid up to "
         "now, dashed where decoding will take it"));
  add_title(m_chart, tr("KV cache of one sequence as decoding goes on"));
  add_legend_row(m_chart, m_chart->legend, 2);

  m_headline = new QLabel;
  m_headline->setWordWrap(true);
  m_headline->setTextFormat(Qt::RichText);
  m_headline->setToolTip(
      tr("The cache now: tokens held and bytes under each scheme, from the "
         "planner's memory model"));
  QFont big = m_headline->font();
  big.setPointSize(big.pointSize() + 2);
  m_headline->setFont(big);

  m_formula = new QPlainTextEdit;
  m_formula->setReadOnly(true);
  m_formula->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  m_formula->setFixedHeight(150);
  m_formula->setToolTip(
      tr("The planner's formula (the same text as the Planner view), with the "
         "current numbers substituted, for fp16 and the compressed scheme"));

  auto* top = new QHBoxLayout;
  top->addWidget(controls_box);
  top->addWidget(m_chart, 1);
  body()->addLayout(top, 1);
  body()->addWidget(m_headline);
  body()->addWidget(m_formula);

  connect(m_model, &QComboBox::currentIndexChanged, this, &LearnGrowthPage::on_settings_changed);
  connect(m_scheme_combo, &QComboBox::currentIndexChanged, this,
          &LearnGrowthPage::on_settings_changed);
  connect(m_prompt, &QSpinBox::valueChanged, this, &LearnGrowthPage::reset);
  connect(m_target, &QSpinBox::valueChanged, this, &LearnGrowthPage::on_settings_changed);
  connect(m_playback, &PlaybackControls::step_requested, this, &LearnGrowthPage::step);
  connect(m_playback, &PlaybackControls::reset_requested, this, &LearnGrowthPage::reset);

  set_model(QStringLiteral("llama-3-8b"));
  on_settings_changed();
  reset();
}

const planners::ModelSpec& LearnGrowthPage::model() const {
  return m_models[static_cast<std::size_t>(std::max(0, m_model->currentIndex()))];
}

planners::Deployment LearnGrowthPage::deployment() const {
  planners::Deployment d;
  d.page_tokens = 1;  // the bare formula: no paging on this page (the planner page shows it)
  return d;
}

std::uint64_t LearnGrowthPage::fp16_bytes() const {
  return planners::kv_bytes_per_sequence(model(), m_fp16, deployment(), m_tokens);
}

std::uint64_t LearnGrowthPage::compressed_bytes() const {
  return planners::kv_bytes_per_sequence(model(), m_scheme, deployment(), m_tokens);
}

bool LearnGrowthPage::is_playing() const {
  return m_playback->is_playing();
}

void LearnGrowthPage::set_model(const QString& id) {
  const int i = m_model->findData(id);
  if (i >= 0) m_model->setCurrentIndex(i);
}

void LearnGrowthPage::set_scheme(const QString& id) {
  const int i = m_scheme_combo->findData(id);
  if (i >= 0) m_scheme_combo->setCurrentIndex(i);
}

void LearnGrowthPage::set_prompt(int tokens) {
  m_prompt->setValue(tokens);
}

void LearnGrowthPage::set_target(int tokens) {
  m_target->setValue(tokens);
}

void LearnGrowthPage::set_step_tokens(int tokens) {
  m_step_tokens->setValue(tokens);
}

void LearnGrowthPage::on_settings_changed() {
  m_scheme = planners::parse_scheme(m_scheme_combo->currentData().toString().toStdString()).value();
  const int max_context = std::max(1, model().max_context);
  {
    const QSignalBlocker block(m_target);
    m_target->setMaximum(max_context);
  }
  m_error->setText(m_prompt->value() > m_target->value()
                       ? tr("Prompt: %1 tokens is longer than \"Decode until\" (%2 tokens); the "
                            "cache starts at the prompt and does not grow.")
                             .arg(m_prompt->value())
                             .arg(m_target->value())
                       : QString());
  // Lowering the target (or picking a model with a shorter context) cuts the cache back to it,
  // never below the prompt.
  const std::int64_t prompt = std::min(m_prompt->value(), max_context);
  m_tokens = std::min<std::int64_t>(m_tokens, std::max<std::int64_t>(m_target->value(), prompt));
  update_view();
}

void LearnGrowthPage::step() {
  const std::int64_t target = m_target->value();
  if (m_tokens >= target) return;
  m_tokens = std::min<std::int64_t>(target, m_tokens + m_step_tokens->value());
  update_view();
}

void LearnGrowthPage::reset() {
  pause();
  m_tokens = std::min(m_prompt->value(), model().max_context);
  on_settings_changed();
}

void LearnGrowthPage::play() {
  m_playback->play();
}

void LearnGrowthPage::pause() {
  m_playback->pause();
}

void LearnGrowthPage::update_view() {
  m_playback->step_button()->setEnabled(m_tokens < m_target->value());
  const planners::ModelSpec& m = model();
  const double fp16 = static_cast<double>(fp16_bytes());
  const double compressed = static_cast<double>(compressed_bytes());
  const std::int64_t decoded = std::max<std::int64_t>(0, m_tokens - m_prompt->value());
  m_headline->setText(
      tr("<b>%1 tokens</b> in the cache (prompt %2 + %3 decoded) · fp16 <b>%4</b> · %5 "
         "<b>%6</b>%7 · each token adds %8 in fp16")
          .arg(QLocale().toString(static_cast<qlonglong>(m_tokens)))
          .arg(QLocale().toString(std::min(m_prompt->value(), m.max_context)))
          .arg(QLocale().toString(static_cast<qlonglong>(decoded)))
          .arg(format_byte_count(fp16), QString::fromStdString(m_scheme.label),
               format_byte_count(compressed))
          .arg(compressed > 0 ? tr(" (%1 smaller)").arg(format_ratio(fp16 / compressed))
                              : QString())
          .arg(format_byte_count(planners::kv_bytes_per_token(m, m_fp16))));
  const auto d = deployment();
  m_formula->setPlainText(QString::fromStdString(planners::explain_kv(m, m_fp16, d, m_tokens, 1) +
                                                 "\n" +
                                                 planners::explain_kv(m, m_scheme, d, m_tokens, 1))
                              .trimmed());
  draw_chart();
}

void LearnGrowthPage::draw_chart() {
  QCustomPlot* p = m_chart;
  p->clearGraphs();
  p->clearItems();
  const planners::ModelSpec& m = model();
  const auto d = deployment();
  const std::int64_t end = std::max<std::int64_t>(m_target->value(), m_tokens);
  const ByteUnit unit = byte_unit_for(static_cast<double>(
      planners::kv_bytes_per_sequence(m, m_fp16, d, std::max<std::int64_t>(end, 1))));
  const struct {
    const planners::Scheme* scheme;
    QColor color;
  } lines[] = {{&m_fp16, palette::kKey}, {&m_scheme, palette::kRatio}};
  for (const auto& line : lines) {
    auto* done = p->addGraph();
    done->setName(QString::fromStdString(line.scheme->label));
    done->setPen(QPen(line.color, 2.5));
    auto* ahead = p->addGraph();
    ahead->removeFromLegend();
    ahead->setPen(QPen(kProjection, 1.2, Qt::DashLine));
    for (int k = 0; k <= kChartPoints; ++k) {
      const std::int64_t t = end * k / kChartPoints;
      const double y =
          static_cast<double>(planners::kv_bytes_per_sequence(m, *line.scheme, d, t)) / unit.bytes;
      (t <= m_tokens ? done : ahead)->addData(static_cast<double>(t), y);
    }
    const double now =
        static_cast<double>(planners::kv_bytes_per_sequence(m, *line.scheme, d, m_tokens)) /
        unit.bytes;
    done->addData(static_cast<double>(m_tokens), now);
    auto* dot = new QCPItemTracer(p);
    dot->setGraph(done);
    dot->setGraphKey(static_cast<double>(m_tokens));
    dot->setStyle(QCPItemTracer::tsCircle);
    dot->setSize(8);
    dot->setPen(QPen(line.color.darker(130)));
    dot->setBrush(line.color);
    // Beside the dot, on the side with room; fp16 (the higher line) above it, the other level
    // with it (below it in the right half), so the two never overlap or fall below the axis.
    const bool left_half = m_tokens * 2 < end;
    const bool above = line.scheme == &m_fp16;
    auto* label = new QCPItemText(p);
    label->position->setCoords(static_cast<double>(m_tokens), now);
    label->setPositionAlignment((left_half ? Qt::AlignLeft : Qt::AlignRight) |
                                (above ? Qt::AlignBottom : Qt::AlignVCenter));
    if (!above && !left_half) {
      // Left of the dot the lower line's own solid part comes in: hang the label below it.
      label->position->setParentAnchor(dot->position);
      label->position->setCoords(0, 16);  // pixels below the dot
      label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
    }
    label->setPadding(QMargins(6, 4, 6, 4));
    label->setText(format_byte_count(now * unit.bytes));
    label->setFont(QFont(p->font().family(), 9, QFont::Bold));
    label->setColor(line.color.darker(130));
    label->setBrush(QColor(255, 255, 255, 220));  // readable over the dashed line
  }
  if (m_prompt->value() > 0 && m_prompt->value() < end) {
    auto* prefill = new QCPItemStraightLine(p);
    prefill->point1->setCoords(m_prompt->value(), 0);
    prefill->point2->setCoords(m_prompt->value(), 1);
    prefill->setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
    auto* text = new QCPItemText(p);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    text->position->setCoords(m_prompt->value(), 0.02);
    text->setPadding(QMargins(4, 0, 0, 0));
    text->setText(tr("end of prefill"));
    text->setColor(QColor(100, 100, 100));
  }
  p->xAxis->setLabel(tr("tokens in the cache"));
  p->yAxis->setLabel(tr("KV bytes of one sequence (%1)").arg(unit.name));
  p->xAxis->setRange(0, static_cast<double>(end));
  p->yAxis->rescale();
  p->yAxis->setRange(0, std::max(1e-9, p->yAxis->range().upper * 1.08));
  p->replot();
}

LearnLink LearnGrowthPage::link() const {
  LearnLink link;
  link.target = LearnLink::Target::Planner;
  const auto gpu = planners::find_gpu("h100-sxm");
  nlohmann::json params = {
      {"model", planners::model_to_json(model())},
      {"context", std::max<std::int64_t>(1, m_tokens)},
      {"batch", 1},
      {"schemes", {"fp16", m_scheme.id}},
  };
  if (gpu)
    params["gpu"] = planners::gpu_to_json(*gpu);
  else
    params["gpu"] = planners::gpu_to_json(planners::builtin_gpus().front());
  link.planner = params;
  return link;
}

}  // namespace kvlab::gui
