// Memory over decode steps in the GUI: after a KVComp + Huffman run on the tiny preset, the
// Compression page's "Decode stream" tab shows exactly the points simulate_stream gives for the
// same cache (prefill half, every 16 steps), the run is saved with the stream, and a run of
// another method hides the tab again.
#include <gtest/gtest.h>

#include <QTabWidget>

#include "common/source_panel.h"
#include "compression/compression_runner.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "compression/stream_chart.h"
#include "gui_test_support.h"
#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/codec/stream_sim_json.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using gui_test::fresh_dir;
using gui_test::tiny_source;

constexpr int kTimeoutMs = 60'000;

MethodConfig kvcomp(CodecKind codec) {
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.block_size = 16;
  m.codec = codec;
  return m;
}

// The engine's stream for the tiny source, computed here without the widgets.
StreamReport engine_stream(const MethodConfig& method) {
  auto cache = generate_synthetic(tiny_source());
  EXPECT_TRUE(cache.ok()) << cache.message();
  const auto config = stream_config_for(method, cache->tokens());
  EXPECT_TRUE(config.has_value());
  EXPECT_EQ(config->prefill_tokens, cache->tokens() / 2);
  EXPECT_EQ(config->record_every, 16);
  auto stream = simulate_stream(*cache, *config);
  EXPECT_TRUE(stream.ok()) << stream.message();
  return *stream;
}

void expect_chart_shows(const StreamChart& chart, const StreamReport& expected) {
  const StreamSeriesData& d = chart.data();
  ASSERT_EQ(d.step.size(), expected.points.size());
  ASSERT_EQ(gui_test::child<QCPGraph>(&chart, "total_graph")->data()->size(),
            static_cast<int>(expected.points.size()));
  ASSERT_EQ(gui_test::child<QCPGraph>(&chart, "fp16_graph")->data()->size(),
            static_cast<int>(expected.points.size()));
  const double unit = chart.unit().bytes;
  // The number in the title is the last point's ratio to fp16.
  const QString ratio = QString::number(expected.points.back().ratio(), 'f', 2);
  EXPECT_TRUE(chart.title().contains(ratio + QStringLiteral("×"))) << chart.title().toStdString();
  for (std::size_t i = 0; i < expected.points.size(); ++i) {
    const StreamPoint& p = expected.points[i];
    const CacheMemory& m = p.memory;
    const double compressed =
        static_cast<double>(m.payload + m.metadata + m.codebooks + m.quant_params);
    EXPECT_EQ(d.step[i], p.step) << i;
    EXPECT_EQ(d.tokens[i], p.tokens) << i;
    EXPECT_EQ(d.compressed[i], compressed) << i;
    EXPECT_EQ(d.buffer[i], static_cast<double>(m.buffer)) << i;
    EXPECT_EQ(d.fp16[i], static_cast<double>(p.fp16_bytes)) << i;
    // What is drawn: the same numbers in the axis unit.
    const int k = static_cast<int>(i);
    EXPECT_DOUBLE_EQ(gui_test::child<QCPGraph>(&chart, "total_graph")->data()->at(k)->key, p.step);
    EXPECT_DOUBLE_EQ(gui_test::child<QCPGraph>(&chart, "total_graph")->data()->at(k)->value * unit,
                     static_cast<double>(m.total()));
    EXPECT_DOUBLE_EQ(
        gui_test::child<QCPGraph>(&chart, "compressed_graph")->data()->at(k)->value * unit,
        compressed);
    EXPECT_DOUBLE_EQ(gui_test::child<QCPGraph>(&chart, "fp16_graph")->data()->at(k)->value * unit,
                     static_cast<double>(p.fp16_bytes));
  }
}

TEST(StreamView, KvCompHuffmanRunShowsMemoryOverDecodeSteps) {
  const auto db = fresh_dir() / "runs.sqlite";
  MainWindow window(db);
  ASSERT_TRUE(window.store_error().isEmpty()) << window.store_error().toStdString();
  window.resize(1400, 900);
  window.show();
  CompressionView& view = *window.compression_view();
  auto* stream_chart = gui_test::child<StreamChart>(&view, "stream");
  EXPECT_FALSE(view.lower_tabs()->isTabVisible(CompressionView::kStreamTab));

  view.source_panel()->set_synthetic(tiny_source());
  view.method_panel()->set_config(kvcomp(CodecKind::Huffman));
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  EXPECT_TRUE(view.lower_tabs()->isTabVisible(CompressionView::kStreamTab));
  ASSERT_TRUE(view.model()->stream().has_value());
  const StreamReport expected = engine_stream(kvcomp(CodecKind::Huffman));
  EXPECT_EQ(stream_to_json(*view.model()->stream()), stream_to_json(expected));
  view.lower_tabs()->setCurrentIndex(CompressionView::kStreamTab);
  expect_chart_shows(*stream_chart, expected);
  EXPECT_GT(expected.points.back().ratio(), 1.0);

  // Saved with the run, as the engine's JSON.
  auto store = RunsStore::open(db);
  ASSERT_TRUE(store.ok()) << store.message();
  auto run = store->load_run(view.model()->last_saved_run_id());
  ASSERT_TRUE(run.ok()) << run.message();
  ASSERT_EQ(run->artifacts.count("stream"), 1u);
  EXPECT_EQ(run->artifacts.at("stream"), stream_to_json(expected));

  // Bit packing streams too; KIVI has no stream and the tab goes away.
  view.method_panel()->set_config(kvcomp(CodecKind::BitPack));
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  expect_chart_shows(*stream_chart, engine_stream(kvcomp(CodecKind::BitPack)));
  view.method_panel()->set_config(MethodConfig{});
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  EXPECT_FALSE(view.lower_tabs()->isTabVisible(CompressionView::kStreamTab));
  EXPECT_NE(view.lower_tabs()->currentIndex(), CompressionView::kStreamTab);
  EXPECT_FALSE(view.model()->stream().has_value());
  EXPECT_EQ(gui_test::child<QCPGraph>(stream_chart, "total_graph")->data()->size(), 0);
}

}  // namespace
}  // namespace kvlab::gui
