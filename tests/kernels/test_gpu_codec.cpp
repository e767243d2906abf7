// The GPU quantizer, encoder and fused attention against the CPU engine: the same codes, the same
// stream bytes, each side decoding the other's streams, attention outputs matching a
// double-precision reference, and corrupt streams reported as errors. Without a usable GPU every
// test here reports SKIPPED, except the one that checks the no-GPU error itself.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "codec/bitpack.h"
#include "gpu_test_support.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/kernels/gpu_kv.h"
#include "quant/group_quant.h"
#include "varwidth_size.cuh"

namespace kvlab {
namespace {

// fp16 keys/values with per-channel offsets and a few outlier channels, as real keys have.
std::vector<std::uint16_t> random_fp16(int tokens, int heads, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> offset(static_cast<std::size_t>(heads) * dim);
  for (std::size_t j = 0; j < offset.size(); ++j)
    offset[j] = (j % 17 == 0) ? 8.f * n(rng) : 0.3f * n(rng);
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = offset[i % offset.size()] + n(rng);
  std::vector<std::uint16_t> h(x.size());
  float_to_fp16(x, h);
  return h;
}

TensorView fp16_view(const std::vector<std::uint16_t>& x, int tokens, int heads, int dim) {
  return TensorView(reinterpret_cast<const std::byte*>(x.data()), DType::F16, tokens, heads, dim,
                    static_cast<std::ptrdiff_t>(heads) * dim, dim);
}

// A CPU cache prefilled with `tokens` tokens of keys k and values v at once: whole blocks
// compressed, the tail in its fp16 buffer.
Result<CompressedKvCache> prefilled_cache(const CompressedCacheConfig& config,
                                          const std::vector<std::uint16_t>& k,
                                          const std::vector<std::uint16_t>& v, int tokens,
                                          int heads, int dim) {
  auto cache = CompressedKvCache::create(config, heads, dim);
  if (!cache) return cache;
  if (Status st =
          cache->prefill(fp16_view(k, tokens, heads, dim), fp16_view(v, tokens, heads, dim));
      !st) {
    return st.error();
  }
  return cache;
}

void expect_same_encoding(const EncodedCodes& gpu, const EncodedCodes& cpu) {
  EXPECT_EQ(gpu.kind, cpu.kind);
  EXPECT_EQ(gpu.tokens, cpu.tokens);
  EXPECT_EQ(gpu.bitpack_width, cpu.bitpack_width);
  ASSERT_EQ(gpu.payload.size(), cpu.payload.size());
  EXPECT_TRUE(gpu.payload == cpu.payload) << "payload bytes differ";
  EXPECT_TRUE(gpu.block_offsets == cpu.block_offsets);
  EXPECT_TRUE(gpu.vector_bits == cpu.vector_bits);
}

TEST(GpuCodec, NoGpuIsAClearError) {
  if (cuda::require_gpu()) GTEST_SKIP() << "a GPU is present";
  const std::vector<std::uint8_t> codes(8, 1);
  auto r = cuda::encode_codes(codes, 1, 1, 8, CodecConfig{CodecKind::BitPack, 4, 4}, nullptr);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("no usable GPU"), std::string::npos) << r.message();
}

TEST(GpuCodec, BadInputIsAnError) {
  KVLAB_REQUIRE_GPU();
  const std::vector<std::uint8_t> codes(10, 1);
  EXPECT_FALSE(cuda::encode_codes(codes, 1, 1, 8, CodecConfig{CodecKind::BitPack, 4, 4}, nullptr));
  const std::vector<std::uint8_t> wide(8, 200);
  auto r = cuda::encode_codes(wide, 1, 1, 8, CodecConfig{CodecKind::BitPack, 4, 2}, nullptr);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("wider"), std::string::npos) << r.message();
  EXPECT_FALSE(cuda::encode_codes(wide, 1, 1, 8, CodecConfig{CodecKind::Huffman, 4, 0}, nullptr));
  const auto x = random_fp16(4, 1, 8, 1);
  EXPECT_FALSE(cuda::compress_layer(x, x, 4, 1, 8, cuda::GpuCompressOptions{.rel_scale = -1.0}));
}

TEST(GpuCodec, QuantizationMatchesCpuCodes) {
  KVLAB_REQUIRE_GPU();
  struct Case {
    int tokens, heads, dim;
    cuda::GpuGroupSpec spec;
  };
  const Case cases[] = {
      {1, 1, 8, {8, 64, 0, true, 0.05}},      {63, 2, 64, {8, 64, 0, true, 0.05}},
      {64, 8, 128, {8, 64, 0, true, 0.02}},   {65, 3, 128, {8, 64, 0, true, 0.1}},
      {1000, 8, 128, {8, 64, 0, true, 0.05}}, {200, 4, 128, {2, 32, 32, false, 0.0}},
      {77, 2, 64, {4, 32, 32, false, 0.0}},   {129, 1, 96, {8, 128, 0, true, 0.01}},
  };
  unsigned seed = 11;
  for (const Case& c : cases) {
    const auto x = random_fp16(c.tokens, c.heads, c.dim, seed++);
    const detail::GroupSpec cpu_spec{
        c.spec.bits, c.spec.key_group_tokens, c.spec.value_group_channels,
        c.spec.relative ? detail::StepRule::Relative : detail::StepRule::Levels, c.spec.rel_scale};
    for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      SCOPED_TRACE(::testing::Message() << c.tokens << "x" << c.heads << "x" << c.dim << " bits "
                                        << c.spec.bits << " " << role_name(role));
      auto gpu = cuda::quantize_groups(x, c.tokens, c.heads, c.dim, role, c.spec);
      ASSERT_TRUE(gpu) << gpu.message();
      const std::size_t units = detail::group_unit_count(cpu_spec, role, c.tokens, c.heads, c.dim);
      const std::size_t n = x.size();
      std::vector<std::uint8_t> packed(detail::packed_bytes(n, c.spec.bits));
      std::vector<float> steps(units), mins(units);
      detail::quantize_groups(fp16_view(x, c.tokens, c.heads, c.dim), role, cpu_spec, packed.data(),
                              0, steps.data(), mins.data());
      std::vector<std::uint8_t> codes(n);
      detail::unpack_codes(packed.data(), 0, n, c.spec.bits, codes.data());
      EXPECT_TRUE(gpu->codes == codes) << "codes differ";
      EXPECT_TRUE(gpu->steps == steps) << "steps differ";
      EXPECT_TRUE(gpu->mins == mins) << "minimums differ";
    }
  }
}

// Codes drawn from a skewed distribution over `alphabet` values.
std::vector<std::uint8_t> random_codes(std::size_t n, int alphabet, unsigned seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<int> geo(0.35);
  std::uniform_int_distribution<int> uni(0, alphabet - 1);
  std::vector<std::uint8_t> c(n);
  for (auto& v : c) {
    const int g = alphabet >= 256 ? uni(rng) : std::min(geo(rng), alphabet - 1);
    v = static_cast<std::uint8_t>(alphabet == 1 ? 7 : g);
  }
  return c;
}

TEST(GpuCodec, EncodingIsTheCpuEncodersBytes) {
  KVLAB_REQUIRE_GPU();
  const int block = 16;
  const int token_counts[] = {0, 1, block - 1, block, block + 1, 3 * block + 5, 517};
  const int alphabets[] = {1, 4, 16, 256};
  unsigned seed = 100;
  for (int tokens : token_counts) {
    for (int alphabet : alphabets) {
      for (int heads : {1, 3}) {
        const int dim = alphabet == 256 ? 64 : 24;
        SCOPED_TRACE(::testing::Message()
                     << tokens << " tokens, alphabet " << alphabet << ", heads " << heads);
        const auto codes =
            random_codes(static_cast<std::size_t>(tokens) * heads * dim, alphabet, seed++);
        // The book comes from a prefix, as a prefill's would, so later codes can need the escape.
        // rANS also with a pair book (two codes a symbol) where the codes fit 4 bits.
        const std::span<const std::uint8_t> prefix(codes.data(), codes.size() / 3);
        auto book = HuffmanCodebook::from_histogram(count_codes(prefix), false, true);
        ASSERT_TRUE(book) << book.message();
        auto pair_book = HuffmanCodebook::from_histogram(
            alphabet <= 16 ? count_code_pairs(prefix, dim) : count_codes(prefix), alphabet <= 16,
            true);
        ASSERT_TRUE(pair_book) << pair_book.message();
        for (int variant = 0; variant < 4; ++variant) {
          const CodecKind kind = variant == 0   ? CodecKind::Huffman
                                 : variant == 1 ? CodecKind::BitPack
                                                : CodecKind::Rans;
          const HuffmanCodebook* used = variant == 3 ? &*pair_book : &*book;
          SCOPED_TRACE(::testing::Message() << codec_id(kind) << (variant == 3 ? " pairs" : ""));
          const CodecConfig config{kind, block, 0};
          auto cpu = encode_codes(codes, tokens, heads, dim, config, used);
          ASSERT_TRUE(cpu) << cpu.message();
          auto gpu = cuda::encode_codes(codes, tokens, heads, dim, config, used);
          ASSERT_TRUE(gpu) << gpu.message();
          expect_same_encoding(*gpu, *cpu);
          // The CPU decodes what the GPU wrote.
          std::vector<std::uint8_t> back(codes.size());
          ASSERT_TRUE(decode_codes(*gpu, used, back));
          EXPECT_TRUE(back == codes);
        }
      }
    }
  }
}

// VarWidth sizing on the GPU (a comparison codec a run reports, never written there) against the
// CPU's encoded_bytes(): the same bytes with tails of blocks and heads and every code width; and,
// for a vector past its u16 bit count (head_dim 8192, codes up to 200: about 67,500 bits), the
// CPU's error, token and head named.
TEST(GpuCodec, VarWidthSizingIsTheCpus) {
  KVLAB_REQUIRE_GPU();
  struct Case {
    int tokens, heads, dim, block, alphabet;
  };
  const Case cases[] = {{0, 2, 64, 64, 21},    {1, 1, 8, 64, 21},    {130, 3, 64, 64, 21},
                        {1000, 8, 128, 64, 4}, {77, 2, 96, 32, 256}, {5, 2, 8192, 64, 201}};
  unsigned seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.tokens << "x" << c.heads << "x" << c.dim << " block "
                                      << c.block << " alphabet " << c.alphabet);
    const std::size_t n = static_cast<std::size_t>(c.tokens) * c.heads * c.dim;
    std::vector<std::uint8_t> codes = random_codes(n, c.alphabet, seed++);
    if (c.dim == 8192) {  // uniform over 0..200: nearly every group of 16 takes 8 bits a code
      std::mt19937 rng(seed);
      std::uniform_int_distribution<int> uni(0, 200);
      for (auto& v : codes) v = static_cast<std::uint8_t>(uni(rng));
    }
    const CodecConfig config{CodecKind::VarWidth, c.block, 0};
    auto cpu = encoded_bytes(codes, c.tokens, c.heads, c.dim, config, nullptr);
    EXPECT_EQ(static_cast<bool>(cpu), c.dim != 8192) << (cpu ? "" : cpu.message());
    cuda::DeviceArray<std::uint8_t> d;
    ASSERT_TRUE(d.upload(codes.data(), n, "test codes"));
    cuda::DeviceArray<unsigned long long> scratch;
    auto gpu = cuda::varwidth_bytes(d.get(), c.tokens, c.heads, c.dim, c.block, scratch, nullptr);
    ASSERT_EQ(static_cast<bool>(gpu), static_cast<bool>(cpu))
        << (gpu ? "" : gpu.message()) << (cpu ? "" : cpu.message());
    if (cpu) {
      EXPECT_EQ(*gpu, *cpu);
    } else {
      EXPECT_EQ(gpu.message(), cpu.message());
    }
  }
}

// A rANS pair book (two 4-bit codes a symbol) meeting a code above 15: the CPU refuses it
// (check_append) and so does the GPU, with the same message, instead of indexing past its table.
TEST(GpuCodec, RansPairBookRefusesWideCodesAsTheCpuDoes) {
  KVLAB_REQUIRE_GPU();
  const int tokens = 40, heads = 2, dim = 24, block = 16;
  auto codes = random_codes(static_cast<std::size_t>(tokens) * heads * dim, 16, 7);
  auto book = HuffmanCodebook::from_histogram(count_code_pairs(codes, dim), true, true);
  ASSERT_TRUE(book) << book.message();
  ASSERT_TRUE(book->pairs());
  codes[static_cast<std::size_t>(21) * heads * dim + 5] = 20;  // token 21
  codes[static_cast<std::size_t>(33) * heads * dim] = 200;     // a later one
  const CodecConfig config{CodecKind::Rans, block, 0};
  auto cpu = encode_codes(codes, tokens, heads, dim, config, &*book);
  ASSERT_FALSE(cpu);
  auto gpu = cuda::encode_codes(codes, tokens, heads, dim, config, &*book);
  ASSERT_FALSE(gpu);
  EXPECT_EQ(gpu.message(), cpu.message());
  EXPECT_NE(gpu.message().find("rans codes: code 20 at token 21 does not fit"), std::string::npos)
      << gpu.message();
}

// Reference attention in double over the dequantized compressed tokens.
struct Reference {
  std::vector<double> logits, out;
};
Reference reference(const std::vector<float>& k, const std::vector<float>& v, int tokens,
                    int kv_heads, int dim, const std::vector<float>& q,
                    const std::vector<float>& probs, int q_heads) {
  Reference r;
  const int group = q_heads / kv_heads;
  r.logits.assign(static_cast<std::size_t>(q_heads) * tokens, 0.0);
  r.out.assign(static_cast<std::size_t>(q_heads) * dim, 0.0);
  for (int qh = 0; qh < q_heads; ++qh) {
    const int h = qh / group;
    for (int t = 0; t < tokens; ++t) {
      double dot = 0, p = probs[static_cast<std::size_t>(qh) * tokens + t];
      for (int c = 0; c < dim; ++c) {
        const std::size_t i = (static_cast<std::size_t>(t) * kv_heads + h) * dim + c;
        dot += static_cast<double>(q[static_cast<std::size_t>(qh) * dim + c]) * k[i];
        r.out[static_cast<std::size_t>(qh) * dim + c] += p * v[i];
      }
      r.logits[static_cast<std::size_t>(qh) * tokens + t] = dot / std::sqrt(double(dim));
    }
  }
  return r;
}

using test::rel_error;

struct AttnCase {
  int tokens, kv_heads, group, dim;
  CodecKind codec;
  double rel_scale;
};

// Attention on the GPU over a CPU-prefilled cache of `config` (keys and values of `c`'s shape,
// random queries and weights), against the double reference over the cache's own reconstruction;
// then `more` (when given) checks the cache and its uploaded layer further.
struct CacheShape {
  int tokens, kv_heads, group, dim;
};
// Keys, values and queries of a shape, and the generator that draws the weights after them.
struct AttnInputs {
  std::vector<std::uint16_t> k, v;
  std::vector<float> q;
  std::mt19937 rng;
};
AttnInputs attention_inputs(const CacheShape& c, unsigned& seed) {
  AttnInputs in;
  in.k = random_fp16(c.tokens, c.kv_heads, c.dim, seed++);
  in.v = random_fp16(c.tokens, c.kv_heads, c.dim, seed++);
  in.rng.seed(seed++);
  std::normal_distribution<float> nd(0.f, 1.f);
  in.q.resize(static_cast<std::size_t>(c.kv_heads) * c.group * c.dim);
  for (auto& x : in.q) x = nd(in.rng);
  return in;
}

void expect_attention_matches_reference(
    const CompressedCacheConfig& config, const CacheShape& c, unsigned& seed,
    const std::function<void(const CompressedKvCache&, const cuda::GpuLayer&)>& more = {}) {
  AttnInputs in = attention_inputs(c, seed);
  const int q_heads = c.kv_heads * c.group;
  std::normal_distribution<float> nd(0.f, 1.f);
  auto cache = prefilled_cache(config, in.k, in.v, c.tokens, c.kv_heads, c.dim);
  ASSERT_TRUE(cache) << cache.message();
  const int ct = cache->compressed_tokens();
  ASSERT_GT(ct, 0);
  std::vector<float> kd(static_cast<std::size_t>(c.tokens) * c.kv_heads * c.dim), vd(kd.size());
  ASSERT_TRUE(cache->dequantize_all(kd, vd));
  std::vector<float> probs(static_cast<std::size_t>(q_heads) * ct);
  for (auto& p : probs) p = std::abs(nd(in.rng)) / ct;
  const Reference ref = reference(kd, vd, ct, c.kv_heads, c.dim, in.q, probs, q_heads);
  auto up = cuda::upload_layer(cache->view());
  ASSERT_TRUE(up) << up.message();
  EXPECT_EQ(up->codec(), config.codec);
  std::vector<float> logits(static_cast<std::size_t>(q_heads) * ct), out(in.q.size());
  ASSERT_TRUE(cuda::attention_logits(*up, in.q, q_heads, logits));
  ASSERT_TRUE(cuda::attention_values(*up, probs, q_heads, out));
  EXPECT_LT(rel_error(logits, ref.logits), 1e-5);
  EXPECT_LT(rel_error(out, ref.out), 1e-5);
  if (more) more(*cache, *up);
}

TEST(GpuFusedAttention, MatchesReferenceOnCpuAndGpuEncodedStreams) {
  KVLAB_REQUIRE_GPU();
  const AttnCase cases[] = {
      {64, 1, 1, 64, CodecKind::Huffman, 0.05},    {130, 2, 4, 128, CodecKind::Huffman, 0.03},
      {1000, 8, 4, 128, CodecKind::Huffman, 0.05}, {256, 4, 2, 96, CodecKind::Huffman, 0.01},
      {200, 8, 8, 128, CodecKind::Huffman, 0.1},   {128, 2, 1, 64, CodecKind::BitPack, 0.07},
      {1000, 8, 4, 128, CodecKind::BitPack, 0.07}, {193, 3, 2, 128, CodecKind::BitPack, 0.01},
      {150, 2, 2, 33, CodecKind::Huffman, 0.05},   {70, 1, 1, 33, CodecKind::BitPack, 0.07},
      {1000, 8, 4, 128, CodecKind::Rans, 0.05},    {150, 2, 2, 33, CodecKind::Rans, 0.1},
  };
  unsigned seed = 500;
  for (const AttnCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.kv_heads << " heads, group "
                                      << c.group << ", dim " << c.dim << ", " << codec_id(c.codec));
    // CPU-encoded cache (whole blocks compressed; the tail stays in its fp16 buffer).
    CompressedCacheConfig config;
    config.block_size = 64;
    config.buffer_size = 64;
    config.rel_scale = c.rel_scale;
    config.codec = c.codec;
    config.huffman_pairs = false;  // the GPU reads single-code books (Backend::huffman_pairs)
    const CacheShape shape{c.tokens, c.kv_heads, c.group, c.dim};
    expect_attention_matches_reference(config, shape, seed);

    AttnInputs in = attention_inputs(shape, seed);
    const auto& k = in.k;
    const auto& v = in.v;
    const auto& q = in.q;
    const int q_heads = c.kv_heads * c.group;
    std::normal_distribution<float> nd(0.f, 1.f);
    std::mt19937& rng = in.rng;

    // GPU-encoded: every token compressed; the reference decodes the GPU's streams on the CPU.
    cuda::GpuCompressOptions opt;
    opt.block_size = 64;
    opt.rel_scale = c.rel_scale;
    opt.codec = c.codec;
    auto gl = cuda::compress_layer(k, v, c.tokens, c.kv_heads, c.dim, opt);
    ASSERT_TRUE(gl) << gl.message();
    auto host = cuda::download_layer(*gl);
    ASSERT_TRUE(host) << host.message();
    // Same bytes as the CPU pipeline: quantize, codebook from the histogram, encode.
    const detail::GroupSpec spec{8, 64, 0, detail::StepRule::Relative, c.rel_scale};
    for (int r = 0; r < 2; ++r) {
      const TensorRole role = r == 0 ? TensorRole::Key : TensorRole::Value;
      const auto& x = r == 0 ? k : v;
      const std::size_t units = detail::group_unit_count(spec, role, c.tokens, c.kv_heads, c.dim);
      std::vector<std::uint8_t> codes(x.size());
      std::vector<float> st(units), mn(units);
      detail::quantize_groups(fp16_view(x, c.tokens, c.kv_heads, c.dim), role, spec, codes.data(),
                              0, st.data(), mn.data());
      auto book =
          HuffmanCodebook::from_histogram(count_codes(codes), false, c.codec == CodecKind::Rans);
      ASSERT_TRUE(book);
      const int width = r == 0 ? 0 : host->keys.bitpack_width;
      auto cpu =
          encode_codes(codes, c.tokens, c.kv_heads, c.dim, CodecConfig{c.codec, 64, width}, &*book);
      ASSERT_TRUE(cpu) << cpu.message();
      expect_same_encoding(r == 0 ? host->keys : host->values, *cpu);
      EXPECT_TRUE((r == 0 ? host->key_steps : host->value_steps) == st);
      EXPECT_TRUE((r == 0 ? host->key_mins : host->value_mins) == mn);
    }
    // Reference from the CPU decoding the GPU's streams.
    std::vector<std::uint8_t> kc(k.size()), vc(v.size());
    const bool booked = c.codec != CodecKind::BitPack;
    const HuffmanCodebook* kb = booked ? &host->key_book : nullptr;
    const HuffmanCodebook* vb = booked ? &host->value_book : nullptr;
    ASSERT_TRUE(decode_codes(host->keys, kb, kc));
    ASSERT_TRUE(decode_codes(host->values, vb, vc));
    std::vector<float> kf(k.size()), vf(v.size());
    const std::size_t hd = static_cast<std::size_t>(c.kv_heads) * c.dim;
    for (std::size_t i = 0; i < kf.size(); ++i) {
      const std::size_t t = i / hd, j = i % hd;
      const std::size_t ku = (t / 64) * hd + j;
      kf[i] = host->key_mins[ku] + kc[i] * host->key_steps[ku];
      const std::size_t vu = i / c.dim;
      vf[i] = host->value_mins[vu] + vc[i] * host->value_steps[vu];
    }
    std::vector<float> probs_all(static_cast<std::size_t>(q_heads) * c.tokens);
    for (auto& p : probs_all) p = std::abs(nd(rng)) / c.tokens;
    const Reference ref2 = reference(kf, vf, c.tokens, c.kv_heads, c.dim, q, probs_all, q_heads);
    std::vector<float> logits2(static_cast<std::size_t>(q_heads) * c.tokens), out2(q.size());
    ASSERT_TRUE(cuda::attention_logits(*gl, q, q_heads, logits2));
    ASSERT_TRUE(cuda::attention_values(*gl, probs_all, q_heads, out2));
    EXPECT_LT(rel_error(logits2, ref2.logits), 1e-5);
    EXPECT_LT(rel_error(out2, ref2.out), 1e-5);
  }
}

// The Huffman kernels' groups (fused_attention.cuh's FusedAttentionPolicy: 64 threads a codec
// block, up to four blocks a CUDA block, each block's stream staged in shared memory): codec
// blocks longer than a group (several rounds a block, the scan carried between them), streams
// longer than a group's stage (fine steps: many bits a code, so the rest is read from global
// memory), and token blocks that leave groups of the last grid round idle.
TEST(GpuFusedAttention, HuffmanGroupsMatchReferenceOnLongBlocksAndStreams) {
  KVLAB_REQUIRE_GPU();
  struct Case {
    CacheShape shape;
    int block;
    double rel_scale;
  };
  const Case cases[] = {{{800, 2, 4, 128}, 160, 0.05},
                        {{700, 3, 2, 128}, 64, 0.002},
                        {{333, 1, 8, 256}, 128, 0.004},
                        {{90, 5, 1, 40}, 32, 0.05}};
  unsigned seed = 900;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.shape.tokens << " tokens, " << c.shape.kv_heads << " heads, group "
                 << c.shape.group << ", dim " << c.shape.dim << ", block " << c.block);
    CompressedCacheConfig config;
    config.block_size = c.block;
    config.buffer_size = c.block;
    config.rel_scale = c.rel_scale;
    config.codec = CodecKind::Huffman;
    config.huffman_pairs = false;
    expect_attention_matches_reference(
        config, c.shape, seed, [&](const CompressedKvCache& cache, const cuda::GpuLayer&) {
          // The first three overflow a group's 4 KiB stage (measured on the CPU: 10.4, 5.1 and
          // 31.3 KB of keys a codec block), the last does not (0.7 KB).
          const EncodedCodes& e = *cache.view().keys;
          EXPECT_EQ(e.payload.size() / e.block_count() > 4096u, c.shape.tokens != 90);
        });
  }
}

// rANS layers (rans_attention.cu, one warp a codec block): CPU-encoded caches of pair and
// single-code books, GQA groups 1 to 8, head_dim 7 to 256, short last blocks and tokens left in
// the fp16 buffer, against the same double reference.
struct RansCase {
  int tokens, kv_heads, group, dim;
  bool pairs;
  double rel_scale;
  int block_size;
};

TEST(GpuFusedAttention, RansMatchesReferenceOnCpuEncodedStreams) {
  KVLAB_REQUIRE_GPU();
  const RansCase cases[] = {
      {64, 1, 1, 64, true, 0.2, 64},     {130, 2, 4, 128, false, 0.03, 64},
      {1000, 8, 4, 128, true, 0.1, 64},  {256, 4, 2, 96, false, 0.01, 64},
      {200, 8, 8, 128, true, 0.2, 64},   {150, 2, 2, 33, true, 0.1, 64},
      {300, 1, 8, 256, false, 0.05, 64}, {70, 3, 1, 7, true, 0.2, 16},
      {97, 2, 4, 64, true, 0.1, 1},      {500, 2, 2, 128, false, 0.05, 200},
  };
  unsigned seed = 900;
  int pair_books = 0, code_books = 0;
  for (const RansCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.tokens << " tokens, " << c.kv_heads << " heads, group " << c.group << ", dim "
                 << c.dim << ", block " << c.block_size << (c.pairs ? ", pairs" : ""));
    CompressedCacheConfig config;
    config.block_size = c.block_size;
    config.buffer_size = c.block_size;
    config.rel_scale = c.rel_scale;
    config.codec = CodecKind::Rans;
    config.huffman_pairs = c.pairs;
    expect_attention_matches_reference(
        config, {c.tokens, c.kv_heads, c.group, c.dim}, seed,
        [&](const CompressedKvCache& cache, const cuda::GpuLayer& up) {
          ASSERT_NE(cache.view().key_book->rans(), nullptr);
          (cache.view().key_book->pairs() ? pair_books : code_books)++;
          // The layer comes back as it went: the device's copy holds the cache's bytes.
          auto host = cuda::download_layer(up);
          ASSERT_TRUE(host) << host.message();
          EXPECT_TRUE(host->keys.payload == cache.view().keys->payload);
        });
  }
  EXPECT_GT(pair_books, 0);
  EXPECT_GT(code_books, 0);
}

// A damaged rANS block is flagged by the warp that decodes it (its lanes do not end in their
// start states, or its words do not come out even), and named by the host.
TEST(GpuFusedAttention, CorruptRansBlocksAreErrorsNotCrashes) {
  KVLAB_REQUIRE_GPU();
  const int tokens = 256, heads = 2, dim = 64;
  const auto k = random_fp16(tokens, heads, dim, 31);
  CompressedCacheConfig config;
  config.block_size = 64;
  config.buffer_size = 64;
  config.rel_scale = 0.1;
  config.codec = CodecKind::Rans;
  auto cache = prefilled_cache(config, k, k, tokens, heads, dim);
  ASSERT_TRUE(cache) << cache.message();
  const CompressedKvView good = cache->view();
  std::vector<float> q(static_cast<std::size_t>(heads) * dim, 0.5f);
  std::vector<float> probs(static_cast<std::size_t>(heads) * good.compressed_tokens, 0.01f);
  std::vector<float> logits(probs.size()), out(q.size());

  // Block 1's first lane state, one bit off, in each stream: it cannot end at 2^16. (Each stream
  // damaged in its own copy: the value book does not decode the key stream, from block 0 on.)
  EncodedCodes keys = *good.keys, values = *good.values;
  keys.payload[keys.block_offsets[1]] ^= 1u;
  values.payload[values.block_offsets[1]] ^= 1u;
  CompressedKvView bad = good;
  bad.keys = &keys;
  bad.values = &values;
  auto up = cuda::upload_layer(bad);
  ASSERT_TRUE(up) << up.message();
  auto st = cuda::attention_logits(*up, q, heads, logits);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("corrupt key stream in block 1"), std::string::npos) << st.message();
  st = cuda::attention_values(*up, probs, heads, out);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("corrupt value stream in block 1"), std::string::npos)
      << st.message();

  // Random damage: an error or a result, never a crash or a read outside the payload; the CPU
  // decoder and the warps agree on which.
  std::mt19937 rng(78);
  int errors = 0;
  for (int trial = 0; trial < 50; ++trial) {
    EncodedCodes damaged = *good.keys;
    for (int i = 0; i < 2; ++i) {
      damaged.payload[rng() % damaged.payload.size()] ^=
          static_cast<std::uint8_t>(1u << (rng() % 8));
    }
    bad.keys = &damaged;
    bad.values = good.values;
    auto u = cuda::upload_layer(bad);
    ASSERT_TRUE(u) << u.message();
    const bool gpu_ok = static_cast<bool>(cuda::attention_logits(*u, q, heads, logits));
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(damaged.tokens) * heads * dim);
    const bool cpu_ok = static_cast<bool>(decode_codes(damaged, good.key_book, codes));
    EXPECT_EQ(gpu_ok, cpu_ok) << "trial " << trial;
    errors += !gpu_ok;
  }
  EXPECT_GT(errors, 25);
}

// The tensor-core path for bit-packed 4- and 8-bit layers (vectors of whole 16-byte words):
// every token count around the 16-token tiles and 64-token blocks, GQA groups 1 to 8, head_dim
// 64 to 256 (8-bit: 32 to 128), other block sizes, and softmax weights with spikes that make a
// warp rescale what it has accumulated.
struct PackedCase {
  int tokens, kv_heads, group, dim, width, block_size;
  bool spiky;
};

TEST(GpuFusedAttention, PackedTensorCorePathMatchesReference) {
  KVLAB_REQUIRE_GPU();
  std::vector<PackedCase> cases;
  const int token_counts[] = {1, 63, 64, 65, 1000, 4099};
  const int dims[] = {64, 128, 256};
  const int groups[] = {1, 2, 4, 8};
  for (int i = 0; i < 12; ++i) {
    const int dim = dims[i / 4], group = groups[i % 4];
    // Blocks of 128, and of 32 where a logits step still fits (head_dim >= 128 at 4 bits).
    const int block = i % 4 == 3 ? 128 : (i % 4 == 1 && dim >= 128 ? 32 : 64);
    for (int j : {i % 6, (i + 3) % 6}) {
      cases.push_back({token_counts[j], 1 + i % 3, group, dim, 4, block, (i + j) % 2 == 1});
    }
  }
  cases.push_back({1000, 2, 2, 64, 8, 64, true});
  cases.push_back({65, 3, 8, 128, 8, 64, false});
  cases.push_back({4099, 1, 4, 32, 8, 64, true});
  cases.push_back({63, 2, 1, 128, 8, 16, false});
  unsigned seed = 900;
  for (const PackedCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.tokens << " tokens, " << c.kv_heads << " heads, group "
                                      << c.group << ", dim " << c.dim << ", width " << c.width
                                      << ", block " << c.block_size << (c.spiky ? ", spiky" : ""));
    const auto k = random_fp16(c.tokens, c.kv_heads, c.dim, seed++);
    const auto v = random_fp16(c.tokens, c.kv_heads, c.dim, seed++);
    const int q_heads = c.kv_heads * c.group;
    std::mt19937 rng(seed++);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<float> q(static_cast<std::size_t>(q_heads) * c.dim);
    for (auto& x : q) x = nd(rng);
    std::vector<float> probs(static_cast<std::size_t>(q_heads) * c.tokens);
    for (std::size_t i = 0; i < probs.size(); ++i) {
      const bool spike = c.spiky && (i % c.tokens) % 89 == 37;
      probs[i] = std::abs(nd(rng)) / c.tokens * (spike ? 300.f : 1.f);
    }

    cuda::GpuCompressOptions opt;
    opt.block_size = c.block_size;
    opt.rel_scale = c.width == 4 ? 1.0 / 15.0 : 1.0 / 255.0;
    opt.codec = CodecKind::BitPack;
    opt.bitpack_width = c.width;
    auto gl = cuda::compress_layer(k, v, c.tokens, c.kv_heads, c.dim, opt);
    ASSERT_TRUE(gl) << gl.message();
    auto host = cuda::download_layer(*gl);
    ASSERT_TRUE(host) << host.message();
    ASSERT_EQ(host->keys.bitpack_width, c.width);
    ASSERT_EQ(host->values.bitpack_width, c.width);
    std::vector<std::uint8_t> kc(k.size()), vc(v.size());
    ASSERT_TRUE(decode_codes(host->keys, nullptr, kc));
    ASSERT_TRUE(decode_codes(host->values, nullptr, vc));
    std::vector<float> kf(k.size()), vf(v.size());
    const std::size_t hd = static_cast<std::size_t>(c.kv_heads) * c.dim;
    for (std::size_t i = 0; i < kf.size(); ++i) {
      const std::size_t t = i / hd, j = i % hd;
      const std::size_t ku = (t / c.block_size) * hd + j;
      kf[i] = host->key_mins[ku] + kc[i] * host->key_steps[ku];
      const std::size_t vu = i / c.dim;
      vf[i] = host->value_mins[vu] + vc[i] * host->value_steps[vu];
    }
    const Reference ref = reference(kf, vf, c.tokens, c.kv_heads, c.dim, q, probs, q_heads);
    std::vector<float> logits(static_cast<std::size_t>(q_heads) * c.tokens), out(q.size());
    ASSERT_TRUE(cuda::attention_logits(*gl, q, q_heads, logits));
    ASSERT_TRUE(cuda::attention_values(*gl, probs, q_heads, out));
    EXPECT_LT(rel_error(logits, ref.logits), 1e-5);
    EXPECT_LT(rel_error(out, ref.out), 1e-5);

    // The same layer encoded by the CPU cache (whole blocks; the tail stays fp16 on the host).
    if (c.tokens >= 2 * c.block_size && c.width == 4) {
      CompressedCacheConfig config;
      config.block_size = c.block_size;
      config.buffer_size = c.block_size;
      config.rel_scale = 1.0 / 15.0;
      config.codec = CodecKind::BitPack;
      config.bitpack_width = 4;
      auto cache = prefilled_cache(config, k, v, c.tokens, c.kv_heads, c.dim);
      ASSERT_TRUE(cache) << cache.message();
      const int ct = cache->compressed_tokens();
      std::vector<float> kd(k.size()), vd(v.size());
      ASSERT_TRUE(cache->dequantize_all(kd, vd));
      std::vector<float> p2(static_cast<std::size_t>(q_heads) * ct);
      for (auto& p : p2) p = std::abs(nd(rng)) / ct;
      const Reference ref2 = reference(kd, vd, ct, c.kv_heads, c.dim, q, p2, q_heads);
      auto up = cuda::upload_layer(cache->view());
      ASSERT_TRUE(up) << up.message();
      std::vector<float> l2(static_cast<std::size_t>(q_heads) * ct), o2(q.size());
      ASSERT_TRUE(cuda::attention_logits(*up, q, q_heads, l2));
      ASSERT_TRUE(cuda::attention_values(*up, p2, q_heads, o2));
      EXPECT_LT(rel_error(l2, ref2.logits), 1e-5);
      EXPECT_LT(rel_error(o2, ref2.out), 1e-5);
    }
  }
}

TEST(GpuFusedAttention, BadShapesAreErrors) {
  KVLAB_REQUIRE_GPU();
  const auto k = random_fp16(64, 2, 64, 3);
  auto gl = cuda::compress_layer(k, k, 64, 2, 64, cuda::GpuCompressOptions{});
  ASSERT_TRUE(gl) << gl.message();
  std::vector<float> q(3 * 64), logits(3 * 64);
  auto st = cuda::attention_logits(*gl, q, 3, logits);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("multiple"), std::string::npos) << st.message();
  std::vector<float> q6(6 * 64), l6(6 * 64);
  st = cuda::attention_logits(*gl, q6, 6, l6);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("GQA"), std::string::npos) << st.message();
  std::vector<float> small(10);
  EXPECT_FALSE(cuda::attention_logits(*gl, std::span<const float>(q6).first(2 * 64), 2, small));
}

TEST(GpuFusedAttention, CorruptStreamsAreErrorsNotCrashes) {
  KVLAB_REQUIRE_GPU();
  const int tokens = 256, heads = 2, dim = 64;
  const auto k = random_fp16(tokens, heads, dim, 9);
  CompressedCacheConfig config;
  config.block_size = 64;
  config.buffer_size = 64;
  config.huffman_pairs = false;
  auto cache = prefilled_cache(config, k, k, tokens, heads, dim);
  ASSERT_TRUE(cache) << cache.message();
  const CompressedKvView good = cache->view();
  std::vector<float> q(static_cast<std::size_t>(heads) * dim, 0.5f);
  std::vector<float> logits(static_cast<std::size_t>(heads) * good.compressed_tokens);

  // Moving one bit between two neighbouring vectors keeps every structural check happy but makes
  // both vectors decode the wrong number of bits: the kernel must flag it.
  EncodedCodes keys = *good.keys;
  keys.vector_bits[0] += 1;
  keys.vector_bits[1] -= 1;
  CompressedKvView bad = good;
  bad.keys = &keys;
  auto up = cuda::upload_layer(bad);
  ASSERT_TRUE(up) << up.message();
  auto st = cuda::attention_logits(*up, q, heads, logits);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("corrupt key stream in block 0"), std::string::npos) << st.message();

  // Offsets past the end are refused before anything reaches the GPU.
  EncodedCodes past = *good.keys;
  past.block_offsets.back() = static_cast<std::uint32_t>(past.payload.size() + 100);
  bad.keys = &past;
  EXPECT_FALSE(cuda::upload_layer(bad));

  // Random byte damage: an error or a result, never a crash or a read outside the payload.
  std::mt19937 rng(77);
  for (int trial = 0; trial < 50; ++trial) {
    EncodedCodes damaged = *good.keys;
    for (int i = 0; i < 4; ++i) {
      damaged.payload[rng() % damaged.payload.size()] ^=
          static_cast<std::uint8_t>(1u << (rng() % 8));
    }
    bad.keys = &damaged;
    auto u = cuda::upload_layer(bad);
    ASSERT_TRUE(u) << u.message();
    (void)cuda::attention_logits(*u, q, heads, logits);
  }
}

// A cache whose books code pairs of codes (the CPU default where codes fit 4 bits) is refused
// with a message naming the reason, not decoded wrongly.
TEST(GpuFusedAttention, PairCodebooksAreAClearError) {
  KVLAB_REQUIRE_GPU();
  const int tokens = 128, heads = 2, dim = 64;
  const auto k = random_fp16(tokens, heads, dim, 21);
  CompressedCacheConfig config;
  config.block_size = 64;
  config.buffer_size = 64;
  config.rel_scale = 0.2;
  auto cache = prefilled_cache(config, k, k, tokens, heads, dim);
  ASSERT_TRUE(cache) << cache.message();
  ASSERT_TRUE(cache->view().key_book->pairs());
  auto up = cuda::upload_layer(cache->view());
  ASSERT_FALSE(up);
  EXPECT_NE(up.message().find("pairs of codes"), std::string::npos) << up.message();
}

}  // namespace
}  // namespace kvlab
