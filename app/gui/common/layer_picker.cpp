#include "common/layer_picker.h"
#include "common/number_fields.h"

#include <algorithm>

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>

namespace kvlab::gui {

QStringList tensor_choices() {
  return {QObject::tr("keys"), QObject::tr("values")};
}

LayerPicker::LayerPicker(const QString& choice_label, const QStringList& choices, QWidget* parent)
    : QWidget(parent) {
  m_layer = new IntField(this);
  m_layer->setObjectName(QStringLiteral("layer"));
  m_layer->setRange(0, 0);
  m_choice = new QComboBox(this);
  m_choice->setObjectName(QStringLiteral("choice"));
  m_choice->addItems(choices);
  m_choice->setSizeAdjustPolicy(QComboBox::AdjustToContents);

  m_row = new QHBoxLayout(this);
  m_row->setContentsMargins(0, 0, 0, 0);
  m_layer_label = new QLabel(tr("Layer"), this);
  m_layer_label->setBuddy(m_layer);
  m_choice_label = new QLabel(choice_label, this);
  m_choice_label->setBuddy(m_choice);
  set_tooltips(tr("The layer shown (0 is the first)"), tr("Which one of the layer is shown"));
  m_row->addWidget(m_layer_label);
  m_row->addWidget(m_layer);
  m_row->addSpacing(12);
  m_row->addWidget(m_choice_label);
  m_row->addWidget(m_choice);

  const auto emit_changed = [this] { emit changed(layer(), choice()); };
  connect(m_layer, &QSpinBox::valueChanged, this, emit_changed);
  connect(m_choice, &QComboBox::currentIndexChanged, this, emit_changed);
}

void LayerPicker::set_layer_count(int count) {
  const QSignalBlocker block(m_layer);
  m_layer->setRange(0, std::max(0, count - 1));  // QSpinBox clamps the value
}

void LayerPicker::set_choices(const QStringList& choices) {
  const int previous = m_choice->currentIndex();
  const QSignalBlocker block(m_choice);
  m_choice->clear();
  m_choice->addItems(choices);
  m_choice->setCurrentIndex(std::clamp(previous, 0, std::max(0, m_choice->count() - 1)));
}

void LayerPicker::select(int layer, int choice) {
  const QSignalBlocker block_layer(m_layer);
  const QSignalBlocker block_choice(m_choice);
  m_layer->setValue(layer);
  m_choice->setCurrentIndex(std::clamp(choice, 0, std::max(0, m_choice->count() - 1)));
}

void LayerPicker::set_tooltips(const QString& layer_tip, const QString& choice_tip) {
  m_layer->setToolTip(layer_tip);
  m_layer_label->setToolTip(layer_tip);
  m_choice->setToolTip(choice_tip);
  m_choice_label->setToolTip(choice_tip);
}

int LayerPicker::layer() const {
  return m_layer->value();
}

int LayerPicker::choice() const {
  return std::max(0, m_choice->currentIndex());
}

}  // namespace kvlab::gui
