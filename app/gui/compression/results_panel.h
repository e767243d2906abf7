// The numbers of a run: ratio, bits per value, element-wise and attention-level errors, and the
// KV memory formula with the run's own numbers substituted (fp16 and measured). The texts are
// results_text.h's; the panel lays them out.
#pragma once

#include <array>

#include <QGroupBox>

#include "common/chart_data.h"
#include "compression/results_text.h"

class QLabel;

namespace kvlab::gui {

class ResultsPanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit ResultsPanel(QWidget* parent = nullptr);

  void set_summary(const ReportSummary& summary, const QString& origin);
  void clear();

  // For finding them, the labels are named: "heading"; the numbers (Metric's order) "ratio",
  // "bits_per_value", "mse", "max_abs", "snr", "logit_rmse", "softmax_kl",
  // "attn_output_rel_error", "attn_output_cosine"; the codec row (hidden when no codec ran)
  // "codec_row", its caption ("huffman codes:") "codec_caption" and its numbers (CodecMetric's
  // order) "entropy", "payload", "codec_metadata", "codebook"; the formulas "fp16_formula" and
  // "measured_formula", the second's caption "measured_caption".

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
