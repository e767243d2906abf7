// fp16 / bf16 conversions against an independent double-precision rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kvlab/engine/core/dtype.h"

namespace kvlab {
namespace {

// Value of an fp16 bit pattern computed from its fields in double (independent of the code
// under test).
double fp16_value(std::uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (e == 0x1f) return m ? std::numeric_limits<double>::quiet_NaN() : sign * INFINITY;
  if (e == 0) return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

TEST(DType, Fp16DecodeMatchesFieldFormulaForAllCodes) {
  for (int c = 0; c < 65536; ++c) {
    const double want = fp16_value(static_cast<std::uint16_t>(c));
    const float got = fp16_to_float(static_cast<std::uint16_t>(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << c;
    }
  }
}

TEST(DType, Fp16EncodeIsNearestEvenAgainstBruteForce) {
  // Every positive finite fp16 value and every midpoint between neighbours.
  std::vector<double> finite;
  for (int c = 0; c < 0x7c00; ++c) finite.push_back(fp16_value(static_cast<std::uint16_t>(c)));
  for (std::size_t i = 0; i + 1 < finite.size(); ++i) {
    const double lo = finite[i], hi = finite[i + 1];
    const float mid = static_cast<float>((lo + hi) / 2);  // exact in float
    const std::uint16_t even =
        (i % 2 == 0) ? static_cast<std::uint16_t>(i) : static_cast<std::uint16_t>(i + 1);
    EXPECT_EQ(float_to_fp16(mid), even) << "midpoint after code " << i;
    EXPECT_EQ(float_to_fp16(static_cast<float>(lo)), i);
    EXPECT_EQ(float_to_fp16(-static_cast<float>(lo)), 0x8000 | i);
    const float just_above = std::nextafter(mid, INFINITY);
    EXPECT_EQ(float_to_fp16(just_above), i + 1);
  }
  EXPECT_EQ(float_to_fp16(70000.f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-INFINITY), 0xfc00);
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(NAN))));
}

TEST(DType, BulkConversionsMatchScalar) {
  std::vector<float> x;
  for (int i = 0; i < 1003; ++i) x.push_back(std::sin(i * 0.37f) * std::pow(2.f, (i % 40) - 20));
  std::vector<std::uint16_t> h(x.size());
  float_to_fp16(x, h);
  std::vector<float> back(x.size());
  fp16_to_float(h, back);
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], float_to_fp16(x[i])) << i;
    EXPECT_EQ(back[i], fp16_to_float(h[i])) << i;
  }
}

TEST(DType, Bf16RoundTripAndRounding) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even gives 1.
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 0x1p-8f + 0x1p-20f)), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(parse_dtype("bfloat16"), DType::BF16);
  EXPECT_FALSE(parse_dtype("int7").has_value());
}

}  // namespace
}  // namespace kvlab
