// Memory of the streaming compressed cache over decode steps: the last point equals the memory of
// compressed caches fed the same tokens here, points grow with the tokens, the fp16 buffer never
// holds more than buffer_size tokens, the JSON form round-trips, and bad configs are errors.
#include <gtest/gtest.h>

#include <vector>

#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/codec/stream_sim_json.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab {
namespace {

KvCache tiny_cache(int context) {
  SyntheticConfig s;
  s.preset = "tiny";
  s.context = context;
  s.seed = 5;
  auto c = generate_synthetic(s);
  EXPECT_TRUE(c.ok()) << c.message();
  return std::move(c).value();
}

std::vector<float> row(const Tensor& t, int token) {
  std::vector<float> r(static_cast<std::size_t>(t.heads()) * t.dim());
  for (int h = 0; h < t.heads(); ++h)
    t.view().load_row(token, h, std::span(r).subspan(static_cast<std::size_t>(h * t.dim())));
  return r;
}

// Memory of every layer's cache after the prefill and all appends, summed.
CacheMemory fed_memory(const KvCache& cache, const StreamConfig& config) {
  auto cc = stream_cache_config(config);
  EXPECT_TRUE(cc.ok()) << cc.message();
  CacheMemory sum;
  for (const LayerKv& l : cache.layers) {
    auto c = CompressedKvCache::create(*cc, cache.shape.kv_heads, cache.shape.head_dim);
    EXPECT_TRUE(c.ok()) << c.message();
    const int p = config.prefill_tokens;
    EXPECT_TRUE(c->prefill(l.key.view().token_range(0, p), l.value.view().token_range(0, p)).ok());
    for (int t = p; t < l.key.tokens(); ++t)
      EXPECT_TRUE(c->append(row(l.key, t), row(l.value, t)).ok());
    const CacheMemory m = c->memory();
    sum.payload += m.payload;
    sum.metadata += m.metadata;
    sum.codebooks += m.codebooks;
    sum.quant_params += m.quant_params;
    sum.buffer += m.buffer;
  }
  return sum;
}

struct Param {
  int prefill;
  int every;
  CodecKind codec;
};

class StreamSim : public ::testing::TestWithParam<Param> {};

TEST_P(StreamSim, LastPointEqualsFedCachesAndPointsGrow) {
  const Param p = GetParam();
  const KvCache cache = tiny_cache(150);
  StreamConfig config;
  config.prefill_tokens = p.prefill;
  config.block_size = 16;
  config.buffer_size = 32;
  config.codec = p.codec;
  config.record_every = p.every;
  auto r = simulate_stream(cache, config);
  ASSERT_TRUE(r.ok()) << r.message();
  const int layers = static_cast<int>(cache.layers.size());
  EXPECT_EQ(r->layers, layers);
  ASSERT_FALSE(r->points.empty());
  EXPECT_EQ(r->points.front().step, 0);
  EXPECT_EQ(r->points.front().tokens, p.prefill);
  EXPECT_EQ(r->points.back().tokens, 150);

  const CacheMemory want = fed_memory(cache, config);
  const CacheMemory& got = r->points.back().memory;
  EXPECT_EQ(got.payload, want.payload);
  EXPECT_EQ(got.metadata, want.metadata);
  EXPECT_EQ(got.codebooks, want.codebooks);
  EXPECT_EQ(got.quant_params, want.quant_params);
  EXPECT_EQ(got.buffer, want.buffer);

  const std::uint64_t per_token = 2ull * 2 * cache.shape.kv_heads * cache.shape.head_dim;
  for (std::size_t i = 0; i < r->points.size(); ++i) {
    const StreamPoint& pt = r->points[i];
    EXPECT_EQ(pt.fp16_bytes, per_token * pt.tokens * layers) << i;
    EXPECT_LE(pt.memory.buffer, per_token * config.buffer_size * layers) << i;
    if (i == 0) continue;
    const StreamPoint& prev = r->points[i - 1];
    EXPECT_GT(pt.tokens, prev.tokens) << i;
    EXPECT_GT(pt.step, prev.step) << i;
    EXPECT_LE(pt.step - prev.step, p.every) << i;
    // Compressed parts only grow: blocks are appended, never rewritten.
    EXPECT_GE(pt.memory.payload, prev.memory.payload) << i;
    EXPECT_GE(pt.memory.quant_params, prev.memory.quant_params) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Prefills, StreamSim,
    ::testing::Values(Param{0, 1, CodecKind::Huffman}, Param{1, 7, CodecKind::Huffman},
                      Param{15, 16, CodecKind::Huffman}, Param{16, 16, CodecKind::BitPack},
                      Param{75, 10, CodecKind::Huffman}, Param{150, 16, CodecKind::BitPack}));

TEST(StreamSimulation, MaxLayersAndJsonRoundTrip) {
  const KvCache cache = tiny_cache(100);
  StreamConfig config;
  config.prefill_tokens = 50;
  config.block_size = 16;
  config.buffer_size = 32;
  config.max_layers = 1;
  auto r = simulate_stream(cache, config);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->layers, 1);
  auto back = stream_from_json(stream_to_json(*r));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(stream_to_json(*back), stream_to_json(*r));
  EXPECT_FALSE(stream_from_json(nlohmann::json{{"source", "x"}}).ok());
}

TEST(StreamSimulation, BadConfigIsAnError) {
  const KvCache cache = tiny_cache(64);
  const auto fails = [&](StreamConfig c, const char* want) {
    auto r = simulate_stream(cache, c);
    ASSERT_FALSE(r.ok()) << want;
    EXPECT_NE(r.message().find(want), std::string::npos) << r.message();
  };
  StreamConfig base;
  base.block_size = 16;
  base.buffer_size = 32;
  StreamConfig c = base;
  c.prefill_tokens = 65;
  fails(c, "prefill");
  c = base;
  c.record_every = 0;
  fails(c, "record_every");
  c = base;
  c.buffer_size = 40;
  fails(c, "buffer size");
  c = base;
  c.rel_scale = 0;
  fails(c, "relative scale");
  c = base;
  c.codec = CodecKind::VarWidth;
  fails(c, "varwidth");
  c = base;
  c.max_layers = -1;
  fails(c, "max_layers");
  EXPECT_FALSE(simulate_stream(KvCache{}, base).ok());
  // Cancelling stops the work with the cancel message.
  auto cancelled = simulate_stream(cache, base, [](double, std::string_view) { return false; });
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.message(), kCancelledMessage);
}

}  // namespace
}  // namespace kvlab
