// ggml's KV-cache block quantizers (ggml_quantize) and the Quantizer built on them.
//  - GgmlKvQuantReference: byte equality with gguf-py and libggml on the inputs that
//    tests/python/ggml_kv_quant_reference.py writes (ctest python.ggml_kv_quant_reference runs
//    it; skipped when run on its own).
//  - worked examples computed by hand, sizes 0 / block-1 / block / block+1, error bounds of
//    decode(encode(x)), NaN and inf that must not crash;
//  - the Quantizer: bytes counted, histograms, llama.cpp's attn_rot undone on dequantize,
//    head_dim not a multiple of 32 an error naming it;
//  - the AVX-512 path (ggml_quantize, the batched attn_rot) against the reference path, probe
//    blocks with ties, zeros, tiny values, NaN and inf.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <sstream>
#include <vector>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/rotation.h"
#include "quant/ggml_block_quantizer.h"

namespace kvlab {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1,
                               GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL};

std::vector<std::uint8_t> quantized(GgmlType t, const std::vector<float>& x,
                                    GgmlQuantizeRule rule = GgmlQuantizeRule::KvCache) {
  std::vector<std::uint8_t> out(*ggml_row_bytes(t, static_cast<std::int64_t>(x.size())));
  EXPECT_TRUE(ggml_quantize(t, x.data(), static_cast<std::int64_t>(x.size()), out.data(), rule));
  return out;
}

std::vector<char> read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

std::optional<GgmlType> type_named(const std::string& s) {
  for (GgmlType t : kTypes) {
    if (ggml_type_info(t)->name == s) return t;
  }
  return std::nullopt;
}

// --- against the peers ------------------------------------------------------------------------

TEST(GgmlKvQuantReference, BytesEqualPeers) {
  const char* dir_env = std::getenv("KVLAB_GGML_KV_REF_DIR");
  if (dir_env == nullptr) {
    GTEST_SKIP() << "needs the peers' bytes: run by ctest -R python.ggml_kv_quant_reference";
  }
  const std::filesystem::path dir(dir_env);
  std::ifstream manifest(dir / "manifest.txt");
  ASSERT_TRUE(manifest) << "no manifest.txt in " << dir;
  std::string line;
  int compared = 0;
  while (std::getline(manifest, line)) {
    if (line.empty()) continue;
    std::istringstream ls(line);
    std::string input, type_name, rule_name, expected_file, label;
    int must_match = 1;
    ls >> input >> type_name >> rule_name >> expected_file >> label >> must_match;
    const auto type = type_named(type_name);
    ASSERT_TRUE(type.has_value()) << line;
    const auto raw = read_file(dir / input);
    std::vector<float> x(raw.size() / sizeof(float));
    std::memcpy(x.data(), raw.data(), x.size() * sizeof(float));
    const auto rule = rule_name == "file" ? GgmlQuantizeRule::ModelFile : GgmlQuantizeRule::KvCache;
    const auto ours = quantized(*type, x, rule);
    const auto theirs = read_file(dir / expected_file);
    ASSERT_EQ(theirs.size(), ours.size()) << line;
    const int size = ggml_type_info(*type)->type_size;
    std::size_t differing = 0, first = ours.size();
    for (std::size_t b = 0; b < ours.size(); b += size) {
      // An IQ4_NL block with scale 0 (max |x| < 1e-15, or all NaN) decodes to zeros whatever its
      // codes; llama.cpp's _ref before 2026 leaves them as the stack held them (kvlab: 0).
      const bool zero_iq4 = *type == GgmlType::IQ4_NL && ((ours[b] | ours[b + 1]) & 0x7F) == 0 &&
                            ((theirs[b] | theirs[b + 1]) & 0x7F) == 0 && ours[b] == theirs[b] &&
                            ours[b + 1] == static_cast<std::uint8_t>(theirs[b + 1]);
      if (!zero_iq4 && std::memcmp(ours.data() + b, theirs.data() + b, size) != 0) {
        ++differing;
        first = std::min(first, b);
      }
    }
    const std::size_t blocks = ours.size() / size;
    std::printf("%-7s %-5s %-40s %zu/%zu blocks differ\n", type_name.c_str(), input.c_str(),
                label.c_str(), differing, blocks);
    if (must_match != 0 && differing != 0) {
      std::ostringstream msg;
      msg << type_name << " vs " << label << " on " << input << ": " << differing << " of "
          << blocks << " blocks differ; first block " << first / size << ": input";
      for (int j = 0; j < 32; ++j) msg << ' ' << x[first / size * 32 + j];
      msg << "\n ours:  ";
      for (int j = 0; j < size; ++j) msg << ' ' << int(ours[first + j]);
      msg << "\n theirs:";
      for (int j = 0; j < size; ++j)
        msg << ' ' << int(static_cast<std::uint8_t>(theirs[first + j]));
      ADD_FAILURE() << msg.str();
    }
    ++compared;
  }
  EXPECT_GT(compared, 0);
}

// --- worked examples --------------------------------------------------------------------------

std::uint16_t f16_at(const std::vector<std::uint8_t>& b, std::size_t off) {
  std::uint16_t h;
  std::memcpy(&h, b.data() + off, 2);
  return h;
}

TEST(GgmlQuantize, WorkedExampleQ8_0) {
  // amax 127 -> d = 1; roundf: 2.5 -> 3, -2.5 -> -3 (ties away from zero).
  std::vector<float> x(32, 0.f);
  x[0] = 127.f, x[1] = 2.5f, x[2] = -2.5f, x[3] = 0.49f, x[4] = -127.f;
  const auto b = quantized(GgmlType::Q8_0, x);
  ASSERT_EQ(b.size(), 34u);
  EXPECT_EQ(f16_at(b, 0), 0x3C00);  // 1.0
  EXPECT_EQ(static_cast<std::int8_t>(b[2]), 127);
  EXPECT_EQ(static_cast<std::int8_t>(b[3]), 3);
  EXPECT_EQ(static_cast<std::int8_t>(b[4]), -3);
  EXPECT_EQ(static_cast<std::int8_t>(b[5]), 0);
  EXPECT_EQ(static_cast<std::int8_t>(b[6]), -127);
}

TEST(GgmlQuantize, WorkedExampleQ4_0AndQ5_0) {
  // max (signed, largest |x|) = -8 -> d = 1, codes x + 8 truncated after + 0.5: x = -8 -> 0,
  // x = 7.4 -> 15, x = 8 -> min(15, 16) = 15; low nibbles hold values 0..15, high 16..31.
  std::vector<float> x(32, 0.f);
  x[0] = -8.f, x[1] = 7.4f, x[16] = 3.f, x[17] = -0.5f;
  const auto b = quantized(GgmlType::Q4_0, x);
  ASSERT_EQ(b.size(), 18u);
  EXPECT_EQ(f16_at(b, 0), 0x3C00);
  EXPECT_EQ(b[2], 0x00 | (11 << 4));  // x0 = -8 -> 0, x16 = 3 -> 11
  EXPECT_EQ(b[3], 15 | (8 << 4));     // x1 = 7.4 -> 15, x17 = -0.5 + 8.5 = 8 -> 8
  // Q5_0: d = max / -16 = 0.5, codes x/0.5 + 16 truncated after + 0.5: -8 -> 0, 7.4 -> 31
  // (14.8 + 16.5 = 31.3), 3 -> 22 (6 + 16.5); bit 4 of value j in bit j of qh.
  const auto c = quantized(GgmlType::Q5_0, x);
  ASSERT_EQ(c.size(), 22u);
  EXPECT_EQ(f16_at(c, 0), 0x3800);  // 0.5
  std::uint32_t qh;
  std::memcpy(&qh, c.data() + 2, 4);
  EXPECT_EQ(c[6], 0 | ((22 & 0x0F) << 4));
  EXPECT_EQ(c[7] & 0x0F, 31 & 0x0F);
  EXPECT_EQ(qh & 1u, 0u);
  EXPECT_EQ((qh >> 1) & 1u, 1u);
  EXPECT_EQ((qh >> 16) & 1u, 1u);
}

TEST(GgmlQuantize, WorkedExampleQ4_1) {
  // min 0, max 15 -> d = 1, m = 0; codes x + 0.5 truncated: 2.5 -> 3.
  std::vector<float> x(32, 1.f);
  x[0] = 0.f, x[1] = 15.f, x[2] = 2.5f;
  const auto b = quantized(GgmlType::Q4_1, x);
  ASSERT_EQ(b.size(), 20u);
  EXPECT_EQ(f16_at(b, 0), 0x3C00);
  EXPECT_EQ(f16_at(b, 2), 0x0000);
  EXPECT_EQ(b[4] & 0x0F, 0);
  EXPECT_EQ(b[5] & 0x0F, 15);
  EXPECT_EQ(b[6] & 0x0F, 3);
}

TEST(GgmlQuantize, ZeroBlocksAndUnsupportedInput) {
  std::vector<float> zeros(64, 0.f);
  for (GgmlType t : kTypes) {
    const auto b = quantized(t, zeros);
    std::vector<float> back(64, 1.f);
    ggml_dequantize(t, b.data(), back.data(), 64);
    for (float v : back) EXPECT_EQ(v, 0.f) << ggml_type_info(t)->name;
  }
  std::uint8_t sink[64] = {};
  float x[33] = {};
  EXPECT_TRUE(ggml_quantize(GgmlType::Q4_0, x, 0, sink));
  EXPECT_FALSE(ggml_quantize(GgmlType::Q4_0, x, 31, sink));
  EXPECT_FALSE(ggml_quantize(GgmlType::Q4_0, x, 33, sink));
  EXPECT_FALSE(ggml_quantize(GgmlType::Q4_0, x, -32, sink));
  EXPECT_FALSE(ggml_quantize(GgmlType::Q4_K, x, 32, sink));
  EXPECT_FALSE(ggml_quantize(GgmlType::F16, x, 32, sink));
  EXPECT_TRUE(ggml_quantizable(GgmlType::IQ4_NL));
  EXPECT_FALSE(ggml_quantizable(GgmlType::MXFP4));
}

// decode(encode(x)) within each type's step: |x - x̂| <= d/2 (+ fp16 rounding of d and m),
// for seeded random sizes of whole blocks.
TEST(GgmlQuantize, RoundTripErrorBounds) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (GgmlType t : kTypes) {
    for (int blocks : {1, 2, 7, 64}) {
      std::vector<float> x(blocks * 32);
      for (float& v : x) v = nd(rng) * 3.f;
      const auto b = quantized(t, x);
      std::vector<float> y(x.size());
      ggml_dequantize(t, b.data(), y.data(), static_cast<std::int64_t>(x.size()));
      for (int k = 0; k < blocks; ++k) {
        float amax = 0.f, mn = x[k * 32], mx = x[k * 32];
        for (int j = 0; j < 32; ++j) {
          amax = std::max(amax, std::fabs(x[k * 32 + j]));
          mn = std::min(mn, x[k * 32 + j]);
          mx = std::max(mx, x[k * 32 + j]);
        }
        double step = 0;  // the largest error a code may have, with margin for fp16 d/m
        switch (t) {
          case GgmlType::Q8_0:
            step = amax / 127 * 0.5 + amax * 2e-3;
            break;
          case GgmlType::Q4_0:
            step = amax / 8 * 1.0 + amax * 2e-3;
            break;  // top code clipped
          case GgmlType::Q5_0:
            step = amax / 16 * 1.0 + amax * 2e-3;
            break;
          case GgmlType::Q4_1:
            step = (mx - mn) / 15 * 0.5 + amax * 2e-3;
            break;
          case GgmlType::Q5_1:
            step = (mx - mn) / 31 * 0.5 + amax * 2e-3;
            break;
          default:
            step = amax * 0.2;
            break;  // IQ4_NL's widest level gap, 24/127 of the scale
        }
        for (int j = 0; j < 32; ++j) {
          EXPECT_LE(std::fabs(x[k * 32 + j] - y[k * 32 + j]), step)
              << ggml_type_info(t)->name << " block " << k << " value " << j;
        }
      }
    }
  }
}

// The search rule (llama-quantize's IQ4_NL) never fits worse than the KV cache's single scale
// by the reference's own weighted measure, and usually better.
TEST(GgmlQuantize, Iq4nlSearchFitsAtLeastAsWell) {
  std::mt19937 rng(8);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> x(32 * 256);
  for (float& v : x) v = nd(rng);
  auto err = [&](const std::vector<std::uint8_t>& b) {
    std::vector<float> y(x.size());
    ggml_dequantize(GgmlType::IQ4_NL, b.data(), y.data(), static_cast<std::int64_t>(x.size()));
    double e = 0;
    for (std::size_t i = 0; i < x.size(); ++i) e += double(x[i] - y[i]) * (x[i] - y[i]);
    return e;
  };
  EXPECT_LT(err(quantized(GgmlType::IQ4_NL, x, GgmlQuantizeRule::ModelFile)),
            err(quantized(GgmlType::IQ4_NL, x, GgmlQuantizeRule::KvCache)));
}

// NaN and inf: no crash, no read or write outside the blocks, finite blocks untouched.
TEST(GgmlQuantize, NanAndInfDoNotCrash) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (GgmlType t : kTypes) {
    for (int variant = 0; variant < 5; ++variant) {
      std::vector<float> x(96, 0.5f);
      for (int j = 0; j < 32; ++j) x[32 + j] = float(j) - 16.f;
      float* bad = x.data() + 32;  // the middle block only
      if (variant == 0) bad[3] = nan;
      if (variant == 1) bad[0] = nan;
      if (variant == 2) bad[5] = inf;
      if (variant == 3) bad[5] = -inf;
      if (variant == 4) std::fill(bad, bad + 32, nan);
      const int size = ggml_type_info(t)->type_size;
      std::vector<std::uint8_t> b(3 * size + 8, 0xAB);
      ASSERT_TRUE(ggml_quantize(t, x.data(), 96, b.data()));
      for (int k = 0; k < 8; ++k) EXPECT_EQ(b[3 * size + k], 0xAB);  // nothing past the end
      std::vector<float> y(96);
      ggml_dequantize(t, b.data(), y.data(), 96);
      for (int j : {0, 31, 64, 95}) EXPECT_NEAR(y[j], 0.5f, 0.1f) << ggml_type_info(t)->name;
    }
  }
}

// --- the Quantizer ----------------------------------------------------------------------------

Tensor random_tensor(int tokens, int heads, int dim, std::uint32_t seed, DType dtype) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(tokens) * heads * dim);
  for (float& x : v) x = nd(rng);
  for (int t = 0; t < tokens; ++t) v[(static_cast<std::size_t>(t) * heads) * dim + 3] = 30.f;
  return Tensor::from_float(v, dtype, tokens, heads, dim);
}

TEST(GgmlBlockQuantizer, BytesAreLlamaCppRows) {
  const Tensor k = random_tensor(70, 4, 128, 1, DType::F32);
  const auto flat = k.view().to_float();
  for (GgmlType t : kTypes) {
    const auto q = detail::make_ggml_block_quantizer(t, false);
    auto r = q->quantize(k.view(), TensorRole::Key);
    ASSERT_TRUE(r.ok()) << r.message();
    // The same bytes as quantizing llama.cpp's rows (token after token, heads in order).
    EXPECT_EQ(std::vector<std::uint8_t>(r->codes.begin(), r->codes.end()), quantized(t, flat))
        << q->name();
    const std::uint64_t blocks = 70 * 4 * 128 / 32;
    const int size = ggml_type_info(t)->type_size;
    EXPECT_EQ(r->bytes.total(), blocks * size + kTensorHeaderBytes);
    EXPECT_EQ(r->bytes.scales, blocks * 2);
    const bool has_min = t == GgmlType::Q4_1 || t == GgmlType::Q5_1;
    EXPECT_EQ(r->bytes.zero_points, has_min ? blocks * 2 : 0u);
    const auto h = q->histograms(*r);
    ASSERT_EQ(h.size(), 1u);
    std::uint64_t count = 0;
    for (auto c : h[0].counts) count += c;
    EXPECT_EQ(count, 70u * 4 * 128);
    EXPECT_EQ(h[0].counts.size(), std::size_t{1} << h[0].bits);
    std::vector<float> back(flat.size());
    q->dequantize(*r, back);
    std::vector<float> expect(flat.size());
    ggml_dequantize(t, r->codes.data(), expect.data(), static_cast<std::int64_t>(flat.size()));
    EXPECT_EQ(back, expect);
  }
}

TEST(GgmlBlockQuantizer, HadamardReturnsOriginalFrameAndHelpsOutliers) {
  const Tensor k = random_tensor(64, 2, 128, 2, DType::F16);
  const auto flat = k.view().to_float();
  auto mse = [&](const std::vector<float>& y) {
    double e = 0;
    for (std::size_t i = 0; i < y.size(); ++i) e += double(y[i] - flat[i]) * (y[i] - flat[i]);
    return e / y.size();
  };
  for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    const auto plain = detail::make_ggml_block_quantizer(GgmlType::Q4_0, false);
    const auto rot = detail::make_ggml_block_quantizer(GgmlType::Q4_0, true);
    auto a = plain->quantize(k.view(), role);
    auto b = rot->quantize(k.view(), role);
    ASSERT_TRUE(a.ok() && b.ok());
    // Stored rotated: the codes are those of the rotated rows.
    std::vector<float> rotated = flat;
    for (std::size_t r = 0; r < rotated.size() / 128; ++r) {
      llama_attn_rotate(std::span(rotated).subspan(r * 128, 128), role, false);
    }
    EXPECT_EQ(std::vector<std::uint8_t>(b->codes.begin(), b->codes.end()),
              quantized(GgmlType::Q4_0, rotated));
    std::vector<float> ya(flat.size()), yb(flat.size());
    plain->dequantize(*a, ya);
    rot->dequantize(*b, yb);
    EXPECT_LT(mse(yb), mse(ya)) << role_name(role);  // the outlier channel is spread out
    EXPECT_LT(mse(yb), 0.05);                        // and yb is in the original frame
  }
  EXPECT_NE(detail::make_ggml_block_quantizer(GgmlType::Q8_0, true)->name().find("attn_rot"),
            std::string::npos);
}

TEST(GgmlBlockQuantizer, HeadDimNotMultipleOf32IsAnError) {
  const Tensor k = random_tensor(4, 2, 80 + 4, 3, DType::F32);
  const auto q = detail::make_ggml_block_quantizer(GgmlType::Q8_0, false);
  const auto r = q->quantize(k.view(), TensorRole::Key);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("head_dim 84"), std::string::npos) << r.message();
  EXPECT_NE(r.message().find("32"), std::string::npos) << r.message();
  // 96 is a multiple of 32 but not of 64: quantized, and attn_rot stays off as in llama.cpp.
  const Tensor v = random_tensor(4, 2, 96, 3, DType::F32);
  const auto r96 = detail::make_ggml_block_quantizer(GgmlType::Q8_0, true)
                       ->quantize(v.view(), TensorRole::Value);
  ASSERT_TRUE(r96.ok());
  EXPECT_EQ(std::vector<std::uint8_t>(r96->codes.begin(), r96->codes.end()),
            quantized(GgmlType::Q8_0, v.view().to_float()));
  const auto bad = detail::make_ggml_block_quantizer(GgmlType::Q4_K, false)
                       ->quantize(v.view(), TensorRole::Value);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("q4_k"), std::string::npos) << bad.message();
}

TEST(GgmlBlockQuantizer, EmptyAndNanTensors) {
  const Tensor empty(DType::F16, 0, 2, 64);
  const auto q = detail::make_ggml_block_quantizer(GgmlType::IQ4_NL, true);
  auto r = q->quantize(empty.view(), TensorRole::Key);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->codes.empty());
  std::vector<float> v(2 * 64, 1.f);
  v[5] = std::numeric_limits<float>::quiet_NaN();
  const Tensor t = Tensor::from_float(v, DType::F32, 1, 2, 64);
  auto rn = q->quantize(t.view(), TensorRole::Key);
  ASSERT_TRUE(rn.ok());
  std::vector<float> back(v.size());
  q->dequantize(*rn, back);  // must not crash; the NaN head decodes to NaN after the rotation
}

// --- the fast path against the reference path ------------------------------------------------

// Blocks that probe every rule the vectorised path reorganises: random scales from denormal to
// near FLT_MAX, exact rounding ties of each type's grid (and IQ4_NL's midpoints between levels),
// equal |x| of both signs (the first one sets the scale), ±0 in every order, NaN and ±inf.
std::vector<float> probe_blocks(std::uint32_t seed, int blocks) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> kind_of(0, 11), pos(0, 31), small(-20, 20);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  constexpr float kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                 1,    13,   25,  38,  53,  69,  89,  113};
  std::vector<float> v(static_cast<std::size_t>(blocks) * 32);
  for (int b = 0; b < blocks; ++b) {
    float* x = v.data() + static_cast<std::size_t>(b) * 32;
    const float scale = std::ldexp(1.0f, small(rng) * 6);  // 2^-120 … 2^120
    const int kind = kind_of(rng);
    for (int j = 0; j < 32; ++j) x[j] = nd(rng) * scale;
    switch (kind) {
      case 0:  // half-integer ties on the q8_0 grid (amax 127 -> d 1) and the q4/q5 grids
        for (int j = 0; j < 32; ++j) x[j] = (small(rng) * 2 + 1) * 0.5f * scale;
        x[pos(rng)] = 127.f * scale;
        break;
      case 1:  // q4_0 / q5_0: max -8 or -16 -> d 1 or 0.5, values on the half steps
        for (int j = 0; j < 32; ++j) x[j] = std::fmod(small(rng) * 0.25f, 8.f) * scale;
        x[pos(rng)] = (pos(rng) % 2 != 0 ? -8.f : -16.f) * scale;
        break;
      case 2:  // equal |x| of both signs: the first one's sign sets d
        x[pos(rng)] = 5.f * scale;
        x[pos(rng)] = -5.f * scale;
        break;
      case 3:  // zeros of both signs, maybe with one value
        for (int j = 0; j < 32; ++j) x[j] = pos(rng) % 2 != 0 ? 0.f : -0.f;
        if (pos(rng) % 2 != 0) x[pos(rng)] = nd(rng) * scale;
        break;
      case 4:  // tiny: denormals and IQ4_NL's 1e-15 threshold
        for (int j = 0; j < 32; ++j) x[j] = nd(rng) * (pos(rng) % 2 != 0 ? 1e-40f : 1e-15f);
        break;
      case 5:  // NaN (either sign) somewhere, maybe last
        x[pos(rng) % 2 != 0 ? 31 : pos(rng)] = pos(rng) % 2 != 0 ? nan : -nan;
        break;
      case 6:  // ±inf, maybe with a NaN
        x[pos(rng)] = pos(rng) % 2 != 0 ? inf : -inf;
        if (pos(rng) % 3 == 0) x[pos(rng)] = nan;
        break;
      case 7:  // IQ4_NL midpoints: max -127 -> d 1, values halfway between levels
        for (int j = 0; j < 32; ++j) {
          const int k = pos(rng) % 15;
          x[j] = (kLevels[k] + kLevels[k + 1]) * 0.5f * scale;
        }
        x[pos(rng)] = -127.f * scale;
        break;
      case 8:  // near FLT_MAX
        for (int j = 0; j < 32; ++j) x[j] = nd(rng) * 1e38f;
        break;
      case 9:  // all equal (q4_1 / q5_1: d = 0)
        for (int j = 0; j < 32; ++j) x[j] = scale;
        break;
      case 10:  // all non-negative with zeros (the _1 types' min is a zero)
        for (int j = 0; j < 32; ++j) x[j] = pos(rng) % 3 == 0 ? -0.f : std::fabs(x[j]);
        break;
      default:  // integers (exact level hits for the _1 grids)
        for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(small(rng)) * scale;
        break;
    }
  }
  return v;
}

TEST(GgmlQuantize, FastPathEqualsReferencePath) {
  const int blocks = 20000 + 7;  // not a whole number of IQ4_NL's 16-block groups
  const auto x = probe_blocks(11, blocks);
  for (GgmlType t : kTypes) {
    for (auto rule : {GgmlQuantizeRule::KvCache, GgmlQuantizeRule::ModelFile}) {
      const auto fast = quantized(t, x, rule);
      std::vector<std::uint8_t> ref(fast.size());
      ASSERT_TRUE(detail::ggml_quantize_scalar(t, x.data(), static_cast<std::int64_t>(x.size()),
                                               ref.data(), rule));
      const int size = ggml_type_info(t)->type_size;
      for (std::size_t b = 0; b < fast.size(); b += size) {
        if (std::memcmp(fast.data() + b, ref.data() + b, size) == 0) continue;
        std::ostringstream msg;
        msg << ggml_type_info(t)->name << " block " << b / size << ": input";
        for (int j = 0; j < 32; ++j) msg << ' ' << x[b / size * 32 + j];
        msg << "\n fast:";
        for (int j = 0; j < size; ++j) msg << ' ' << int(fast[b + j]);
        msg << "\n ref: ";
        for (int j = 0; j < size; ++j) msg << ' ' << int(ref[b + j]);
        FAIL() << msg.str();
      }
    }
  }
}

TEST(GgmlBlockQuantizer, FastRotationEqualsLlamaAttnRotate) {
  std::mt19937 rng(12);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int dim : {64, 128, 192, 256, 320, 512, 96}) {
    for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const std::size_t rows = 37;
      std::vector<float> x(rows * dim);
      for (float& v : x) v = nd(rng);
      x[5 * dim + 7] = std::numeric_limits<float>::quiet_NaN();
      x[9 * dim + 1] = std::numeric_limits<float>::infinity();
      x[9 * dim + 2] = -std::numeric_limits<float>::infinity();
      x[11 * dim] = 3e38f, x[11 * dim + 1] = 3e38f;  // overflows to inf inside the transform
      x[13 * dim + 3] = 1e-42f;
      std::vector<float> ref = x;
      for (std::size_t r = 0; r < rows; ++r) {
        llama_attn_rotate(std::span(ref).subspan(r * dim, dim), role, false);
      }
      detail::llama_attn_rotate_rows(x.data(), rows, dim, role);
      EXPECT_EQ(std::memcmp(x.data(), ref.data(), x.size() * sizeof(float)), 0)
          << "dim " << dim << ' ' << role_name(role);
    }
  }
  // The Quantizer with attn_rot: the reference bytes of the reference rotation's rows.
  const Tensor k = random_tensor(100, 3, 128, 5, DType::F16);
  const auto flat = k.view().to_float();
  for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    std::vector<float> rotated = flat;
    for (std::size_t r = 0; r < rotated.size() / 128; ++r) {
      llama_attn_rotate(std::span(rotated).subspan(r * 128, 128), role, false);
    }
    for (GgmlType t : kTypes) {
      auto q = detail::make_ggml_block_quantizer(t, true)->quantize(k.view(), role);
      ASSERT_TRUE(q.ok());
      std::vector<std::uint8_t> ref(q->codes.size());
      ASSERT_TRUE(detail::ggml_quantize_scalar(
          t, rotated.data(), static_cast<std::int64_t>(rotated.size()), ref.data()));
      EXPECT_EQ(std::vector<std::uint8_t>(q->codes.begin(), q->codes.end()), ref)
          << ggml_type_info(t)->name << ' ' << role_name(role);
    }
  }
}

// Throughput of the quantize path for fp16 input (printed; a loose floor only).
TEST(GgmlBlockQuantizer, Throughput) {
  const Tensor k = random_tensor(2048, 8, 128, 4, DType::F16);
  const double gb = double(k.elements()) * 2 / 1e9;
  for (GgmlType t : kTypes) {
    const auto q = detail::make_ggml_block_quantizer(t, false);
    const auto t0 = std::chrono::steady_clock::now();
    auto r = q->quantize(k.view(), TensorRole::Key);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(r.ok());
    std::printf("%s: %.2f GB/s of fp16 input (%.1f ms for %.0f MB)\n", q->name().c_str(), gb / s,
                s * 1e3, gb * 1e3);
    EXPECT_GT(gb / s, 0.01);
  }
}

}  // namespace
}  // namespace kvlab
