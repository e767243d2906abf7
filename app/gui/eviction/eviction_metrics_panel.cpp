#include "eviction/eviction_metrics_panel.h"

#include <QGridLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "common/explain.h"

namespace kvlab::gui {

namespace {

// The value labels' names, for finding them (column 1 has "compared_" before).
const std::array<const char*, kEvictionMetricCount> kObjectNames{
    "policy",    "kept",   "memory",          "memory_ratio", "mass_retained",
    "rel_error", "cosine", "needle_retained", "needle_top_k",
};

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
      value->setObjectName((c == 0 ? QString() : QStringLiteral("compared_")) +
                           QLatin1String(kObjectNames[m]));
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

void EvictionMetricsPanel::set_summaries(const EvictionSummary& first,
                                         const std::optional<EvictionSummary>& second,
                                         const QString& origin) {
  clear();
  m_heading->setText(eviction_metrics_heading(first, origin));
  const auto fill = [&](int column, const EvictionSummary& s) {
    const EvictionMetricTexts texts = eviction_metric_texts(s);
    for (int m = 0; m < kEvictionMetricCount; ++m) m_values[column][m]->setText(texts.values[m]);
  };
  fill(0, first);
  if (second) fill(1, *second);
}

}  // namespace kvlab::gui
