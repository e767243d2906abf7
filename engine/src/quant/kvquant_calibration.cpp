// KVQuant's offline fitting (kvquant_calibration.h). Written from the paper (arXiv:2401.18079,
// Sec. 3.3-3.4) and from reading the reference's SimQuant.quantize and QuantLinearSim.__init__
// (quant/kvquant/simquant_module_quantizer.py); no code taken from it.
#include "quant/kvquant_calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <utility>

#include <tbb/parallel_sort.h>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kvlab::detail {

double normal_quantile(double p) {
  if (!(p > 0.0 && p < 1.0))
    return p <= 0.0 ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::infinity();
  double lo = -40.0, hi = 40.0;
  for (int it = 0; it < 200 && lo < hi; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    const double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
    (cdf < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

std::vector<float> normal_float_levels(int bits) {
  const int half = 1 << (bits - 1);
  const double delta = 0.5 * (1.0 / 32.0 + 1.0 / 30.0);  // QLoRA's offset 0.9677 = 1 - delta
  std::vector<float> levels;
  levels.reserve(static_cast<std::size_t>(2 * half));
  // Negative half: half points from delta to 1/2 (the last one Φ⁻¹(1/2) = 0).
  const double neg_scale = -normal_quantile(delta);
  for (int i = 0; i < half; ++i) {
    const double p = half > 1 ? delta + (0.5 - delta) * i / (half - 1) : 0.5;
    levels.push_back(static_cast<float>(normal_quantile(p) / neg_scale));
  }
  // Positive half: half + 1 points from 1/2 to 1 - delta, the first (0) dropped.
  const double pos_scale = normal_quantile(1.0 - delta);
  for (int i = 1; i <= half; ++i) {
    const double p = 0.5 + (0.5 - delta) * i / half;
    levels.push_back(static_cast<float>(normal_quantile(p) / pos_scale));
  }
  levels[static_cast<std::size_t>(half) - 1] = 0.f;  // Φ⁻¹(1/2), exact by construction
  levels.front() = -1.f;                             // so are the ends
  levels.back() = 1.f;
  return levels;
}

double percentile_sorted(std::span<const float> sorted, double q) {
  if (sorted.empty()) return 0.0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + frac * (static_cast<double>(sorted[lo + 1]) - sorted[lo]);
}

double percentile_selected(std::span<float> values, double q) {
  if (values.empty()) return 0.0;
  const double pos = q * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto at = values.begin() + static_cast<std::ptrdiff_t>(std::min(lo, values.size() - 1));
  std::nth_element(values.begin(), at, values.end());
  if (lo + 1 >= values.size()) return *at;
  const float a = *at, b = *std::min_element(at + 1, values.end());
  const double frac = pos - static_cast<double>(lo);
  return a + frac * (static_cast<double>(b) - a);
}

namespace {

constexpr int kBins = 4096;

// Prefix sums over bins of weight, weight·x and weight·x² (index 0 is the empty prefix).
struct BinSums {
  std::vector<double> w, s, q;
  double cost(int i, int j) const {  // SSE of bins i..j inclusive around their weighted mean
    const double W = w[j + 1] - w[i];
    if (W <= 0.0) return 0.0;
    const double S = s[j + 1] - s[i];
    return std::max(0.0, (q[j + 1] - q[i]) - S * S / W);
  }
};

// Cluster m ≥ 1 of the DP: cur[j] = min over i ≥ m of prev[i - 1] + cost(i, j) (clusters 0..m-1
// on bins 0..i-1, cluster m on bins i..j), for j in [jlo, jhi]; the best i is monotone in j, so
// divide and conquer.
void dp_layer(const BinSums& b, int m, const std::vector<double>& prev, std::vector<double>& cur,
              std::vector<int>& arg, int jlo, int jhi, int ilo, int ihi) {
  if (jlo > jhi) return;
  const int j = (jlo + jhi) / 2;
  double best = std::numeric_limits<double>::infinity();
  int best_i = std::max(ilo, m);
  for (int i = std::max(ilo, m); i <= std::min(j, ihi); ++i) {
    const double c = prev[i - 1] + b.cost(i, j);
    if (c < best) best = c, best_i = i;
  }
  cur[j] = best;
  arg[j] = best_i;
  dp_layer(b, m, prev, cur, arg, jlo, j - 1, ilo, best_i);
  dp_layer(b, m, prev, cur, arg, j + 1, jhi, best_i, ihi);
}

}  // namespace

std::vector<float> weighted_kmeans_1d(std::span<const float> x, std::span<const float> w, int k) {
  const auto weight = [&](std::size_t i) { return w.empty() ? 1.f : w[i]; };
  float xmin = std::numeric_limits<float>::infinity(), xmax = -xmin;
  double total = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !(weight(i) > 0.f)) continue;
    xmin = std::min(xmin, x[i]);
    xmax = std::max(xmax, x[i]);
    total += weight(i);
  }
  std::vector<float> c(static_cast<std::size_t>(k));
  if (!(total > 0.0)) {
    for (int j = 0; j < k; ++j) c[j] = k > 1 ? -1.f + 2.f * j / (k - 1) : 0.f;
    return c;
  }
  // 1. Exact optimum over a histogram.
  const double width = xmax > xmin ? (static_cast<double>(xmax) - xmin) / kBins : 1.0;
  const auto bin_of = [&](float v) {
    return std::clamp(static_cast<int>((v - xmin) / width), 0, kBins - 1);
  };
  BinSums b;
  b.w.assign(kBins + 1, 0.0);
  b.s.assign(kBins + 1, 0.0);
  b.q.assign(kBins + 1, 0.0);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double wi = weight(i);
    if (!std::isfinite(x[i]) || !(wi > 0.0)) continue;
    const int bin = bin_of(x[i]) + 1;
    b.w[bin] += wi;
    b.s[bin] += wi * x[i];
    b.q[bin] += wi * x[i] * x[i];
  }
  for (int i = 1; i <= kBins; ++i) {
    b.w[i] += b.w[i - 1];
    b.s[i] += b.s[i - 1];
    b.q[i] += b.q[i - 1];
  }
  const int kk = std::min(k, kBins);
  std::vector<double> prev(kBins), cur(kBins);
  std::vector<std::vector<int>> arg(kk, std::vector<int>(kBins, 0));
  for (int j = 0; j < kBins; ++j) prev[j] = b.cost(0, j);  // one cluster: bins 0..j
  for (int m = 1; m < kk; ++m) {
    std::fill(cur.begin(), cur.end(), std::numeric_limits<double>::infinity());
    dp_layer(b, m, prev, cur, arg[m], m, kBins - 1, m, kBins - 1);
    std::swap(prev, cur);
  }
  std::vector<int> start(kk + 1, kBins);
  for (int m = kk - 1, j = kBins - 1; m >= 0; --m) {
    start[m] = arg[m][j];
    j = start[m] - 1;
  }
  for (int m = 0; m < kk; ++m) {
    const int i = start[m], j = start[m + 1] - 1;
    const double W = b.w[j + 1] - b.w[i];
    c[m] = W > 0.0 ? static_cast<float>((b.s[j + 1] - b.s[i]) / W)
                   : static_cast<float>(xmin + width * (0.5 * (i + j + 1)));
  }
  for (int m = kk; m < k; ++m) c[m] = xmax;
  // 2. Lloyd on the exact samples.
  // The samples sorted, with prefix sums of weight and weight·x. Samples that compare equal add
  // the same to every sum (+0 and -0 included), so the engine's threads may sort them in any
  // order. Every weight 1 (the default): the floats alone, the weight before sample i being i.
  std::vector<float> sx;
  std::vector<double> pw, ps;
  if (w.empty()) {
    sx.reserve(x.size());
    for (float v : x) {
      if (std::isfinite(v)) sx.push_back(v);
    }
    tbb::parallel_sort(sx.begin(), sx.end());
    ps.assign(sx.size() + 1, 0.0);
    for (std::size_t i = 0; i < sx.size(); ++i) ps[i + 1] = ps[i] + sx[i];
  } else {
    std::vector<std::pair<float, float>> sw;
    sw.reserve(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (std::isfinite(x[i]) && weight(i) > 0.f) sw.emplace_back(x[i], weight(i));
    }
    tbb::parallel_sort(sw.begin(), sw.end());
    sx.resize(sw.size());
    pw.assign(sw.size() + 1, 0.0);
    ps.assign(sw.size() + 1, 0.0);
    for (std::size_t i = 0; i < sw.size(); ++i) {
      sx[i] = sw[i].first;
      pw[i + 1] = pw[i] + sw[i].second;
      ps[i + 1] = ps[i] + static_cast<double>(sw[i].second) * sw[i].first;
    }
  }
  const auto weight_before = [&](std::size_t i) {
    return pw.empty() ? static_cast<double>(i) : pw[i];
  };
  // Lloyd: cluster m takes (mid(m-1, m), mid(m, m+1)], the tie to the lower level as the
  // reference's argmin does.
  for (int it = 0; it < 100; ++it) {
    bool changed = false;
    std::size_t begin = 0;
    std::vector<float> next = c;
    for (int m = 0; m < k; ++m) {
      std::size_t end = sx.size();
      if (m + 1 < k) {
        const float mid = 0.5f * (c[m] + c[m + 1]);
        end = static_cast<std::size_t>(
            std::upper_bound(sx.begin() + static_cast<std::ptrdiff_t>(begin), sx.end(), mid) -
            sx.begin());
      }
      const double W = weight_before(end) - weight_before(begin);
      if (W > 0.0) next[m] = static_cast<float>((ps[end] - ps[begin]) / W);
      changed |= next[m] != c[m];
      begin = end;
    }
    c = std::move(next);
    if (!changed) break;
  }
  std::sort(c.begin(), c.end());
  return c;
}

int outliers_per_side(double fraction, int n) {
  if (n <= 0 || !(fraction > 0.0)) return 0;
  const int k = static_cast<int>(std::floor(fraction * n / 2.0 + 0.5));
  return std::clamp(k, 0, (n - 1) / 2);
}

namespace {

// One tail of a token: the K strongest (value, index) entries seen, weakest first. Stronger means
// a larger value (the low tail stores −x), ties to the lower index for the high tail and to the
// higher index for the low tail, so the two rank every entry in exactly opposite orders and never
// share one when 2k < n. The index decides ties, so the order entries come in does not matter.
struct Tail {
  std::vector<float>& v;
  std::vector<int>& i;
  int K, count = 0;
  bool low_index_wins;

  bool stronger(float a, int ai, float b, int bi) const {
    return a > b || (a == b && (low_index_wins ? ai < bi : ai > bi));
  }
  float floor() const {  // entries below it cannot enter
    return count < K ? -std::numeric_limits<float>::infinity() : v[0];
  }
  void offer(float a, int ai) {
    if (count == K && !stronger(a, ai, v[0], i[0])) return;
    int p = 0;                            // kept entries weaker than the new one
    const int base = count == K ? 1 : 0;  // when full, slot 0 (the weakest) is dropped
    for (p = base; p < count && stronger(a, ai, v[p], i[p]); ++p) {
    }
    if (count < K) {
      for (int j = count; j > p; --j) v[j] = v[j - 1], i[j] = i[j - 1];
      ++count;
    } else {
      for (int j = 0; j + 1 < p; ++j) v[j] = v[j + 1], i[j] = i[j + 1];
      --p;
    }
    v[p] = a;
    i[p] = ai;
  }
};

constexpr int kStripes = 16;

}  // namespace

void select_token_tails(const float* x, int n, int k, TailScratch& s, float& lower, float& upper,
                        std::vector<int>& outliers) {
  outliers.clear();
  if (n <= 0) {
    lower = upper = 0.f;
    return;
  }
  k = std::clamp(k, 0, (n - 1) / 2);
  const int K = k + 1;
  s.hi_v.resize(K);
  s.hi_i.resize(K);
  s.lo_v.resize(K);
  s.lo_i.resize(K);
  Tail hi{s.hi_v, s.hi_i, K, 0, true}, lo{s.lo_v, s.lo_i, K, 0, false};
  const auto offer = [&](int j) {
    const float a = x[j];
    if (a != a) return;  // NaN: neither tail
    if (a >= hi.floor()) hi.offer(a, j);
    if (-a >= lo.floor()) lo.offer(-a, j);
  };
  // The row as 16 stripes of nb entries: block j is {j, j + nb, j + 2nb, ...}, its maximum and
  // minimum from vertical (vectorised) passes. From them a lower bound of the K-th largest entry
  // (and an upper bound of the K-th smallest) is cheap, and only entries past it are candidates.
  const int nb = n / kStripes;
  if (nb < 2 * K) {
    for (int j = 0; j < n; ++j) offer(j);
  } else {
    s.bmax.assign(x, x + nb);
    s.bmin.assign(x, x + nb);
    float* bmax = s.bmax.data();
    float* bmin = s.bmin.data();
    for (int r = 1; r < kStripes; ++r) {
      const float* row = x + static_cast<std::size_t>(r) * nb;
#pragma omp simd
      for (int j = 0; j < nb; ++j) {
        bmax[j] = std::max(bmax[j], row[j]);  // (NaN entries are not supported)
        bmin[j] = std::min(bmin[j], row[j]);
      }
    }
    // K disjoint groups of blocks (j mod K): each group's largest maximum is a distinct entry,
    // so the smallest of the K is at most the K-th largest entry; all K largest are >= it.
    s.sel.assign(static_cast<std::size_t>(2 * K), 0.f);
    float* gmax = s.sel.data();
    float* gmin = gmax + K;
    for (int g = 0; g < K; ++g) gmax[g] = bmax[g], gmin[g] = bmin[g];
    for (int j = K, g = 0; j < nb; ++j, g = g + 1 == K ? 0 : g + 1) {  // g = j mod K
      gmax[g] = std::max(gmax[g], bmax[j]);
      gmin[g] = std::min(gmin[g], bmin[j]);
    }
    const float tau_hi = *std::min_element(gmax, gmax + K);
    const float tau_lo = *std::max_element(gmin, gmin + K);
    // Candidates: the indices past either bound, in index order (16 at a time by mask and
    // compress-store where AVX-512 has them).
    if (s.cand_hi.size() < static_cast<std::size_t>(n)) {  // grown once, never shrunk
      s.cand_hi.resize(static_cast<std::size_t>(n));
      s.cand_lo.resize(static_cast<std::size_t>(n));
    }
    int* ch = s.cand_hi.data();
    int* cl = s.cand_lo.data();
    int nh = 0, nl = 0, j0 = 0;
#if defined(__AVX512F__)
    const __m512 vhi = _mm512_set1_ps(tau_hi), vlo = _mm512_set1_ps(tau_lo);
    const __m512i step = _mm512_set1_epi32(16);
    __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (; j0 + 16 <= n; j0 += 16, idx = _mm512_add_epi32(idx, step)) {
      const __m512 v = _mm512_loadu_ps(x + j0);
      const __mmask16 mh = _mm512_cmp_ps_mask(v, vhi, _CMP_GE_OQ);
      const __mmask16 ml = _mm512_cmp_ps_mask(v, vlo, _CMP_LE_OQ);
      if ((mh | ml) == 0) continue;
      _mm512_mask_compressstoreu_epi32(ch + nh, mh, idx);
      _mm512_mask_compressstoreu_epi32(cl + nl, ml, idx);
      nh += __builtin_popcount(mh);
      nl += __builtin_popcount(ml);
    }
#endif
    for (int j = j0; j < n; ++j) {
      ch[nh] = j;
      nh += x[j] >= tau_hi;
      cl[nl] = j;
      nl += x[j] <= tau_lo;
    }
    for (int c = 0; c < nh; ++c) hi.offer(x[ch[c]], ch[c]);
    for (int c = 0; c < nl; ++c) lo.offer(-x[cl[c]], cl[c]);
  }
  if (hi.count == 0) {  // every entry NaN
    lower = upper = 0.f;
    return;
  }
  upper = s.hi_v[0];
  lower = -s.lo_v[0];
  for (int j = 1; j < hi.count; ++j) outliers.push_back(s.hi_i[j]);
  for (int j = 1; j < lo.count; ++j) outliers.push_back(s.lo_i[j]);
  std::sort(outliers.begin(), outliers.end());
}

}  // namespace kvlab::detail
