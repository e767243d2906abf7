// NVFP4, MXFP4 and calibrated FP8 KV caches: the E2M1 grid, rounding ties, saturation, the block
// scale formulas against values worked out by hand here, bytes per value, and the bytes of
// independent references (tests/python/fp4_reference.py: gguf's MXFP4 quantizer and a NumPy
// NVFP4) when that test has written them.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/quant/fp8.h"
#include "quant/fp4_quantizer.h"
#include "quant/fp8_calibrated.h"
#include "quant/quantizers.h"

namespace kvlab {
namespace {

using detail::e2m1_to_float;
using detail::float_to_e2m1;

Tensor tensor_of(const std::vector<float>& v, int tokens, int heads, int dim,
                 DType dtype = DType::F32) {
  return Tensor::from_float(v, dtype, tokens, heads, dim);
}

TEST(Fp4, E2m1TableAndEveryValueEncodesToItself) {
  const float expected[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -0.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    const float v = e2m1_to_float(static_cast<std::uint8_t>(c));
    EXPECT_EQ(v, expected[c]) << "code " << c;
    EXPECT_EQ(std::signbit(v), c >= 8) << "code " << c;
    EXPECT_EQ(float_to_e2m1(v), c) << "value " << v;
  }
}

TEST(Fp4, E2m1RoundsTiesToEvenAndSaturates) {
  // Midpoints go to the neighbour with the even code.
  EXPECT_EQ(float_to_e2m1(0.25f), 0);   // 0 | 0.5
  EXPECT_EQ(float_to_e2m1(0.75f), 2);   // 0.5 | 1.0
  EXPECT_EQ(float_to_e2m1(1.25f), 2);   // 1.0 | 1.5
  EXPECT_EQ(float_to_e2m1(1.75f), 4);   // 1.5 | 2.0
  EXPECT_EQ(float_to_e2m1(2.5f), 4);    // 2 | 3
  EXPECT_EQ(float_to_e2m1(3.5f), 6);    // 3 | 4
  EXPECT_EQ(float_to_e2m1(5.0f), 6);    // 4 | 6
  EXPECT_EQ(float_to_e2m1(-2.5f), 12);  // sign kept
  // Just off the midpoints: plain nearest.
  EXPECT_EQ(float_to_e2m1(std::nextafter(0.25f, 1.f)), 1);
  EXPECT_EQ(float_to_e2m1(std::nextafter(0.75f, 0.f)), 1);
  EXPECT_EQ(float_to_e2m1(std::nextafter(5.0f, 9.f)), 7);
  // Saturation (satfinite) and signed zero.
  EXPECT_EQ(float_to_e2m1(7.f), 7);
  EXPECT_EQ(float_to_e2m1(1e30f), 7);
  EXPECT_EQ(float_to_e2m1(INFINITY), 7);
  EXPECT_EQ(float_to_e2m1(-1e30f), 15);
  EXPECT_EQ(float_to_e2m1(-0.1f), 8);
  EXPECT_EQ(float_to_e2m1(0.f), 0);
}

TEST(Fp4, Nvfp4BlockScalesFollowTheKernelFormula) {
  // Three blocks of 16; the tensor amax is 12, so global = 448 * 6 / 12 = 224.
  std::vector<float> x(48, 0.f);
  x[0] = 3.f, x[1] = 1.f, x[2] = -0.4f;  // block 0: amax 3
  x[16] = 12.f, x[17] = 5.f;             // block 1: amax 12
  x[32] = 1.f, x[33] = 0.1f;             // block 2: amax 1
  const auto q = detail::make_nvfp4_quantizer();
  const Tensor t = tensor_of(x, 1, 1, 48);
  auto r = q->quantize(t.view(), TensorRole::Key);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->params.size(), 1u);
  EXPECT_EQ(r->params[0], 224.f);
  const std::uint8_t* nib = r->codes.data();
  const std::uint8_t* sf = r->codes.data() + 24;
  // Block 0: sf = 224 * (3 * (1/6)) = 112 = e4m3 0x6e (1.75 * 2^6); out = 1 / (112 / 224) = 2:
  // 3 -> 6 (code 7), 1 -> 2 (code 4), -0.4 -> -0.8 -> -1.0 (code 0xa).
  EXPECT_EQ(sf[0], 0x6e);
  EXPECT_EQ(nib[0], 0x47);
  EXPECT_EQ(nib[1], 0x0a);
  // Block 1: sf = 224 * 2 = 448 = 0x7e; out = 0.5: 12 -> 6 (7), 5 -> 2.5, a tie, -> 2 (4).
  EXPECT_EQ(sf[1], 0x7e);
  EXPECT_EQ(nib[8], 0x47);
  // Block 2: sf = 224 / 6 = 37.33 rounds to e4m3 36 (0x61: 1.125 * 2^5); out = 224 / 36 =
  // 6.22: 1 -> 6.22 saturates to 6 (7); 0.1 -> 0.622 -> 0.5 (1).
  EXPECT_EQ(sf[2], 0x61);
  EXPECT_EQ(nib[16], 0x17);
  std::vector<float> hat(48);
  q->dequantize(*r, hat);
  EXPECT_FLOAT_EQ(hat[0], 3.f);
  EXPECT_FLOAT_EQ(hat[2], -0.5f);
  EXPECT_FLOAT_EQ(hat[17], 4.f);
  EXPECT_FLOAT_EQ(hat[32], 6.f * 36.f / 224.f);
}

TEST(Fp4, Mxfp4FollowsLlamaCppRule) {
  // amax 3: e = floor(log2 3) - 2 + 127 = 126, d = 2^(126 - 128) = 0.25, so the 16 kvalues are
  // 0, .25, .5, .75, 1, 1.5, 2, 3 and their negatives.
  std::vector<float> x(32, 0.f);
  x[0] = 3.f;
  x[1] = 0.125f;   // tie 0 | 0.25 -> index 0
  x[2] = -0.125f;  // rounds to zero: index 0 (+0), not 8
  x[3] = 0.375f;   // tie 0.25 | 0.5 -> the smaller, index 1 (OCP's ties-to-even gives 0.5)
  x[4] = -0.375f;  // index 9
  x[5] = 2.5f;     // tie 2 | 3 -> index 6
  x[16] = -1.2f;   // nearest -1.0: index 12, in the high nibble of qs[0]
  const auto q = detail::make_mxfp4_quantizer();
  const Tensor t = tensor_of(x, 1, 1, 32);
  auto r = q->quantize(t.view(), TensorRole::Value);
  ASSERT_TRUE(r.ok()) << r.message();
  ASSERT_EQ(r->codes.size(), 17u);
  EXPECT_EQ(r->codes[0], 126);
  EXPECT_EQ(r->codes[1], 0xc7);
  EXPECT_EQ(r->codes[2], 0x00);
  EXPECT_EQ(r->codes[3], 0x00);
  EXPECT_EQ(r->codes[4], 0x01);
  EXPECT_EQ(r->codes[5], 0x09);
  EXPECT_EQ(r->codes[6], 0x06);
  EXPECT_EQ(detail::mxfp4_exponent(0.f), 0);
  EXPECT_EQ(detail::mxfp4_exponent(1.f), 125);
  EXPECT_EQ(detail::mxfp4_exponent(std::nextafter(1.f, 0.f)), 124);
  EXPECT_EQ(detail::e8m0_to_float_half(127), 0.5f);
  EXPECT_EQ(detail::e8m0_to_float_half(0), std::ldexp(1.f, -128));
  EXPECT_EQ(detail::e8m0_to_float_half(1), std::ldexp(1.f, -127));
  std::vector<float> hat(32);
  q->dequantize(*r, hat);
  EXPECT_EQ(hat[0], 3.f);
  EXPECT_EQ(hat[3], 0.25f);
  EXPECT_EQ(hat[16], -1.f);
}

TEST(Fp4, BytesPerValue) {
  const int tokens = 5, heads = 3, dim = 64;
  const std::size_t n = static_cast<std::size_t>(tokens) * heads * dim;
  std::vector<float> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(0.37f * static_cast<float>(i)) * 3.f;
  const Tensor t = tensor_of(x, tokens, heads, dim, DType::F16);
  auto nv = detail::make_nvfp4_quantizer()->quantize(t.view(), TensorRole::Key);
  ASSERT_TRUE(nv.ok()) << nv.message();
  EXPECT_EQ(nv->bytes.codes, n / 2);
  EXPECT_EQ(nv->bytes.scales, n / 16 + 4);  // one e4m3 per 16, one fp32 global
  EXPECT_EQ(nv->bytes.metadata, kTensorHeaderBytes);
  EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(nv->bytes.codes + nv->bytes.scales - 4) / n, 4.5);
  EXPECT_EQ(nv->codes.size(), nv->bytes.codes + nv->bytes.scales - 4);
  auto mx = detail::make_mxfp4_quantizer()->quantize(t.view(), TensorRole::Key);
  ASSERT_TRUE(mx.ok()) << mx.message();
  EXPECT_EQ(mx->codes.size(), n / 32 * 17);
  EXPECT_EQ(mx->bytes.codes + mx->bytes.scales, mx->codes.size());
  EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(mx->bytes.codes + mx->bytes.scales) / n, 4.25);
  // Histograms count every code.
  for (const auto* q : {&*nv, &*mx}) {
    const auto hist = (q == &*nv ? detail::make_nvfp4_quantizer() : detail::make_mxfp4_quantizer())
                          ->histograms(*q);
    ASSERT_GE(hist.size(), 1u);
    std::uint64_t total = 0;
    for (auto c : hist[0].counts) total += c;
    EXPECT_EQ(total, n);
  }
}

TEST(Fp4, HeadDimNotAMultipleOfTheBlockIsAnError) {
  const Tensor t24 = tensor_of(std::vector<float>(2 * 24, 1.f), 2, 1, 24);
  auto nv = detail::make_nvfp4_quantizer()->quantize(t24.view(), TensorRole::Key);
  ASSERT_FALSE(nv.ok());
  EXPECT_NE(nv.message().find("24"), std::string::npos) << nv.message();
  EXPECT_NE(nv.message().find("16"), std::string::npos) << nv.message();
  const Tensor t48 = tensor_of(std::vector<float>(48, 1.f), 1, 1, 48);
  auto mx = detail::make_mxfp4_quantizer()->quantize(t48.view(), TensorRole::Value);
  ASSERT_FALSE(mx.ok());
  EXPECT_NE(mx.message().find("48"), std::string::npos) << mx.message();
  EXPECT_NE(mx.message().find("32"), std::string::npos) << mx.message();
}

TEST(Fp4, EmptyTensorAndRoundTripBound) {
  const Tensor empty = tensor_of({}, 0, 2, 32);
  for (const auto& q : {detail::make_nvfp4_quantizer(), detail::make_mxfp4_quantizer()}) {
    auto r = q->quantize(empty.view(), TensorRole::Key);
    ASSERT_TRUE(r.ok()) << r.message();
    EXPECT_TRUE(r->codes.empty());
  }
  // Every value is within a third of its block's amax of its reconstruction: half the widest
  // E2M1 gap (4 -> 6) is amax / 6 with NVFP4's scale rounding on top, and MXFP4's floor exponent
  // saturates values between 6 and 8 units (at most amax / 4).
  const int tokens = 37, heads = 2, dim = 64;
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  std::uint32_t s = 12345;
  for (auto& v : x) {
    s = s * 1664525u + 1013904223u;
    v = (static_cast<float>(s >> 8) / 16777216.f - 0.5f) * ((s & 7) == 0 ? 40.f : 4.f);
  }
  const Tensor t = tensor_of(x, tokens, heads, dim);
  for (int block : {16, 32}) {
    const auto q = block == 16 ? detail::make_nvfp4_quantizer() : detail::make_mxfp4_quantizer();
    auto r = q->quantize(t.view(), TensorRole::Key);
    ASSERT_TRUE(r.ok()) << r.message();
    std::vector<float> hat(x.size());
    q->dequantize(*r, hat);
    for (std::size_t b = 0; b < x.size(); b += block) {
      float amax = 0;
      for (int i = 0; i < block; ++i) amax = std::max(amax, std::fabs(x[b + i]));
      for (int i = 0; i < block; ++i) {
        ASSERT_LE(std::fabs(hat[b + i] - x[b + i]), amax * (1.f / 3.f) + 1e-6f)
            << q->name() << " at " << b + i;
      }
    }
  }
}

// ---- FP8 with calibrated scales --------------------------------------------------------------

TEST(Fp8Calibrated, LaterTokensBeyondTheCalibrationRangeClipAndAreCounted) {
  const int tokens = 8, heads = 2, dim = 16;
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.1f * static_cast<float>(i));
  // Prefill (tokens 0-3) has amax 1; decode tokens carry larger values.
  const std::size_t row = static_cast<std::size_t>(heads) * dim;
  x[4 * row + 0] = 3.f;
  x[5 * row + 17] = -5.f;
  x[6 * row + 3] = 2.f;
  x[7 * row + 30] = 1.5f;
  detail::Fp8CalibratedConfig cfg;
  cfg.calib_tokens = 4;
  cfg.k_range = 448.f;  // scale = amax / 448: anything above the prefill's amax clips
  auto qr = detail::make_fp8_calibrated_quantizer(cfg);
  ASSERT_TRUE(qr.ok()) << qr.message();
  const auto& q = **qr;
  for (DType dtype : {DType::F16, DType::F32}) {
    const Tensor t = tensor_of(x, tokens, heads, dim, dtype);
    auto r = q.quantize(t.view(), TensorRole::Key);
    ASSERT_TRUE(r.ok()) << r.message();
    const auto report = detail::fp8_calibration_report(*r);
    EXPECT_EQ(report.calib_tokens, 4);
    ASSERT_EQ(report.scales.size(), 1u);
    EXPECT_EQ(report.scales[0], 1.f / 448.f);
    EXPECT_EQ(report.clipped, 4u);
    EXPECT_DOUBLE_EQ(report.clipped_fraction(), 4.0 / x.size());
    EXPECT_EQ(r->bytes.scales, 4u);           // one fp32 scale
    EXPECT_EQ(r->codes[4 * row], 0x7e);       // saturated to +448
    EXPECT_EQ(r->codes[5 * row + 17], 0xfe);  // and -448
    const auto hist = q.histograms(*r);
    ASSERT_EQ(hist.size(), 2u);
    EXPECT_EQ(hist[1].counts[1], 4u);
    EXPECT_EQ(hist[1].counts[0] + hist[1].counts[1], x.size());
    std::vector<float> hat(x.size());
    q.dequantize(*r, hat);
    EXPECT_FLOAT_EQ(hat[4 * row], 448.f * (1.f / 448.f));
  }
  // vLLM's default ranges leave headroom: keys scale by amax / 200 (2.24x the prefill amax fits),
  // values by amax / 100 (4.48x).
  detail::Fp8CalibratedConfig vllm;
  vllm.calib_tokens = 4;
  auto dq = detail::make_fp8_calibrated_quantizer(vllm);
  ASSERT_TRUE(dq.ok()) << dq.message();
  const Tensor t = tensor_of(x, tokens, heads, dim, DType::F16);
  auto k = (*dq)->quantize(t.view(), TensorRole::Key);
  auto v = (*dq)->quantize(t.view(), TensorRole::Value);
  ASSERT_TRUE(k.ok() && v.ok());
  EXPECT_EQ(detail::fp8_calibration_report(*k).scales[0], 1.f / 200.f);
  EXPECT_EQ(detail::fp8_calibration_report(*k).clipped, 2u);  // 3 and -5
  EXPECT_EQ(detail::fp8_calibration_report(*v).scales[0], 1.f / 100.f);
  EXPECT_EQ(detail::fp8_calibration_report(*v).clipped, 1u);  // -5
}

TEST(Fp8Calibrated, ExplicitAndPerHeadScales) {
  const int tokens = 3, heads = 2, dim = 4;
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim, 1.f);
  const Tensor t = tensor_of(x, tokens, heads, dim, DType::F16);
  detail::Fp8CalibratedConfig cfg;
  cfg.per_head = true;
  cfg.k_scales = {0.5f, 0.25f};
  cfg.v_scales = {0.125f};
  auto qr = detail::make_fp8_calibrated_quantizer(cfg);
  ASSERT_TRUE(qr.ok()) << qr.message();
  auto k = (*qr)->quantize(t.view(), TensorRole::Key);
  ASSERT_TRUE(k.ok()) << k.message();
  EXPECT_EQ(k->codes[0], float_to_fp8(2.f, Fp8Format::E4M3));    // head 0: 1 / 0.5
  EXPECT_EQ(k->codes[dim], float_to_fp8(4.f, Fp8Format::E4M3));  // head 1: 1 / 0.25
  EXPECT_EQ(k->bytes.scales, 8u);
  EXPECT_EQ(detail::fp8_calibration_report(*k).calib_tokens, 0);
  auto v = (*qr)->quantize(t.view(), TensorRole::Value);
  ASSERT_TRUE(v.ok()) << v.message();
  EXPECT_EQ(v->params.size(), 2u);  // one given scale serves both heads
  // Two key scales for a tensor of three heads.
  const Tensor t3 = tensor_of(std::vector<float>(12, 1.f), 1, 3, 4);
  auto bad = (*qr)->quantize(t3.view(), TensorRole::Key);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("2 key scales"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("3 KV heads"), std::string::npos) << bad.message();
  // Configuration errors.
  detail::Fp8CalibratedConfig none;
  EXPECT_FALSE(detail::make_fp8_calibrated_quantizer(none).ok());
  detail::Fp8CalibratedConfig neg;
  neg.k_scales = {-1.f};
  neg.v_scales = {1.f};
  EXPECT_FALSE(detail::make_fp8_calibrated_quantizer(neg).ok());
  detail::Fp8CalibratedConfig many;
  many.k_scales = {1.f, 2.f};
  many.v_scales = {1.f};
  EXPECT_FALSE(detail::make_fp8_calibrated_quantizer(many).ok());
}

// ---- Independent references (tests/python/fp4_reference.py) -----------------------------------

std::filesystem::path reference_dir() {
  if (const char* env = std::getenv("KVLAB_FP4_REFERENCE_DIR")) return env;
  // build/tests/engine/tmp -> build/tests/model/fp4_reference (tests/model/CMakeLists.txt).
  return std::filesystem::path(KVLAB_TEST_TMPDIR).parent_path().parent_path() / "model" /
         "fp4_reference";
}

std::vector<std::uint8_t> read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// "" when equal, else where the bytes first differ.
std::string byte_difference(std::span<const std::uint8_t> got, std::span<const std::uint8_t> want) {
  if (got.size() != want.size()) {
    return "size " + std::to_string(got.size()) + " != " + std::to_string(want.size());
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return "byte " + std::to_string(i) + ": " + std::to_string(got[i]) +
             " != " + std::to_string(want[i]);
    }
  }
  return "";
}

// ---- The vectorised quantizers against the formulas written out element by element -----------

// Random values with the awkward ones mixed in: zeros of both signs, E2M1 ties, powers of two and
// the floats just below them, fp16 and fp32 subnormals, values past fp16's range, and (where
// `special`) infinities and NaN.
std::vector<float> awkward_values(std::size_t n, std::uint32_t seed, bool special) {
  std::vector<float> x(n);
  std::uint32_t s = seed;
  const auto next = [&s] {
    s = s * 1664525u + 1013904223u;
    return s >> 8;
  };
  for (auto& v : x) {
    const float sign = (next() & 1) ? -1.f : 1.f;
    const int pick = static_cast<int>(next() % 12);
    const int p = static_cast<int>(next() % 40) - 20;
    switch (pick) {
      case 0:
        v = sign * 0.f;
        break;
      case 1:
        v = sign * 0.25f * static_cast<float>(next() % 30);
        break;
      case 2:
        v = sign * std::ldexp(1.f, p);
        break;
      case 3:
        v = sign * std::nextafter(std::ldexp(1.f, p), 0.f);
        break;
      case 4:
        v = sign * std::ldexp(static_cast<float>(next() % 1024), -24);
        break;
      case 5:
        v = sign * std::ldexp(static_cast<float>(next() % 1000 + 1), -149);
        break;
      case 6:
        v = sign * (special ? std::numeric_limits<float>::infinity() : 70000.f);
        break;
      case 7:
        v = special ? std::numeric_limits<float>::quiet_NaN() : sign * 1e-3f;
        break;
      case 8:
        v = sign * std::ldexp(1.f + static_cast<float>(next() % 16) / 16.f, p / 4);
        break;
      default:
        v = sign * static_cast<float>(next() % 100000) * 1e-4f * std::ldexp(1.f, p / 3);
    }
  }
  return x;
}

// E2M1 by nearest value: the smallest distance, the even code on a tie, beyond 6 saturated.
std::uint8_t e2m1_nearest(float y) {
  const float m[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const float a = std::fabs(y);
  int best = 0;
  for (int k = 1; k < 8; ++k) {
    const float dk = std::fabs(a - m[k]), db = std::fabs(a - m[best]);
    if (dk < db || (dk == db && k % 2 == 0)) best = k;
  }
  if (a > 6.f) best = 7;
  return static_cast<std::uint8_t>((std::signbit(y) ? 8 : 0) | best);
}

std::vector<std::uint8_t> nvfp4_by_formula(const std::vector<float>& x, float* global_out) {
  const std::size_t n = x.size();
  float amax = 0.f;
  for (float v : x) amax = std::max(amax, std::fabs(v));
  const float global = amax > 0.f ? 448.f * 6.f / amax : 1.f;
  std::vector<std::uint8_t> out(n / 2 + n / 16);
  for (std::size_t b = 0; b < n / 16; ++b) {
    float bmax = 0.f;
    for (int i = 0; i < 16; ++i) bmax = std::max(bmax, std::fabs(x[b * 16 + i]));
    const std::uint8_t sf8 = float_to_fp8(global * (bmax * (1.f / 6.f)), Fp8Format::E4M3);
    const float narrow = fp8_to_float(sf8, Fp8Format::E4M3);
    const float scale = narrow != 0.f ? 1.f / (narrow * (1.f / global)) : 0.f;
    // x * scale, except that a NaN scale (0 * inf) gives its own NaN for every element, a NaN x
    // included: which of two NaNs a product returns is the compiler's operand order on x86.
    const auto y = [&](std::size_t i) { return std::isnan(scale) ? scale : x[i] * scale; };
    for (int j = 0; j < 8; ++j) {
      out[b * 8 + j] = static_cast<std::uint8_t>(e2m1_nearest(y(b * 16 + 2 * j)) |
                                                 e2m1_nearest(y(b * 16 + 2 * j + 1)) << 4);
    }
    out[n / 2 + b] = sf8;
  }
  *global_out = global;
  return out;
}

// quantize_row_mxfp4_ref, with kvlab's rule for non-finite inputs (midpoints, ties down, -0 as
// +0); for finite ones llama.cpp's best_index_mxfp4 (first least error) must agree with it.
std::vector<std::uint8_t> mxfp4_by_formula(const std::vector<float>& x) {
  const int kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  const float mid[7] = {0.5f, 1.5f, 2.5f, 3.5f, 5.f, 7.f, 10.f};
  std::vector<std::uint8_t> out(x.size() / 32 * 17);
  for (std::size_t b = 0; b < x.size() / 32; ++b) {
    const float* xb = x.data() + b * 32;
    float amax = 0.f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float ef = std::floor(std::log2(amax)) - 2.f + 127.f;
    const std::uint8_t e =
        amax > 0.f ? static_cast<std::uint8_t>(static_cast<int>(std::clamp(ef, -256.f, 255.f))) : 0;
    const float d = std::ldexp(1.f, e - 128);
    const auto index = [&](float v) {
      int m = 0;
      for (float t : mid) m += std::fabs(v) > t * d;
      const int rule = m | (v < 0.f && m > 0 ? 8 : 0);
      if (std::isfinite(v)) {
        int best = 0;
        for (int k = 1; k < 16; ++k) {
          if (std::fabs(kv[k] * d - v) < std::fabs(kv[best] * d - v)) best = k;
        }
        EXPECT_EQ(best, rule) << "value " << v << ", d " << d;
      }
      return rule;
    };
    out[b * 17] = e;
    for (int j = 0; j < 16; ++j) {
      out[b * 17 + 1 + j] = static_cast<std::uint8_t>(index(xb[j]) | index(xb[j + 16]) << 4);
    }
  }
  return out;
}

TEST(Fp4, QuantizersMatchTheFormulaElementByElement) {
  struct Shape {
    int tokens, heads, dim;
  };
  for (const Shape& shape : {Shape{1, 1, 32}, Shape{37, 3, 96}, Shape{50, 8, 128}}) {
    for (bool special : {false, true}) {
      const std::size_t n = static_cast<std::size_t>(shape.tokens) * shape.heads * shape.dim;
      const auto values = awkward_values(n, static_cast<std::uint32_t>(n) + special, special);
      for (DType dtype : {DType::F32, DType::F16}) {
        SCOPED_TRACE(::testing::Message()
                     << shape.tokens << "x" << shape.heads << "x" << shape.dim << " "
                     << dtype_name(dtype) << (special ? " with inf/NaN" : ""));
        const Tensor t = tensor_of(values, shape.tokens, shape.heads, shape.dim, dtype);
        const std::vector<float> x = t.view().to_float();  // as stored (fp16-rounded)
        float global = 0.f;
        const auto nv_want = nvfp4_by_formula(x, &global);
        auto nv = detail::make_nvfp4_quantizer()->quantize(t.view(), TensorRole::Key);
        ASSERT_TRUE(nv.ok()) << nv.message();
        EXPECT_EQ(byte_difference(nv->codes, nv_want), "") << "nvfp4";
        EXPECT_EQ(std::bit_cast<std::uint32_t>(nv->params[0]),
                  std::bit_cast<std::uint32_t>(global));
        auto mx = detail::make_mxfp4_quantizer()->quantize(t.view(), TensorRole::Key);
        ASSERT_TRUE(mx.ok()) << mx.message();
        EXPECT_EQ(byte_difference(mx->codes, mxfp4_by_formula(x)), "") << "mxfp4";
        // A view of one head is strided: it goes through the row loader.
        if (shape.heads > 1) {
          const TensorView head = t.view().head(1);
          std::vector<float> hx = head.to_float();
          auto hv = detail::make_mxfp4_quantizer()->quantize(head, TensorRole::Key);
          ASSERT_TRUE(hv.ok()) << hv.message();
          EXPECT_EQ(byte_difference(hv->codes, mxfp4_by_formula(hx)), "") << "mxfp4 head 1";
          auto hn = detail::make_nvfp4_quantizer()->quantize(head, TensorRole::Key);
          ASSERT_TRUE(hn.ok()) << hn.message();
          EXPECT_EQ(byte_difference(hn->codes, nvfp4_by_formula(hx, &global)), "")
              << "nvfp4 head 1";
        }
      }
    }
  }
}

TEST(Fp8Calibrated, QuantizersMatchTheFormulaElementByElement) {
  const int tokens = 45, heads = 3, dim = 48, calib = 20;
  const std::size_t n = static_cast<std::size_t>(tokens) * heads * dim;
  for (bool special : {false, true}) {
    auto values = awkward_values(n, 77u + special, special);
    for (DType dtype : {DType::F32, DType::F16}) {
      const Tensor t = tensor_of(values, tokens, heads, dim, dtype);
      const std::vector<float> x = t.view().to_float();
      for (Fp8Format format : {Fp8Format::E4M3, Fp8Format::E5M2}) {
        const float top = fp8_max(format);
        for (bool per_head : {false, true}) {
          SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " " << static_cast<int>(format)
                                            << (per_head ? " per head" : " per tensor")
                                            << (special ? " with inf/NaN" : ""));
          // Calibrated: scale = amax of the first `calib` tokens / 200, code = fp8(x / scale).
          detail::Fp8CalibratedConfig cfg;
          cfg.format = format;
          cfg.per_head = per_head;
          cfg.calib_tokens = calib;
          auto q = detail::make_fp8_calibrated_quantizer(cfg);
          ASSERT_TRUE(q.ok()) << q.message();
          auto r = (*q)->quantize(t.view(), TensorRole::Key);
          ASSERT_TRUE(r.ok()) << r.message();
          std::vector<float> amax(heads, 0.f);
          for (std::size_t i = 0; i < static_cast<std::size_t>(calib) * heads * dim; ++i) {
            float& m = amax[per_head ? (i / dim) % heads : 0];
            m = std::max(m, std::fabs(x[i]));
          }
          std::uint64_t clipped = 0;
          std::vector<std::uint8_t> want(n);
          for (std::size_t i = 0; i < n; ++i) {
            const float a = amax[per_head ? (i / dim) % heads : 0];
            const float scale = a > 0.f ? a / kvlab::detail::kVllmKScaleConstant : 1.f;
            const float v = x[i] / scale;
            want[i] = float_to_fp8(v, format);
            clipped += std::fabs(v) > top;
          }
          EXPECT_EQ(byte_difference(r->codes, want), "") << "calibrated";
          EXPECT_EQ(detail::fp8_calibration_report(*r).clipped, clipped);
          // Dynamic: scale = amax / max over the whole tensor, code = fp8(x * (1 / scale)).
          auto dq =
              detail::make_fp8_quantizer(format, per_head)->quantize(t.view(), TensorRole::Key);
          ASSERT_TRUE(dq.ok()) << dq.message();
          std::fill(amax.begin(), amax.end(), 0.f);
          for (std::size_t i = 0; i < n; ++i) {
            float& m = amax[per_head ? (i / dim) % heads : 0];
            m = std::max(m, std::fabs(x[i]));
          }
          for (std::size_t i = 0; i < n; ++i) {
            const float a = amax[per_head ? (i / dim) % heads : 0];
            want[i] = float_to_fp8(x[i] * (1.f / (a > 0.f ? a / top : 1.f)), format);
          }
          EXPECT_EQ(byte_difference(dq->codes, want), "") << "dynamic";
        }
      }
    }
  }
}

TEST(Fp4Reference, BytesMatchGgufMxfp4AndNumpyNvfp4) {
  const auto dir = reference_dir();
  std::ifstream list(dir / "cases.txt");
  if (!list) {
    GTEST_SKIP() << "no reference files in " << dir
                 << " (ctest's python.fp4_reference writes them with gguf + NumPy)";
  }
  std::string line;
  int cases = 0;
  while (std::getline(list, line)) {
    std::istringstream fields(line);
    std::string name;
    int tokens = 0, heads = 0, dim = 0, f16 = 0;
    if (!(fields >> name >> tokens >> heads >> dim >> f16)) continue;
    SCOPED_TRACE(name);
    const auto raw = read_bytes(dir / (name + ".f32"));
    const std::size_t n = static_cast<std::size_t>(tokens) * heads * dim;
    ASSERT_EQ(raw.size(), n * 4);
    std::vector<float> x(n);
    std::memcpy(x.data(), raw.data(), raw.size());
    std::vector<DType> dtypes = {DType::F32};
    if (f16) dtypes.push_back(DType::F16);
    for (DType dtype : dtypes) {
      const Tensor t = tensor_of(x, tokens, heads, dim, dtype);
      auto mx = detail::make_mxfp4_quantizer()->quantize(t.view(), TensorRole::Key);
      ASSERT_TRUE(mx.ok()) << mx.message();
      EXPECT_EQ(byte_difference(mx->codes, read_bytes(dir / (name + ".mxfp4"))), "")
          << "mxfp4 " << dtype_name(dtype);
      auto nv = detail::make_nvfp4_quantizer()->quantize(t.view(), TensorRole::Key);
      ASSERT_TRUE(nv.ok()) << nv.message();
      EXPECT_EQ(byte_difference(nv->codes, read_bytes(dir / (name + ".nvfp4"))), "")
          << "nvfp4 " << dtype_name(dtype);
      const auto g = read_bytes(dir / (name + ".nvfp4_global"));
      ASSERT_EQ(g.size(), 4u);
      float global = 0;
      std::memcpy(&global, g.data(), 4);
      EXPECT_EQ(nv->params[0], global) << dtype_name(dtype);
    }
    ++cases;
  }
  EXPECT_GT(cases, 0) << "cases.txt in " << dir << " lists no case";
}

}  // namespace
}  // namespace kvlab
