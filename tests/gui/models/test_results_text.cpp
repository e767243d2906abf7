// The Compression page's Results texts (results_text.h) with no widget: a summary written by hand
// against the texts a person reads, and a real run's numbers against texts computed here from the
// engine's report with printf's rules (the app's are the command line's, run_records.h).
#include <gtest/gtest.h>

#include <QString>

#include "compression/report_charts.h"
#include "compression/results_text.h"
#include "gui_test_support.h"

namespace kvlab::gui {
namespace {

ReportSummary hand_written_summary() {
  ReportSummary s;
  s.source = QStringLiteral("synthetic tiny");
  s.method_label = QStringLiteral("kivi <2 bits>");
  s.tokens = 96;
  s.layers = 2;
  s.ratio = 4.2666;
  s.bits_per_value = 3.75;
  s.mse = 0.000123456;
  s.max_abs = 1234.4;
  s.snr_db = 24.06;
  s.logit_rmse = 1.2e-5;
  s.softmax_kl = 0;
  s.attn_output_rel_error = 0.0123;
  s.attn_output_cosine = 0.9999876;
  s.fp16_formula = QStringLiteral("2 × 2 layers × … = 12.0 KiB");
  s.measured_formula = QStringLiteral("2 × 2 layers × … = 2.8 KiB");
  return s;
}

TEST(ResultsText, EachNumberInItsUnit) {
  const ResultsTexts t = results_texts(hand_written_summary(), QStringLiteral("computed in 12 ms"));
  EXPECT_EQ(t[Metric::Ratio], QStringLiteral("4.27×"));
  EXPECT_EQ(t[Metric::BitsPerValue], QStringLiteral("3.75"));
  EXPECT_EQ(t[Metric::Mse], QStringLiteral("0.000123"));
  EXPECT_EQ(t[Metric::MaxAbs], QStringLiteral("1234"));  // no exponent from a thousand up
  EXPECT_EQ(t[Metric::SnrDb], QStringLiteral("24.1 dB"));
  EXPECT_EQ(t[Metric::LogitRmse], QStringLiteral("1.2e-05"));
  EXPECT_EQ(t[Metric::SoftmaxKl], QStringLiteral("0"));
  EXPECT_EQ(t[Metric::AttnOutputRelError], QStringLiteral("1.23 %"));
  EXPECT_EQ(t[Metric::AttnOutputCosine], QStringLiteral("0.99999"));
  EXPECT_EQ(t.measured_caption, QStringLiteral("at 3.75 bits/value:"));
  EXPECT_EQ(t.fp16_formula, QStringLiteral("2 × 2 layers × … = 12.0 KiB"));
  EXPECT_EQ(t.measured_formula, QStringLiteral("2 × 2 layers × … = 2.8 KiB"));
  EXPECT_FALSE(t.codec.has_value());
}

TEST(ResultsText, HeadingEscapesTheLabelsAndAddsWhatIsKnown) {
  ReportSummary s = hand_written_summary();
  EXPECT_EQ(results_texts(s, QStringLiteral("stored run #3")).heading,
            QStringLiteral("synthetic tiny · <b>kivi &lt;2 bits&gt;</b> · 96 tokens × 2 layers · "
                           "stored run #3"));
  s.backend = QStringLiteral("cpu: Xeon");
  s.peak_memory_bytes = 1.5 * 1024 * 1024;
  s.stages = QStringLiteral("quantize cpu 3 ms, code <cpu>");
  EXPECT_EQ(results_texts(s, QStringLiteral("computed in 12 ms")).heading,
            QStringLiteral("synthetic tiny · <b>kivi &lt;2 bits&gt;</b> · 96 tokens × 2 layers · "
                           "computed in 12 ms · on cpu: Xeon · peak memory 1.5 MiB<br>"
                           "quantize cpu 3 ms, code &lt;cpu&gt;"));
  // A run on a GPU adds the device memory it held beside the host's.
  s.backend = QStringLiteral("cuda: NVIDIA H200");
  s.device_peak_memory_bytes = 2.5 * 1024 * 1024 * 1024;
  s.stages.clear();
  EXPECT_EQ(results_texts(s, QStringLiteral("computed in 12 ms")).heading,
            QStringLiteral("synthetic tiny · <b>kivi &lt;2 bits&gt;</b> · 96 tokens × 2 layers · "
                           "computed in 12 ms · on cuda: NVIDIA H200 · peak memory 1.5 MiB (GPU "
                           "2.5 GiB)"));
}

TEST(ResultsText, CodecRowInBitsPerCodeAndBytes) {
  ReportSummary s = hand_written_summary();
  s.codec = CodecSummary{QStringLiteral("huffman"), 2.3456, 2.5, 4096, 1536, 129};
  const ResultsTexts t = results_texts(s, QString());
  ASSERT_TRUE(t.codec.has_value());
  EXPECT_EQ(t.codec->caption, QStringLiteral("huffman codes:"));
  EXPECT_EQ((*t.codec)[CodecMetric::EntropyBits], QStringLiteral("2.35 bits/code"));
  EXPECT_EQ((*t.codec)[CodecMetric::PayloadBits], QStringLiteral("2.50 bits/code"));
  EXPECT_EQ((*t.codec)[CodecMetric::MetadataBytes], QStringLiteral("1.5 KiB"));
  EXPECT_EQ((*t.codec)[CodecMetric::CodebookBytes], QStringLiteral("129 B"));
  s.codec->codec.clear();  // a stored run that did not name its codec
  EXPECT_EQ(results_texts(s, QString()).codec->caption, QStringLiteral("coded codes:"));
}

// Bytes as a person reads them, for the small counts of the tiny cache: "129 B", "1.5 KiB".
QString small_byte_count(std::uint64_t bytes) {
  EXPECT_LT(bytes, 1024u * 1024u) << "the tiny cache's codec bytes";
  return bytes < 1024 ? QStringLiteral("%1 B").arg(bytes)
                      : QString::asprintf("%.1f KiB", static_cast<double>(bytes) / 1024.0);
}

TEST(ResultsText, RealRunReadsAsTheEnginesReport) {
  const CompressionReport r =
      gui_test::engine_report(gui_test::tiny_source(), gui_test::tiered_method());
  const ResultsTexts t = results_texts(chart_set_from_report(r).summary, QString());
  EXPECT_EQ(t[Metric::Ratio], QString::asprintf("%.2f×", r.ratio));
  EXPECT_EQ(t[Metric::BitsPerValue], QString::asprintf("%.2f", r.bits_per_value));
  EXPECT_EQ(t[Metric::Mse], QString::asprintf("%.3g", r.error.mse));
  EXPECT_EQ(t[Metric::SnrDb], QString::asprintf("%.1f dB", r.error.snr_db));
  EXPECT_EQ(t[Metric::AttnOutputRelError],
            QString::asprintf("%.3g %%", 100 * r.error.attn_output_rel_error));
  EXPECT_EQ(t[Metric::AttnOutputCosine], QString::asprintf("%.5f", r.error.attn_output_cosine));
  EXPECT_EQ(t.measured_caption, QString::asprintf("at %.2f bits/value:", r.bits_per_value));
  EXPECT_TRUE(t.heading.contains(QStringLiteral("96 tokens × 2 layers")))
      << t.heading.toStdString();
  EXPECT_FALSE(t.codec.has_value());  // age-tiered codes nothing

  MethodConfig kvcomp;
  kvcomp.kind = MethodKind::KvComp;
  kvcomp.block_size = 32;
  kvcomp.codec = CodecKind::Huffman;
  const CompressionReport coded = gui_test::engine_report(gui_test::tiny_source(), kvcomp);
  ASSERT_GT(coded.codec.codes, 0u);
  const ResultsTexts c = results_texts(chart_set_from_report(coded).summary, QString());
  ASSERT_TRUE(c.codec.has_value());
  EXPECT_EQ(c.codec->caption, QStringLiteral("huffman codes:"));
  EXPECT_EQ((*c.codec)[CodecMetric::EntropyBits],
            QString::asprintf("%.2f bits/code", coded.codec.entropy_bits_per_code));
  EXPECT_EQ((*c.codec)[CodecMetric::PayloadBits],
            QString::asprintf("%.2f bits/code", coded.codec.payload_bits_per_code));
  EXPECT_EQ((*c.codec)[CodecMetric::MetadataBytes], small_byte_count(coded.codec.metadata_bytes));
  EXPECT_EQ((*c.codec)[CodecMetric::CodebookBytes], small_byte_count(coded.codec.codebook_bytes));
}

}  // namespace
}  // namespace kvlab::gui
