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

constexpr int kGrowthTickMs = 80;
const QColor kProjection{170, 170, 170};

QString growth_explanation() {
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
    : LearnPage(tr("How the KV cache grows"), growth_explanation(),
                QStringLiteral("Pope et al., \"Efficiently Scaling Transformer Inference\", "
                               "MLSys 2023 (arXiv:2211.05102)"),
                tr("Open in the Planner view"), parent) {
  full_view_button()->setToolTip(
      tr("Open the Planner with this model and the current number of tokens as the context, "
         "fp16 and the compressed scheme checked"));
  m_model_combo = catalog_combo(m_model.models());
  m_model_combo->setToolTip(
      tr("A model from the planner's catalogue: its layers, KV heads and head_dim decide how "
         "many bytes each token adds"));
  m_scheme_combo = scheme_combo(LearnGrowthModel::scheme_ids());
  m_scheme_combo->setToolTip(
      tr("The compressed storage drawn beside fp16, counted as the planner counts it (KIVI: "
         "codes, a scale and a minimum per group, the newest 128 tokens kept in fp16)"));
  m_prompt = new IntField;
  m_prompt->setRange(0, 1 << 20);
  m_prompt->setValue(m_model.prompt());
  m_prompt->setSuffix(tr(" tokens"));
  m_prompt->setToolTip(
      tr("Prompt length: prefill writes these tokens' K and V in one go, so the "
         "cache starts here"));
  m_target = new IntField;
  m_target->setRange(1, 1 << 22);
  m_target->setValue(m_model.target());
  m_target->setSuffix(tr(" tokens"));
  m_target->setToolTip(
      tr("Decode until the cache holds this many tokens (at most the model's "
         "context length); the chart's x-axis ends here"));
  m_step_tokens = new IntField;
  m_step_tokens->setRange(1, 1 << 16);
  m_step_tokens->setValue(m_model.step_tokens());
  m_step_tokens->setToolTip(
      tr("Tokens decoded per step: a real decode step adds one token; more per step just makes "
         "the animation quicker"));
  for (auto* s : {m_prompt, m_target, m_step_tokens}) s->setKeyboardTracking(false);

  m_playback = new PlaybackControls(
      {tr("Decode step after step until the target length; press again to pause"),
       tr("Decode one step (the tokens per step set on the left)"),
       tr("Back to the cache right after prefill (the prompt only)")},
      kGrowthTickMs);
  m_playback->set_at_end([this] { return m_model.at_end(); });

  auto* form = new QFormLayout;
  add_form_row(form, tr("Model"), m_model_combo);
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

  connect(m_model_combo, &QComboBox::currentIndexChanged, this, [this](int i) {
    m_model.set_model(i);
    update_view();
  });
  connect(m_scheme_combo, &QComboBox::currentIndexChanged, this, [this] {
    m_model.set_scheme(m_scheme_combo->currentData().toString().toStdString());
    update_view();
  });
  connect(m_prompt, &QSpinBox::valueChanged, this, [this](int tokens) {
    pause();
    m_model.set_prompt(tokens);
    update_view();
  });
  connect(m_target, &QSpinBox::valueChanged, this, [this](int tokens) {
    m_model.set_target(tokens);
    update_view();
  });
  connect(m_step_tokens, &QSpinBox::valueChanged, this,
          [this](int tokens) { m_model.set_step_tokens(tokens); });
  connect(m_playback, &PlaybackControls::step_requested, this, &LearnGrowthPage::step);
  connect(m_playback, &PlaybackControls::reset_requested, this, &LearnGrowthPage::reset);

  m_model_combo->setCurrentIndex(m_model.model_index());
  update_view();
}

bool LearnGrowthPage::is_playing() const {
  return m_playback->is_playing();
}

void LearnGrowthPage::set_model(const QString& id) {
  const int i = m_model_combo->findData(id);
  if (i >= 0) m_model_combo->setCurrentIndex(i);
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

void LearnGrowthPage::step() {
  m_model.step();
  update_view();
}

void LearnGrowthPage::reset() {
  pause();
  m_model.reset();
  update_view();
}

void LearnGrowthPage::play() {
  m_playback->play();
}

void LearnGrowthPage::pause() {
  m_playback->pause();
}

void LearnGrowthPage::sync_controls() {
  const QSignalBlocker block(m_target);
  m_target->setMaximum(std::max(1, m_model.model().max_context));
  m_target->setValue(m_model.target());
}

void LearnGrowthPage::update_view() {
  sync_controls();
  m_playback->step_button()->setEnabled(!m_model.at_end());
  m_error->setText(m_model.error_text());
  m_headline->setText(m_model.headline());
  m_formula->setPlainText(m_model.formula());
  draw_chart();
}

void LearnGrowthPage::draw_chart() {
  QCustomPlot* p = m_chart;
  p->clearGraphs();
  p->clearItems();
  const std::int64_t end = m_model.chart_end();
  const std::int64_t tokens = m_model.tokens();
  const int prompt = m_model.prompt();
  const ByteUnit unit = byte_unit_for(
      static_cast<double>(m_model.bytes_at(m_model.fp16_scheme(), std::max<std::int64_t>(end, 1))));
  const QColor colors[] = {palette::kKey, palette::kRatio};
  const auto lines = m_model.lines();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const LearnGrowthModel::Line& line = lines[i];
    const QColor color = colors[i % 2];
    auto* done = p->addGraph();
    done->setName(QString::fromStdString(line.scheme->label));
    done->setPen(QPen(color, 2.5));
    auto* ahead = p->addGraph();
    ahead->removeFromLegend();
    ahead->setPen(QPen(kProjection, 1.2, Qt::DashLine));
    for (std::size_t k = 0; k < line.done_tokens.size(); ++k) {
      done->addData(static_cast<double>(line.done_tokens[k]), line.done_bytes[k] / unit.bytes);
    }
    for (std::size_t k = 0; k < line.ahead_tokens.size(); ++k) {
      ahead->addData(static_cast<double>(line.ahead_tokens[k]), line.ahead_bytes[k] / unit.bytes);
    }
    const double now = line.now_bytes / unit.bytes;
    auto* dot = new QCPItemTracer(p);
    dot->setGraph(done);
    dot->setGraphKey(static_cast<double>(tokens));
    dot->setStyle(QCPItemTracer::tsCircle);
    dot->setSize(8);
    dot->setPen(QPen(color.darker(130)));
    dot->setBrush(color);
    // Beside the dot, on the side with room; fp16 (the higher line) above it, the other level
    // with it (below it in the right half), so the two never overlap or fall below the axis.
    const bool left_half = tokens * 2 < end;
    const bool above = i == 0;
    auto* label = new QCPItemText(p);
    label->position->setCoords(static_cast<double>(tokens), now);
    label->setPositionAlignment((left_half ? Qt::AlignLeft : Qt::AlignRight) |
                                (above ? Qt::AlignBottom : Qt::AlignVCenter));
    if (!above && !left_half) {
      // Left of the dot the lower line's own solid part comes in: hang the label below it.
      label->position->setParentAnchor(dot->position);
      label->position->setCoords(0, 16);  // pixels below the dot
      label->setPositionAlignment(Qt::AlignRight | Qt::AlignTop);
    }
    label->setPadding(QMargins(6, 4, 6, 4));
    label->setText(format_byte_count(line.now_bytes));
    label->setFont(QFont(p->font().family(), 9, QFont::Bold));
    label->setColor(color.darker(130));
    label->setBrush(QColor(255, 255, 255, 220));  // readable over the dashed line
  }
  if (prompt > 0 && prompt < end) {
    auto* prefill = new QCPItemStraightLine(p);
    prefill->point1->setCoords(prompt, 0);
    prefill->point2->setCoords(prompt, 1);
    prefill->setPen(QPen(QColor(120, 120, 120), 1, Qt::DotLine));
    auto* text = new QCPItemText(p);
    text->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    text->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    text->position->setCoords(prompt, 0.02);
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

}  // namespace kvlab::gui
