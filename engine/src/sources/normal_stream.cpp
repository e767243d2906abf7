#include "sources/normal_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kvlab::detail {

namespace {

// Φ^{-1}(p) for p in (0, 0.5]: Newton's method on the CDF (erfc, full double accuracy) from
// the tail bound -sqrt(-2 ln p), which lies left of the root.
double lower_quantile(double p) {
  const double inv_sqrt_2pi = 0.3989422804014327;
  double x = -std::sqrt(-2.0 * std::log(p));
  for (int k = 0; k < 100; ++k) {
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    const double pdf = inv_sqrt_2pi * std::exp(-0.5 * x * x);
    const double step = (cdf - p) / pdf;
    x -= step;
    if (std::fabs(step) < 1e-13 * std::max(1.0, std::fabs(x))) break;
  }
  return x;
}

}  // namespace

const std::array<float, 65537>& normal_quantile_table() {
  static const std::array<float, 65537> table = [] {
    std::array<float, 65537> t{};
    constexpr int kHalf = 32768;
    t[kHalf] = 0.0f;
    t[0] = static_cast<float>(lower_quantile(0x1p-24));
    for (int i = 1; i < kHalf; ++i) t[i] = static_cast<float>(lower_quantile(i * 0x1p-16));
    for (int i = 0; i < kHalf; ++i) t[65536 - i] = -t[i];
    return t;
  }();
  return table;
}

const std::array<NormalBin, 65536>& normal_bin_table() {
  static const std::array<NormalBin, 65536> bins = [] {
    const auto& t = normal_quantile_table();
    std::array<NormalBin, 65536> b{};
    for (std::size_t i = 0; i < b.size(); ++i) b[i] = {t[i], t[i + 1] - t[i]};
    return b;
  }();
  return bins;
}

NormalStream::NormalStream(std::uint64_t seed) : m_bins(normal_bin_table().data()) {
  for (int lane = 0; lane < kLanes; ++lane) {
    std::uint64_t s = stream_seed(seed, static_cast<std::uint64_t>(lane), 0x6e6f726d616c);
    for (auto& word : m_s) word[lane] = splitmix64(s);
  }
}

void NormalStream::generate(float* out) {
  std::uint64_t r[kLanes];
  for (int l = 0; l < kLanes; ++l) {  // xoshiro256** on each lane (Blackman and Vigna 2018)
    const std::uint64_t x = m_s[1][l] * 5;
    r[l] = ((x << 7) | (x >> 57)) * 9;
    const std::uint64_t t = m_s[1][l] << 17;
    m_s[2][l] ^= m_s[0][l];
    m_s[3][l] ^= m_s[1][l];
    m_s[1][l] ^= m_s[2][l];
    m_s[0][l] ^= m_s[3][l];
    m_s[2][l] ^= t;
    m_s[3][l] = (m_s[3][l] << 45) | (m_s[3][l] >> 19);
  }
  // The 16 halves of the 8 outputs, low half first; each half's top 16 bits pick a bin, its low
  // 16 bits the place within it: quantile + width * place, in one rounding (fma) on both paths.
  alignas(64) std::uint32_t u[kBlock];
  std::memcpy(u, r, sizeof u);
#if defined(__AVX512F__)
  const __m512i v = _mm512_load_si512(u);
  const __m512i bin = _mm512_srli_epi32(v, 16);
  const __m512 place = _mm512_mul_ps(
      _mm512_cvtepi32_ps(_mm512_and_si512(v, _mm512_set1_epi32(0xffff))), _mm512_set1_ps(0x1p-16f));
  // Bins of halves 0-7 and 8-15, each (quantile, width); then the quantiles and the widths apart.
  static_assert(sizeof(NormalBin) == 8);
  const __m512 low = _mm512_castpd_ps(_mm512_i32gather_pd(_mm512_castsi512_si256(bin), m_bins, 8));
  const __m512 high =
      _mm512_castpd_ps(_mm512_i32gather_pd(_mm512_extracti64x4_epi64(bin, 1), m_bins, 8));
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512 q = _mm512_permutex2var_ps(low, even, high);
  const __m512 width =
      _mm512_permutex2var_ps(low, _mm512_add_epi32(even, _mm512_set1_epi32(1)), high);
  _mm512_storeu_ps(out, _mm512_fmadd_ps(width, place, q));
#else
  for (int j = 0; j < kBlock; ++j) {
    const std::uint32_t bin = u[j] >> 16;
    const float place = static_cast<float>(u[j] & 0xffffu) * 0x1p-16f;
    out[j] = std::fma(m_bins[bin].width, place, m_bins[bin].quantile);
  }
#endif
}

void NormalStream::fill(std::span<float> out) {
  std::size_t i = 0;
  while (i < out.size() && m_next < kBlock) out[i++] = m_block[static_cast<std::size_t>(m_next++)];
  for (; out.size() - i >= static_cast<std::size_t>(kBlock); i += kBlock) generate(out.data() + i);
  if (i < out.size()) {
    generate(m_block.data());
    m_next = 0;
    while (i < out.size()) out[i++] = m_block[static_cast<std::size_t>(m_next++)];
  }
}

float NormalStream::next() {
  if (m_next == kBlock) {
    generate(m_block.data());
    m_next = 0;
  }
  return m_block[static_cast<std::size_t>(m_next++)];
}

}  // namespace kvlab::detail
