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

  // For finding them: the bars of each codec (key = layer, value = ratio), all four named
  // "codec_bars", added in CodecKind order; the entropy bound per layer, the graph named
  // "entropy_graph".

 private:
  QCPTextElement* m_title = nullptr;
  QCPBarsGroup* m_group = nullptr;
  std::array<QCPBars*, kCodecCount> m_bars{};
  QCPGraph* m_entropy = nullptr;
};

}  // namespace kvlab::gui
