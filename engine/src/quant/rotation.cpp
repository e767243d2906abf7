// Hadamard and random orthogonal rotations of head vectors (see rotation.h for the sources).
#include "kvlab/engine/quant/rotation.h"

#include <bit>
#include <cmath>
#include <numbers>
#include <random>

#include "quant/hadamard16.h"

#include <fmt/format.h>
#include <Eigen/Dense>

namespace kvlab {

namespace {

// The butterflies of hadamard_transform() on one vector of d floats (a power of two), in its
// order: strides 1, 2, 4, ... With AVX-512 the strides below 16 run inside one register per 16
// values (hadamard16.h), the wider ones over whole registers; each value sees the same additions
// as in the scalar loop.
void butterflies(float* v, int d) {
  int h = 1;
#if defined(__AVX512F__)
  if (d >= 16) {
    for (int b = 0; b < d; b += 16) {
      _mm512_storeu_ps(v + b, detail::hadamard16(_mm512_loadu_ps(v + b)));
    }
    h = 16;
  }
#endif
  for (; h < d; h *= 2) {
    for (int b = 0; b < d; b += 2 * h) {
      float* a = v + b;
      float* c = a + h;
#pragma omp simd
      for (int j = 0; j < h; ++j) {
        const float x = a[j], y = c[j];
        a[j] = x + y;
        c[j] = x - y;
      }
    }
  }
}

}  // namespace

void hadamard_transform(std::span<float> x) {
  const std::size_t n = x.size();
  if (!is_power_of_two(static_cast<std::int64_t>(n))) return;
  // Butterflies of growing stride give H_n in Sylvester order: after the pass of stride h, each
  // run of 2h values holds H_2h applied to it. (Plain loops: the reference the vector forms, in
  // apply_rows and ggml_block_quantizer.cpp, are held to, NaN inputs included.)
  for (std::size_t h = 1; h < n; h *= 2) {
    for (std::size_t i = 0; i < n; i += 2 * h) {
      for (std::size_t j = i; j < i + h; ++j) {
        const float a = x[j], b = x[j + h];
        x[j] = a + b;
        x[j + h] = a - b;
      }
    }
  }
  const float scale = hadamard_scale(static_cast<int>(n));
  for (float& v : x) v *= scale;
}

bool llama_attn_rot_enabled(GgmlType cache_type, int head_dim) {
  // ggml_is_quantized(type) is true exactly for the block types (block size > 1).
  const GgmlTypeInfo* info = ggml_type_info(cache_type);
  return info != nullptr && info->block_size > 1 && head_dim > 0 && head_dim % 64 == 0;
}

int llama_attn_rot_size(TensorRole role, int head_dim) {
  if (head_dim <= 0 || head_dim % 64 != 0) return 0;
  if (role == TensorRole::Value) return 64;  // build_input_v_rot: nrot = 64
  // build_input_k_rot: double from 64 while it divides head_dim, then step back once.
  int n = 64;
  while (head_dim % (2 * n) == 0) n *= 2;
  return n;
}

void llama_attn_rotate(std::span<float> head, TensorRole role, bool /*inverse*/) {
  const int n = llama_attn_rot_size(role, static_cast<int>(head.size()));
  if (n == 0) return;
  for (std::size_t i = 0; i < head.size(); i += n) hadamard_transform(head.subspan(i, n));
}

Result<RandomizedHadamard> RandomizedHadamard::create(int dim, std::uint64_t seed) {
  if (!is_power_of_two(dim)) {
    return make_error(fmt::format(
        "randomized Hadamard: head_dim {} is not a power of two (the fast Walsh-Hadamard "
        "transform needs one; use a random orthogonal rotation instead)",
        dim));
  }
  std::mt19937_64 rng(seed);
  std::vector<float> signs(dim);
  for (float& s : signs) s = (rng() >> 63) != 0 ? -1.0f : 1.0f;
  return RandomizedHadamard(std::move(signs));
}

void RandomizedHadamard::apply(std::span<float> head) const {
  if (head.size() != m_signs.size()) return;
  for (std::size_t i = 0; i < head.size(); ++i) head[i] *= m_signs[i];
  hadamard_transform(head);
}

void RandomizedHadamard::inverse(std::span<float> head) const {
  if (head.size() != m_signs.size()) return;
  hadamard_transform(head);
  for (std::size_t i = 0; i < head.size(); ++i) head[i] *= m_signs[i];
}

void RandomizedHadamard::apply_rows(float* rows, int count, bool inverse) const {
  // apply() / inverse() of each vector, bit for bit (the same operations in the same order), with
  // the butterflies vectorised.
  const int d = dim();
  const std::size_t dd = static_cast<std::size_t>(d);
  const float* signs = m_signs.data();
  const float scale = hadamard_scale(d);
  for (int i = 0; i < count; ++i) {
    float* v = rows + i * dd;
    if (!inverse) {
#pragma omp simd
      for (int j = 0; j < d; ++j) v[j] *= signs[j];
    }
    butterflies(v, d);
    if (inverse) {
#pragma omp simd
      for (int j = 0; j < d; ++j) v[j] = v[j] * scale * signs[j];
    } else {
#pragma omp simd
      for (int j = 0; j < d; ++j) v[j] *= scale;
    }
  }
}

Result<RandomOrthogonalRotation> RandomOrthogonalRotation::create(int dim, std::uint64_t seed) {
  if (dim < 1 || dim > 4096) {
    return make_error(
        fmt::format("random orthogonal rotation: head_dim {} is outside 1 to 4096", dim));
  }
  std::mt19937_64 rng(seed);
  // Uniform in (0, 1]: the top 53 bits of a draw, plus one ulp so that log() never sees 0.
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53; };
  Eigen::MatrixXd g(dim, dim);
  for (int j = 0; j < dim; ++j) {
    for (int i = 0; i < dim; i += 2) {
      const double r = std::sqrt(-2.0 * std::log(uniform()));
      const double t = 2.0 * std::numbers::pi * uniform();
      g(i, j) = r * std::cos(t);
      if (i + 1 < dim) g(i + 1, j) = r * std::sin(t);
    }
  }
  const Eigen::HouseholderQR<Eigen::MatrixXd> qr(g);
  Eigen::MatrixXd q = qr.householderQ();
  const Eigen::MatrixXd& r = qr.matrixQR();
  for (int j = 0; j < dim; ++j) {
    if (r(j, j) < 0) q.col(j) *= -1.0;
  }
  std::vector<float> m(static_cast<std::size_t>(dim) * dim);
  for (int i = 0; i < dim; ++i) {
    for (int j = 0; j < dim; ++j) m[static_cast<std::size_t>(i) * dim + j] = float(q(i, j));
  }
  return RandomOrthogonalRotation(dim, std::move(m));
}

void RandomOrthogonalRotation::apply(std::span<float> head) const {
  if (head.size() != static_cast<std::size_t>(m_dim)) return;
  std::vector<float> out(m_dim);
  for (int i = 0; i < m_dim; ++i) {
    const float* row = m_q.data() + static_cast<std::size_t>(i) * m_dim;
    double s = 0;
    for (int j = 0; j < m_dim; ++j) s += double(row[j]) * head[j];
    out[i] = float(s);
  }
  std::copy(out.begin(), out.end(), head.begin());
}

void RandomOrthogonalRotation::inverse(std::span<float> head) const {
  if (head.size() != static_cast<std::size_t>(m_dim)) return;
  std::vector<double> out(m_dim, 0.0);
  for (int i = 0; i < m_dim; ++i) {
    const float* row = m_q.data() + static_cast<std::size_t>(i) * m_dim;
    const double hi = head[i];
    for (int j = 0; j < m_dim; ++j) out[j] += double(row[j]) * hi;
  }
  for (int j = 0; j < m_dim; ++j) head[j] = float(out[j]);
}

}  // namespace kvlab
