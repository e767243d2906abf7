// Where a prefill press spent its budget: per layer, the prompt tokens its budget allows (an
// outlined bar: PyramidKV's pyramid) and those kept (filled, the mean over KV heads); below, a
// layers × KV heads heat map of the prompt tokens each head kept (Ada-KV's spread over heads).
#pragma once

#include <qcustomplot.h>

#include "eviction/eviction_press_data.h"

namespace kvlab::gui {

class EvictionBudgetChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit EvictionBudgetChart(QWidget* parent = nullptr);

  void set_data(const EvictionBudgetData& data);
  void clear_data(const QString& message);

  const EvictionBudgetData& data() const { return m_data; }
  // The bars are named "budget_bars" and "kept_bars"; the heat map "color_map", whose cell
  // (layer, head) holds the prompt tokens the head kept.
  QString title() const { return m_title->text(); }

 private:
  QCPTextElement* m_title = nullptr;
  QCPAxisRect* m_heads_rect = nullptr;
  QCPBars* m_budget = nullptr;
  QCPBars* m_kept = nullptr;
  QCPColorMap* m_map = nullptr;
  QCPColorScale* m_scale = nullptr;
  EvictionBudgetData m_data;
};

}  // namespace kvlab::gui
