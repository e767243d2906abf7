// Learn page (b)'s table of errors and its two vector charts (see learn_quant_page.h).
#include <qcustomplot.h>

#include <QComboBox>
#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>

#include "common/gui_format.h"
#include "learn/learn_quant_page.h"

namespace kvlab::gui {
namespace {

const QColor kGroupingColors[] = {{200, 55, 55}, {52, 101, 164}, {60, 150, 90}};
const QCPScatterStyle::ScatterShape kGroupingShapes[] = {
    QCPScatterStyle::ssCross, QCPScatterStyle::ssCircle, QCPScatterStyle::ssDiamond};

}  // namespace

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
