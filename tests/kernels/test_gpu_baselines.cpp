// The GPU baselines (cuBLAS fp16 and fused FP8 attention) against double-precision references
// written here with plain loops, compared by normalised error ||out - ref|| / ||ref||. Boundary
// token counts (1, one tile -1/0/+1, a few blocks' worth) and seeded random head counts. Outputs
// are poisoned with NaN first, so an element a kernel never wrote fails the check. Every test
// reports SKIPPED without a usable GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"

namespace kvlab {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Shape {
  int tokens, kv_heads, group, dim;
  int q_heads() const { return kv_heads * group; }
  std::size_t size() const { return static_cast<std::size_t>(tokens) * kv_heads * dim; }
};

std::string describe(const Shape& s) {
  return std::to_string(s.tokens) + " tokens x " + std::to_string(s.kv_heads) +
         " KV heads, group " + std::to_string(s.group) + ", dim " + std::to_string(s.dim);
}

// The brief's boundary sizes (tokens 1, 63, 64, 65, 1000; dim 64 and 128; groups 1 and 4), with
// 1 to 4 KV heads drawn from a seeded generator, plus a few larger or odder shapes.
std::vector<Shape> shapes(unsigned seed, bool fp8_extras) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> heads(1, 4);
  std::vector<Shape> out;
  for (int tokens : {1, 63, 64, 65, 1000}) {
    for (int dim : {64, 128}) {
      for (int group : {1, 4}) out.push_back({tokens, heads(rng), group, dim});
    }
  }
  out.push_back({4099, 8, 4, 128});  // many blocks per head, tokens not a multiple of 4
  out.push_back({333, 2, 8, 128});
  if (fp8_extras) {
    out.push_back({77, 2, 2, 256});  // two 128-channel rounds (values), four chunks (logits)
    out.push_back({130, 3, 7, 80});  // a dim that is no multiple of 64, an odd group
    out.push_back({50, 1, 3, 16});
    out.push_back({2048, 2, 8, 192});
  }
  return out;
}

// logits[qh][t] = sum_c q[qh][c] k[t][h][c] / sqrt(dim); out[qh][c] = sum_t p[qh][t] v[t][h][c].
std::vector<double> reference_logits(const std::vector<double>& k, const Shape& s,
                                     const std::vector<float>& q) {
  std::vector<double> logits(static_cast<std::size_t>(s.q_heads()) * s.tokens);
  for (int qh = 0; qh < s.q_heads(); ++qh) {
    const int h = qh / s.group;
    for (int t = 0; t < s.tokens; ++t) {
      double dot = 0;
      for (int c = 0; c < s.dim; ++c) {
        dot += static_cast<double>(q[static_cast<std::size_t>(qh) * s.dim + c]) *
               k[(static_cast<std::size_t>(t) * s.kv_heads + h) * s.dim + c];
      }
      logits[static_cast<std::size_t>(qh) * s.tokens + t] = dot / std::sqrt(double(s.dim));
    }
  }
  return logits;
}

std::vector<double> reference_values(const std::vector<double>& v, const Shape& s,
                                     const std::vector<float>& p) {
  std::vector<double> out(static_cast<std::size_t>(s.q_heads()) * s.dim, 0.0);
  for (int qh = 0; qh < s.q_heads(); ++qh) {
    const int h = qh / s.group;
    for (int t = 0; t < s.tokens; ++t) {
      const double w = p[static_cast<std::size_t>(qh) * s.tokens + t];
      for (int c = 0; c < s.dim; ++c) {
        out[static_cast<std::size_t>(qh) * s.dim + c] +=
            w * v[(static_cast<std::size_t>(t) * s.kv_heads + h) * s.dim + c];
      }
    }
  }
  return out;
}

using test::rel_error;

std::vector<float> random_queries(const Shape& s, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> q(static_cast<std::size_t>(s.q_heads()) * s.dim);
  for (auto& x : q) x = nd(rng);
  return q;
}

// Softmax rows of random logits (weights spread over two orders of magnitude), as decoding has.
std::vector<float> random_probs(const Shape& s, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.5f);
  std::vector<float> p(static_cast<std::size_t>(s.q_heads()) * s.tokens);
  for (auto& x : p) x = nd(rng);
  softmax_rows(p, s.q_heads());
  return p;
}

// fp16 keys/values with per-channel offsets and a few outlier channels, as real keys have.
std::vector<std::uint16_t> random_fp16(const Shape& s, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  const std::size_t row = static_cast<std::size_t>(s.kv_heads) * s.dim;
  std::vector<float> offset(row);
  for (std::size_t j = 0; j < row; ++j) offset[j] = (j % 17 == 0) ? 4.f * nd(rng) : 0.3f * nd(rng);
  std::vector<std::uint16_t> h(s.size());
  for (std::size_t i = 0; i < h.size(); ++i) h[i] = float_to_fp16(offset[i % row] + nd(rng));
  return h;
}

struct Fp8Tensor {
  std::vector<std::uint8_t> codes;
  std::vector<float> scales;
  std::vector<double> decoded;  // fp8_to_float(code) * scale[head], the reference's input
};

// Per-head absmax scaling as vLLM's fp8 cache; `all_codes` draws the codes uniformly from every
// finite code instead, so each decode path (subnormals, the largest values) is exercised.
Fp8Tensor random_fp8(const Shape& s, Fp8Format format, bool all_codes, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.001f, 0.05f);
  Fp8Tensor x;
  x.scales.resize(s.kv_heads);
  for (auto& sc : x.scales) sc = scale(rng);
  x.codes.resize(s.size());
  x.decoded.resize(s.size());
  for (std::size_t i = 0; i < x.codes.size(); ++i) {
    const int h = static_cast<int>((i / s.dim) % s.kv_heads);
    std::uint8_t c;
    if (all_codes) {
      do c = static_cast<std::uint8_t>(byte(rng));
      while (!std::isfinite(fp8_to_float(c, format)));
    } else {
      c = float_to_fp8(nd(rng) * 0.5f / x.scales[h], format);
    }
    x.codes[i] = c;
    x.decoded[i] = static_cast<double>(fp8_to_float(c, format)) * x.scales[h];
  }
  return x;
}

const char* name(Fp8Format f) {
  return f == Fp8Format::E4M3 ? "e4m3" : "e5m2";
}

// Whether this process has libcublas mapped, from /proc/self/maps.
bool cublas_mapped() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/libcublas.so") != std::string::npos) return true;
  }
  return false;
}

// Read before main(): a library the executable links is mapped by then, whatever test runs.
const bool g_cublas_at_start = cublas_mapped();

// cuBLAS is opened when the baseline first needs it, not loaded with every kvlab process (about
// 150 MiB resident). Needs the CUDA toolkit's libraries, not a GPU.
TEST(GpuBaselines, CublasOpensOnFirstUseOnly) {
  EXPECT_FALSE(g_cublas_at_start) << "libcublas was loaded at start: something links it";
  const Status opened = cuda::cublas_available();
  ASSERT_TRUE(opened) << opened.message();
  EXPECT_TRUE(cublas_mapped());
  EXPECT_TRUE(cuda::cublas_available());  // once per process, the same answer
}

TEST(GpuBaselines, CublasFp16LogitsMatchReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(5);
  for (const Shape& s : shapes(11, false)) {
    SCOPED_TRACE(describe(s));
    const auto k = random_fp16(s, rng);
    std::vector<double> kd(k.size());
    for (std::size_t i = 0; i < k.size(); ++i) kd[i] = fp16_to_float(k[i]);
    const auto q = random_queries(s, rng);
    const auto ref = reference_logits(kd, s, q);
    const Fp16KvView kv{s.tokens, s.kv_heads, s.dim, k, k};
    std::vector<float> logits(ref.size(), kNaN);
    const Status st = cuda::fp16_attention_logits(kv, q, s.q_heads(), logits);
    ASSERT_TRUE(st) << st.message();
    // The queries are rounded to fp16 for the GEMM: errors near 2^-12.
    EXPECT_LT(rel_error(logits, ref), 2e-3);
  }
}

TEST(GpuBaselines, CublasFp16ValuesMatchReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(6);
  for (const Shape& s : shapes(12, false)) {
    SCOPED_TRACE(describe(s));
    const auto v = random_fp16(s, rng);
    std::vector<double> vd(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) vd[i] = fp16_to_float(v[i]);
    const auto p = random_probs(s, rng);
    const auto ref = reference_values(vd, s, p);
    const Fp16KvView kv{s.tokens, s.kv_heads, s.dim, v, v};
    std::vector<float> out(ref.size(), kNaN);
    const Status st = cuda::fp16_attention_values(kv, p, s.q_heads(), out);
    ASSERT_TRUE(st) << st.message();
    EXPECT_LT(rel_error(out, ref), 2e-3);
  }
}

TEST(GpuBaselines, Fp8LogitsMatchReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(7);
  for (Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    for (bool all_codes : {false, true}) {
      for (const Shape& s : shapes(13, true)) {
        SCOPED_TRACE(std::string(name(format)) + (all_codes ? " all codes, " : ", ") + describe(s));
        const Fp8Tensor k = random_fp8(s, format, all_codes, rng);
        const auto q = random_queries(s, rng);
        const auto ref = reference_logits(k.decoded, s, q);
        const cuda::Fp8KvView kv{s.tokens, s.kv_heads, s.dim, format, k.codes, {}, k.scales, {}};
        std::vector<float> logits(ref.size(), kNaN);
        const Status st = cuda::fp8_attention_logits(kv, q, s.q_heads(), logits);
        ASSERT_TRUE(st) << st.message();
        EXPECT_LT(rel_error(logits, ref), 1e-5);
      }
    }
  }
}

TEST(GpuBaselines, Fp8ValuesMatchReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(8);
  for (Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    for (bool all_codes : {false, true}) {
      for (const Shape& s : shapes(14, true)) {
        SCOPED_TRACE(std::string(name(format)) + (all_codes ? " all codes, " : ", ") + describe(s));
        const Fp8Tensor v = random_fp8(s, format, all_codes, rng);
        const auto p = random_probs(s, rng);
        const auto ref = reference_values(v.decoded, s, p);
        const cuda::Fp8KvView kv{s.tokens, s.kv_heads, s.dim, format, {}, v.codes, {}, v.scales};
        std::vector<float> out(ref.size(), kNaN);
        const Status st = cuda::fp8_attention_values(kv, p, s.q_heads(), out);
        ASSERT_TRUE(st) << st.message();
        EXPECT_LT(rel_error(out, ref), 1e-5);
      }
    }
  }
}

// Weights of any magnitude, not only a softmax's: the kernel rescales per block and head.
TEST(GpuBaselines, Fp8ValuesTakeUnnormalisedWeights) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(9);
  const Shape s{700, 2, 4, 128};
  const Fp8Tensor v = random_fp8(s, Fp8Format::E4M3, false, rng);
  for (float magnitude : {1e-6f, 1.f, 1e4f}) {
    SCOPED_TRACE(magnitude);
    std::normal_distribution<float> nd(0.f, magnitude);
    std::vector<float> p(static_cast<std::size_t>(s.q_heads()) * s.tokens);
    for (auto& x : p) x = nd(rng);
    const auto ref = reference_values(v.decoded, s, p);
    const cuda::Fp8KvView kv{s.tokens, s.kv_heads, s.dim, Fp8Format::E4M3,
                             {},       v.codes,    {},    v.scales};
    std::vector<float> out(ref.size(), kNaN);
    ASSERT_TRUE(cuda::fp8_attention_values(kv, p, s.q_heads(), out));
    EXPECT_LT(rel_error(out, ref), 1e-5);
  }
}

// A NaN code decodes to NaN (fp8_to_float's meaning): its token's logits are NaN, no other's.
TEST(GpuBaselines, Fp8NaNCodesGiveNaNLogits) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(10);
  const Shape s{40, 2, 4, 64};
  for (Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
    SCOPED_TRACE(name(format));
    Fp8Tensor k = random_fp8(s, format, false, rng);
    const int bad_token = 17, bad_head = 1;
    k.codes[(static_cast<std::size_t>(bad_token) * s.kv_heads + bad_head) * s.dim + 5] = 0x7f;
    ASSERT_TRUE(std::isnan(fp8_to_float(0x7f, format)));
    const auto q = random_queries(s, rng);
    const cuda::Fp8KvView kv{s.tokens, s.kv_heads, s.dim, format, k.codes, {}, k.scales, {}};
    std::vector<float> logits(static_cast<std::size_t>(s.q_heads()) * s.tokens, 0.f);
    ASSERT_TRUE(cuda::fp8_attention_logits(kv, q, s.q_heads(), logits));
    for (int qh = 0; qh < s.q_heads(); ++qh) {
      for (int t = 0; t < s.tokens; ++t) {
        const bool nan = std::isnan(logits[static_cast<std::size_t>(qh) * s.tokens + t]);
        EXPECT_EQ(nan, t == bad_token && qh / s.group == bad_head)
            << "head " << qh << " token " << t;
      }
    }
  }
}

// Full decode attention softmax(q.K^T / sqrt(d)) V in double, one sequence.
std::vector<double> reference_attention(const std::vector<double>& k, const std::vector<double>& v,
                                        const Shape& s, const std::vector<float>& q) {
  const std::vector<double> logits = reference_logits(k, s, q);
  std::vector<float> p(logits.size());
  for (int qh = 0; qh < s.q_heads(); ++qh) {
    double mx = -INFINITY, sum = 0;
    for (int t = 0; t < s.tokens; ++t) mx = std::max(mx, logits[qh * s.tokens + t]);
    std::vector<double> e(s.tokens);
    for (int t = 0; t < s.tokens; ++t) sum += e[t] = std::exp(logits[qh * s.tokens + t] - mx);
    for (int t = 0; t < s.tokens; ++t) p[qh * s.tokens + t] = static_cast<float>(e[t] / sum);
  }
  // reference_values takes float weights; double ones would change the result only near 1e-8.
  return reference_values(v, s, p);
}

// The fused fp16 decode kernel (the FlashAttention-class baseline) against the double reference:
// every boundary shape, head_dim 64/128/256, every group 1..8 (3 as SmolLM2, 7), one token (one
// chunk) to thousands (many chunks merged by the last block), and batches of sequences that differ.
// fp32 accumulation and exp2f: errors near 1e-6; 1e-4 leaves room and still catches a wrong row,
// a missed chunk or a stale merge (each at least 1e-2 here).
TEST(GpuBaselines, Fp16FusedDecodeMatchesReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(15);
  std::vector<std::pair<Shape, int>> cases;  // shape, batch
  for (const Shape& s : shapes(16, false)) cases.push_back({s, 1});
  for (int group = 1; group <= 8; ++group) cases.push_back({{777, 2, group, 128}, 1});
  cases.push_back({{65, 1, 3, 256}, 1});
  cases.push_back({{5000, 3, 3, 64}, 1});   // SmolLM2's heads, many chunks
  cases.push_back({{2049, 8, 4, 128}, 8});  // a batch of 8 sequences
  cases.push_back({{1, 2, 2, 64}, 32});
  bool several_chunks = false;
  for (const auto& [s, batch] : cases) {
    SCOPED_TRACE(describe(s) + ", batch " + std::to_string(batch));
    std::vector<std::uint16_t> k, v;
    std::vector<float> q;
    std::vector<double> ref;
    for (int b = 0; b < batch; ++b) {
      const auto kb = random_fp16(s, rng), vb = random_fp16(s, rng);
      const auto qb = random_queries(s, rng);
      std::vector<double> kd(kb.size()), vd(vb.size());
      for (std::size_t i = 0; i < kb.size(); ++i) kd[i] = fp16_to_float(kb[i]);
      for (std::size_t i = 0; i < vb.size(); ++i) vd[i] = fp16_to_float(vb[i]);
      const auto rb = reference_attention(kd, vd, s, qb);
      k.insert(k.end(), kb.begin(), kb.end());
      v.insert(v.end(), vb.begin(), vb.end());
      q.insert(q.end(), qb.begin(), qb.end());
      ref.insert(ref.end(), rb.begin(), rb.end());
    }
    const Fp16KvView kv{s.tokens, s.kv_heads, s.dim, k, v};
    std::vector<float> out(ref.size(), kNaN);
    int splits = 0;
    const Status st = cuda::fp16_decode_attention(kv, batch, q, s.q_heads(), out, &splits);
    ASSERT_TRUE(st) << st.message();
    EXPECT_LT(rel_error(out, ref), 1e-4);
    EXPECT_GE(splits, 1);
    // The call launched twice on one prepared object, the output poisoned before each: the
    // second launch (whose output this is) found the merge counters reset by the first.
    several_chunks |= splits > 1;
  }
  EXPECT_TRUE(several_chunks) << "no case split its tokens over several blocks";
}

TEST(GpuBaselines, BadInputIsAnError) {
  KVLAB_REQUIRE_GPU();
  const Shape s{10, 2, 1, 64};
  const std::vector<std::uint8_t> codes(s.size(), 0x38);
  const std::vector<float> sc(2, 1.f);
  const cuda::Fp8KvView kv{s.tokens, s.kv_heads, s.dim, Fp8Format::E4M3, codes, codes, sc, sc};
  std::vector<float> q(2 * 64), p(2 * 10), logits(2 * 10), out(2 * 64);
  ASSERT_TRUE(cuda::fp8_attention_logits(kv, q, 2, logits));
  ASSERT_TRUE(cuda::fp8_attention_values(kv, p, 2, out));

  // q or probs of the wrong size.
  std::vector<float> q_short(2 * 64 - 1), p_long(2 * 10 + 1);
  Status st = cuda::fp8_attention_logits(kv, q_short, 2, logits);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("input holds 127 floats"), std::string::npos) << st.message();
  EXPECT_FALSE(cuda::fp8_attention_values(kv, p_long, 2, out));
  // Query heads not a multiple of the KV heads; a group above 8.
  std::vector<float> q3(3 * 64), l3(3 * 10);
  EXPECT_FALSE(cuda::fp8_attention_logits(kv, q3, 3, l3));
  std::vector<float> q32(32 * 64), l32(32 * 10);
  st = cuda::fp8_attention_logits(kv, q32, 32, l32);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("GQA groups of 16"), std::string::npos) << st.message();
  // head_dim not a multiple of 16, or above 256.
  for (int dim : {100, 272}) {
    const std::vector<std::uint8_t> c(static_cast<std::size_t>(10) * 2 * dim, 0);
    const cuda::Fp8KvView bad{10, 2, dim, Fp8Format::E4M3, c, c, sc, sc};
    std::vector<float> qd(2 * static_cast<std::size_t>(dim));
    st = cuda::fp8_attention_logits(bad, qd, 2, logits);
    ASSERT_FALSE(st);
    EXPECT_NE(st.message().find("head_dim " + std::to_string(dim)), std::string::npos)
        << st.message();
  }
  // One scale short.
  const std::vector<float> sc1(1, 1.f);
  const cuda::Fp8KvView few{s.tokens, s.kv_heads, s.dim, Fp8Format::E4M3, codes, codes, sc1, sc1};
  EXPECT_FALSE(cuda::fp8_attention_logits(few, q, 2, logits));

  // fp16: the same size and head checks.
  const std::vector<std::uint16_t> h(s.size(), 0);
  const Fp16KvView f{s.tokens, s.kv_heads, s.dim, h, h};
  EXPECT_TRUE(cuda::fp16_attention_logits(f, q, 2, logits));
  EXPECT_FALSE(cuda::fp16_attention_logits(f, q_short, 2, logits));
  EXPECT_FALSE(cuda::fp16_attention_values(f, p_long, 2, out));
  EXPECT_FALSE(cuda::fp16_attention_logits(f, q3, 3, l3));
  const Fp16KvView empty{0, 2, 64, {}, {}};
  EXPECT_FALSE(cuda::fp16_attention_values(empty, p, 2, out));

  // The fused decode kernel: sizes, groups above 8, head_dims it has no kernel for.
  EXPECT_TRUE(cuda::fp16_decode_attention(f, 1, q, 2, out));
  EXPECT_FALSE(cuda::fp16_decode_attention(f, 1, q_short, 2, out));
  EXPECT_FALSE(cuda::fp16_decode_attention(f, 2, q, 2, out));  // one sequence's K/V for two
  EXPECT_FALSE(cuda::fp16_decode_attention(f, 1, q3, 3, l3));
  std::vector<float> o32(32 * 64);
  EXPECT_FALSE(cuda::fp16_decode_attention(f, 1, q32, 32, o32));
  const std::vector<std::uint16_t> h80(static_cast<std::size_t>(10) * 2 * 80, 0);
  const Fp16KvView f80{10, 2, 80, h80, h80};
  std::vector<float> q80(2 * 80), o80(2 * 80);
  st = cuda::fp16_decode_attention(f80, 1, q80, 2, o80);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("head_dim 80"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace kvlab
