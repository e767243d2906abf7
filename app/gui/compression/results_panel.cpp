#include "compression/results_panel.h"

#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QResizeEvent>
#include <QVBoxLayout>
#include <algorithm>
#include <utility>
#include <vector>

#include "common/explain.h"

namespace kvlab::gui {

namespace {

struct MetricInfo {
  const char* name;
  const char* object_name;  // the value label's, for finding it
  QString (*tooltip)();     // explain.h: the texts the Runs page shares
};

// Same order as Metric.
constexpr std::array<MetricInfo, kMetricCount> kMetrics{{
    {"Ratio", "ratio", explain::ratio},
    {"Bits / value", "bits_per_value", explain::bits_per_value},
    {"MSE", "mse", explain::mse},
    {"Max abs error", "max_abs", explain::max_abs_error},
    {"SNR", "snr", explain::snr},
    {"Logit RMSE", "logit_rmse", explain::logit_rmse},
    {"Softmax KL", "softmax_kl", explain::softmax_kl},
    {"Attn-out rel. error", "attn_output_rel_error", explain::attn_output_rel_error},
    {"Attn-out cosine", "attn_output_cosine", explain::attn_output_cosine},
}};

// Same order as CodecMetric.
constexpr std::array<MetricInfo, kCodecMetricCount> kCodecMetrics{{
    {"Entropy", "entropy", explain::entropy},
    {"Payload", "payload", explain::payload},
    {"Offsets + counts", "codec_metadata", explain::codec_metadata},
    {"Codebook", "codebook", explain::codebook},
}};

QLabel* selectable_label(QWidget* parent) {
  auto* label = new QLabel(parent);
  label->setTextInteractionFlags(Qt::TextSelectableByMouse);
  return label;
}

// Name/value pairs in as many columns as the width allows, up to `max_columns`: three on a wide
// window, fewer on a 1024-pixel one, so the panel never makes the page scroll sideways. Its
// minimum width is one column's.
class MetricGrid : public QWidget {
 public:
  MetricGrid(int max_columns, QWidget* parent)
      : QWidget(parent), m_max_columns(max_columns), m_columns(max_columns) {
    m_grid = new QGridLayout(this);
    m_grid->setContentsMargins(0, 0, 0, 0);
    m_grid->setHorizontalSpacing(kSpacing);
    m_grid->setVerticalSpacing(4);
    m_grid->setSizeConstraint(QLayout::SetNoConstraint);
  }

  void add(QLabel* name, QLabel* value) {
    m_pairs.push_back({name, value});
    place(m_columns);
  }

  // As narrow as one column; as tall as the rows of the columns shown now (a resize that changes
  // the columns asks the page to lay out again).
  QSize minimumSizeHint() const override { return {width_for(1), height_for(m_columns)}; }
  QSize sizeHint() const override { return {width_for(m_max_columns), height_for(m_columns)}; }

 protected:
  void resizeEvent(QResizeEvent* event) override {
    const int columns = columns_for(event->size().width());
    if (columns != m_columns) place(columns);
    QWidget::resizeEvent(event);
  }

 private:
  static constexpr int kSpacing = 10;

  int pair_width() const {
    int name = 0, value = 0;
    for (const auto& [n, v] : m_pairs) {
      name = std::max(name, n->sizeHint().width());
      value = std::max({value, v->minimumWidth(), v->sizeHint().width()});
    }
    return name + kSpacing + value;
  }
  int width_for(int columns) const { return columns * pair_width() + (columns - 1) * kSpacing; }
  int height_for(int columns) const {
    int row = 0;
    for (const auto& [n, v] : m_pairs)
      row = std::max({row, n->sizeHint().height(), v->sizeHint().height()});
    const int rows = (static_cast<int>(m_pairs.size()) + columns - 1) / columns;
    return rows * row + std::max(rows - 1, 0) * m_grid->verticalSpacing();
  }
  int columns_for(int width) const {
    int columns = m_max_columns;
    while (columns > 1 && width_for(columns) > width) --columns;
    return columns;
  }
  void place(int columns) {
    m_columns = columns;
    for (const auto& [n, v] : m_pairs) {
      m_grid->removeWidget(n);
      m_grid->removeWidget(v);
    }
    for (int c = 0; c < 2 * m_max_columns; ++c) m_grid->setColumnStretch(c, 0);
    for (std::size_t i = 0; i < m_pairs.size(); ++i) {
      const int row = static_cast<int>(i) / columns, column = 2 * (static_cast<int>(i) % columns);
      m_grid->addWidget(m_pairs[i].first, row, column, Qt::AlignRight);
      m_grid->addWidget(m_pairs[i].second, row, column + 1);
    }
    for (int c = 1; c < 2 * columns; c += 2) m_grid->setColumnStretch(c, 1);
    updateGeometry();
  }

  int m_max_columns;
  int m_columns;
  QGridLayout* m_grid;
  std::vector<std::pair<QLabel*, QLabel*>> m_pairs;
};

}  // namespace

ResultsPanel::ResultsPanel(QWidget* parent) : QGroupBox(tr("Results"), parent) {
  m_heading = selectable_label(this);
  m_heading->setObjectName(QStringLiteral("heading"));
  m_heading->setWordWrap(true);
  m_heading->setToolTip(
      tr("The run shown: its source, method, tokens × layers, whether it was computed now or "
         "reopened from the runs database, and where the entropy coder ran"));

  auto* grid = new MetricGrid(3, this);
  QFont value_font = font();
  value_font.setBold(true);
  for (int i = 0; i < kMetricCount; ++i) {
    auto* name = new QLabel(tr(kMetrics[i].name) + QStringLiteral(":"), grid);
    name->setToolTip(kMetrics[i].tooltip());
    m_values[i] = selectable_label(grid);
    m_values[i]->setObjectName(QLatin1String(kMetrics[i].object_name));
    m_values[i]->setFont(value_font);
    m_values[i]->setToolTip(name->toolTip());
    m_values[i]->setMinimumWidth(90);
    grid->add(name, m_values[i]);
  }

  // The codec's numbers: a caption line, then the pairs in as many columns as fit.
  m_codec_row = new QWidget(this);
  m_codec_row->setObjectName(QStringLiteral("codec_row"));
  auto* codec = new QVBoxLayout(m_codec_row);
  codec->setContentsMargins(0, 4, 0, 0);
  codec->setSpacing(2);
  m_codec_caption = new QLabel(m_codec_row);
  m_codec_caption->setObjectName(QStringLiteral("codec_caption"));
  QFont caption_font = font();
  caption_font.setItalic(true);
  m_codec_caption->setFont(caption_font);
  m_codec_caption->setToolTip(
      tr("The codec that entropy-coded KVComp's uint8 codes; the numbers below it cover all of "
         "its streams, every layer's K and V"));
  codec->addWidget(m_codec_caption);
  auto* codec_grid = new MetricGrid(kCodecMetricCount, m_codec_row);
  for (int i = 0; i < kCodecMetricCount; ++i) {
    auto* name = new QLabel(tr(kCodecMetrics[i].name) + QStringLiteral(":"), codec_grid);
    name->setToolTip(kCodecMetrics[i].tooltip());
    m_codec_values[i] = selectable_label(codec_grid);
    m_codec_values[i]->setObjectName(QLatin1String(kCodecMetrics[i].object_name));
    m_codec_values[i]->setFont(value_font);
    m_codec_values[i]->setToolTip(name->toolTip());
    codec_grid->add(name, m_codec_values[i]);
  }
  codec->addWidget(codec_grid);

  auto* formula = new QGridLayout;
  formula->setHorizontalSpacing(10);
  auto* fp16_caption = new QLabel(tr("KV memory, fp16:"), this);
  fp16_caption->setToolTip(explain::fp16_formula());
  formula->addWidget(fp16_caption, 0, 0, Qt::AlignRight);
  m_measured_caption = new QLabel(tr("at measured bits:"), this);
  m_measured_caption->setObjectName(QStringLiteral("measured_caption"));
  m_measured_caption->setToolTip(explain::measured_formula());
  formula->addWidget(m_measured_caption, 1, 0, Qt::AlignRight);
  m_fp16_formula = selectable_label(this);
  m_measured_formula = selectable_label(this);
  m_fp16_formula->setObjectName(QStringLiteral("fp16_formula"));
  m_measured_formula->setObjectName(QStringLiteral("measured_formula"));
  m_fp16_formula->setToolTip(explain::fp16_formula());
  m_measured_formula->setToolTip(explain::measured_formula());
  QFont mono = font();
  mono.setFamily(QStringLiteral("monospace"));
  mono.setStyleHint(QFont::TypeWriter);
  m_fp16_formula->setFont(mono);
  m_measured_formula->setFont(mono);
  // A long formula wraps at its spaces rather than make the page wider than a laptop's window.
  m_fp16_formula->setWordWrap(true);
  m_measured_formula->setWordWrap(true);
  formula->addWidget(m_fp16_formula, 0, 1);
  formula->addWidget(m_measured_formula, 1, 1);
  formula->setColumnStretch(1, 1);

  auto* layout = new QVBoxLayout(this);
  layout->addWidget(m_heading);
  layout->addWidget(grid);
  layout->addWidget(m_codec_row);
  layout->addSpacing(4);
  layout->addLayout(formula);
  clear();
}

void ResultsPanel::clear() {
  m_heading->setText(tr("No run yet: pick a source and a method, then press Run."));
  for (QLabel* v : m_values) v->setText(QStringLiteral("–"));
  m_fp16_formula->setText(QStringLiteral("–"));
  m_measured_formula->setText(QStringLiteral("–"));
  m_measured_caption->setText(tr("at measured bits:"));
  for (QLabel* v : m_codec_values) v->setText(QStringLiteral("–"));
  m_codec_row->setVisible(false);
}

void ResultsPanel::set_summary(const ReportSummary& summary, const QString& origin) {
  const ResultsTexts t = results_texts(summary, origin);
  m_heading->setText(t.heading);
  for (int i = 0; i < kMetricCount; ++i) m_values[i]->setText(t.values[i]);
  m_fp16_formula->setText(t.fp16_formula);
  m_measured_formula->setText(t.measured_formula);
  m_measured_caption->setText(t.measured_caption);
  m_codec_row->setVisible(t.codec.has_value());
  if (t.codec) {
    m_codec_caption->setText(t.codec->caption);
    for (int i = 0; i < kCodecMetricCount; ++i) m_codec_values[i]->setText(t.codec->values[i]);
  }
}

}  // namespace kvlab::gui
