// The codes histogram with its pickers: which layer, keys or values, and which histogram when
// a method keeps several (age-tiered keeps one per tier).
#pragma once

#include <vector>

#include <QWidget>

#include "common/chart_data.h"

class QComboBox;
class QLabel;

namespace kvlab::gui {

class HistogramChart;
class LayerPicker;

enum class TensorPick { Keys = 0, Values = 1 };

class HistogramPanel : public QWidget {
  Q_OBJECT

 public:
  explicit HistogramPanel(QWidget* parent = nullptr);

  void set_histograms(std::vector<LayerHistograms> histograms);
  void clear();

  // Picks what is shown (the pickers follow); out-of-range picks are clamped.
  void select(int layer, TensorPick tensor, int histogram_index = 0);
  int selected_layer() const;
  TensorPick selected_tensor() const;
  int selected_histogram() const;

  // The chart is named "chart", the entropy line under it "entropy", for finding them.

 signals:
  // The layer or tensor picked changed (by a person or by select()).
  void selection_changed(int layer, kvlab::gui::TensorPick tensor);

 private:
  void refill_histogram_combo();
  void redraw();
  const std::vector<HistogramData>* current_list() const;

  std::vector<LayerHistograms> m_histograms;
  LayerPicker* m_picker = nullptr;
  QComboBox* m_which = nullptr;
  QLabel* m_entropy = nullptr;
  HistogramChart* m_chart = nullptr;
  bool m_updating = false;
};

}  // namespace kvlab::gui
