// FP8 E4M3 / E5M2 against an independent reference: values from the bit fields in double, and
// rounding by brute-force search for the nearest representable value (ties to even).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kvlab/engine/quant/fp8.h"
#include "quant/fp8_impl.h"

namespace kvlab {
namespace {

struct Format {
  Fp8Format f;
  int exp_bits, mant_bits, bias;
  bool ieee_specials;  // E5M2: exponent all-ones is inf/NaN; E4M3: only S.1111.111 is NaN
};
const Format kFormats[] = {{Fp8Format::E4M3, 4, 3, 7, false}, {Fp8Format::E5M2, 5, 2, 15, true}};

double reference_value(const Format& fmt, int code) {
  const int e = (code >> fmt.mant_bits) & ((1 << fmt.exp_bits) - 1);
  const int m = code & ((1 << fmt.mant_bits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
  const int emax = (1 << fmt.exp_bits) - 1;
  if (fmt.ieee_specials && e == emax) {
    return m == 0 ? sign * INFINITY : std::numeric_limits<double>::quiet_NaN();
  }
  if (!fmt.ieee_specials && e == emax && m == (1 << fmt.mant_bits) - 1) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double frac = static_cast<double>(m) / (1 << fmt.mant_bits);
  if (e == 0) return sign * frac * std::pow(2.0, 1 - fmt.bias);
  return sign * (1.0 + frac) * std::pow(2.0, e - fmt.bias);
}

// Nearest finite code by brute force; ties go to the even code; beyond the largest finite value
// the result saturates.
int reference_encode(const Format& fmt, double x) {
  if (std::isnan(x)) return -1;
  int best = -1;
  double best_err = INFINITY;
  for (int c = 0; c < 256; ++c) {
    const double v = reference_value(fmt, c);
    if (!std::isfinite(v)) continue;
    if ((c & 0x80) != (std::signbit(x) ? 0x80 : 0)) continue;
    const double err = std::fabs(v - x);
    if (err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

TEST(Fp8, DecodeMatchesReferenceForAll256Codes) {
  for (const auto& fmt : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const double want = reference_value(fmt, c);
      const float got = fp8_to_float(static_cast<std::uint8_t>(c), fmt.f);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << c;
      } else {
        EXPECT_EQ(static_cast<double>(got), want) << "code " << c;
      }
    }
  }
}

#if defined(__F16C__) && defined(__AVX2__)
// The fused readers' E4M3 decode through fp16 (e4m3_halves8 / e4m3_halves16, times 2^8) gives
// every code the value fp8_decode_finite gives it, bit for bit, and the format's value (E4M3
// table above) wherever that is finite.
TEST(Fp8, E4m3ThroughHalvesIsTheFiniteDecodeForAll256Codes) {
  alignas(32) float eight[16], sixteen[16];
  for (int c0 = 0; c0 < 256; c0 += 16) {
    alignas(16) std::uint8_t codes[16];
    for (int i = 0; i < 16; ++i) codes[i] = static_cast<std::uint8_t>(c0 + i);
    const __m128i bytes = _mm_load_si128(reinterpret_cast<const __m128i*>(codes));
    _mm256_store_ps(eight, _mm256_cvtph_ps(detail::e4m3_halves8(_mm_cvtepu8_epi16(bytes))));
    _mm256_store_ps(
        eight + 8,
        _mm256_cvtph_ps(detail::e4m3_halves8(_mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8)))));
    const __m256i wide = detail::e4m3_halves16(_mm256_cvtepu8_epi16(bytes));
    _mm256_store_ps(sixteen, _mm256_cvtph_ps(_mm256_castsi256_si128(wide)));
    _mm256_store_ps(sixteen + 8, _mm256_cvtph_ps(_mm256_extracti128_si256(wide, 1)));
    for (int i = 0; i < 16; ++i) {
      const int c = c0 + i;
      const float want = detail::fp8_decode_finite<detail::E4M3>(static_cast<std::uint32_t>(c));
      EXPECT_EQ(std::bit_cast<std::uint32_t>(sixteen[i] * 256.f),
                std::bit_cast<std::uint32_t>(want))
          << "code " << c;
      EXPECT_EQ(std::bit_cast<std::uint32_t>(eight[i] * 256.f), std::bit_cast<std::uint32_t>(want))
          << "code " << c;
      const double exact = reference_value(kFormats[0], c);
      if (!std::isnan(exact)) {
        EXPECT_EQ(static_cast<double>(want), exact) << "code " << c;
      }
    }
  }
}
#endif

TEST(Fp8, EncodeOfEveryFiniteCodeIsItself) {
  for (const auto& fmt : kFormats) {
    for (int c = 0; c < 256; ++c) {
      const double v = reference_value(fmt, c);
      if (!std::isfinite(v)) continue;
      EXPECT_EQ(float_to_fp8(static_cast<float>(v), fmt.f), c) << "code " << c;
    }
  }
}

TEST(Fp8, EncodeRoundsToNearestEvenLikeBruteForce) {
  for (const auto& fmt : kFormats) {
    // Midpoints between neighbours, and points just off them.
    std::vector<double> finite;
    for (int c = 0; c < 128; ++c) {
      const double v = reference_value(fmt, c);
      if (std::isfinite(v)) finite.push_back(v);
    }
    for (std::size_t i = 0; i + 1 < finite.size(); ++i) {
      const double mid = (finite[i] + finite[i + 1]) / 2;
      for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY), -mid}) {
        const float xf = static_cast<float>(x);
        EXPECT_EQ(float_to_fp8(xf, fmt.f), reference_encode(fmt, xf)) << "x=" << x;
      }
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> e(-20, 20);
    for (int i = 0; i < 20000; ++i) {
      const float x = static_cast<float>((i % 2 ? -1 : 1) * std::pow(2.0, e(rng)));
      ASSERT_EQ(float_to_fp8(x, fmt.f), reference_encode(fmt, x)) << "x=" << x;
    }
  }
}

TEST(Fp8, SaturatesAndKeepsNaN) {
  for (const auto& fmt : kFormats) {
    const std::uint8_t max_code = fmt.f == Fp8Format::E4M3 ? 0x7e : 0x7b;
    EXPECT_EQ(float_to_fp8(1e9f, fmt.f), max_code);
    EXPECT_EQ(float_to_fp8(INFINITY, fmt.f), max_code);
    EXPECT_EQ(float_to_fp8(-INFINITY, fmt.f), 0x80 | max_code);
    EXPECT_EQ(fp8_to_float(max_code, fmt.f), fp8_max(fmt.f));
    EXPECT_TRUE(std::isnan(fp8_to_float(float_to_fp8(NAN, fmt.f), fmt.f)));
    EXPECT_EQ(float_to_fp8(0.0f, fmt.f), 0);
    EXPECT_EQ(float_to_fp8(-0.0f, fmt.f), 0x80);
  }
  EXPECT_EQ(fp8_max(Fp8Format::E4M3), 448.f);
  EXPECT_EQ(fp8_max(Fp8Format::E5M2), 57344.f);
}

}  // namespace
}  // namespace kvlab
