// turboquant_rules.h, the vector-at-a-time TurboQuant the GPU quantizer runs, against the CPU
// quantizer (turboquant_quantizer.cpp, AVX-512 a block at a time): every stored byte equal, for
// both rotations, 1 to 4 bits with and without QJL, fp16 / bf16 / float32 norms and inputs, head
// dims from 2 to 256 and shapes with tails of the CPU's blocks. The vectors are held in columns
// (one vector every `vectors` floats), as the GPU's threads hold them. The reference packs the
// codes with a plain bit loop written here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/quant/turboquant_rules.h"
#include "quant/turboquant_quantizer.h"

namespace kvlab {
namespace {

namespace tr = turboquant_rules;
using detail::TurboQuantConfig;
using detail::TurboQuantRotation;

// code i at bit i * bits, low bits first.
template <class Out>
void pack_plain(const std::vector<std::uint8_t>& codes, int bits, Out& out, std::size_t at) {
  for (std::size_t i = 0; i < codes.size(); ++i) {
    for (int b = 0; b < bits; ++b) {
      const std::size_t bit = i * bits + b;
      out[at + bit / 8] |= static_cast<std::uint8_t>(((codes[i] >> b) & 1) << (bit % 8));
    }
  }
}

Tensor sample(DType dtype, int tokens, int heads, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = g(rng) * (1.f + static_cast<float>(i % 7));  // uneven channels
  }
  if (x.size() > 3) x[3] = 0.f;
  return Tensor::from_float(x, dtype, tokens, heads, dim);
}

struct Reference {
  QuantizedTensor q;
  std::vector<float> reconstruction;
};

// The tensor coded vector by vector through the rules, in the stored layout.
Reference encode_with_rules(const TurboQuantConfig& cfg, const Tensor& t, TensorRole role) {
  auto tables = detail::turboquant_tables(cfg, t.dim());
  EXPECT_TRUE(tables.ok()) << tables.message();
  const tr::Tables rules = tables->rules();
  const int d = t.dim();
  const std::size_t vectors = static_cast<std::size_t>(t.tokens()) * t.heads();
  const std::size_t n = vectors * d;
  const std::vector<float> rows = t.view().to_float();
  // Columns: coordinate k of vector v at k * vectors + v.
  std::vector<float> xc(n), yc(n), rc(n);
  for (std::size_t v = 0; v < vectors; ++v) {
    for (int k = 0; k < d; ++k) xc[k * vectors + v] = rows[v * d + k];
  }
  std::vector<std::uint8_t> codes(n), signs(n);
  Reference out;
  out.q = QuantizedTensor{role, t.tokens(), t.heads(), d, {}, {}, {}, {}, {}};
  out.q.params.assign(vectors * (cfg.qjl ? 2 : 1), 0.f);
  for (std::size_t v = 0; v < vectors; ++v) {
    const tr::Strided x{xc.data() + v, vectors};
    tr::Strided y{yc.data() + v, vectors}, r{rc.data() + v, vectors};
    tr::Encoded e{codes.data() + v * d, signs.data() + v * d};
    EXPECT_TRUE(tr::encode_vector(rules, x, y, r, e));
    out.q.params[v] = e.norm;
    if (cfg.qjl) out.q.params[vectors + v] = e.gamma;
  }
  const int mse_bits = detail::turboquant_mse_bits(cfg);
  const std::size_t mse_bytes = mse_bits > 0 ? (n * mse_bits + 7) / 8 : 0;
  out.q.codes.assign(mse_bytes + (cfg.qjl ? (n + 7) / 8 : 0), 0);
  if (mse_bits > 0) pack_plain(codes, mse_bits, out.q.codes, 0);
  if (cfg.qjl) pack_plain(signs, 1, out.q.codes, mse_bytes);
  out.reconstruction.resize(n);
  std::vector<float> scratch(d);
  for (std::size_t v = 0; v < vectors; ++v) {
    const auto code = [&](int j) { return codes[v * d + j]; };
    const auto sign = [&](int j) { return signs[v * d + j]; };
    float* y = scratch.data();
    float* o = out.reconstruction.data() + v * d;
    tr::decode_vector(rules, code, sign, out.q.params[v], cfg.qjl ? out.q.params[vectors + v] : 0.f,
                      y, o);
  }
  return out;
}

struct Case {
  int tokens, heads, dim;
};

void expect_rules_match_cpu(TurboQuantRotation rotation, const std::vector<Case>& cases) {
  int compared = 0;
  for (const Case& c : cases) {
    for (int bits = 1; bits <= 4; ++bits) {
      for (bool qjl : {false, true}) {
        if (qjl && bits == 1 && c.dim > 64) continue;  // covered at the small dims
        for (DType nd : {DType::F16, DType::BF16, DType::F32}) {
          const DType in = nd;  // the input dtypes ride along with the norm dtypes
          const TurboQuantConfig cfg{bits, qjl, rotation, 7u + static_cast<unsigned>(c.dim), nd};
          const std::string where = std::string(detail::turboquant_rotation_name(rotation)) +
                                    " bits " + std::to_string(bits) + (qjl ? " qjl" : "") +
                                    " norms " + std::string(dtype_name(nd)) + " [" +
                                    std::to_string(c.tokens) + "," + std::to_string(c.heads) + "," +
                                    std::to_string(c.dim) + "]";
          const Tensor t = sample(in, c.tokens, c.heads, c.dim, 11u * c.dim + bits);
          const TensorRole role = qjl ? TensorRole::Key : TensorRole::Value;
          auto cpu = detail::make_turboquant_quantizer(cfg);
          auto want = cpu->quantize(t.view(), role);
          ASSERT_TRUE(want) << where << ": " << want.message();
          const Reference got = encode_with_rules(cfg, t, role);
          ASSERT_EQ(got.q.codes.size(), want->codes.size()) << where;
          const auto diff =
              std::mismatch(got.q.codes.begin(), got.q.codes.end(), want->codes.begin());
          ASSERT_TRUE(diff.first == got.q.codes.end())
              << where << ": code byte " << (diff.first - got.q.codes.begin()) << " is "
              << int(*diff.first) << " by the rules, " << int(*diff.second) << " on the CPU";
          ASSERT_EQ(got.q.params.size(), want->params.size()) << where;
          for (std::size_t i = 0; i < got.q.params.size(); ++i) {
            ASSERT_EQ(0, std::memcmp(&got.q.params[i], &want->params[i], sizeof(float)))
                << where << ": norm " << i << " is " << got.q.params[i] << " by the rules, "
                << want->params[i] << " on the CPU";
          }
          // The reconstruction: the same stored numbers, sums in other orders.
          std::vector<float> recon(t.elements());
          cpu->dequantize(*want, recon);
          float scale = 1.f, worst = 0.f;
          for (std::size_t i = 0; i < recon.size(); ++i) {
            scale = std::max(scale, std::fabs(recon[i]));
            worst = std::max(worst, std::fabs(recon[i] - got.reconstruction[i]));
          }
          EXPECT_LE(worst, 1e-5f * scale) << where << ": reconstructions differ";
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(TurboQuantRules, OrthogonalRotationStoresTheCpusBytes) {
  // Tails of the CPU's 256-vector blocks and of its 16-vector norm batches; head dims that are
  // and are not multiples of 16 (the CPU's GEMM and Eigen's).
  expect_rules_match_cpu(TurboQuantRotation::RandomOrthogonal,
                         {{1, 1, 2}, {3, 5, 24}, {37, 3, 64}, {70, 8, 128}, {9, 2, 40}});
}

TEST(TurboQuantRules, HadamardRotationStoresTheCpusBytes) {
  expect_rules_match_cpu(
      TurboQuantRotation::RandomizedHadamard,
      {{1, 1, 2}, {5, 3, 8}, {33, 2, 16}, {37, 3, 64}, {70, 8, 128}, {6, 1, 256}});
}

TEST(TurboQuantRules, ANonFiniteVectorIsRefused) {
  auto tables = detail::turboquant_tables({3, true, TurboQuantRotation::RandomOrthogonal, 1}, 16);
  ASSERT_TRUE(tables) << tables.message();
  std::vector<float> x(16, 1.f), y(16), r(16);
  std::vector<std::uint8_t> codes(16), signs(16);
  x[5] = std::numeric_limits<float>::infinity();
  tr::Encoded e{codes.data(), signs.data()};
  float* yp = y.data();
  float* rp = r.data();
  const float* xp = x.data();
  EXPECT_FALSE(tr::encode_vector(tables->rules(), xp, yp, rp, e));
  x[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(tr::encode_vector(tables->rules(), xp, yp, rp, e));
  x[5] = 3.e19f;  // finite, but its square overflows the norm
  EXPECT_FALSE(tr::encode_vector(tables->rules(), xp, yp, rp, e));
  // Tables for a head_dim the method cannot take say why.
  auto bad = detail::turboquant_tables({3, false, TurboQuantRotation::RandomizedHadamard, 1}, 24);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("24"), std::string::npos) << bad.message();
  EXPECT_FALSE(detail::turboquant_tables({3, false, TurboQuantRotation::RandomOrthogonal, 1}, 1));
}

}  // namespace
}  // namespace kvlab
