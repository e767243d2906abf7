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
#include "kvlab/engine/attention/metrics.h"

namespace kvlab::gui {
namespace {

constexpr int kContext = 256;  // tokens of the layer: a multiple of every group size offered

QString explanation() {
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

// sqrt(sum err^2 / sum x^2) from the engine's error sums.
double relative_error(const ElementErrorSums& e) {
  return e.sum_sq_signal > 0 ? std::sqrt(e.sum_sq_err / e.sum_sq_signal) : 0.0;
}

const QColor kGroupingColors[] = {{200, 55, 55}, {52, 101, 164}, {60, 150, 90}};
const QCPScatterStyle::ScatterShape kGroupingShapes[] = {
    QCPScatterStyle::ssCross, QCPScatterStyle::ssCircle, QCPScatterStyle::ssDiamond};

}  // namespace

QString LearnQuantPage::grouping_name(Grouping g) {
  switch (g) {
    case Grouping::PerTensor:
      return tr("per-tensor");
    case Grouping::PerChannel:
      return tr("per-channel");
    case Grouping::PerToken:
      return tr("per-token");
  }
  return {};
}

std::vector<float> LearnQuantPage::per_tensor_round_trip(const std::vector<float>& x, int bits) {
  if (x.empty()) return {};
  const auto [lo_it, hi_it] = std::minmax_element(x.begin(), x.end());
  const float lo = *lo_it, hi = *hi_it;
  const float max_code = static_cast<float>((1 << bits) - 1);
  const float step = (hi - lo) / max_code;
  std::vector<float> out(x.size(), lo);
  if (step <= 0.f) return out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float code = std::min(max_code, std::round((x[i] - lo) / step));
    out[i] = lo + code * step;
  }
  return out;
}

LearnQuantPage::LearnQuantPage(QWidget* parent)
    : LearnPage(tr("Quantization: per-tensor, per-channel, per-token"), explanation(),
                QStringLiteral("Liu et al., \"KIVI: A Tuning-Free Asymmetric 2bit Quantization "
                               "for KV Cache\", ICML 2024 (arXiv:2402.02750)"),
                tr("Open in the Compression view"), parent) {
  full_view_button()->setToolTip(
      tr("Run KIVI (keys per channel, values per token) at these bits and group size on this "
         "same synthetic layer in the Compression view; 8 bits runs the age-tiered method with "
         "every token in its INT8 tier, which groups the same way"));
  m_source.preset = "llama3-8b";
  m_source.layers = 1;
  m_source.context = kContext;
  m_source.seed = 1;

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
  m_head->setRange(0, 7);
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
  generate();
  recompute();
}

void LearnQuantPage::generate() {
  auto cache = generate_synthetic(m_source);
  if (!cache) {
    m_error = tr("Synthetic source: %1").arg(QString::fromStdString(cache.message()));
    m_error_label->setText(m_error);
    return;
  }
  m_cache = std::move(cache).value();
  const LayerKv& layer = m_cache.layers.front();
  data(TensorRole::Key).original = layer.key.view().to_float();
  data(TensorRole::Value).original = layer.value.view().to_float();
  m_queries = layer.query.view().to_float();
  m_head->setMaximum(layer.key.heads() - 1);
}

int LearnQuantPage::bits() const {
  return m_bits->currentData().toInt();
}
int LearnQuantPage::group_size() const {
  return m_group->currentData().toInt();
}
int LearnQuantPage::token() const {
  return m_token->value();
}
int LearnQuantPage::head() const {
  return m_head->value();
}
QString LearnQuantPage::error_text() const {
  return m_error;
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

const std::vector<float>& LearnQuantPage::original(TensorRole role) const {
  return data(role).original;
}
const std::vector<float>& LearnQuantPage::reconstructed(TensorRole role, Grouping g) const {
  return data(role).reconstructed[static_cast<std::size_t>(g)];
}
const LearnQuantPage::Errors& LearnQuantPage::errors(TensorRole role, Grouping g) const {
  return data(role).errors[static_cast<std::size_t>(g)];
}

MethodConfig LearnQuantPage::method() const {
  MethodConfig m;
  m.group_size = group_size();
  m.residual = 0;  // every token quantized, as on this page
  if (bits() == 8) {
    // KIVI offers 2 and 4 bits; the age-tiered quantizer's INT8 tier groups the same way.
    m.kind = MethodKind::Tiered;
    m.int8_tokens = m_source.context;
  } else {
    m.kind = MethodKind::Kivi;
    m.bits = bits();
  }
  return m;
}

void LearnQuantPage::recompute() {
  if (m_cache.layers.empty()) return;
  auto quantizer = make_quantizer(method());
  if (!quantizer) {
    m_error = tr("Method: %1").arg(QString::fromStdString(quantizer.message()));
    m_error_label->setText(m_error);
    return;
  }
  const LayerKv& layer = m_cache.layers.front();
  const int heads = layer.key.heads(), dim = layer.key.dim();
  for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    const Tensor& tensor = role == TensorRole::Key ? layer.key : layer.value;
    RoleData& d = data(role);
    d.reconstructed[0] = per_tensor_round_trip(d.original, bits());
    // The engine's KIVI groups: key mode is per channel, value mode per token, whichever
    // tensor it is given.
    for (const auto& [g, mode] : {std::pair{1, TensorRole::Key}, std::pair{2, TensorRole::Value}}) {
      auto q = (*quantizer)->quantize(tensor.view(), mode);
      if (!q) {
        m_error =
            tr("Quantizing the %1s: %2")
                .arg(QString::fromLatin1(role_name(role)), QString::fromStdString(q.message()));
        m_error_label->setText(m_error);
        return;
      }
      d.reconstructed[g].resize(tensor.elements());
      (*quantizer)->dequantize(*q, d.reconstructed[g]);
    }
  }
  const auto& k = data(TensorRole::Key);
  const auto& v = data(TensorRole::Value);
  const int nq = layer.query.tokens(), q_heads = layer.query.heads();
  for (int g = 0; g < kGroupings; ++g) {
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      RoleData& d = data(role);
      ElementErrorSums sums;
      sums.add(d.original, d.reconstructed[g]);
      Errors& e = d.errors[g];
      e.mse = sums.mse();
      e.rel_error = relative_error(sums);
      const bool key = role == TensorRole::Key;
      e.attention_error =
          nq == 0 ? 0.0
                  : attention_errors(m_queries, TensorView::of_floats(k.original, heads, dim),
                                     TensorView::of_floats(v.original, heads, dim),
                                     key ? k.reconstructed[g] : k.original,
                                     key ? v.original : v.reconstructed[g], {q_heads, heads, dim})
                        .output_rel_error();
    }
  }
  m_error.clear();
  m_error_label->clear();
  fill_table();
  draw_charts();
}

LearnLink LearnQuantPage::link() const {
  LearnLink link;
  link.target = LearnLink::Target::Compression;
  link.source = m_source;
  link.method = method();
  return link;
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
  for (int g = 0; g < kGroupings; ++g) rows << grouping_name(static_cast<Grouping>(g));
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
  const auto value_of = [&](int column, int g) {
    const Errors& e =
        errors(column < 3 ? TensorRole::Key : TensorRole::Value, static_cast<Grouping>(g));
    const double values[] = {e.mse, e.rel_error, e.attention_error};
    return values[column % 3];
  };
  for (int c = 0; c < 6; ++c) {
    int best = 0;
    for (int g = 1; g < kGroupings; ++g) {
      if (value_of(c, g) < value_of(c, best)) best = g;
    }
    for (int g = 0; g < kGroupings; ++g) {
      const double x = value_of(c, g);
      auto* item = new QTableWidgetItem(c % 3 == 0 ? format_metric(x) : format_percent(x));
      item->setTextAlignment(Qt::AlignCenter);
      if (g == best) {
        item->setBackground(QColor(214, 238, 214));
        QFont f = item->font();
        f.setBold(true);
        item->setFont(f);
      }
      m_table->setItem(g, c, item);
    }
  }
  // The conclusion is read off the attention-output errors: what the model sees.
  const auto best_of = [&](TensorRole role) {
    int best = 0;
    for (int g = 1; g < kGroupings; ++g) {
      if (errors(role, static_cast<Grouping>(g)).attention_error <
          errors(role, static_cast<Grouping>(best)).attention_error) {
        best = g;
      }
    }
    return static_cast<Grouping>(best);
  };
  const auto times = [&](TensorRole role, Grouping other, Grouping best) {
    const double b = errors(role, best).attention_error;
    return b > 0 ? format_ratio(errors(role, other).attention_error / b) : tr("—");
  };
  const Grouping best_k = best_of(TensorRole::Key), best_v = best_of(TensorRole::Value);
  m_conclusion->setText(
      tr("<p>At %1 bits, G = %2:</p><p><b>keys do best %3</b>: per-token gives %4 the attention "
         "error.</p><p><b>values do best %5</b>: per-channel gives %6 the attention error.</p>")
          .arg(bits())
          .arg(group_size())
          .arg(grouping_name(best_k), times(TensorRole::Key, Grouping::PerToken, best_k),
               grouping_name(best_v), times(TensorRole::Value, Grouping::PerChannel, best_v)));
}

void LearnQuantPage::draw_charts() {
  draw_vector(m_key_chart, TensorRole::Key);
  draw_vector(m_value_chart, TensorRole::Value);
}

void LearnQuantPage::draw_vector(QCustomPlot* plot, TensorRole role) {
  plot->clearGraphs();
  const RoleData& d = data(role);
  if (m_cache.layers.empty() || d.reconstructed[0].empty()) {
    plot->replot();
    return;
  }
  const Tensor& t = m_cache.layers.front().key;
  const int dim = t.dim();
  const int quarter = m_channels->currentData().toInt();
  const int first = quarter < 0 ? 0 : quarter * dim / 4;
  const int last = quarter < 0 ? dim : (quarter + 1) * dim / 4;
  const std::size_t base = (static_cast<std::size_t>(token()) * t.heads() + head()) * dim;
  const auto add = [&](const std::vector<float>& x, const QString& name) {
    auto* g = plot->addGraph();
    g->setName(name);
    for (int c = first; c < last; ++c) g->addData(c, x[base + c]);
    return g;
  };
  // Reconstructions as markers (a line through rounded values only zigzags), the original as
  // a line, drawn last so it stays on top.
  const double marker = quarter < 0 ? 5 : 8;
  for (int g = 0; g < kGroupings; ++g) {
    auto* graph = add(d.reconstructed[g], grouping_name(static_cast<Grouping>(g)));
    graph->setLineStyle(QCPGraph::lsNone);
    graph->setScatterStyle(
        QCPScatterStyle(kGroupingShapes[g], QPen(kGroupingColors[g], 1.4), Qt::NoBrush, marker));
  }
  auto* x = add(d.original, tr("original"));
  x->setPen(QPen(QColor(30, 30, 30), 1.2));
  x->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 3));
  plot->xAxis->setLabel(tr("channel of head %1, token %2").arg(head()).arg(token()));
  plot->yAxis->setLabel(role == TensorRole::Key ? tr("key") : tr("value"));
  plot->rescaleAxes();
  plot->xAxis->setRange(first - 1, last);
  const QCPRange y = plot->yAxis->range();
  plot->yAxis->setRange(y.lower - 0.05 * y.size(), y.upper + 0.05 * y.size());
  plot->replot();
}

}  // namespace kvlab::gui
