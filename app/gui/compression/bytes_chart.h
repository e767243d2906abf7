// Bar chart of the compressed bytes by component (codes, scales, zero-points, residual fp16,
// metadata), keys and values stacked, with the total of each bar written above it.
#pragma once

#include <QVector>

#include <qcustomplot.h>

#include "common/chart_data.h"
#include "common/chart_style.h"

namespace kvlab::gui {

class BytesChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit BytesChart(QWidget* parent = nullptr);

  void set_data(const ByteBarsData& data);
  void clear_data();

  // What is drawn: the bars "key_bars" and "value_bars" (bar i is component i,
  // byte_component_names()), in axis units of unit().
  const ByteUnit& unit() const { return m_unit; }

 private:
  void clear_value_labels();

  QCPTextElement* m_title = nullptr;
  QCPTextElement* m_subtitle = nullptr;
  QCPBars* m_key_bars = nullptr;
  QCPBars* m_value_bars = nullptr;
  QVector<QCPItemText*> m_value_labels;
  ByteUnit m_unit;
};

}  // namespace kvlab::gui
