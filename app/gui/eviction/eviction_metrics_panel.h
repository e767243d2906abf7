// The numbers of an eviction run, one column per policy: tokens kept, memory against the full
// cache and the ratio, attention mass retained, attention-output error and cosine, and whether
// the planted needle survived (and is still among the top-k attended entries).
#pragma once

#include <array>
#include <optional>

#include <QGroupBox>

#include "eviction/eviction_chart_data.h"

class QLabel;

namespace kvlab::gui {

enum class EvictionMetric {
  Policy,
  Kept,
  Memory,
  Ratio,
  MassRetained,
  RelError,
  Cosine,
  NeedleRetained,
  NeedleTopK,
};
inline constexpr int kEvictionMetricCount = 9;

class EvictionMetricsPanel : public QGroupBox {
  Q_OBJECT

 public:
  static constexpr int kColumns = 2;  // the policy, and the one compared with it

  explicit EvictionMetricsPanel(QWidget* parent = nullptr);

  void set_summaries(const EvictionSummary& first, const std::optional<EvictionSummary>& second,
                     const QString& origin);
  void clear();

  QLabel* value_label(EvictionMetric metric, int column = 0) const {
    return m_values[static_cast<std::size_t>(column)][static_cast<std::size_t>(metric)];
  }
  // The heading is named "heading", for finding it.

 private:
  void fill(int column, const EvictionSummary& s);

  QLabel* m_heading = nullptr;
  std::array<std::array<QLabel*, kEvictionMetricCount>, kColumns> m_values{};
};

}  // namespace kvlab::gui
