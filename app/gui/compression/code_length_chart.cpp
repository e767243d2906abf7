#include "compression/code_length_chart.h"

#include <algorithm>

#include "common/chart_style.h"
#include "common/gui_style.h"

namespace kvlab::gui {

namespace {

constexpr int kEscape = 256;

}  // namespace

CodeLengthChart::CodeLengthChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(360, 220);
  m_title = add_title(this, tr("Huffman code length vs frequency"));
  QFont note_font = font();
  note_font.setPointSize(9);
  m_note = new QCPTextElement(this, QString(), note_font);
  m_note->setTextColor(style::kMutedText);
  plotLayout()->insertRow(1);
  plotLayout()->addElement(1, 0, m_note);

  xAxis->setLabel(tr("code value"));
  yAxis->setLabel(tr("count"));
  yAxis->setNumberFormat(QStringLiteral("gb"));
  yAxis->setLabelColor(palette::kCodes.darker(120));
  yAxis2->setVisible(true);
  yAxis2->setLabel(tr("code length (bits)"));
  yAxis2->setLabelColor(palette::kCodeLength);
  auto length_ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  length_ticker->setTickStep(2.0);
  length_ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
  yAxis2->setTicker(length_ticker);
  yAxis2->grid()->setVisible(false);
  xAxis->grid()->setVisible(false);

  m_counts = new QCPBars(xAxis, yAxis);
  m_counts->setObjectName(QStringLiteral("count_bars"));
  m_counts->setName(tr("count (left)"));
  m_counts->setPen(QPen(palette::kCodes.darker(130)));
  m_counts->setBrush(palette::kCodes);

  m_lengths = addGraph(xAxis, yAxis2);
  m_lengths->setObjectName(QStringLiteral("length_graph"));
  m_lengths->setName(tr("code length in bits (right)"));
  m_lengths->setLineStyle(QCPGraph::lsStepCenter);
  m_lengths->setPen(QPen(palette::kCodeLength, 1.5));
  m_lengths->setScatterStyle(
      QCPScatterStyle(QCPScatterStyle::ssCircle, palette::kCodeLength, Qt::white, 5));

  setAutoAddPlottableToLegend(false);
  m_counts->addToLegend(legend);
  m_lengths->addToLegend(legend);
  add_legend_row(this, legend, 2);

  style_plot(this);
  clear_data(tr("Run kvcomp with a codec to see code lengths"));
}

QString CodeLengthChart::note() const {
  return m_note->text();
}

void CodeLengthChart::clear_data(const QString& message) {
  m_counts->data()->clear();
  m_lengths->data()->clear();
  m_escape_length = 0;
  m_title->setText(tr("Huffman code length vs frequency"));
  m_note->setText(message);
  xAxis->setRange(-0.5, 15.5);
  yAxis->setRange(0, 1);
  yAxis2->setRange(0, 13);
  legend->setVisible(false);
  replot();
}

void CodeLengthChart::set_data(const CodeLengthData& data, const QString& title) {
  QVector<double> x, counts, lengths;
  double max_count = 0, max_length = 0;
  int first = -1, last = -1;
  const int values = static_cast<int>(std::min<std::size_t>(data.counts.size(), kEscape));
  for (int v = 0; v < values; ++v) {
    if (data.counts[v] == 0) continue;
    const double length = v < static_cast<int>(data.bits.size())      ? data.bits[v]
                          : v < static_cast<int>(data.lengths.size()) ? data.lengths[v]
                                                                      : 0;
    x.push_back(v);
    counts.push_back(static_cast<double>(data.counts[v]));
    lengths.push_back(length);
    max_count = std::max(max_count, counts.back());
    max_length = std::max(max_length, length);
    if (first < 0) first = v;
    last = v;
  }
  m_counts->setData(x, counts, true);
  m_lengths->setData(x, lengths, true);
  m_escape_length = static_cast<int>(data.lengths.size()) > kEscape ? data.lengths[kEscape] : 0;
  max_length = std::max(max_length, static_cast<double>(m_escape_length));

  if (first < 0) first = last = 0;
  const int span = last - first + 1;
  auto ticker = QSharedPointer<QCPAxisTickerFixed>::create();
  ticker->setTickStep(span <= 16 ? 1.0 : span <= 40 ? 2.0 : span <= 80 ? 8.0 : 32.0);
  ticker->setScaleStrategy(QCPAxisTickerFixed::ssNone);
  xAxis->setTicker(ticker);
  xAxis->setRange(first - 1.2, last + 1.2);
  m_counts->setWidth(span <= 64 ? 0.8 : 1.0);
  yAxis->setRange(0, max_count > 0 ? max_count * 1.1 : 1.0);
  yAxis2->setRange(0, max_length + 1.5);

  m_title->setText(title);
  const double lo = lengths.isEmpty() ? 0 : *std::min_element(lengths.begin(), lengths.end());
  const double hi = lengths.isEmpty() ? 0 : *std::max_element(lengths.begin(), lengths.end());
  if (data.pairs) {
    m_lengths->setName(tr("mean bits per code (right)"));
    yAxis2->setLabel(tr("bits per code"));
    m_note->setText(tr("One word codes a pair of neighbouring codes; a code's bits: half its "
                       "pairs' bits, averaged · %1 code values, %2–%3 bits each")
                        .arg(x.size())
                        .arg(lo, 0, 'f', 2)
                        .arg(hi, 0, 'f', 2));
  } else {
    m_lengths->setName(tr("code length in bits (right)"));
    yAxis2->setLabel(tr("code length (bits)"));
    m_note->setText(
        m_escape_length > 0
            ? tr("%1 code values occur, %2–%3 bits each · escape (values absent from the "
                 "histogram): %4 bits + 8 raw bits")
                  .arg(x.size())
                  .arg(lo)
                  .arg(hi)
                  .arg(m_escape_length)
            : tr("%1 code values occur · no escape code").arg(x.size()));
  }
  legend->setVisible(true);
  replot();
}

}  // namespace kvlab::gui
