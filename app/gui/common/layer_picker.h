// The picker row every per-layer chart shares: "Layer [spin]  <What> [combo]", where the combo
// picks keys or values (histograms, code lengths) or a KV head (eviction maps). select() sets
// both without emitting; a person's change emits changed().
#pragma once

#include <QStringList>
#include <QWidget>

class QComboBox;
class QHBoxLayout;
class QLabel;
class QSpinBox;

namespace kvlab::gui {

class LayerPicker : public QWidget {
  Q_OBJECT

 public:
  // `choice_label` names the combo ("Tensor", "KV head"); `choices` fills it.
  LayerPicker(const QString& choice_label, const QStringList& choices, QWidget* parent = nullptr);

  // Layers 0..count-1 (at least one entry shown); the value is clamped, not reset.
  void set_layer_count(int count);
  void set_choices(const QStringList& choices);  // keeps the index when it still exists
  // Clamps both and emits nothing.
  void select(int layer, int choice);
  int layer() const;
  int choice() const;  // 0 when the combo is empty
  // What the layer and the choice pick; each caption shows its control's tooltip too.
  void set_tooltips(const QString& layer_tip, const QString& choice_tip);

  // The layer spin box is named "layer", the combo "choice", for finding them.
  // Where callers add their own widgets after the pickers.
  QHBoxLayout* row() const { return m_row; }

 signals:
  void changed(int layer, int choice);

 private:
  QSpinBox* m_layer = nullptr;
  QComboBox* m_choice = nullptr;
  QLabel* m_layer_label = nullptr;
  QLabel* m_choice_label = nullptr;
  QHBoxLayout* m_row = nullptr;
};

// "keys", "values": the tensor choices of the histogram and code-length pickers.
QStringList tensor_choices();

}  // namespace kvlab::gui
