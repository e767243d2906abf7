// Memory of the streaming compressed cache over decode steps (KVComp's decode loop): stacked
// areas for the compressed part (coded payload, block metadata, codebooks, quantization
// parameters) and, above it, the fp16 buffer of the newest tokens, with the fp16 size of the same
// tokens as a dashed reference line. The saw-tooth of the buffer shows each flush into blocks.
#pragma once

#include <qcustomplot.h>

#include "common/chart_data.h"
#include "common/chart_style.h"

namespace kvlab::gui {

class StreamChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit StreamChart(QWidget* parent = nullptr);

  void set_data(const StreamSeriesData& data);
  void clear_data();

  const StreamSeriesData& data() const { return m_data; }
  // The graphs "compressed_graph", "total_graph" (compressed + buffer) and "fp16_graph", in axis
  // units of unit().bytes bytes, keyed by decode step.
  const ByteUnit& unit() const { return m_unit; }
  QString title() const { return m_title->text(); }

 private:
  QCPTextElement* m_title = nullptr;
  QCPTextElement* m_subtitle = nullptr;
  QCPGraph* m_total = nullptr;
  QCPGraph* m_compressed = nullptr;
  QCPGraph* m_fp16 = nullptr;
  StreamSeriesData m_data;
  ByteUnit m_unit;
};

}  // namespace kvlab::gui
