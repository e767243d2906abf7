// Lloyd-Max (MSE-optimal) scalar codebooks for one coordinate of a uniformly random point on the
// unit sphere S^(d-1), the codebooks of TurboQuant (Zandieh, Daliri, Hadian, Mirrokni 2025,
// "TurboQuant: Online Vector Quantization with Near-optimal Distortion Rate", arXiv:2504.19874,
// Sec. 3.1). After a random rotation each coordinate of a unit vector has the density (Lemma 1)
//   f_d(x) = Gamma(d/2) / (sqrt(pi) Gamma((d-1)/2)) * (1 - x^2)^((d-3)/2),  x in [-1, 1],
// which tends to N(0, 1/d) as d grows. The b-bit codebook minimises E[(x - c(x))^2] under f_d:
// Lloyd's iteration (centroid = conditional mean of its cell, boundary = midpoint of adjacent
// centroids, Max 1960 / Lloyd 1982) on a fine grid. Private to the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace kvlab::detail {

inline constexpr int kLloydMaxMaxBits = 4;

struct LloydMaxCodebook {
  int dim = 0;
  int bits = 0;
  std::vector<float> centroids;   // 2^bits levels, ascending, symmetric about 0
  std::vector<float> boundaries;  // 2^bits - 1 midpoints between adjacent centroids, ascending
  // Expected squared error of one coordinate under f_d (so d * mse is TurboQuant's D_mse for a
  // unit vector, Theorem 1), and the Lloyd iterations it took.
  double mse = 0.0;
  int iterations = 0;
};

// Computes the codebook from scratch (about a millisecond). dim >= 2, 1 <= bits <= 4; other
// values give an empty codebook.
LloydMaxCodebook compute_lloyd_max_codebook(int dim, int bits);

// Nearest-level search against ascending boundaries t[0..count) (count <= kMaxLevelBoundaries):
// code = the number of boundaries strictly below x (x > t[k]), so a value exactly on a boundary
// takes the lower level and NaN takes level 0. The plain form compares every boundary; the fast
// one gives the same codes by a branch-free binary search (AVX-512: the boundaries in one
// register, four probes by permute for 15 boundaries), 16 values at a time.
inline constexpr int kMaxLevelBoundaries = 15;
void count_boundaries_below_plain(const float* x, std::size_t n, const float* t, int count,
                                  std::uint8_t* codes);
void count_boundaries_below(const float* x, std::size_t n, const float* t, int count,
                            std::uint8_t* codes);

// Binary-search probes for `count` boundaries: the smallest s with 2^s - 1 >= count.
inline int level_search_steps(int count) {
  int s = 0;
  while ((1 << s) - 1 < count) ++s;
  return s;
}

// f(std::integral_constant<int, level_search_steps(count)>{}) for count 1 to 15 (the search's
// step count as a template argument).
template <class F>
decltype(auto) with_level_search_steps(int count, F&& f) {
  switch (level_search_steps(count)) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    default:
      return f(std::integral_constant<int, 4>{});
  }
}

#if defined(__AVX512F__)
// The boundaries in lanes [0, count), +inf above (no value is above it, NaN neither).
inline __m512 level_search_table(const float* t, int count) {
  return _mm512_mask_loadu_ps(_mm512_set1_ps(__builtin_inff()),
                              static_cast<__mmask16>((1u << count) - 1), t);
}
// Codes of 16 values: `Steps` probes of `table` (ascending, padded with +inf to 2^Steps - 1
// lanes), each adding 2^s where x is above the probed boundary; equal to counting every
// boundary below x, since the boundaries are sorted.
template <int Steps>
inline __m512i level_search16(__m512 x, __m512 table) {
  __m512i idx = _mm512_setzero_si512();
  for (int s = Steps - 1; s >= 0; --s) {
    const __m512i probe = _mm512_add_epi32(idx, _mm512_set1_epi32((1 << s) - 1));
    const __mmask16 above = _mm512_cmp_ps_mask(x, _mm512_permutexvar_ps(probe, table), _CMP_GT_OQ);
    idx = _mm512_mask_add_epi32(idx, above, idx, _mm512_set1_epi32(1 << s));
  }
  return idx;
}
#endif

// The codebook for (dim, bits), computed once per process and kept (thread-safe). The reference
// stays valid for the life of the process.
const LloydMaxCodebook& lloyd_max_codebook(int dim, int bits);

}  // namespace kvlab::detail
