#include "compression/histogram_panel.h"

#include <algorithm>
#include <cmath>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QVBoxLayout>

#include "common/layer_picker.h"
#include "compression/histogram_chart.h"

namespace kvlab::gui {

namespace {

// Shannon entropy of the codes, in bits per code: the least an entropy coder (Huffman, as in
// KVComp) could spend per code on this histogram.
double entropy_bits(const std::vector<std::uint64_t>& counts) {
  double total = 0;
  for (auto c : counts) total += static_cast<double>(c);
  if (total <= 0) return 0;
  double h = 0;
  for (auto c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / total;
    h -= p * std::log2(p);
  }
  return h;
}

}  // namespace

HistogramPanel::HistogramPanel(QWidget* parent) : QWidget(parent) {
  m_picker = new LayerPicker(tr("Tensor"), tensor_choices(), this);
  m_picker->set_tooltips(tr("Layer whose quantized codes are counted"),
                         tr("Keys or values of that layer: each has its own codes"));
  m_which = new QComboBox(this);
  m_which->setMinimumContentsLength(14);
  m_which->setSizeAdjustPolicy(QComboBox::AdjustToContents);
  m_which->setToolTip(
      tr("Which group of codes: methods with several code widths (age-tiered: INT8 and INT4 "
         "tiers) keep one histogram per width"));
  auto* which_label = new QLabel(tr("Histogram"), this);
  which_label->setBuddy(m_which);
  which_label->setToolTip(m_which->toolTip());
  m_entropy = new QLabel(this);
  m_entropy->setObjectName(QStringLiteral("entropy"));
  m_entropy->setWordWrap(true);  // a line of its own under the pickers, wrapped when narrow
  m_entropy->setToolTip(
      tr("Code values that occur at least once, and the order-0 Shannon entropy −Σ p·log2 p of "
         "this histogram: the fewest bits per code a coder of one code at a time could reach, "
         "beside the bits each code is stored in"));
  m_chart = new HistogramChart(this);
  m_chart->setObjectName(QStringLiteral("chart"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(m_picker);
  controls->addSpacing(12);
  controls->addWidget(which_label);
  controls->addWidget(m_which);
  controls->addStretch(1);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  layout->addWidget(m_entropy);
  layout->addWidget(m_chart, 1);

  const auto picked = [this] {
    refill_histogram_combo();
    redraw();
    emit selection_changed(selected_layer(), selected_tensor());
  };
  connect(m_picker, &LayerPicker::changed, this, picked);
  connect(m_which, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
  clear();
}

void HistogramPanel::set_histograms(std::vector<LayerHistograms> histograms) {
  m_histograms = std::move(histograms);
  m_picker->set_layer_count(static_cast<int>(m_histograms.size()));
  refill_histogram_combo();
  redraw();
}

void HistogramPanel::clear() {
  set_histograms({});
}

void HistogramPanel::select(int layer, TensorPick tensor, int histogram_index) {
  m_picker->select(layer, static_cast<int>(tensor));
  refill_histogram_combo();
  {
    const QSignalBlocker block(m_which);
    m_which->setCurrentIndex(std::clamp(histogram_index, 0, std::max(0, m_which->count() - 1)));
  }
  redraw();
  emit selection_changed(selected_layer(), selected_tensor());
}

int HistogramPanel::selected_layer() const {
  return m_picker->layer();
}

TensorPick HistogramPanel::selected_tensor() const {
  return m_picker->choice() == 1 ? TensorPick::Values : TensorPick::Keys;
}

int HistogramPanel::selected_histogram() const {
  return std::max(0, m_which->currentIndex());
}

const std::vector<HistogramData>* HistogramPanel::current_list() const {
  const int layer = m_picker->layer();
  if (layer < 0 || layer >= static_cast<int>(m_histograms.size())) return nullptr;
  const LayerHistograms& lh = m_histograms[layer];
  return selected_tensor() == TensorPick::Keys ? &lh.key : &lh.value;
}

void HistogramPanel::refill_histogram_combo() {
  const QString previous = m_which->currentText();
  const QSignalBlocker block(m_which);
  m_which->clear();
  if (const auto* list = current_list()) {
    for (const auto& h : *list) {
      m_which->addItem(QStringLiteral("%1 (%2-bit)").arg(h.label).arg(h.bits));
    }
  }
  const int same = m_which->findText(previous);
  m_which->setCurrentIndex(same >= 0 ? same : 0);
  m_which->setEnabled(m_which->count() > 1);
}

void HistogramPanel::redraw() {
  const auto* list = current_list();
  const int index = selected_histogram();
  if (!list || list->empty() || index >= static_cast<int>(list->size())) {
    m_entropy->clear();
    m_chart->clear_data(m_histograms.empty() ? tr("Run a method to see its codes")
                                             : tr("No quantized codes for this layer and tensor"));
    return;
  }
  const HistogramData& h = (*list)[index];
  const QString tensor = selected_tensor() == TensorPick::Keys ? tr("keys") : tr("values");
  m_chart->set_histogram(h, tr("Quantized codes: layer %1 %2, %3")
                                .arg(m_histograms[m_picker->layer()].layer)
                                .arg(tensor, h.label));
  int used = 0;
  for (auto c : h.counts) used += c > 0 ? 1 : 0;
  m_entropy->setText(tr("%1 of %2 codes used · entropy %3 of %4 bits per code")
                         .arg(used)
                         .arg(h.counts.size())
                         .arg(QString::number(entropy_bits(h.counts), 'f', 2))
                         .arg(h.bits));
}

}  // namespace kvlab::gui
