#include "compression/code_length_panel.h"

#include <algorithm>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>

#include "common/gui_style.h"
#include "common/layer_picker.h"
#include "compression/code_length_chart.h"

namespace kvlab::gui {

CodeLengthPanel::CodeLengthPanel(QWidget* parent) : QWidget(parent) {
  m_picker = new LayerPicker(tr("Tensor"), tensor_choices(), this);
  m_picker->set_tooltips(tr("Layer whose Huffman codebook is shown"),
                         tr("Keys and values have a codebook each, per layer"));
  m_about = new QLabel(this);
  m_about->setWordWrap(true);  // on two lines rather than widen the page past a laptop's
  style::make_muted(m_about);
  m_chart = new CodeLengthChart(this);
  m_chart->setObjectName(QStringLiteral("chart"));

  auto* controls = new QHBoxLayout;
  controls->addWidget(m_picker);
  controls->addSpacing(12);
  controls->addWidget(m_about, 1);

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(controls);
  layout->addWidget(m_chart, 1);

  const auto changed = [this] {
    redraw();
    emit selection_changed(selected_layer(), selected_tensor());
  };
  connect(m_picker, &LayerPicker::changed, this, changed);
  clear();
}

void CodeLengthPanel::set_code_lengths(std::vector<LayerCodeLengths> code_lengths,
                                       const QString& codec) {
  m_data = std::move(code_lengths);
  m_codec = codec;
  m_picker->set_layer_count(static_cast<int>(m_data.size()));
  m_picker->setEnabled(!m_data.empty());
  redraw();
}

void CodeLengthPanel::clear() {
  set_code_lengths({}, QString());
}

void CodeLengthPanel::select(int layer, TensorPick tensor) {
  m_picker->select(layer, static_cast<int>(tensor));
  redraw();
  emit selection_changed(selected_layer(), selected_tensor());
}

int CodeLengthPanel::selected_layer() const {
  return m_picker->layer();
}

TensorPick CodeLengthPanel::selected_tensor() const {
  return m_picker->choice() == 1 ? TensorPick::Values : TensorPick::Keys;
}

void CodeLengthPanel::redraw() {
  const int layer = m_picker->layer();
  if (m_data.empty() || layer < 0 || layer >= static_cast<int>(m_data.size())) {
    m_about->setText(m_data.empty() ? tr("No codec ran on the shown run.") : QString());
    m_chart->clear_data(tr("Run kvcomp with a codec (Method → Codec) to see code lengths"));
    return;
  }
  const LayerCodeLengths& l = m_data[layer];
  const bool keys = selected_tensor() == TensorPick::Keys;
  const CodeLengthData& d = keys ? l.key : l.value;
  if (d.lengths.empty() || d.counts.empty()) {
    m_about->clear();
    m_chart->clear_data(tr("No code lengths for this layer and tensor"));
    return;
  }
  m_about->setText(
      m_codec == QStringLiteral("huffman")
          ? tr("The codebook this run's Huffman coding used.")
          : tr("The Huffman codebook built for comparison (this run used %1).").arg(m_codec));
  m_chart->set_data(d, (d.pairs ? tr("Huffman bits per code vs frequency (pair codebook): layer "
                                     "%1 %2")
                                : tr("Huffman code length vs frequency: layer %1 %2"))
                           .arg(l.layer)
                           .arg(keys ? tr("keys") : tr("values")));
}

}  // namespace kvlab::gui
