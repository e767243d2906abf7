#include "eviction/eviction_metrics_panel.h"

#include <QGridLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "common/explain.h"
#include "common/gui_format.h"

namespace kvlab::gui {

namespace {

const std::array<const char*, kEvictionMetricCount> kNames{
    "Policy",
    "Kept at the last step",
    "Memory (vs full cache)",
    "Memory ratio",
    "Attention mass retained",
    "Attn-output rel. error",
    "Attn-output cosine",
    "Needle retained",
    "Needle in top-k",
};

// explain.h: the definitions, shared with the Runs page.
const std::array<QString (*)(), kEvictionMetricCount> kTips{
    explain::eviction_policy,       explain::eviction_kept,           explain::eviction_memory,
    explain::eviction_memory_ratio, explain::attention_mass_retained, explain::eviction_rel_error,
    explain::eviction_cosine,       explain::needle_retained,         explain::needle_in_top_k,
};

QString needle_text(const std::optional<double>& f) {
  if (!f) return QObject::tr("— (no needle known)");
  return QObject::tr("%1 of KV heads").arg(format_percent(*f));
}

}  // namespace

EvictionMetricsPanel::EvictionMetricsPanel(QWidget* parent) : QGroupBox(tr("Results"), parent) {
  m_heading = new QLabel(this);
  m_heading->setObjectName(QStringLiteral("heading"));
  m_heading->setWordWrap(true);
  m_heading->setToolTip(
      tr("The policy shown, the tokens the sequence has at the last step, and whether the "
         "numbers cover all layers or the selected one"));
  auto* grid = new QGridLayout;
  grid->setHorizontalSpacing(18);
  grid->setVerticalSpacing(3);
  for (int m = 0; m < kEvictionMetricCount; ++m) {
    auto* name = new QLabel(tr(kNames[m]), this);
    name->setToolTip(kTips[m]());
    grid->addWidget(name, m, 0);
    for (int c = 0; c < kColumns; ++c) {
      auto* value = new QLabel(this);
      value->setTextInteractionFlags(Qt::TextSelectableByMouse);
      value->setWordWrap(true);  // two policies' numbers fit a 1024-pixel window
      value->setToolTip(name->toolTip());
      if (m == static_cast<int>(EvictionMetric::Policy)) {
        QFont bold = value->font();
        bold.setBold(true);
        value->setFont(bold);
      }
      grid->addWidget(value, m, c + 1);
      m_values[c][m] = value;
    }
  }
  grid->setColumnStretch(1, 1);
  grid->setColumnStretch(2, 1);
  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_heading);
  layout->addLayout(grid);
  clear();
}

void EvictionMetricsPanel::clear() {
  m_heading->setText(tr("Run a policy (or open a stored eviction run) to see its numbers."));
  for (auto& column : m_values) {
    for (QLabel* l : column) l->clear();
  }
}

void EvictionMetricsPanel::fill(int column, const EvictionSummary& s) {
  const auto set = [&](EvictionMetric m, const QString& text) {
    value_label(m, column)->setText(text);
  };
  set(EvictionMetric::Policy, s.label);
  const double kept_fraction = s.context > 0 ? s.kept_tokens / s.context : 0.0;
  set(EvictionMetric::Kept, tr("%1 of %2 tokens (%3)")
                                .arg(QString::number(s.kept_tokens, 'f', 1))
                                .arg(s.context)
                                .arg(format_percent(kept_fraction)));
  set(EvictionMetric::Memory,
      tr("%1 of %2")
          .arg(format_byte_count(s.memory_bytes), format_byte_count(s.full_memory_bytes)));
  set(EvictionMetric::Ratio,
      s.memory_bytes > 0 ? format_ratio(s.full_memory_bytes / s.memory_bytes) : tr("—"));
  // The needle query (the last step) pays little attention to anything but the needle: the
  // numbers of ordinary decoding leave it out.
  const auto with_without = [](double with, const std::optional<double>& without) {
    if (!without) return format_percent(with);
    return EvictionMetricsPanel::tr("%1 (%2 w/o needle query)")
        .arg(format_percent(with), format_percent(*without));
  };
  set(EvictionMetric::MassRetained, with_without(s.mass_retained, s.mass_without_needle_step));
  set(EvictionMetric::RelError, with_without(s.rel_error, s.rel_error_without_needle_step));
  set(EvictionMetric::Cosine, QString::number(s.cosine, 'f', 4));
  set(EvictionMetric::NeedleRetained, needle_text(s.needle_retained));
  set(EvictionMetric::NeedleTopK, needle_text(s.needle_in_top_k));
}

void EvictionMetricsPanel::set_summaries(const EvictionSummary& first,
                                         const std::optional<EvictionSummary>& second,
                                         const QString& origin) {
  clear();
  m_heading->setText(tr("%1 · %2 tokens, numbers over %3 · %4")
                         .arg(first.label)
                         .arg(first.context)
                         .arg(first.scope, origin));
  fill(0, first);
  if (second) fill(1, *second);
}

}  // namespace kvlab::gui
