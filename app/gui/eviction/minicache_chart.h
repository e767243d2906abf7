// MiniCache's merged layers: per layer, the memory of the full cache (outlined) and what the
// layer holds at the last step (filled; blue for the layers merged with a neighbour), a bracket
// over each pair of layers that share their tokens' directions, and the share of prompt tokens
// retained unmerged (right axis).
#pragma once

#include <vector>

#include <qcustomplot.h>

#include "eviction/eviction_press_data.h"

namespace kvlab::gui {

class MiniCacheChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit MiniCacheChart(QWidget* parent = nullptr);

  void set_data(const MiniCacheData& data);
  void clear_data(const QString& message);

  const MiniCacheData& data() const { return m_data; }
  // The bars are named "full_bars", "merged_bars" and "own_bars", the graph "retained_graph".
  // One "shared" bracket per merged pair.
  int pair_marks() const { return static_cast<int>(m_pairs.size()) / 2; }
  QString title() const { return m_title->text(); }

 private:
  QCPTextElement* m_title = nullptr;
  QCPBars* m_full = nullptr;
  QCPBars* m_merged = nullptr;
  QCPBars* m_own = nullptr;
  QCPGraph* m_retained = nullptr;
  std::vector<QCPAbstractItem*> m_pairs;  // a line and its label per pair
  MiniCacheData m_data;
};

}  // namespace kvlab::gui
