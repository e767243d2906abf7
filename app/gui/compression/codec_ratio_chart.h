// Per-layer compression ratio by codec: for each layer, grouped bars for bit packing, variable
// width and Huffman (the layer's ratio had its codes been coded that way, everything else equal),
// and a marker at the ratio with codes at their order-0 entropy bound.
#pragma once

#include <array>

#include <qcustomplot.h>

#include "common/chart_data.h"

namespace kvlab::gui {

class CodecRatioChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit CodecRatioChart(QWidget* parent = nullptr);

  void set_data(const CodecRatioData& data);
  void clear_data();

  // Bars of codec `index` (CodecKind order): key = layer, value = ratio.
  QCPBars* bars(int index) const { return m_bars[static_cast<std::size_t>(index)]; }
  // The entropy bound per layer is the graph named "entropy_graph".

 private:
  QCPTextElement* m_title = nullptr;
  QCPBarsGroup* m_group = nullptr;
  std::array<QCPBars*, kCodecCount> m_bars{};
  QCPGraph* m_entropy = nullptr;
};

}  // namespace kvlab::gui
