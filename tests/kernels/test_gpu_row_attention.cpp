// The CUDA RowAttention (cuda::make_row_attention, gpu_row_attention.h) against the engine's CPU
// reference (make_reference_row_attention, model/row_attention.h): the same random rows of every
// format it takes, handed to both a few tokens at a time as a store hands them over during decode,
// and the same queries, give the same outputs; groups of 3 query heads per KV head (padded to 4
// for the compressed formats) and of 4; storage reserved up front and grown past it. The shapes
// it refuses are refused with or without a GPU; the other tests report SKIPPED without one,
// except the one that checks the no-GPU error itself.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_support.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/row_attention.h"
#include "kvlab/engine/quant/row_decode.h"
#include "kvlab/kernels/gpu_row_attention.h"

namespace kvlab {
namespace {

using Format = row_decode::Format;

// One append's rows, [token][kv head] in the store's layout (NVFP4: nibbles and block scales
// apart).
struct Rows {
  int tokens = 0;
  std::vector<std::uint8_t> keys, values, key_scales, value_scales;
  StoredRows view() const { return {tokens, keys, values, key_scales, value_scales}; }
};

void put_u16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v & 0xffu);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}

// An E4M3 code that is not NaN (S.1111.111).
std::uint8_t e4m3_code(std::mt19937& rng) {
  for (;;) {
    const auto c = static_cast<std::uint8_t>(rng() & 0xffu);
    if ((c & 0x7fu) != 0x7fu) return c;
  }
}

// Random valid bytes of `rows` rows of `dim` channels (NVFP4: the nibbles only), values of a few
// units at most so that the softmax is neither flat nor one-hot.
std::vector<std::uint8_t> random_data(Format f, std::size_t rows, int dim, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(0.f, 1.f);
  std::normal_distribution<float> normal(0.f, 1.f);
  const std::size_t row = f == Format::Nvfp4
                              ? static_cast<std::size_t>(dim / 2)
                              : static_cast<std::size_t>(row_decode::row_bytes(f, dim));
  std::vector<std::uint8_t> out(rows * row);
  switch (f) {
    case Format::Fp16:
      for (std::size_t i = 0; i < rows * dim; ++i) put_u16(&out[2 * i], float_to_fp16(normal(rng)));
      break;
    case Format::Fp8E4M3:  // scaled by 0.005 .. 0.02 (params_for): at most 9
      for (std::uint8_t& b : out) b = e4m3_code(rng);
      break;
    case Format::Q8_0:
    case Format::Q4_0: {
      // A block: fp16 d, then 32 signed 8-bit codes (Q8_0) or 16 bytes of nibble pairs (Q4_0).
      const bool q8 = f == Format::Q8_0;
      const std::size_t block = q8 ? sizeof(ggml_block::Q8_0) : sizeof(ggml_block::Q4_0);
      const std::size_t d_at = q8 ? offsetof(ggml_block::Q8_0, d) : offsetof(ggml_block::Q4_0, d);
      const std::size_t qs_at =
          q8 ? offsetof(ggml_block::Q8_0, qs) : offsetof(ggml_block::Q4_0, qs);
      for (std::size_t b = 0; b < out.size() / block; ++b) {
        std::uint8_t* p = out.data() + b * block;
        const float d = q8 ? 0.005f + 0.025f * uniform(rng) : 0.05f + 0.25f * uniform(rng);
        put_u16(p + d_at, float_to_fp16(uniform(rng) < 0.5f ? d : -d));
        for (std::size_t i = qs_at; i < block; ++i) p[i] = static_cast<std::uint8_t>(rng() & 0xffu);
      }
      break;
    }
    case Format::Nvfp4:  // every nibble is an E2M1 value
      for (std::uint8_t& b : out) b = static_cast<std::uint8_t>(rng() & 0xffu);
      break;
    default:
      ADD_FAILURE() << "no rows of " << row_decode::format_name(f);
      break;
  }
  return out;
}

// NVFP4 block scales: positive E4M3 codes of exponent 4 to 11 (0.125 to 30).
std::vector<std::uint8_t> random_block_scales(std::size_t rows, int dim, std::mt19937& rng) {
  std::vector<std::uint8_t> out(rows * static_cast<std::size_t>(dim / 16));
  for (std::uint8_t& b : out) b = static_cast<std::uint8_t>(0x20u + rng() % 0x40u);
  return out;
}

Rows random_rows(Format f, int tokens, int kv_heads, int dim, std::mt19937& rng) {
  Rows r;
  r.tokens = tokens;
  const std::size_t rows = static_cast<std::size_t>(tokens) * kv_heads;
  r.keys = random_data(f, rows, dim, rng);
  r.values = random_data(f, rows, dim, rng);
  if (f == Format::Nvfp4) {
    r.key_scales = random_block_scales(rows, dim, rng);
    r.value_scales = random_block_scales(rows, dim, rng);
  }
  return r;
}

RowParams params_for(Format f, int kv_heads, std::mt19937& rng) {
  RowParams p;
  p.format = f;
  if (f == Format::Fp8E4M3) {
    std::uniform_real_distribution<float> scale(0.005f, 0.02f);
    for (int h = 0; h < kv_heads; ++h) {
      p.key_head_scales.push_back(scale(rng));
      p.value_head_scales.push_back(scale(rng));
    }
  }
  if (f == Format::Nvfp4) {
    p.key_global = 16.f;
    p.value_global = 24.f;
  }
  return p;
}

std::vector<float> random_q(const RowAttentionShape& s, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> q(static_cast<std::size_t>(s.heads) * s.head_dim);
  for (float& x : q) x = normal(rng);
  return q;
}

// The GPU runs fp32 dot products and an online softmax in base 2 (exp2f of logits scaled by
// log2(e) / sqrt(d) in fp32, FlashDecoding's chunks merged in fp32); the reference sums in double
// over the same decoded values. Relative errors of a few 1e-6 per logit reach the weights and the
// output through exp; 2e-3 of the output's largest value leaves room for that over a thousand
// tokens and still catches a wrong row, block, scale, head or padding (each moves the output by
// several percent here).
void expect_close(const std::vector<float>& gpu, const std::vector<float>& ref) {
  ASSERT_EQ(gpu.size(), ref.size());
  float top = 0.f, worst = 0.f;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    ASSERT_TRUE(std::isfinite(gpu[i])) << "output " << i << " is " << gpu[i];
    top = std::max(top, std::abs(ref[i]));
    worst = std::max(worst, std::abs(gpu[i] - ref[i]));
  }
  EXPECT_LE(worst, 2e-3f * top + 1e-5f) << "largest |out| " << top;
}

TEST(GpuRowAttention, NoGpuIsAClearError) {
  if (cuda::require_gpu()) GTEST_SKIP() << "a GPU is present";
  auto r = cuda::make_row_attention({.layers = 2, .heads = 8, .kv_heads = 2, .head_dim = 128});
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("no usable GPU"), std::string::npos) << r.message();
}

// Checked before the GPU is asked for, so these run everywhere.
TEST(GpuRowAttention, RefusesShapesTheKernelCannotServe) {
  const struct {
    RowAttentionShape shape;
    const char* says;
  } cases[] = {
      {{1, 8, 2, 96, 0}, "head_dim"},     {{1, 8, 2, 32, 0}, "head_dim"},
      {{1, 8, 2, 512, 0}, "head_dim"},    {{1, 10, 4, 128, 0}, "multiple"},
      {{1, 8, 0, 128, 0}, "multiple"},    {{1, 0, 2, 128, 0}, "multiple"},
      {{1, 18, 2, 128, 0}, "at most 8"},  {{0, 8, 2, 128, 0}, "layers"},
      {{1, 8, 2, 128, -1}, "max_tokens"},
  };
  for (const auto& c : cases) {
    const RowAttentionShape& s = c.shape;
    SCOPED_TRACE(::testing::Message()
                 << s.layers << " layers, " << s.heads << "/" << s.kv_heads << " heads, dim "
                 << s.head_dim << ", " << s.max_tokens << " tokens");
    auto r = cuda::make_row_attention(s);
    ASSERT_FALSE(r);
    EXPECT_NE(r.message().find(c.says), std::string::npos) << r.message();
  }
}

// Every format at head_dim 64 and 128, groups of 3 (the compressed formats' padded launch) and 4,
// appends of 1, 64, 1000, 1 and 1 tokens (storage reserved for 100 tokens, or none, then grown),
// attended after each; a second layer in fp16 beside it stays its own.
TEST(GpuRowAttention, MatchesTheCpuReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(47);
  const int appends[] = {1, 64, 1000, 1, 1};
  int n = 0;
  for (Format f : {Format::Fp16, Format::Fp8E4M3, Format::Q8_0, Format::Q4_0, Format::Nvfp4}) {
    for (int dim : {64, 128}) {
      for (const auto& [heads, kv_heads] : {std::pair{9, 3}, std::pair{8, 2}}) {
        const RowAttentionShape shape{.layers = 2,
                                      .heads = heads,
                                      .kv_heads = kv_heads,
                                      .head_dim = dim,
                                      .max_tokens = n++ % 2 == 0 ? 0 : 100};
        SCOPED_TRACE(::testing::Message()
                     << row_decode::format_name(f) << ", dim " << dim << ", " << heads << "/"
                     << kv_heads << " heads, max_tokens " << shape.max_tokens);
        auto gpu = cuda::make_row_attention(shape);
        ASSERT_TRUE(gpu) << gpu.message();
        auto ref = make_reference_row_attention(shape);
        ASSERT_TRUE(ref) << ref.message();
        RowAttention& g = **gpu;
        RowAttention& r = **ref;
        EXPECT_EQ(g.name().rfind("cuda (", 0), 0u) << g.name();

        const RowParams side = params_for(Format::Fp16, kv_heads, rng);
        const Rows side_rows = random_rows(Format::Fp16, 3, kv_heads, dim, rng);
        ASSERT_TRUE(g.begin_layer(0, side));
        ASSERT_TRUE(r.begin_layer(0, side));
        ASSERT_TRUE(g.append(0, side_rows.view()));
        ASSERT_TRUE(r.append(0, side_rows.view()));

        const RowParams params = params_for(f, kv_heads, rng);
        const Status began = g.begin_layer(1, params);
        ASSERT_TRUE(began) << began.message();
        ASSERT_TRUE(r.begin_layer(1, params));
        int tokens = 0;
        for (int step : appends) {
          SCOPED_TRACE(::testing::Message() << tokens << " + " << step << " tokens");
          const Rows rows = random_rows(f, step, kv_heads, dim, rng);
          const Status st = g.append(1, rows.view());
          ASSERT_TRUE(st) << st.message();
          ASSERT_TRUE(r.append(1, rows.view()));
          tokens += step;
          EXPECT_EQ(g.tokens(1), tokens);
          const std::vector<float> q = random_q(shape, rng);
          std::vector<float> out_gpu(q.size(), NAN), out_ref(q.size(), NAN);
          const Status at = g.attend(1, q, out_gpu);
          ASSERT_TRUE(at) << at.message();
          ASSERT_TRUE(r.attend(1, q, out_ref));
          expect_close(out_gpu, out_ref);
        }
        // The rows' bytes at least (the reserved or doubled capacity may hold more).
        const std::uint64_t rows_bytes =
            static_cast<std::uint64_t>(tokens) * kv_heads * row_decode::row_bytes(f, dim) * 2;
        EXPECT_GE(g.bytes(), rows_bytes);

        const std::vector<float> q = random_q(shape, rng);
        std::vector<float> out_gpu(q.size(), NAN), out_ref(q.size(), NAN);
        ASSERT_TRUE(g.attend(0, q, out_gpu));
        ASSERT_TRUE(r.attend(0, q, out_ref));
        expect_close(out_gpu, out_ref);
      }
    }
  }
}

TEST(GpuRowAttention, AnEmptyLayerAttendsToZeros) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(5);
  const RowAttentionShape shape{.layers = 1, .heads = 9, .kv_heads = 3, .head_dim = 64};
  for (Format f : {Format::Fp16, Format::Q4_0, Format::Nvfp4}) {
    SCOPED_TRACE(row_decode::format_name(f));
    auto made = cuda::make_row_attention(shape);
    ASSERT_TRUE(made) << made.message();
    RowAttention& g = **made;
    ASSERT_TRUE(g.begin_layer(0, params_for(f, shape.kv_heads, rng)));
    const std::vector<float> q = random_q(shape, rng);
    std::vector<float> out(q.size(), NAN);
    ASSERT_TRUE(g.attend(0, q, out));
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.f; }));
    ASSERT_TRUE(g.append(0, Rows{}.view()));  // no tokens: nothing to copy
    EXPECT_EQ(g.tokens(0), 0);
    std::fill(out.begin(), out.end(), NAN);
    ASSERT_TRUE(g.attend(0, q, out));
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.f; }));
  }
}

TEST(GpuRowAttention, MisuseIsAnError) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(11);
  const RowAttentionShape shape{.layers = 2, .heads = 4, .kv_heads = 2, .head_dim = 64};
  auto made = cuda::make_row_attention(shape);
  ASSERT_TRUE(made) << made.message();
  RowAttention& g = **made;
  const std::vector<float> q = random_q(shape, rng);
  std::vector<float> out(q.size());
  const Rows rows = random_rows(Format::Q8_0, 2, shape.kv_heads, shape.head_dim, rng);

  // Before begin_layer, and outside the model's layers.
  EXPECT_FALSE(g.append(0, rows.view()));
  EXPECT_FALSE(g.attend(0, q, out));
  EXPECT_FALSE(g.begin_layer(2, params_for(Format::Q8_0, shape.kv_heads, rng)));
  EXPECT_FALSE(g.begin_layer(-1, params_for(Format::Q8_0, shape.kv_heads, rng)));
  EXPECT_FALSE(g.append(2, rows.view()));
  EXPECT_FALSE(g.attend(-1, q, out));

  // Parameters the kernel cannot use.
  RowParams fp8 = params_for(Format::Fp8E4M3, shape.kv_heads, rng);
  fp8.value_head_scales.pop_back();
  EXPECT_FALSE(g.begin_layer(1, fp8));
  RowParams nvfp4 = params_for(Format::Nvfp4, shape.kv_heads, rng);
  nvfp4.key_global = 0.f;
  EXPECT_FALSE(g.begin_layer(1, nvfp4));
  RowParams packed;
  packed.format = Format::Packed4;
  EXPECT_FALSE(g.begin_layer(1, packed));

  ASSERT_TRUE(g.begin_layer(0, params_for(Format::Q8_0, shape.kv_heads, rng)));
  EXPECT_FALSE(g.begin_layer(0, params_for(Format::Q8_0, shape.kv_heads, rng)));  // twice

  // A row short, a byte short, scales where the format has none: errors naming the layer.
  Rows wrong = rows;
  wrong.tokens = 3;
  Status st = g.append(0, wrong.view());
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("layer 0"), std::string::npos) << st.message();
  wrong = rows;
  wrong.values.pop_back();
  EXPECT_FALSE(g.append(0, wrong.view()));
  wrong = rows;
  wrong.key_scales.assign(8, 0x38);
  EXPECT_FALSE(g.append(0, wrong.view()));
  wrong = rows;
  wrong.tokens = -1;
  EXPECT_FALSE(g.append(0, wrong.view()));
  EXPECT_EQ(g.tokens(0), 0);

  ASSERT_TRUE(g.append(0, rows.view()));
  EXPECT_EQ(g.tokens(0), 2);
  std::vector<float> short_out(out.size() - 1);
  EXPECT_FALSE(g.attend(0, q, short_out));
  EXPECT_FALSE(g.attend(0, std::span<const float>(q).first(q.size() - 1), out));
  EXPECT_TRUE(g.attend(0, q, out));
}

}  // namespace
}  // namespace kvlab
