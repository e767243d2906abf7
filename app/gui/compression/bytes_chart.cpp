#include "compression/bytes_chart.h"

#include <algorithm>

#include "common/gui_format.h"

namespace kvlab::gui {

namespace {

const QString kTitle = QStringLiteral("Compressed bytes by component");

QVector<double> positions() {
  QVector<double> x;
  for (int i = 0; i < kByteComponentCount; ++i) x.push_back(i + 1);
  return x;
}

QCPBars* make_bars(QCustomPlot* plot, const QString& name, const QColor& color) {
  auto* bars = new QCPBars(plot->xAxis, plot->yAxis);
  bars->setName(name);
  bars->setWidth(0.6);
  bars->setPen(QPen(color.darker(130)));
  bars->setBrush(color);
  return bars;
}

}  // namespace

BytesChart::BytesChart(QWidget* parent) : QCustomPlot(parent) {
  setMinimumSize(320, 260);
  m_title = add_title(this, kTitle);
  plotLayout()->insertRow(1);
  m_subtitle = new QCPTextElement(this, QString(), QFont(font().family(), 9));
  m_subtitle->setTextColor(QColor(80, 80, 80));
  plotLayout()->addElement(1, 0, m_subtitle);

  auto ticker = QSharedPointer<QCPAxisTickerText>::create();
  const auto x = positions();
  // Two-line tick labels so five fit side by side in a narrow chart ("zero-points" breaks after
  // its hyphen, or it runs into "residual").
  for (int i = 0; i < kByteComponentCount; ++i) {
    QString name = byte_component_names()[i];
    name.replace(QLatin1Char(' '), QLatin1Char('\n'));
    name.replace(QStringLiteral("-"), QStringLiteral("-\n"));
    ticker->addTick(x[i], name);
  }
  xAxis->setTicker(ticker);
  xAxis->setRange(0.4, kByteComponentCount + 0.6);
  xAxis->grid()->setVisible(false);
  yAxis->setLabel(QStringLiteral("bytes"));
  yAxis->setRange(0, 1);

  m_key_bars = make_bars(this, QStringLiteral("keys"), palette::kKey);
  m_key_bars->setObjectName(QStringLiteral("key_bars"));
  m_value_bars = make_bars(this, QStringLiteral("values"), palette::kValue);
  m_value_bars->setObjectName(QStringLiteral("value_bars"));
  m_value_bars->moveAbove(m_key_bars);

  add_legend_row(this, legend, 2);
  style_plot(this);
}

void BytesChart::clear_value_labels() {
  for (QCPItemText* label : m_value_labels) removeItem(label);
  m_value_labels.clear();
}

void BytesChart::clear_data() {
  clear_value_labels();
  m_key_bars->data()->clear();
  m_value_bars->data()->clear();
  m_subtitle->setText(QString());
  yAxis->setLabel(QStringLiteral("bytes"));
  yAxis->setRange(0, 1);
  replot();
}

void BytesChart::set_data(const ByteBarsData& data) {
  clear_value_labels();
  double max_stack = 0;
  for (int i = 0; i < kByteComponentCount; ++i) {
    max_stack = std::max(max_stack, data.key_bytes[i] + data.value_bytes[i]);
  }
  m_unit = byte_unit_for(max_stack);

  const auto x = positions();
  QVector<double> keys, values;
  for (int i = 0; i < kByteComponentCount; ++i) {
    keys.push_back(data.key_bytes[i] / m_unit.bytes);
    values.push_back(data.value_bytes[i] / m_unit.bytes);
  }
  m_key_bars->setData(x, keys, true);
  m_value_bars->setData(x, values, true);

  const double top = max_stack / m_unit.bytes;
  for (int i = 0; i < kByteComponentCount; ++i) {
    auto* label = new QCPItemText(this);
    label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignBottom);
    label->position->setType(QCPItemPosition::ptPlotCoords);
    label->position->setCoords(x[i], keys[i] + values[i] + top * 0.01);
    // The number over its unit: half as wide, so neighbouring labels never run together.
    label->setText(format_byte_count(data.key_bytes[i] + data.value_bytes[i])
                       .replace(QLatin1Char(' '), QLatin1Char('\n')));
    label->setTextAlignment(Qt::AlignHCenter);
    label->setFont(QFont(font().family(), 9));
    label->setColor(QColor(60, 60, 60));
    m_value_labels.push_back(label);
  }

  yAxis->setLabel(m_unit.name);
  // Headroom above the tallest bar for its label.
  yAxis->setRange(0, top > 0 ? top * 1.22 : 1.0);
  m_subtitle->setText(
      data.fp16_bytes > 0
          ? tr("%1 in all (keys + values) vs %2 in fp16")
                .arg(format_byte_count(data.total_bytes), format_byte_count(data.fp16_bytes))
          : tr("%1 in all").arg(format_byte_count(data.total_bytes)));
  replot();
}

}  // namespace kvlab::gui
