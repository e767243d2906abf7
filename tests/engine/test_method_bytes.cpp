// method_tensor_bytes() (the planner's formula for every method) against the bytes each
// quantizer counts when it quantizes, on boundary and random shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {
namespace {

Tensor random_fp16(int tokens, int heads, int dim, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = n(rng) * (i % dim == 3 ? 12.f : 1.f);
  return Tensor::from_float(v, DType::F16, tokens, heads, dim);
}

std::vector<MethodConfig> configs() {
  std::vector<MethodConfig> out;
  for (auto id : method_ids()) {
    MethodConfig c;
    c.kind = *parse_method(id);
    if (c.kind == MethodKind::KvQuant || c.kind == MethodKind::TurboQuant) {
      for (int bits : {2, 3, 4}) {
        c.bits = bits;
        out.push_back(c);
      }
      if (c.kind == MethodKind::TurboQuant) {
        c.qjl = true;
        out.push_back(c);
      }
      continue;
    }
    out.push_back(c);
    if (c.kind == MethodKind::Kivi || c.kind == MethodKind::Int4) {
      c.rotation = RotationKind::Hadamard;  // the seed is counted
      c.rotate_values = true;
      out.push_back(c);
    }
    if (c.kind == MethodKind::Kivi) {
      c.rotation = RotationKind::None;
      c.rotate_values = false;
      c.param_dtype = DType::F32;
      out.push_back(c);
    }
  }
  return out;
}

TEST(MethodBytes, FormulaEqualsTheQuantizersCount) {
  struct Shape {
    int tokens, heads, dim;
  };
  const Shape shapes[] = {{1, 1, 64}, {31, 2, 64}, {200, 3, 64}, {257, 2, 128}, {130, 1, 32}};
  int checked = 0;
  for (const MethodConfig& c : configs()) {
    auto q = make_quantizer(c);
    ASSERT_TRUE(q.ok()) << method_label(c) << ": " << q.message();
    for (const Shape& s : shapes) {
      const Tensor t = random_fp16(s.tokens, s.heads, s.dim, 3 + s.tokens);
      for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
        const auto formula = method_tensor_bytes(c, role, s.tokens, s.heads, s.dim);
        if (!formula) continue;
        auto qt = (*q)->quantize(t.view(), role);
        ASSERT_TRUE(qt.ok()) << method_label(c) << ": " << qt.message();
        SCOPED_TRACE(::testing::Message() << method_label(c) << " " << role_name(role) << " "
                                          << s.tokens << "x" << s.heads << "x" << s.dim);
        if (c.kind == MethodKind::KvQuant && role == TensorRole::Key) {
          // Key outliers are the values beyond per-channel thresholds calibrated on the tensor
          // itself: the formula counts the nominal fraction; with the real count (bounds[1],
          // 6 bytes each: fp16 value and int32 column) it is exact.
          const long long tq = s.tokens - 1;
          const long long nominal =
              std::llround(c.outlier_fraction * static_cast<double>(tq) * s.heads * s.dim);
          const long long actual = qt->bounds.at(1);
          EXPECT_EQ(static_cast<long long>(*formula) + 6 * (actual - nominal),
                    static_cast<long long>(qt->bytes.total()));
        } else {
          EXPECT_EQ(*formula, qt->bytes.total());
        }
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150);
  MethodConfig kvcomp;
  kvcomp.kind = MethodKind::KvComp;
  EXPECT_FALSE(method_tensor_bytes(kvcomp, TensorRole::Key, 10, 1, 64));
}

}  // namespace
}  // namespace kvlab
