#include "quant/lloyd_max.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace kvlab::detail {

namespace {

constexpr int kGridCells = 1 << 16;
constexpr int kMaxIterations = 200000;

// Cumulative moments of f_d over a grid of equal cells, read at any point by linear
// interpolation inside a cell, so that cell masses move smoothly with the boundaries.
class GridMoments {
 public:
  explicit GridMoments(int dim) {
    // Beyond 16 standard deviations (sd = 1/sqrt(d)) the mass is below 1e-50: the grid covers
    // [-lim, lim], the whole interval for small d.
    m_lim = std::min(1.0, 16.0 / std::sqrt(static_cast<double>(dim)));
    m_h = 2.0 * m_lim / kGridCells;
    const double power = 0.5 * (dim - 3);
    m_w.resize(kGridCells);
    m_x.resize(kGridCells);
    for (int i = 0; i < kGridCells; ++i) {
      // Cell midpoints never reach +-1, where f_2 is singular. log1p keeps 1 - x^2 exact near 0.
      const double x = -m_lim + (i + 0.5) * m_h;
      m_x[i] = x;
      m_w[i] = std::exp(power * std::log1p(-x * x));
    }
    m_p.assign(3, std::vector<double>(kGridCells + 1, 0.0));
    for (int i = 0; i < kGridCells; ++i) {
      const double w = m_w[i], x = m_x[i];
      m_p[0][i + 1] = m_p[0][i] + w;
      m_p[1][i + 1] = m_p[1][i] + w * x;
      m_p[2][i + 1] = m_p[2][i] + w * x * x;
    }
    m_total = m_p[0][kGridCells];
  }

  // Integral of x^moment f_d over [-inf, t], normalised to the total mass.
  double cumulative(int moment, double t) const {
    const double u = (t + m_lim) / m_h;
    if (u <= 0.0) return 0.0;
    if (u >= kGridCells) return m_p[moment][kGridCells] / m_total;
    const int k = static_cast<int>(u);
    const double frac = u - k;
    const double cell = m_w[k] * (moment == 0 ? 1.0 : moment == 1 ? m_x[k] : m_x[k] * m_x[k]);
    return (m_p[moment][k] + frac * cell) / m_total;
  }

  // The point below which a fraction q of the mass lies (bisection on the monotone cumulative).
  double quantile(double q) const {
    double lo = -m_lim, hi = m_lim;
    for (int i = 0; i < 100; ++i) {
      const double mid = 0.5 * (lo + hi);
      (cumulative(0, mid) < q ? lo : hi) = mid;
    }
    return 0.5 * (lo + hi);
  }

  double lim() const { return m_lim; }

 private:
  double m_lim = 1.0, m_h = 0.0, m_total = 1.0;
  std::vector<double> m_w, m_x;
  std::vector<std::vector<double>> m_p;
};

}  // namespace

LloydMaxCodebook compute_lloyd_max_codebook(int dim, int bits) {
  LloydMaxCodebook cb;
  if (dim < 2 || bits < 1 || bits > kLloydMaxMaxBits) return cb;
  cb.dim = dim;
  cb.bits = bits;
  const int levels = 1 << bits;
  const GridMoments g(dim);
  // Cell edges: -inf (the grid's lower end), the boundaries, +inf. Start from equal-mass cells.
  std::vector<double> edge(levels + 1), c(levels);
  edge[0] = -g.lim() - 1.0;
  edge[levels] = g.lim() + 1.0;
  for (int k = 1; k < levels; ++k) edge[k] = g.quantile(static_cast<double>(k) / levels);
  const double sd = 1.0 / std::sqrt(static_cast<double>(dim));
  int it = 0;
  for (; it < kMaxIterations; ++it) {
    double change = 0.0;
    for (int k = 0; k < levels; ++k) {
      const double m0 = g.cumulative(0, edge[k + 1]) - g.cumulative(0, edge[k]);
      const double m1 = g.cumulative(1, edge[k + 1]) - g.cumulative(1, edge[k]);
      const double next = m0 > 0.0 ? m1 / m0 : 0.5 * (edge[k] + edge[k + 1]);
      change = std::max(change, std::fabs(next - c[k]));
      c[k] = next;
    }
    // f_d is even: keep the codebook exactly symmetric against rounding drift.
    for (int k = 0; k < levels / 2; ++k) {
      const double s = 0.5 * (c[levels - 1 - k] - c[k]);
      c[k] = -s;
      c[levels - 1 - k] = s;
    }
    for (int k = 1; k < levels; ++k) edge[k] = 0.5 * (c[k - 1] + c[k]);
    // Converged to well below float precision (the iteration stalls near 1e-12 sd in double).
    if (it > 0 && change < 1e-10 * sd) break;
  }
  cb.iterations = it + 1;
  double mse = 0.0;
  for (int k = 0; k < levels; ++k) {
    double m[3];
    for (int j = 0; j < 3; ++j) m[j] = g.cumulative(j, edge[k + 1]) - g.cumulative(j, edge[k]);
    mse += m[2] - 2.0 * c[k] * m[1] + c[k] * c[k] * m[0];
  }
  cb.mse = mse;
  cb.centroids.assign(c.begin(), c.end());
  for (int k = 1; k < levels; ++k) cb.boundaries.push_back(static_cast<float>(edge[k]));
  return cb;
}

const LloydMaxCodebook& lloyd_max_codebook(int dim, int bits) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::unique_ptr<LloydMaxCodebook>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{dim, bits}];
  if (!slot) slot = std::make_unique<LloydMaxCodebook>(compute_lloyd_max_codebook(dim, bits));
  return *slot;
}

void count_boundaries_below_plain(const float* x, std::size_t n, const float* t, int count,
                                  std::uint8_t* codes) {
  for (std::size_t i = 0; i < n; ++i) {
    int c = 0;
    for (int k = 0; k < count; ++k) c += x[i] > t[k] ? 1 : 0;
    codes[i] = static_cast<std::uint8_t>(c);
  }
}

namespace {

#if defined(__AVX512F__)
template <int Steps>
void count_below_avx512(const float* x, std::size_t n, __m512 table, std::uint8_t* codes) {
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i),
                     _mm512_cvtepi32_epi8(level_search16<Steps>(_mm512_loadu_ps(x + i), table)));
  }
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_cvtepi32_storeu_epi8(codes + i, m,
                                     level_search16<Steps>(_mm512_maskz_loadu_ps(m, x + i), table));
  }
}
#endif

}  // namespace

void count_boundaries_below(const float* x, std::size_t n, const float* t, int count,
                            std::uint8_t* codes) {
#if defined(__AVX512F__)
  if (count >= 0 && count <= kMaxLevelBoundaries) {
    if (count == 0) {
      std::fill(codes, codes + n, std::uint8_t{0});
      return;
    }
    const __m512 table = level_search_table(t, count);
    return with_level_search_steps(
        count, [&](auto steps) { count_below_avx512<decltype(steps)::value>(x, n, table, codes); });
  }
#endif
  count_boundaries_below_plain(x, n, t, count, codes);
}

}  // namespace kvlab::detail
