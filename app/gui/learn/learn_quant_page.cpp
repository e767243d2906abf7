#include "learn/learn_quant_page.h"

#include <qcustomplot.h>
#include <QHeaderView>
#include "common/gui_format.h"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QTableWidget>

#include "common/chart_pair.h"
#include "common/chart_style.h"
#include "common/gui_style.h"
#include "common/number_fields.h"

namespace kvlab::gui {
namespace {

using Grouping = LearnQuantModel::Grouping;
constexpr int kContext = LearnQuantModel::kContext;
constexpr int kGroupings = LearnQuantModel::kGroupings;

QString quant_explanation() {
  return QObject::tr(
      "<p>Quantization stores each number as a small integer code plus a <b>scale</b> (step) and "
      "<b>minimum</b> shared by a group: x̂ = min + code × step. Which numbers share them "
      "matters. Keys have a few <b>outlier channels</b> (large on every token): a group that "
      "mixes them with ordinary channels gets a huge step and rounds the ordinary channels "
      "away. Grouping <b>per channel</b> gives each outlier channel its own range.</p>"
      "<p>Values have no outlier channels. What matters for them is the attention output, a "
      "weighted sum of value rows: <b>per-token</b> errors are independent from token to token "
      "and average out, while a per-channel group's rounding is shared by its tokens and adds "
      "up. So KIVI quantizes keys per channel and values per token. Compare the error columns "
      "below, at 2, 4 and 8 bits.</p>");
}

const QColor kGroupingColors[] = {{200, 55, 55}, {52, 101, 164}, {60, 150, 90}};
const QCPScatterStyle::ScatterShape kGroupingShapes[] = {
    QCPScatterStyle::ssCross, QCPScatterStyle::ssCircle, QCPScatterStyle::ssDiamond};

}  // namespace

LearnQuantPage::LearnQuantPage(QWidget* parent)
    : LearnPage(tr("Quantization: per-tensor, per-channel, per-token"), quant_explanation(),
                QStringLiteral("Liu et al., \"KIVI: A Tuning-Free Asymmetric 2bit Quantization "
                               "for KV Cache\", ICML 2024 (arXiv:2402.02750)"),
                tr("Open in the Compression view"), parent) {
  full_view_button()->setToolTip(
      tr("Run KIVI (keys per channel, values per token) at these bits and group size on this "
         "same synthetic layer in the Compression view; 8 bits runs the age-tiered method with "
         "every token in its INT8 tier, which groups the same way"));
  m_bits = new QComboBox;
  for (int b : {2, 4, 8}) m_bits->addItem(tr("%1 bits").arg(b), b);
  m_bits->setToolTip(tr("Bits per code: 2^bits levels between a group's minimum and maximum"));
  m_group = new QComboBox;
  for (int g : {32, 64, 128}) m_group->addItem(QString::number(g), g);
  m_group->setToolTip(
      tr("Group size G: per-channel scales cover G consecutive tokens of one channel; per-token "
         "scales cover G consecutive channels of one token's head (KIVI uses 32)"));
  m_token = new IntField;
  m_token->setRange(0, kContext - 1);
  m_token->setValue(100);
  m_token->setToolTip(tr("Which token's key and value vectors the charts show"));
  m_head = new IntField;
  m_head->setRange(0, std::max(0, m_model.heads() - 1));
  m_head->setToolTip(tr("Which KV head's vectors the charts show (llama3-8b has 8)"));
  for (auto* s : {m_token, m_head}) s->setKeyboardTracking(false);
  m_channels = new QComboBox;
  m_channels->addItem(tr("all 128"), -1);
  for (int q = 0; q < 4; ++q) m_channels->addItem(tr("%1–%2").arg(32 * q).arg(32 * q + 31), q);
  m_channels->setToolTip(
      tr("Which channels of the head the charts show: all, or a quarter to "
         "zoom in (the key outlier channels sit in the last quarter, on "
         "low-frequency RoPE pairs)"));

  auto* form = new QFormLayout;
  add_form_row(form, tr("Bits"), m_bits);
  add_form_row(form, tr("Group size"), m_group);
  add_form_row(form, tr("Token"), m_token);
  add_form_row(form, tr("KV head"), m_head);
  add_form_row(form, tr("Channels"), m_channels);
  auto* about = new QLabel(tr("Layer 0 of a synthetic llama3-8b cache: %1 tokens × 8 KV heads × "
                              "128 channels, seed 1, with 4 outlier channels per key head.")
                               .arg(kContext));
  about->setWordWrap(true);
  about->setToolTip(
      tr("The engine's seeded synthetic generator (the Compression view's "
         "\"synthetic llama3-8b\" source)"));
  m_error_label = new QLabel;
  m_error_label->setWordWrap(true);
  style::make_error_text(m_error_label);
  m_table = new QTableWidget(kGroupings, 6);
  style_table();
  m_conclusion = new QLabel;
  m_conclusion->setWordWrap(true);
  m_conclusion->setTextFormat(Qt::RichText);
  m_conclusion->setToolTip(
      tr("Read off the table: which grouping gives each tensor the lowest "
         "attention-output error, and by how much"));

  auto* controls = new QVBoxLayout;
  controls->addLayout(form);
  controls->addWidget(about);
  controls->addWidget(m_conclusion);
  controls->addWidget(m_error_label);
  controls->addStretch(1);
  auto* controls_box = new QWidget;
  controls_box->setLayout(controls);
  controls_box->setFixedWidth(230);

  m_key_chart = new QCustomPlot;
  m_value_chart = new QCustomPlot;
  for (auto* p : {m_key_chart, m_value_chart}) {
    style_plot(p);
    p->setMinimumHeight(230);
  }
  add_title(m_key_chart, tr("One key vector and its reconstructions"));
  add_title(m_value_chart, tr("One value vector and its reconstructions"));
  add_legend_row(m_key_chart, m_key_chart->legend, 2);
  add_legend_row(m_value_chart, m_value_chart->legend, 2);
  for (auto* p : {m_key_chart, m_value_chart}) {  // two charts side by side: a compact legend
    p->legend->setColumnSpacing(8);
    p->legend->setIconSize(14, 10);
  }
  m_key_chart->setToolTip(
      tr("The chosen token's key, channel by channel (black), and what "
         "each grouping gives back after quantize + dequantize"));
  m_value_chart->setToolTip(
      tr("The chosen token's value, channel by channel (black), and what "
         "each grouping gives back after quantize + dequantize"));

  auto* charts = new ChartPair(m_key_chart, tr("Key"), m_value_chart, tr("Value"));
  auto* right = new QVBoxLayout;
  right->addWidget(charts, 1);
  right->addWidget(m_table);
  auto* row = new QHBoxLayout;
  row->addWidget(controls_box);
  row->addLayout(right, 1);
  body()->addLayout(row, 1);

  connect(m_bits, &QComboBox::currentIndexChanged, this, &LearnQuantPage::recompute);
  connect(m_group, &QComboBox::currentIndexChanged, this, &LearnQuantPage::recompute);
  connect(m_token, &QSpinBox::valueChanged, this, &LearnQuantPage::draw_charts);
  connect(m_head, &QSpinBox::valueChanged, this, &LearnQuantPage::draw_charts);
  connect(m_channels, &QComboBox::currentIndexChanged, this, &LearnQuantPage::draw_charts);
  recompute();
}

void LearnQuantPage::set_bits(int bits) {
  const int i = m_bits->findData(bits);
  if (i >= 0) m_bits->setCurrentIndex(i);
}
void LearnQuantPage::set_group_size(int group) {
  const int i = m_group->findData(group);
  if (i >= 0) m_group->setCurrentIndex(i);
}
void LearnQuantPage::set_token(int token) {
  m_token->setValue(token);
}
void LearnQuantPage::set_head(int head) {
  m_head->setValue(head);
}

void LearnQuantPage::recompute() {
  m_model.set_bits(m_bits->currentData().toInt());
  m_model.set_group_size(m_group->currentData().toInt());
  m_error_label->setText(m_model.error_text());
  fill_table();
  draw_charts();
}

void LearnQuantPage::style_table() {
  m_table->setHorizontalHeaderLabels({tr("keys\nMSE"), tr("keys\nrel. error"),
                                      tr("keys →\nattention err."), tr("values\nMSE"),
                                      tr("values\nrel. error"), tr("values →\nattention err.")});
  const QString header_tips[] = {
      tr("Mean squared error of the keys: mean of (x − x̂)² over every key element of the layer"),
      tr("Relative error of the keys: √(Σ(x − x̂)² / Σx²) over the layer"),
      tr("Relative error of the attention output ‖o − ô‖/‖o‖ of the cache's decode queries "
         "when the keys are quantized this way and the values are exact"),
      tr("Mean squared error of the values: mean of (x − x̂)² over every value element"),
      tr("Relative error of the values: √(Σ(x − x̂)² / Σx²) over the layer"),
      tr("Relative error of the attention output ‖o − ô‖/‖o‖ when the values are quantized "
         "this way and the keys are exact")};
  for (int c = 0; c < 6; ++c) m_table->horizontalHeaderItem(c)->setToolTip(header_tips[c]);
  QStringList rows;
  for (int g = 0; g < kGroupings; ++g)
    rows << LearnQuantModel::grouping_name(static_cast<Grouping>(g));
  m_table->setVerticalHeaderLabels(rows);
  const QString row_tips[] = {
      tr("One minimum and step for the whole layer tensor (all tokens, heads, channels)"),
      tr("One minimum and step per channel, over groups of G tokens (KIVI's keys)"),
      tr("One minimum and step per token, over groups of G channels of a head (KIVI's values)")};
  for (int g = 0; g < kGroupings; ++g) m_table->verticalHeaderItem(g)->setToolTip(row_tips[g]);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->setSelectionMode(QAbstractItemView::NoSelection);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  m_table->verticalHeader()->setDefaultSectionSize(26);
  m_table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_table->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_table->setFixedHeight(m_table->horizontalHeader()->sizeHint().height() + kGroupings * 26 +
                          2 * m_table->frameWidth() + 2);
  m_table->setToolTip(
      tr("Over the whole layer (all tokens and heads). MSE: mean (x − x̂)². rel. error: "
         "√(Σ(x − x̂)² / Σx²). attention error: relative error of the attention output of the "
         "cache's 8 decode queries when only this tensor is quantized (engine metrics). Green: "
         "the lowest in the column"));
}

void LearnQuantPage::fill_table() {
  for (int c = 0; c < LearnQuantModel::kColumns; ++c) {
    const Grouping best = m_model.best_in_column(c);
    for (int g = 0; g < kGroupings; ++g) {
      const double x = m_model.value(static_cast<Grouping>(g), c);
      auto* item = new QTableWidgetItem(c % 3 == 0 ? format_metric(x) : format_percent(x));
      item->setTextAlignment(Qt::AlignCenter);
      if (g == static_cast<int>(best)) {
        item->setBackground(QColor(214, 238, 214));
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      m_table->setItem(g, c, item);
    }
  }
  m_conclusion->setText(m_model.conclusion());
}

void LearnQuantPage::draw_charts() {
  draw_vector(m_key_chart, TensorRole::Key);
  draw_vector(m_value_chart, TensorRole::Value);
}

void LearnQuantPage::draw_vector(QCustomPlot* plot, TensorRole role) {
  plot->clearGraphs();
  const int token = m_token->value(), head = m_head->value();
  const auto v = m_model.vector(role, token, head, m_channels->currentData().toInt());
  if (v.original.empty()) {
    plot->replot();
    return;
  }
  const auto add = [&](const std::vector<float>& x, const QString& name) {
    auto* g = plot->addGraph();
    g->setName(name);
    for (int c = v.first; c < v.last; ++c) g->addData(c, x[static_cast<std::size_t>(c - v.first)]);
    return g;
  };
  // Reconstructions as markers (a line through rounded values only zigzags), the original as
  // a line, drawn last so it stays on top.
  const double marker = v.last - v.first == m_model.dim() ? 5 : 8;
  for (int g = 0; g < kGroupings; ++g) {
    auto* graph = add(v.reconstructed[g], LearnQuantModel::grouping_name(static_cast<Grouping>(g)));
    graph->setLineStyle(QCPGraph::lsNone);
    graph->setScatterStyle(
        QCPScatterStyle(kGroupingShapes[g], QPen(kGroupingColors[g], 1.4), Qt::NoBrush, marker));
  }
  auto* x = add(v.original, tr("original"));
  x->setPen(QPen(QColor(30, 30, 30), 1.2));
  x->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
  plot->xAxis->setLabel(tr("channel of head %1, token %2").arg(head).arg(token));
  plot->yAxis->setLabel(role == TensorRole::Key ? tr("key") : tr("value"));
  plot->rescaleAxes();
  plot->xAxis->setRange(v.first - 1, v.last);
  const QCPRange y = plot->yAxis->range();
  plot->yAxis->setRange(y.lower - 0.05 * y.size(), y.upper + 0.05 * y.size());
  plot->replot();
}

}  // namespace kvlab::gui
