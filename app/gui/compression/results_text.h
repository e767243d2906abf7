// The Compression page's Results texts for one run (QtCore only): the heading, the nine numbers,
// the codec's row and the KV memory formula's caption, each written the way gui_format.h writes
// its unit. results_panel.h only puts them into its labels.
#pragma once

#include <array>
#include <optional>

#include <QString>

#include "common/chart_data.h"

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

struct CodecTexts {
  QString caption;                                // "huffman codes:"
  std::array<QString, kCodecMetricCount> values;  // in CodecMetric's order

  const QString& operator[](CodecMetric m) const { return values[static_cast<std::size_t>(m)]; }
};

struct ResultsTexts {
  QString heading;  // rich text: source · <b>method</b> · tokens × layers · origin …
  std::array<QString, kMetricCount> values;  // in Metric's order
  // The KV memory formula with the run's numbers, in fp16 and at the measured bits/value, and
  // the caption of the second ("at 3.75 bits/value:").
  QString fp16_formula, measured_formula, measured_caption;
  std::optional<CodecTexts> codec;  // empty when no codec ran

  const QString& operator[](Metric m) const { return values[static_cast<std::size_t>(m)]; }
};

// `origin` is the model's "computed in 0.8 s" or "stored run #12 from …" (compression_model.h).
ResultsTexts results_texts(const ReportSummary& summary, const QString& origin);

}  // namespace kvlab::gui
