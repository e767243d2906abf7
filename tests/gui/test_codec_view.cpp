// Entropy coding in the GUI: the codec picker of the method panel, and a KVComp + Huffman run on
// the Compression page whose code-length chart, ratio-by-codec bars and codec metrics match the
// engine's report, also after reopening the run from the Runs page.
#include <gtest/gtest.h>

#include <cmath>

#include <QComboBox>
#include <QLabel>
#include <QTabWidget>

#include "common/source_panel.h"
#include "compression/code_length_chart.h"
#include "compression/code_length_panel.h"
#include "compression/codec_ratio_chart.h"
#include "compression/compression_view.h"
#include "compression/histogram_panel.h"
#include "compression/method_panel.h"
#include "compression/report_charts.h"
#include "compression/results_panel.h"
#include "gui_test_support.h"
#include "plot_test_support.h"
#include "runs/runs_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using gui_test::engine_report;
using gui_test::fresh_dir;
using gui_test::tiny_source;

constexpr int kTimeoutMs = 60'000;

MethodConfig kvcomp_huffman() {
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.block_size = 32;
  m.codec = CodecKind::Huffman;
  return m;
}

TEST(MethodPanel, CodecPickerOnlyForKvComp) {
  MethodPanel panel;
  panel.show();
  QComboBox* codec = gui_test::child<QComboBox>(&panel, "codec");
  ASSERT_EQ(codec->count(), 5);
  EXPECT_EQ(codec->itemText(0), QStringLiteral("none"));
  EXPECT_EQ(codec->itemText(3), QStringLiteral("huffman"));
  EXPECT_EQ(codec->itemText(4), QStringLiteral("rans"));
  for (int i = 0; i < codec->count(); ++i) {
    EXPECT_FALSE(codec->itemData(i, Qt::ToolTipRole).toString().isEmpty()) << i;
  }

  EXPECT_FALSE(panel.config().codec.has_value());  // default: none
  EXPECT_FALSE(panel.is_field_visible(codec));     // default method is kivi
  gui_test::child<QComboBox>(&panel, "method")->setCurrentText(QStringLiteral("kvcomp"));
  EXPECT_TRUE(panel.is_field_visible(codec));
  EXPECT_FALSE(panel.config().codec.has_value());
  codec->setCurrentText(QStringLiteral("varwidth"));
  ASSERT_TRUE(panel.config().codec.has_value());
  EXPECT_EQ(*panel.config().codec, CodecKind::VarWidth);
  // Another method never takes the codec along.
  gui_test::child<QComboBox>(&panel, "method")->setCurrentText(QStringLiteral("kivi"));
  EXPECT_FALSE(panel.is_field_visible(codec));
  EXPECT_FALSE(panel.config().codec.has_value());

  panel.set_config(kvcomp_huffman());
  EXPECT_EQ(codec->currentText(), QStringLiteral("huffman"));
  EXPECT_EQ(method_label(panel.config()), method_label(kvcomp_huffman()));
  panel.set_config(MethodConfig{});
  EXPECT_EQ(codec->currentText(), QStringLiteral("none"));
}

// The code-length chart shows layer `layer`, `tensor` of `expected`.
void expect_code_lengths(CompressionView& view, const CompressionReport& expected, int layer,
                         TensorPick tensor) {
  // Picked on the histogram panel; the code-length panel follows.
  gui_test::child<HistogramPanel>(&view, "histograms")->select(layer, tensor);
  CodeLengthPanel& panel = *gui_test::child<CodeLengthPanel>(&view, "code_lengths");
  EXPECT_EQ(panel.selected_layer(), layer);
  EXPECT_EQ(panel.selected_tensor(), tensor);

  const LayerReport& l = expected.layers.at(static_cast<std::size_t>(layer));
  const bool keys = tensor == TensorPick::Keys;
  const auto& lengths = keys ? l.key_code_lengths : l.value_code_lengths;
  const auto& histograms = keys ? l.key_histograms : l.value_histograms;
  ASSERT_EQ(lengths.size(), 257u);
  ASSERT_EQ(histograms.size(), 1u);
  const auto& counts = histograms[0].counts;
  ASSERT_EQ(counts.size(), 256u);

  const CodeLengthChart& chart = *gui_test::child<CodeLengthChart>(&panel, "chart");
  const auto drawn_lengths = gui_test::child<QCPGraph>(&chart, "length_graph")->data();
  const auto drawn_counts = gui_test::child<QCPBars>(&chart, "count_bars")->data();
  std::vector<int> want_values;
  for (int v = 0; v < 256; ++v) {
    if (counts[static_cast<std::size_t>(v)] > 0) want_values.push_back(v);
  }
  ASSERT_EQ(drawn_lengths->size(), static_cast<int>(want_values.size()));
  ASSERT_EQ(drawn_counts->size(), static_cast<int>(want_values.size()));
  for (int i = 0; i < drawn_lengths->size(); ++i) {
    const int v = want_values[static_cast<std::size_t>(i)];
    EXPECT_EQ(drawn_lengths->at(i)->mainKey(), v);
    EXPECT_EQ(drawn_lengths->at(i)->mainValue(), lengths[static_cast<std::size_t>(v)])
        << "code " << v;
    EXPECT_GT(drawn_lengths->at(i)->mainValue(), 0) << "code " << v;
    EXPECT_EQ(drawn_counts->at(i)->mainKey(), v);
    EXPECT_EQ(drawn_counts->at(i)->mainValue(),
              static_cast<double>(counts[static_cast<std::size_t>(v)]));
  }
  EXPECT_EQ(chart.escape_length(), lengths[256]);
  EXPECT_TRUE(chart.note().contains(QStringLiteral("escape"))) << chart.note().toStdString();
  EXPECT_TRUE(chart.note().contains(QString::number(lengths[256]))) << chart.note().toStdString();
}

void expect_codec_results(CompressionView& view, const CompressionReport& expected) {
  const CodecRatioChart& chart = *gui_test::child<CodecRatioChart>(&view, "codec_ratios");
  const std::vector<QCPBars*> codec_bars = gui_test::plottables<QCPBars>(&chart, "codec_bars");
  ASSERT_EQ(codec_bars.size(), static_cast<std::size_t>(kCodecCount));
  for (int k = 0; k < kCodecCount; ++k) {
    const auto bars = codec_bars[static_cast<std::size_t>(k)]->data();
    ASSERT_EQ(bars->size(), static_cast<int>(expected.layers.size()));
    for (int i = 0; i < bars->size(); ++i) {
      const LayerReport& l = expected.layers[static_cast<std::size_t>(i)];
      EXPECT_EQ(bars->at(i)->mainKey(), l.layer);
      EXPECT_DOUBLE_EQ(bars->at(i)->mainValue(),
                       layer_ratio_with_codec(l, static_cast<CodecKind>(k)))
          << codec_names()[static_cast<std::size_t>(k)].toStdString() << ", layer " << i;
      EXPECT_GT(bars->at(i)->mainValue(), 0);
    }
  }
  const auto entropy = gui_test::child<QCPGraph>(&chart, "entropy_graph")->data();
  ASSERT_EQ(entropy->size(), static_cast<int>(expected.layers.size()));
  for (int i = 0; i < entropy->size(); ++i) {
    EXPECT_DOUBLE_EQ(entropy->at(i)->mainValue(),
                     layer_ratio_at_entropy(expected.layers[static_cast<std::size_t>(i)]));
  }
  // Huffman is the codec that ran: its bar is the layer's own ratio.
  EXPECT_NEAR(codec_bars[static_cast<std::size_t>(CodecKind::Huffman)]->data()->at(0)->mainValue(),
              expected.layers[0].ratio, 1e-9 * expected.layers[0].ratio);
  EXPECT_TRUE(view.lower_tabs()->isTabVisible(CompressionView::kCodecRatioTab));

  const ResultsPanel& results = *gui_test::child<ResultsPanel>(&view, "results");
  EXPECT_FALSE(gui_test::child<QWidget>(&results, "codec_row")->isHidden());
  EXPECT_TRUE(gui_test::child<QLabel>(&results, "codec_caption")
                  ->text()
                  .contains(QStringLiteral("huffman")));
  // The codec's labels show the model's texts for the engine's report (results_text.h; what they
  // say is tested in tests/gui/models/test_results_text.cpp).
  const auto codec_texts = results_texts(chart_set_from_report(expected).summary, QString()).codec;
  ASSERT_TRUE(codec_texts.has_value());
  constexpr std::array<const char*, kCodecMetricCount> kLabels{"entropy", "payload",
                                                               "codec_metadata", "codebook"};
  for (int i = 0; i < kCodecMetricCount; ++i) {
    EXPECT_EQ(gui_test::child<QLabel>(&results, kLabels[i])->text(), codec_texts->values[i])
        << kLabels[i];
  }
}

TEST(CodecView, KvCompHuffmanRunShowsCodeLengthsAndRatiosAndReopens) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(window.store_error().isEmpty()) << window.store_error().toStdString();
  window.resize(1400, 900);
  window.show();
  CompressionView& view = *window.compression_view();
  auto* code_lengths = gui_test::child<CodeLengthPanel>(&view, "code_lengths");
  auto* histograms = gui_test::child<HistogramPanel>(&view, "histograms");
  auto* length_chart = gui_test::child<CodeLengthChart>(code_lengths, "chart");
  auto* length_graph = gui_test::child<QCPGraph>(length_chart, "length_graph");

  // Before any codec ran: no ratio tab, and the code-length chart says how to get one.
  EXPECT_FALSE(view.lower_tabs()->isTabVisible(CompressionView::kCodecRatioTab));
  EXPECT_EQ(length_graph->data()->size(), 0);
  EXPECT_TRUE(length_chart->note().contains(QStringLiteral("codec")));

  view.source_panel()->set_synthetic(tiny_source());
  view.method_panel()->set_config(kvcomp_huffman());
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  const CompressionReport expected = engine_report(tiny_source(), kvcomp_huffman());
  ASSERT_GT(expected.codec.codes, 0u);
  ASSERT_EQ(view.model()->report()->bytes.total(), expected.bytes.total());

  expect_code_lengths(view, expected, 1, TensorPick::Values);
  expect_code_lengths(view, expected, 0, TensorPick::Keys);
  // Picking on the code-length panel moves the histogram too.
  code_lengths->select(1, TensorPick::Keys);
  EXPECT_EQ(histograms->selected_layer(), 1);
  EXPECT_EQ(histograms->selected_tensor(), TensorPick::Keys);
  expect_codec_results(view, expected);
  const std::int64_t id = view.model()->last_saved_run_id();
  ASSERT_GT(id, 0);

  // A run without a codec: the ratio tab goes, the code lengths say why they are empty.
  MethodConfig kivi;
  kivi.residual = 16;
  view.lower_tabs()->setCurrentIndex(CompressionView::kCodecRatioTab);
  view.method_panel()->set_config(kivi);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  EXPECT_FALSE(view.lower_tabs()->isTabVisible(CompressionView::kCodecRatioTab));
  EXPECT_EQ(view.lower_tabs()->currentIndex(), CompressionView::kHistogramTab);
  EXPECT_EQ(length_graph->data()->size(), 0);
  EXPECT_TRUE(length_chart->note().contains(QStringLiteral("codec")));
  EXPECT_TRUE(gui_test::child<QWidget>(gui_test::child<ResultsPanel>(&view, "results"), "codec_row")
                  ->isHidden());

  // Reopened from the Runs page: the same code lengths and ratios, from the stored JSON.
  window.show_page(Page::Runs);
  ASSERT_TRUE(window.runs_view()->open_run(id));
  EXPECT_EQ(window.current_page(), Page::Compression);
  ASSERT_TRUE(view.model()->report()->config.codec.has_value());
  expect_code_lengths(view, expected, 1, TensorPick::Values);
  expect_code_lengths(view, expected, 1, TensorPick::Keys);
  expect_codec_results(view, expected);
}

// At rel_scale 0.2 every code fits 4 bits and the engine codes pairs of codes where that is
// smaller: the chart then draws each code's mean bits (half its pairs' bits, averaged), which
// must add up to the layer's coded bits, and says it shows a pair codebook, also when reopened.
TEST(CodecView, PairCodebookShowsMeanBitsPerCode) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(window.store_error().isEmpty()) << window.store_error().toStdString();
  window.resize(1400, 900);
  window.show();
  CompressionView& view = *window.compression_view();
  MethodConfig m = kvcomp_huffman();
  m.rel_scale = 0.2;
  view.source_panel()->set_synthetic(tiny_source());
  view.method_panel()->set_config(m);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  const CompressionReport expected = engine_report(tiny_source(), m);
  const std::int64_t id = view.model()->last_saved_run_id();
  ASSERT_GT(id, 0);

  auto check = [&](int layer, TensorPick tensor) -> bool {
    SCOPED_TRACE(::testing::Message()
                 << "layer " << layer << (tensor == TensorPick::Keys ? " keys" : " values"));
    gui_test::child<HistogramPanel>(&view, "histograms")->select(layer, tensor);
    const LayerReport& l = expected.layers.at(static_cast<std::size_t>(layer));
    const bool keys = tensor == TensorPick::Keys;
    const bool pairs = keys ? l.key_code_pairs : l.value_code_pairs;
    const auto& bits = keys ? l.key_code_bits : l.value_code_bits;
    const auto& counts = (keys ? l.key_histograms : l.value_histograms).at(0).counts;
    if (bits.size() != 256u) {
      ADD_FAILURE() << bits.size() << " mean bits, expected 256";
      return false;
    }
    const CodeLengthChart& chart = *gui_test::child<CodeLengthChart>(
        gui_test::child<CodeLengthPanel>(&view, "code_lengths"), "chart");
    const auto drawn = gui_test::child<QCPGraph>(&chart, "length_graph")->data();
    double drawn_total = 0;
    for (int i = 0; i < drawn->size(); ++i) {
      const auto v = static_cast<std::size_t>(drawn->at(i)->mainKey());
      EXPECT_DOUBLE_EQ(drawn->at(i)->mainValue(), bits[v]) << "code " << v;
      drawn_total += drawn->at(i)->mainValue() * static_cast<double>(counts[v]);
    }
    // Every block (32 tokens of one head) ends on a byte: up to 7 bits of padding each.
    const CodecStats& codec = keys ? l.key_codec : l.value_codec;
    const double payload_bits = 8.0 * static_cast<double>(codec.payload_bytes);
    const double blocks = std::ceil(expected.tokens / 32.0) * expected.shape.kv_heads;
    EXPECT_LE(drawn_total, payload_bits + 1e-6);
    EXPECT_GE(drawn_total, payload_bits - 7.0 * blocks);
    EXPECT_EQ(chart.note().contains(QStringLiteral("pair")), pairs) << chart.note().toStdString();
    EXPECT_EQ(chart.yAxis2->label() == QStringLiteral("bits per code"), pairs);
    return pairs;
  };
  int pair_books = 0;
  for (int layer = 0; layer < static_cast<int>(expected.layers.size()); ++layer) {
    pair_books += check(layer, TensorPick::Keys) ? 1 : 0;
    pair_books += check(layer, TensorPick::Values) ? 1 : 0;
  }
  EXPECT_GT(pair_books, 0);

  window.show_page(Page::Runs);
  ASSERT_TRUE(window.runs_view()->open_run(id));
  check(0, TensorPick::Keys);
  check(0, TensorPick::Values);
}

}  // namespace
}  // namespace kvlab::gui
