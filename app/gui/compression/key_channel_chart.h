// "Key channel magnitudes": per channel of the head, the largest |k| before a rotation (filled
// steps) and after it (a line), so outlier channels and what a rotation does to them show at a
// glance. Fed a KeyChannelSeries; never calls the engine.
#pragma once

#include <qcustomplot.h>

#include "compression/key_channel_data.h"

namespace kvlab::gui {

class KeyChannelChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit KeyChannelChart(QWidget* parent = nullptr);

  void set_data(const KeyChannelSeries& series);
  // Empties the chart; `why` takes the title's place ("Run to see ...").
  void clear_data(const QString& why);
  // The graphs are named "before_graph" and "after_graph" (the rotation).
  QString title() const;

 private:
  QCPTextElement* m_title = nullptr;
  QCPGraph* m_before = nullptr;
  QCPGraph* m_after = nullptr;
};

}  // namespace kvlab::gui
