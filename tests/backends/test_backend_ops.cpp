// Every op of the Backend interface (engine/backend.h) on every backend make_backend() knows,
// against the CPU reference, in the habit of ggml's test-backend-ops: one table of cases, one
// tolerance per op, and a backend that is not built in or has no usable device reported as
// SKIPPED with the reason, never as a pass.
//
//   encode_codes     the bytes of the engine's encode_codes() exactly (tolerance: none), and the
//                    CPU decoder gives the codes back;
//   fused_attention  a double-precision softmax(q.K/sqrt(d)).V over the cache's own dequantized
//                    keys and values (dequantize_all, not the fused decoding path), to 2e-4
//                    relative to the output's largest magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kvlab/app/backends.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"

namespace kvlab {
namespace {

constexpr double kAttentionTolerance = 2e-4;

// The backend under test, or a skip with make_backend()'s reason.
#define KVLAB_MAKE_BACKEND(var)                                                \
  auto var##_made = make_backend(GetParam());                                  \
  if (!var##_made) GTEST_SKIP() << GetParam() << ": " << var##_made.message(); \
  std::unique_ptr<Backend> var = std::move(var##_made).value()

class BackendOps : public ::testing::TestWithParam<std::string> {
 protected:
  static void SetUpTestSuite() { register_backends(); }
};

// Codes from a skewed distribution over `alphabet` values, as quantized KV codes are.
std::vector<std::uint8_t> skewed_codes(std::size_t n, int alphabet, unsigned seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<int> geometric(0.35);
  std::vector<std::uint8_t> codes(n);
  for (auto& c : codes) c = static_cast<std::uint8_t>(std::min(geometric(rng), alphabet - 1));
  return codes;
}

TEST_P(BackendOps, EncodeCodesWritesTheReferenceBytes) {
  KVLAB_MAKE_BACKEND(backend);
  unsigned seed = 1;
  for (const CodecKind kind : {CodecKind::Huffman, CodecKind::BitPack, CodecKind::Rans}) {
    for (const int tokens : {1, 63, 64, 200}) {
      for (const int alphabet : {2, 12, 200}) {
        const int heads = 2, dim = 24, block = 32;
        SCOPED_TRACE(::testing::Message()
                     << codec_id(kind) << " " << tokens << " tokens, " << alphabet << " values");
        const auto codes =
            skewed_codes(static_cast<std::size_t>(tokens) * heads * dim, alphabet, seed++);
        // Books built the way a cache builds them for this backend: pairs where it takes them.
        const bool pairs = backend->huffman_pairs() && alphabet <= 16;
        auto book = HuffmanCodebook::from_histogram(
            pairs ? count_code_pairs(codes, dim) : count_codes(codes), pairs, true);
        ASSERT_TRUE(book) << book.message();
        const CodecConfig config{kind, block, 0};
        const HuffmanCodebook* used = kind == CodecKind::BitPack ? nullptr : &*book;
        auto reference = encode_codes(codes, tokens, heads, dim, config, used);
        ASSERT_TRUE(reference) << reference.message();
        auto encoded = backend->encode_codes(codes, tokens, heads, dim, config, used);
        ASSERT_TRUE(encoded) << encoded.message();
        EXPECT_EQ(encoded->kind, reference->kind);
        EXPECT_EQ(encoded->bitpack_width, reference->bitpack_width);
        EXPECT_TRUE(encoded->payload == reference->payload) << "payload bytes differ";
        EXPECT_TRUE(encoded->block_offsets == reference->block_offsets);
        EXPECT_TRUE(encoded->vector_bits == reference->vector_bits);
        std::vector<std::uint8_t> back(codes.size());
        ASSERT_TRUE(decode_codes(*encoded, used, back));
        EXPECT_TRUE(back == codes);
      }
    }
  }
}

// softmax(q . K / sqrt(d)) . V in double over [tokens][kv_heads][dim] keys and values.
std::vector<double> reference_attention(const std::vector<float>& keys,
                                        const std::vector<float>& values,
                                        const std::vector<float>& q, int tokens, int kv_heads,
                                        int q_heads, int dim) {
  std::vector<double> out(static_cast<std::size_t>(q_heads) * dim, 0.0);
  const int group = q_heads / kv_heads;
  for (int h = 0; h < q_heads; ++h) {
    const int kv = h / group;
    std::vector<double> logits(static_cast<std::size_t>(tokens));
    for (int t = 0; t < tokens; ++t) {
      double dot = 0;
      for (int i = 0; i < dim; ++i) {
        dot += static_cast<double>(q[static_cast<std::size_t>(h) * dim + i]) *
               keys[(static_cast<std::size_t>(t) * kv_heads + kv) * dim + i];
      }
      logits[static_cast<std::size_t>(t)] = dot / std::sqrt(static_cast<double>(dim));
    }
    const double top = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double& l : logits) sum += (l = std::exp(l - top));
    for (int t = 0; t < tokens; ++t) {
      for (int i = 0; i < dim; ++i) {
        out[static_cast<std::size_t>(h) * dim + i] +=
            logits[static_cast<std::size_t>(t)] / sum *
            values[(static_cast<std::size_t>(t) * kv_heads + kv) * dim + i];
      }
    }
  }
  return out;
}

TEST_P(BackendOps, FusedAttentionMatchesAttentionOverTheDequantizedCache) {
  KVLAB_MAKE_BACKEND(backend);
  struct Case {
    int tokens, kv_heads, q_heads, dim;
    CodecKind codec;
    double rel_scale;
  };
  const Case cases[] = {
      {1, 1, 1, 8, CodecKind::Huffman, 0.05},      // all in the fp16 buffer
      {64, 2, 6, 64, CodecKind::Huffman, 0.05},    // one block, GQA 3:1 as SmolLM2's
      {200, 2, 4, 128, CodecKind::Huffman, 0.02},  // blocks and a buffered tail
      {517, 4, 8, 64, CodecKind::Huffman, 0.1},    // pair symbols where the backend takes them
      {200, 2, 4, 128, CodecKind::BitPack, 0.05}, {1000, 1, 2, 64, CodecKind::BitPack, 0.1},
      {64, 2, 6, 64, CodecKind::Rans, 0.05},    // rANS streams: GQA 3:1
      {200, 2, 4, 128, CodecKind::Rans, 0.02},  // single codes, a buffered tail
      {517, 4, 8, 64, CodecKind::Rans, 0.1},    // pairs where the backend takes them
  };
  unsigned seed = 40;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << codec_id(c.codec) << " " << c.tokens << " tokens, "
                                      << c.kv_heads << "/" << c.q_heads << " heads, dim " << c.dim);
    std::mt19937 rng(seed++);
    std::normal_distribution<float> normal(0.f, 1.f);
    const std::size_t n = static_cast<std::size_t>(c.tokens) * c.kv_heads * c.dim;
    std::vector<float> k(n), v(n), q(static_cast<std::size_t>(c.q_heads) * c.dim);
    for (std::size_t i = 0; i < n; ++i) {
      k[i] = normal(rng) + ((i % static_cast<std::size_t>(c.dim)) % 13 == 0 ? 6.f : 0.f);
      v[i] = normal(rng);
    }
    for (float& x : q) x = normal(rng);
    std::vector<std::uint16_t> k16(n), v16(n);
    float_to_fp16(k, k16);
    float_to_fp16(v, v16);
    const auto view = [&](const std::vector<std::uint16_t>& x) {
      return TensorView(reinterpret_cast<const std::byte*>(x.data()), DType::F16, c.tokens,
                        c.kv_heads, c.dim, static_cast<std::ptrdiff_t>(c.kv_heads) * c.dim, c.dim);
    };
    CompressedCacheConfig config;
    config.codec = c.codec;
    config.rel_scale = c.rel_scale;
    config.huffman_pairs = backend->huffman_pairs();
    auto cache = CompressedKvCache::create(config, c.kv_heads, c.dim);
    ASSERT_TRUE(cache) << cache.message();
    ASSERT_TRUE(cache->prefill(view(k16), view(v16)));

    std::vector<float> keys(n), values(n);
    ASSERT_TRUE(cache->dequantize_all(keys, values));
    const auto expected =
        reference_attention(keys, values, q, c.tokens, c.kv_heads, c.q_heads, c.dim);
    std::vector<float> out(expected.size());
    const Status st = backend->fused_attention(cache->view(), q, c.q_heads, out);
    ASSERT_TRUE(st) << st.message();
    double scale = 0, worst = 0;
    for (double e : expected) scale = std::max(scale, std::abs(e));
    for (std::size_t i = 0; i < out.size(); ++i) {
      worst = std::max(worst, std::abs(out[i] - expected[i]));
    }
    EXPECT_LE(worst, kAttentionTolerance * scale) << "worst |error| " << worst << " of " << scale;
  }
}

TEST_P(BackendOps, CorruptStreamIsAnErrorNotACrash) {
  KVLAB_MAKE_BACKEND(backend);
  const int tokens = 128, heads = 2, dim = 64;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  for (float& f : x) f = normal(rng);
  std::vector<std::uint16_t> h(x.size());
  float_to_fp16(x, h);
  const TensorView view(reinterpret_cast<const std::byte*>(h.data()), DType::F16, tokens, heads,
                        dim, static_cast<std::ptrdiff_t>(heads) * dim, dim);
  CompressedCacheConfig config;
  config.huffman_pairs = backend->huffman_pairs();
  auto cache = CompressedKvCache::create(config, heads, dim);
  ASSERT_TRUE(cache) << cache.message();
  ASSERT_TRUE(cache->prefill(view, view));
  CompressedKvView broken = cache->view();
  ASSERT_NE(broken.keys, nullptr);
  // The keys' last block starts past the payload's end.
  EncodedCodes keys = *broken.keys;
  ASSERT_FALSE(keys.block_offsets.empty());
  keys.block_offsets.back() = static_cast<std::uint32_t>(keys.payload.size() + 4096);
  broken.keys = &keys;
  std::vector<float> q(static_cast<std::size_t>(heads) * dim, 0.5f), out(q.size());
  const Status st = backend->fused_attention(broken, q, heads, out);
  EXPECT_FALSE(st);
}

std::vector<std::string> backends_to_test() {
  std::vector<std::string> ids;
  for (std::string_view id : backend_ids()) {
    if (id != "auto") ids.emplace_back(id);  // "auto" is one of the others
  }
  return ids;
}

INSTANTIATE_TEST_SUITE_P(EveryBackend, BackendOps, ::testing::ValuesIn(backends_to_test()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvlab
