#include "kvlab/engine/quant/channel_stats.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include <fmt/format.h>
#include <Eigen/Core>

#include "core/row_loader.h"
#include "kvlab/engine/quant/rotation.h"

namespace kvlab {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using HeadRows = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

// Tokens converted to float at a time: bounded memory for any context.
constexpr int kChunkTokens = 256;

using HeadRotation = std::variant<std::monostate, RandomizedHadamard, RandomOrthogonalRotation>;

Result<HeadRotation> make_head_rotation(RotationKind kind, int dim, std::uint64_t seed) {
  switch (kind) {
    case RotationKind::None:
      return HeadRotation{};
    case RotationKind::Hadamard: {
      auto r = RandomizedHadamard::create(dim, seed);
      if (!r) return make_error(fmt::format("hadamard rotation: {}", r.message()));
      return HeadRotation{std::move(r).value()};
    }
    case RotationKind::Orthogonal: {
      auto r = RandomOrthogonalRotation::create(dim, seed);
      if (!r) return make_error(fmt::format("orthogonal rotation: {}", r.message()));
      return HeadRotation{std::move(r).value()};
    }
  }
  return make_error("unknown rotation");
}

// max(m, |x|), NaN ignored (std::max keeps m when the comparison is false).
inline float absmax(float m, float x) {
  return std::max(m, std::fabs(x));
}

}  // namespace

std::uint64_t rotation_head_seed(std::uint64_t seed, int head) {
  return seed ^ (0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(head + 1));
}

Result<std::vector<float>> key_channel_absmax(const TensorView& keys, RotationKind rotation,
                                              std::uint64_t seed) {
  const int heads = keys.heads();
  const int dim = keys.dim();
  std::vector<HeadRotation> rotations;
  rotations.reserve(static_cast<std::size_t>(heads));
  for (int h = 0; h < heads; ++h) {
    auto r = make_head_rotation(rotation, dim, rotation_head_seed(seed, h));
    if (!r) return r.error();
    rotations.push_back(std::move(r).value());
  }
  std::vector<float> out(static_cast<std::size_t>(heads) * dim, 0.0f);
  const std::size_t row = static_cast<std::size_t>(heads) * dim;
  std::vector<float> rows(static_cast<std::size_t>(std::min(keys.tokens(), kChunkTokens)) * row);
  for (int t0 = 0; t0 < keys.tokens(); t0 += kChunkTokens) {
    const int t1 = std::min(keys.tokens(), t0 + kChunkTokens);
    const int n = t1 - t0;
    detail::load_rows(keys, t0, t1, rows.data());
    for (int h = 0; h < heads; ++h) {
      float* channel_max = out.data() + static_cast<std::size_t>(h) * dim;
      float* first = rows.data() + static_cast<std::size_t>(h) * dim;
      const auto& r = rotations[static_cast<std::size_t>(h)];
      if (const auto* q = std::get_if<RandomOrthogonalRotation>(&r)) {
        // All tokens of the chunk at once: X Qᵀ, one GEMM, as the rotated quantizer does.
        const Eigen::Map<const RowMatrix> qm(q->matrix().data(), dim, dim);
        const HeadRows x(first, n, dim, Eigen::OuterStride<>(static_cast<Eigen::Index>(row)));
        const RowMatrix y = x * qm.transpose();
        for (int t = 0; t < n; ++t) {
          for (int d = 0; d < dim; ++d) channel_max[d] = absmax(channel_max[d], y(t, d));
        }
        continue;
      }
      const auto* hadamard = std::get_if<RandomizedHadamard>(&r);
      for (int t = 0; t < n; ++t) {
        std::span<float> v(first + static_cast<std::size_t>(t) * row,
                           static_cast<std::size_t>(dim));
        if (hadamard) hadamard->apply(v);
        for (int d = 0; d < dim; ++d) channel_max[d] = absmax(channel_max[d], v[d]);
      }
    }
  }
  return out;
}

}  // namespace kvlab
