// ThinK's key-channel map: one row per layer and KV head, one column per channel of the head,
// green where the prompt keys keep the channel and pale red where ThinK pruned it.
#pragma once

#include <qcustomplot.h>

#include "eviction/eviction_press_data.h"

namespace kvlab::gui {

class EvictionChannelChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit EvictionChannelChart(QWidget* parent = nullptr);

  void set_data(const EvictionChannelData& data);
  void clear_data(const QString& message);

  const EvictionChannelData& data() const { return m_data; }
  // The heat map is named "color_map": cell (channel, row) is 1 where kept, 0 where pruned.
  QString title() const { return m_title->text(); }

 private:
  QCPTextElement* m_title = nullptr;
  QCPColorMap* m_map = nullptr;
  EvictionChannelData m_data;
};

}  // namespace kvlab::gui
