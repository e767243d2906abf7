// Property tests of every quantizer: reconstruction within the documented bound on boundary and
// seeded random shapes, and byte accounting against formulas written out here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "codec/bitpack.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/kivi.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {
namespace {

struct Shape {
  int tokens, heads, dim;
};

// Keys with outlier channels and values of mixed scale, in fp16.
Tensor random_tensor(Shape s, std::uint32_t seed, DType dtype = DType::F16) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(s.tokens) * s.heads * s.dim);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const int ch = static_cast<int>(i % s.dim);
    v[i] = n(rng) * (ch == 3 ? 15.f : 1.f) + (ch == 1 ? 4.f : 0.f);
  }
  return Tensor::from_float(v, dtype, s.tokens, s.heads, s.dim);
}

std::vector<Shape> shapes_for(int group) {
  std::vector<Shape> out;
  for (int t : {0, 1, group - 1, group, group + 1, 2 * group + 5, 200}) {
    if (t < 0) continue;
    out.push_back({t, 2, 16});
  }
  out.push_back({37, 1, 7});   // odd dim: packing crosses bytes
  out.push_back({65, 3, 33});  // dim not a multiple of the group
  std::mt19937 rng(42);
  for (int i = 0; i < 4; ++i) {
    out.push_back({static_cast<int>(rng() % 300), 1 + static_cast<int>(rng() % 4),
                   1 + static_cast<int>(rng() % 64)});
  }
  return out;
}

std::vector<float> roundtrip(const Quantizer& q, const Tensor& x, TensorRole role,
                             QuantizedTensor* out = nullptr) {
  auto r = q.quantize(x.view(), role);
  EXPECT_TRUE(r.ok());
  std::vector<float> hat(x.elements());
  q.dequantize(*r, hat);
  if (out) *out = std::move(*r);
  return hat;
}

// Slack for float arithmetic in (x - min) / step and min + code * step.
double slack(double magnitude) {
  return 1e-5 * (1.0 + std::fabs(magnitude));
}

// Step of the unit holding element (t, h, d) for asymmetric grouping, computed in double:
// keys per channel over aligned groups of G tokens within [t0, t1); values per token over
// channel groups of width G (0 = whole head).
double group_step(const std::vector<float>& x, Shape s, TensorRole role, int t0, int t1, int t,
                  int h, int d, int key_group, int value_group, double divisor, bool relative,
                  double rel) {
  double lo = INFINITY, hi = -INFINITY;
  const auto at = [&](int tt, int dd) {
    return static_cast<double>(x[(static_cast<std::size_t>(tt) * s.heads + h) * s.dim + dd]);
  };
  if (role == TensorRole::Key) {
    const int g0 = t0 + (t - t0) / key_group * key_group;
    for (int tt = g0; tt < std::min(t1, g0 + key_group); ++tt) {
      lo = std::min(lo, at(tt, d));
      hi = std::max(hi, at(tt, d));
    }
  } else {
    const int w = value_group > 0 ? std::min(value_group, s.dim) : s.dim;
    const int c0 = d / w * w;
    for (int dd = c0; dd < std::min(s.dim, c0 + w); ++dd) {
      lo = std::min(lo, at(t, dd));
      hi = std::max(hi, at(t, dd));
    }
  }
  return relative ? rel * (hi - lo) : (hi - lo) / divisor;
}

TEST(BitPack, RoundTripAtEveryOffset) {
  std::mt19937 rng(3);
  for (int bits : {1, 2, 4, 8}) {
    for (std::size_t first : {0u, 1u, 3u, 5u}) {
      for (std::size_t count : {0u, 1u, 2u, 7u, 8u, 33u}) {
        std::vector<std::uint8_t> codes(count);
        for (auto& c : codes) c = static_cast<std::uint8_t>(rng() & ((1u << bits) - 1));
        std::vector<std::uint8_t> packed(detail::packed_bytes(first + count, bits) + 1, 0xa5);
        const std::vector<std::uint8_t> before = packed;
        detail::pack_codes(codes.data(), count, bits, packed.data(), first);
        std::vector<std::uint8_t> back(count);
        detail::unpack_codes(packed.data(), first, count, bits, back.data());
        EXPECT_EQ(back, codes) << bits << " bits, first " << first << ", count " << count;
        // Codes before `first` are untouched.
        std::vector<std::uint8_t> prefix(first), prefix_before(first);
        detail::unpack_codes(packed.data(), 0, first, bits, prefix.data());
        detail::unpack_codes(before.data(), 0, first, bits, prefix_before.data());
        EXPECT_EQ(prefix, prefix_before);
      }
    }
  }
}

TEST(Quantizers, SymmetricIntWithinHalfStep) {
  for (int bits : {8, 4}) {
    MethodConfig c;
    c.kind = bits == 8 ? MethodKind::Int8 : MethodKind::Int4;
    auto q = make_quantizer(c);
    ASSERT_TRUE(q.ok());
    for (Shape s : shapes_for(16)) {
      const Tensor t = random_tensor(s, 11 + s.tokens);
      const std::vector<float> x = t.view().to_float();
      QuantizedTensor qt;
      const std::vector<float> hat = roundtrip(**q, t, TensorRole::Key, &qt);
      double amax = 0;
      for (float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
      const double step = amax / ((1 << (bits - 1)) - 1);
      for (std::size_t i = 0; i < x.size(); ++i) {
        ASSERT_LE(std::fabs(x[i] - hat[i]), step / 2 + slack(x[i])) << "element " << i;
      }
      EXPECT_EQ(qt.bytes.codes, (x.size() * bits + 7) / 8);
      EXPECT_EQ(qt.bytes.scales, 4u);
    }
  }
}

// With an odd number of values a token (3 here), INT4 rows begin in the middle of a byte every
// other token: each range decodes as the test reads the nibbles itself, code i in byte i / 2,
// low nibble first, standing for (code - 8) * scale.
TEST(Quantizers, SymmetricInt4RowsThatBeginMidByte) {
  MethodConfig c;
  c.kind = MethodKind::Int4;
  auto q = make_quantizer(c);
  ASSERT_TRUE(q.ok());
  const Shape s{7, 1, 3};
  const Tensor t = random_tensor(s, 5);
  auto qt = (*q)->quantize(t.view(), TensorRole::Key);
  ASSERT_TRUE(qt.ok()) << qt.message();
  ASSERT_EQ(qt->codes.size(), 11u);  // 21 codes, the last byte half used
  const float scale = qt->params.at(0);
  for (auto [first, last] : {std::pair{1, 2}, std::pair{1, 4}, std::pair{3, 7}, std::pair{0, 7},
                             std::pair{6, 7}, std::pair{2, 2}}) {
    const std::size_t n = static_cast<std::size_t>(last - first) * 3;
    std::vector<float> part(n + 1, NAN);
    ASSERT_TRUE((*q)->dequantize_tokens(*qt, first, last, {part.data(), n}));
    EXPECT_TRUE(std::isnan(part[n])) << "wrote past token " << last;
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t i = static_cast<std::size_t>(first) * 3 + j;
      const int code = (qt->codes[i / 2] >> (4 * (i % 2))) & 0xf;
      ASSERT_EQ(part[j], static_cast<float>(code - 8) * scale)
          << "[" << first << ", " << last << ") value " << j;
    }
  }
}

// KIVI keeps each group's step and minimum in fp16 as its reference does (or in the dtype chosen):
// the stored parameters are exactly representable in it, the error stays within half a stored
// step (plus, where rounding shrank the step, the clamped top code's shortfall of at most
// 2^bits - 1 ulps of the step), and each parameter counts its dtype's bytes.
TEST(Quantizers, KiviWithinHalfStepAndRecentTokensExact) {
  for (const DType params : {DType::F16, DType::BF16, DType::F32}) {
    const double ulp = params == DType::F16 ? 0x1p-11 : params == DType::BF16 ? 0x1p-8 : 0.0;
    const std::size_t param_bytes = params == DType::F32 ? 4 : 2;
    for (int bits : {2, 4}) {
      for (int group : {8, 32}) {
        MethodConfig c;
        c.kind = MethodKind::Kivi;
        c.bits = bits;
        c.group_size = group;
        c.residual = 20;
        if (params != DType::F16) c.param_dtype = params;  // fp16 is KIVI's default
        auto q = make_quantizer(c);
        ASSERT_TRUE(q.ok());
        for (Shape s : shapes_for(group)) {
          for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
            SCOPED_TRACE(::testing::Message() << dtype_name(params) << " " << bits
                                              << " bits G=" << group << " " << role_name(role));
            const Tensor t = random_tensor(s, 5 + s.tokens * 3 + bits);
            const std::vector<float> x = t.view().to_float();
            QuantizedTensor qt;
            const std::vector<float> hat = roundtrip(**q, t, role, &qt);
            for (float p : qt.params) {
              const float stored = params == DType::F16    ? fp16_to_float(float_to_fp16(p))
                                   : params == DType::BF16 ? bf16_to_float(float_to_bf16(p))
                                                           : p;
              ASSERT_EQ(stored, p) << "a parameter is not representable in its dtype";
            }
            const int quantized = std::max(0, s.tokens - c.residual) / group * group;
            const int levels = (1 << bits) - 1;
            for (int tt = 0; tt < s.tokens; ++tt) {
              for (int h = 0; h < s.heads; ++h) {
                for (int d = 0; d < s.dim; ++d) {
                  const std::size_t i = (static_cast<std::size_t>(tt) * s.heads + h) * s.dim + d;
                  if (tt >= quantized) {
                    ASSERT_EQ(hat[i], x[i]) << "fp16 window must be exact";
                    continue;
                  }
                  const double step = group_step(x, s, role, 0, quantized, tt, h, d, group, group,
                                                 levels, false, 0);
                  // A minimum rounded to the dtype moves every code's value by up to half an
                  // ulp of that minimum, |min| <= |x| + range.
                  const double min_shift = ulp * (std::fabs(x[i]) + step * levels);
                  ASSERT_LE(std::fabs(x[i] - hat[i]),
                            step * (0.5 + (levels + 1) * ulp) + min_shift + slack(x[i]))
                      << "t=" << tt << " h=" << h << " d=" << d;
                }
              }
            }
            // Bytes, written out: packed codes, a step and minimum per group, fp16 window.
            const std::size_t hd = static_cast<std::size_t>(s.heads) * s.dim;
            const std::size_t units =
                role == TensorRole::Key
                    ? static_cast<std::size_t>(quantized / group) * hd
                    : static_cast<std::size_t>(quantized) * s.heads * ((s.dim + group - 1) / group);
            EXPECT_EQ(qt.bytes.codes, (quantized * hd * bits + 7) / 8);
            EXPECT_EQ(qt.bytes.scales, units * param_bytes);
            EXPECT_EQ(qt.bytes.zero_points, units * param_bytes);
            EXPECT_EQ(qt.bytes.residual, (s.tokens - quantized) * hd * 2);
            EXPECT_EQ(qt.bytes.metadata, 16u + 3 * 4);
            // The formula the planner evaluates gives the same bytes, component by component.
            KiviShape shape{static_cast<std::uint64_t>(s.tokens),
                            static_cast<std::uint64_t>(s.heads),
                            static_cast<std::uint64_t>(s.dim),
                            bits,
                            group,
                            c.residual};
            shape.param_bytes = static_cast<int>(param_bytes);
            const ByteBreakdown formula = kivi_tensor_bytes(shape, role);
            EXPECT_EQ(formula.codes, qt.bytes.codes);
            EXPECT_EQ(formula.scales, qt.bytes.scales);
            EXPECT_EQ(formula.zero_points, qt.bytes.zero_points);
            EXPECT_EQ(formula.residual, qt.bytes.residual);
            EXPECT_EQ(formula.metadata, qt.bytes.metadata);
          }
        }
      }
    }
  }
}

// A parameter dtype is a choice only where a method keeps per-group parameters, and it is named
// in the label only where it is not the reference's.
TEST(Quantizers, ParamDtypeOption) {
  MethodConfig c;
  c.kind = MethodKind::Kivi;
  EXPECT_EQ(method_param_dtype(c), DType::F16);
  EXPECT_EQ(method_label(c), "kivi-2 G=32 R=128");
  c.param_dtype = DType::F32;
  EXPECT_EQ(method_label(c), "kivi-2 G=32 R=128 params=f32");
  c.kind = MethodKind::KvComp;
  c.param_dtype.reset();
  EXPECT_EQ(method_param_dtype(c), DType::F32);
  c.kind = MethodKind::Int8;
  c.param_dtype = DType::F16;
  auto q = make_quantizer(c);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.message().find("--param-dtype"), std::string::npos) << q.message();
}

TEST(Quantizers, TieredBitsFallWithAge) {
  MethodConfig c;
  c.kind = MethodKind::Tiered;
  c.group_size = 8;
  c.residual = 16;
  c.int8_tokens = 24;
  c.old_bits = 2;
  auto q = make_quantizer(c);
  ASSERT_TRUE(q.ok());
  const Shape s{100, 2, 16};
  for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    const Tensor t = random_tensor(s, 99);
    const std::vector<float> x = t.view().to_float();
    QuantizedTensor qt;
    const std::vector<float> hat = roundtrip(**q, t, role, &qt);
    // 100 tokens, 16 recent fp16 -> 84 quantizable -> 80 aligned; int8 takes 24 (80-24 = 56).
    const std::vector<int> want{0, 56, 80, 100};
    ASSERT_EQ(qt.bounds, want);
    double worst_old = 0, worst_mid = 0;
    for (int tt = 0; tt < s.tokens; ++tt) {
      for (int h = 0; h < s.heads; ++h) {
        for (int d = 0; d < s.dim; ++d) {
          const std::size_t i = (static_cast<std::size_t>(tt) * s.heads + h) * s.dim + d;
          const double err = std::fabs(x[i] - hat[i]);
          if (tt >= 80) {
            ASSERT_EQ(err, 0.0);
          } else {
            const bool old = tt < 56;
            const double step = group_step(x, s, role, old ? 0 : 56, old ? 56 : 80, tt, h, d, 8, 8,
                                           old ? 3 : 255, false, 0);
            ASSERT_LE(err, step / 2 + slack(x[i]));
            (old ? worst_old : worst_mid) = std::max(old ? worst_old : worst_mid, err);
          }
        }
      }
    }
    EXPECT_GT(worst_old, 4 * worst_mid) << "older tokens must be coarser";
    EXPECT_EQ(qt.bytes.codes, 56u * 32 * 2 / 8 + 24u * 32);
  }
}

TEST(Quantizers, KvCompErrorBoundHoldsForEveryElement) {
  for (double rel : {1.0 / 255.0, 0.02, 0.1, 0.5}) {
    for (int block : {1, 16, 64}) {
      MethodConfig c;
      c.kind = MethodKind::KvComp;
      c.block_size = block;
      c.rel_scale = rel;
      auto q = make_quantizer(c);
      ASSERT_TRUE(q.ok());
      for (Shape s : shapes_for(block)) {
        for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
          const Tensor t = random_tensor(s, 17 + s.tokens + block, DType::F32);
          const std::vector<float> x = t.view().to_float();
          QuantizedTensor qt;
          const std::vector<float> hat = roundtrip(**q, t, role, &qt);
          for (int tt = 0; tt < s.tokens; ++tt) {
            for (int h = 0; h < s.heads; ++h) {
              for (int d = 0; d < s.dim; ++d) {
                const std::size_t i = (static_cast<std::size_t>(tt) * s.heads + h) * s.dim + d;
                const double step =
                    group_step(x, s, role, 0, s.tokens, tt, h, d, block, 0, 1, true, rel);
                ASSERT_LE(std::fabs(x[i] - hat[i]), step / 2 + slack(x[i]))
                    << "rel " << rel << " block " << block << " " << role_name(role);
              }
            }
          }
          EXPECT_EQ(qt.bytes.codes, x.size());
        }
      }
    }
  }
}

TEST(Quantizers, Fp8IsNearestCodeTimesScale) {
  // fp16 input takes the table path, f32 input the direct encoder: both must agree with search.
  for (MethodKind kind : {MethodKind::Fp8E4M3, MethodKind::Fp8E5M2}) {
    for (auto [per_head, dtype] : {std::pair{false, DType::F16},
                                   {true, DType::F16},
                                   {false, DType::F32},
                                   {true, DType::F32}}) {
      MethodConfig c;
      c.kind = kind;
      c.per_head_scale = per_head;
      auto q = make_quantizer(c);
      ASSERT_TRUE(q.ok());
      const Fp8Format f = kind == MethodKind::Fp8E4M3 ? Fp8Format::E4M3 : Fp8Format::E5M2;
      const Shape s{50, 3, 16};
      const Tensor t = random_tensor(s, 123, dtype);
      const std::vector<float> x = t.view().to_float();
      QuantizedTensor qt;
      const std::vector<float> hat = roundtrip(**q, t, TensorRole::Key, &qt);
      std::vector<double> amax(s.heads, 0);
      for (std::size_t i = 0; i < x.size(); ++i) {
        const int h = static_cast<int>(i / s.dim % s.heads);
        amax[h] = std::max(amax[h], std::fabs(static_cast<double>(x[i])));
      }
      if (!per_head) {
        const double all = *std::max_element(amax.begin(), amax.end());
        std::fill(amax.begin(), amax.end(), all);
      }
      for (std::size_t i = 0; i < x.size(); ++i) {
        const int h = static_cast<int>(i / s.dim % s.heads);
        const double scale = amax[h] / fp8_max(f);
        // The nearest representable fp8 value of x / scale, by search over all codes.
        double best = 0, best_err = INFINITY;
        for (int code = 0; code < 256; ++code) {
          const double v = fp8_to_float(static_cast<std::uint8_t>(code), f);
          if (std::isfinite(v) && std::fabs(v - x[i] / scale) < best_err) {
            best_err = std::fabs(v - x[i] / scale);
            best = v;
          }
        }
        ASSERT_NEAR(hat[i], best * scale, 1e-5 * (1 + std::fabs(best * scale))) << i;
      }
      EXPECT_EQ(qt.bytes.scales, per_head ? 12u : 4u);
    }
  }
}

TEST(Quantizers, HistogramsCountEveryQuantizedCode) {
  const Shape s{300, 2, 32};  // head_dim a whole block of every block format
  const Tensor t = random_tensor(s, 8);
  for (std::string_view id : method_ids()) {
    MethodConfig c;
    c.kind = *parse_method(id);
    auto q = make_quantizer(c);
    ASSERT_TRUE(q.ok()) << id;
    auto qt = (*q)->quantize(t.view(), TensorRole::Value);
    ASSERT_TRUE(qt.ok()) << id << ": " << qt.message();
    std::uint64_t counted = 0;
    for (const auto& h : (*q)->histograms(*qt)) {
      EXPECT_EQ(h.counts.size(), std::size_t{1} << h.bits) << id;
      // Block formats also show their scales (NVFP4's E4M3, MXFP4's E8M0 exponents).
      if (h.label.find("scale") != std::string::npos ||
          h.label.find("exponent") != std::string::npos) {
        continue;
      }
      for (auto n : h.counts) counted += n;
    }
    const std::uint64_t fp16_values = qt->residual.size();
    EXPECT_EQ(counted + fp16_values, t.elements()) << id;
  }
}

// dequantize_tokens() writes rows [first, last) of what dequantize() writes, for ranges on and off
// the chunks (32 tokens for group keys, 64 for values and int8), across KIVI's fp16 window and
// its quantized tokens, and empty. int8, KIVI and KVComp (the whole-run benchmark's methods)
// must reconstruct ranges; a quantizer that does not writes nothing.
TEST(Quantizers, TokenRangesAreSlicesOfTheWhole) {
  for (std::string_view id : method_ids()) {
    MethodConfig c;
    c.kind = *parse_method(id);
    auto q = make_quantizer(c);
    ASSERT_TRUE(q.ok()) << id;
    const bool must =
        c.kind == MethodKind::Int8 || c.kind == MethodKind::Kivi || c.kind == MethodKind::KvComp;
    for (int tokens : {1, 31, 64, 200, 300}) {
      const Shape s{tokens, 2, 32};
      const Tensor t = random_tensor(s, 11 + static_cast<std::uint32_t>(tokens));
      const std::size_t hd = static_cast<std::size_t>(s.heads) * s.dim;
      for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
        auto qt = (*q)->quantize(t.view(), role);
        ASSERT_TRUE(qt.ok()) << id << ": " << qt.message();
        std::vector<float> whole(t.elements());
        (*q)->dequantize(*qt, whole);
        for (auto [first, last] : {std::pair{0, tokens}, std::pair{0, 1}, std::pair{5, 37},
                                   std::pair{tokens / 2, tokens}, std::pair{tokens - 1, tokens},
                                   std::pair{17, 17}, std::pair{31, 131}}) {
          first = std::min(first, tokens);
          last = std::min(last, tokens);
          const std::size_t n = static_cast<std::size_t>(last - first) * hd;
          std::vector<float> part(n + 1, NAN);  // one float past the range: never written
          const bool done = (*q)->dequantize_tokens(*qt, first, last, {part.data(), n});
          if (must) {
            EXPECT_TRUE(done) << id;
          }
          if (!done) {
            for (float v : part) ASSERT_TRUE(std::isnan(v)) << id << ": wrote, yet said it did not";
            continue;
          }
          EXPECT_TRUE(std::isnan(part[n])) << id << ": wrote past token " << last;
          part.pop_back();
          const std::vector<float> expected(whole.begin() + first * hd, whole.begin() + last * hd);
          EXPECT_EQ(part, expected) << id << " " << tokens << " tokens [" << first << ", " << last
                                    << ") " << role_name(role);
        }
      }
    }
  }
}

TEST(Quantizers, AbsurdParametersGiveClearErrors) {
  MethodConfig c;
  c.kind = MethodKind::Kivi;
  c.bits = 3;
  auto q = make_quantizer(c);
  ASSERT_FALSE(q.ok());
  EXPECT_NE(q.message().find("--bits must be 2 or 4"), std::string::npos);
  c.bits = 2;
  c.group_size = 0;
  EXPECT_NE(make_quantizer(c).message().find("--group-size"), std::string::npos);
  c = MethodConfig{};
  c.kind = MethodKind::KvComp;
  c.rel_scale = 0.001;
  EXPECT_NE(make_quantizer(c).message().find("--rel-scale"), std::string::npos);
  c.rel_scale = std::nan("");
  EXPECT_FALSE(make_quantizer(c).ok());
  EXPECT_FALSE(parse_method("int3").ok());
}

}  // namespace
}  // namespace kvlab
