#include "eviction/eviction_metrics_text.h"

#include <QCoreApplication>

#include "common/gui_format.h"

namespace kvlab::gui {

namespace {

QString tr(const char* text) {
  return QCoreApplication::translate("EvictionMetricsPanel", text);
}

QString needle_text(const std::optional<double>& f) {
  if (!f) return tr("— (no needle known)");
  return tr("%1 of KV heads").arg(format_percent(*f));
}

// The needle query (the last step) pays little attention to anything but the needle: the numbers
// of ordinary decoding leave it out.
QString with_without(double with, const std::optional<double>& without) {
  if (!without) return format_percent(with);
  return tr("%1 (%2 w/o needle query)").arg(format_percent(with), format_percent(*without));
}

}  // namespace

EvictionMetricTexts eviction_metric_texts(const EvictionSummary& s) {
  const double kept_fraction = s.context > 0 ? s.kept_tokens / s.context : 0.0;
  return {{
      s.label,
      tr("%1 of %2 tokens (%3)")
          .arg(QString::number(s.kept_tokens, 'f', 1))
          .arg(s.context)
          .arg(format_percent(kept_fraction)),
      tr("%1 of %2").arg(format_byte_count(s.memory_bytes), format_byte_count(s.full_memory_bytes)),
      s.memory_bytes > 0 ? format_ratio(s.full_memory_bytes / s.memory_bytes) : tr("—"),
      with_without(s.mass_retained, s.mass_without_needle_step),
      with_without(s.rel_error, s.rel_error_without_needle_step),
      QString::number(s.cosine, 'f', 4),
      needle_text(s.needle_retained),
      needle_text(s.needle_in_top_k),
  }};
}

QString eviction_metrics_heading(const EvictionSummary& first, const QString& origin) {
  return tr("%1 · %2 tokens, numbers over %3 · %4")
      .arg(first.label)
      .arg(first.context)
      .arg(first.scope, origin);
}

}  // namespace kvlab::gui
