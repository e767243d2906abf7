// Passkey retrieval against the eviction budget: one line per policy (x the budget as a share
// of the prompt, y the share of pass keys found), prefill presses run with the question before
// the press drawn dashed (one legend entry per policy; the axis label says what dashed means),
// and the full cache's accuracy as a grey reference line.
#pragma once

#include <vector>

#include <qcustomplot.h>

#include "quality/needle_runs.h"

namespace kvlab::gui {

class RetrievalChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit RetrievalChart(QWidget* parent = nullptr);

  void set_data(const RetrievalChartData& data);
  void clear_data(const QString& message);

  const RetrievalChartData& data() const { return m_data; }
  // For finding them: one graph per line of the data, each named "policy_line" (its legend text
  // the line's name); the line named "full_line" is visible when the store has a run with the
  // full cache.
  QString title() const { return m_title->text(); }

 private:
  QCPTextElement* m_title = nullptr;
  QCPItemStraightLine* m_full = nullptr;
  QCPItemText* m_full_label = nullptr;
  std::vector<QCPGraph*> m_lines;
  RetrievalChartData m_data;
};

}  // namespace kvlab::gui
