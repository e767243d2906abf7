// The Huffman code-length chart with its pickers (layer, keys or values). The Compression view
// keeps the pickers in step with the codes histogram's.
#pragma once

#include <vector>

#include <QWidget>

#include "common/chart_data.h"
#include "compression/histogram_panel.h"

class QLabel;

namespace kvlab::gui {

class CodeLengthChart;
class LayerPicker;

class CodeLengthPanel : public QWidget {
  Q_OBJECT

 public:
  explicit CodeLengthPanel(QWidget* parent = nullptr);

  // Empty when no codec ran: the chart then says how to get code lengths.
  void set_code_lengths(std::vector<LayerCodeLengths> code_lengths, const QString& codec);
  void clear();
  bool has_data() const { return !m_data.empty(); }

  // Picks what is shown (the pickers follow); the layer is clamped. Emits selection_changed.
  void select(int layer, TensorPick tensor);
  int selected_layer() const;
  TensorPick selected_tensor() const;

  // The chart is named "chart", for finding it.

 signals:
  void selection_changed(int layer, kvlab::gui::TensorPick tensor);

 private:
  void redraw();

  std::vector<LayerCodeLengths> m_data;
  QString m_codec;
  LayerPicker* m_picker = nullptr;
  QLabel* m_about = nullptr;
  CodeLengthChart* m_chart = nullptr;
};

}  // namespace kvlab::gui
