// The numbers of a run: ratio, bits per value, element-wise and attention-level errors, and the
// KV memory formula with the run's own numbers substituted (fp16 and measured).
#pragma once

#include <array>

#include <QGroupBox>

#include "common/chart_data.h"

class QLabel;

namespace kvlab::gui {

enum class Metric {
  Ratio,
  BitsPerValue,
  Mse,
  MaxAbs,
  SnrDb,
  LogitRmse,
  SoftmaxKl,
  AttnOutputRelError,
  AttnOutputCosine,
};
inline constexpr int kMetricCount = 9;

// The entropy-coding numbers, shown in one more row when a codec ran.
enum class CodecMetric { EntropyBits, PayloadBits, MetadataBytes, CodebookBytes };
inline constexpr int kCodecMetricCount = 4;

class ResultsPanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit ResultsPanel(QWidget* parent = nullptr);

  void set_summary(const ReportSummary& summary, const QString& origin);
  void clear();

  QLabel* value_label(Metric metric) const { return m_values[static_cast<int>(metric)]; }
  QLabel* codec_value_label(CodecMetric metric) const {
    return m_codec_values[static_cast<int>(metric)];
  }
  // The heading is named "heading", the codec row (hidden when no codec ran) "codec_row" and its
  // caption ("huffman codes:") "codec_caption", for finding them.

 private:
  QLabel* m_heading = nullptr;
  std::array<QLabel*, kMetricCount> m_values{};
  QWidget* m_codec_row = nullptr;
  QLabel* m_codec_caption = nullptr;
  std::array<QLabel*, kCodecMetricCount> m_codec_values{};
  QLabel* m_fp16_formula = nullptr;
  QLabel* m_measured_formula = nullptr;
  QLabel* m_measured_caption = nullptr;
};

}  // namespace kvlab::gui
