// The numbers of an eviction run, one column per policy: tokens kept, memory against the full
// cache and the ratio, attention mass retained, attention-output error and cosine, and whether
// the planted needle survived (and is still among the top-k attended entries). The texts are
// eviction_metrics_text.h's; the panel lays them out.
#pragma once

#include <array>
#include <optional>

#include <QGroupBox>

#include "eviction/eviction_chart_data.h"
#include "eviction/eviction_metrics_text.h"

class QLabel;

namespace kvlab::gui {

class EvictionMetricsPanel : public QGroupBox {
  Q_OBJECT

 public:
  static constexpr int kColumns = 2;  // the policy, and the one compared with it

  explicit EvictionMetricsPanel(QWidget* parent = nullptr);

  void set_summaries(const EvictionSummary& first, const std::optional<EvictionSummary>& second,
                     const QString& origin);
  void clear();

  // For finding them, the labels are named: "heading"; the first policy's numbers (EvictionMetric's
  // order) "policy", "kept", "memory", "memory_ratio", "mass_retained", "rel_error", "cosine",
  // "needle_retained", "needle_top_k"; the compared policy's the same with "compared_" before.

 private:
  QLabel* m_heading = nullptr;
  std::array<std::array<QLabel*, kEvictionMetricCount>, kColumns> m_values{};
};

}  // namespace kvlab::gui
