// The Eviction page's Results texts for one policy (QtCore only): tokens kept, memory against the
// full cache and the ratio, attention mass retained, attention-output error and cosine, and the
// needle's survival, each written the way gui_format.h writes its unit. eviction_metrics_panel.h
// only puts them into its labels, a column per policy.
#pragma once

#include <array>

#include <QString>

#include "eviction/eviction_chart_data.h"

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

struct EvictionMetricTexts {
  std::array<QString, kEvictionMetricCount> values;  // in EvictionMetric's order

  const QString& operator[](EvictionMetric m) const { return values[static_cast<std::size_t>(m)]; }
};

EvictionMetricTexts eviction_metric_texts(const EvictionSummary& summary);
// "h2o budget 25% · 96 tokens, numbers over all layers · computed in 0.1 s": the first policy's
// label and context, the scope, and `origin` (eviction_model.h).
QString eviction_metrics_heading(const EvictionSummary& first, const QString& origin);

}  // namespace kvlab::gui
