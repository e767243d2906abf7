// Private to the attention sources: the AVX2/FMA/F16C inner loops (16-lane AVX-512 registers for
// the dot products and weighted sums where the build has AVX-512F) shared by the fp16 baseline
// and the fused compressed paths, so that both run the same register-blocked arithmetic and
// differ only in how a row of keys or values becomes floats (F16C conversion, or integer codes
// widened and converted). With codes, the dequantization x = min + code * step is folded out of
// the loop (KVComp, Jiang et al. 2025, Sec. 4): keys are quantized per channel, so the query is
// scaled by the steps once per block and the minimums give one bias per query head; values are
// quantized per token, so the softmax weight is scaled by the step and the minimums give one
// bias per head. The loops then multiply plain codes.
//
// Rows are read 16 channels at a time (head_dim a multiple of kLaneGroup); other head sizes and
// builds without AVX2 take the scalar loops in the callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define KVLAB_FUSED_SIMD 1
// The value loops take 16 lanes per register where the build has AVX-512 (F, for the 512-bit
// FMAs and conversions).
#if defined(__AVX512F__)
#define KVLAB_FUSED_512 1
#else
#define KVLAB_FUSED_512 0
#endif
#else
#define KVLAB_FUSED_SIMD 0
#endif

namespace kvlab::detail {
// The loops' bodies depend on the instruction set the including file is compiled for: an inline
// namespace per variant keeps a file built for AVX2 only (tests/engine/test_fused_kernels_avx2.cpp)
// from sharing symbols with one built for AVX-512.
#if KVLAB_FUSED_512
inline namespace simd512 {
#else
inline namespace simd256 {
#endif

// Channels one row load gives (two 8-float registers).
constexpr int kLaneGroup = 16;
// Query heads one kernel call serves; larger GQA groups take several calls.
constexpr int kHeadTile = 4;

#if KVLAB_FUSED_SIMD

// Rows ahead of the one in use whose cache lines a kernel asks for (prefetch): the next chunk's,
// since fp16 rows of one head are a stride apart, which the hardware prefetcher follows poorly
// once the rows come from beyond L2 (measured: 2x faster q.K at 16K tokens, rows from L3).
constexpr std::size_t kPrefetchRows = 64;

// Asks for row r + kPrefetchRows of `count` rows of `dim` values of T, `stride` values apart:
// the whole row (prefetch_row_ahead), or the cache line lane group j starts, if it starts one
// (prefetch_group_ahead: the value loops pass over the rows once per lane group, and spreading
// the requests keeps them from queuing up behind each other).
template <class T>
inline void prefetch_row_ahead(const T* base, std::size_t stride, int dim, std::size_t count,
                               std::size_t r) {
  if (r + kPrefetchRows >= count) return;
  const char* p = reinterpret_cast<const char*>(base + (r + kPrefetchRows) * stride);
  for (std::size_t i = 0; i < sizeof(T) * static_cast<std::size_t>(dim); i += 64) {
    _mm_prefetch(p + i, _MM_HINT_T1);
  }
}
template <class T>
inline void prefetch_group_ahead(const T* base, std::size_t stride, std::size_t count,
                                 std::size_t r, int j) {
  const std::size_t offset = static_cast<std::size_t>(kLaneGroup) * static_cast<std::size_t>(j);
  if (offset * sizeof(T) % 64 != 0 || r + kPrefetchRows >= count) return;
  _mm_prefetch(reinterpret_cast<const char*>(base + (r + kPrefetchRows) * stride + offset),
               _MM_HINT_T1);
}

// fp16 rows (F16C conversion); `stride` in halves, `dim` halves per row, `count` rows.
struct Fp16Rows {
  static constexpr bool kNibbles = false;
  const std::uint16_t* base;
  std::size_t stride;
  int dim;
  std::size_t count;
  void prefetch(std::size_t r) const { prefetch_row_ahead(base, stride, dim, count, r); }
  void prefetch_group(std::size_t r, int j) const {
    prefetch_group_ahead(base, stride, count, r, j);
  }
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    const std::uint16_t* p = base + r * stride + static_cast<std::size_t>(kLaneGroup) * j;
    a = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    b = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)));
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    const std::uint16_t* p = base + r * stride + static_cast<std::size_t>(kLaneGroup) * j;
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
#endif
};

// Float rows (a tile a stored cache decoded, kv_method_store.cpp; the model runner's cache);
// `stride` in floats. With `count` rows given, the loops ask for rows ahead as Fp16Rows does
// (a tile in L1 leaves it 0).
struct FloatRows {
  static constexpr bool kNibbles = false;
  const float* base;
  std::size_t stride;
  int dim = 0;
  std::size_t count = 0;
  void prefetch(std::size_t r) const { prefetch_row_ahead(base, stride, dim, count, r); }
  void prefetch_group(std::size_t r, int j) const {
    prefetch_group_ahead(base, stride, count, r, j);
  }
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    const float* p = base + r * stride + static_cast<std::size_t>(kLaneGroup) * j;
    a = _mm256_loadu_ps(p);
    b = _mm256_loadu_ps(p + 8);
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    return _mm512_loadu_ps(base + r * stride + static_cast<std::size_t>(kLaneGroup) * j);
  }
#endif
};

// One byte per code; `stride` in bytes.
struct ByteRows {
  static constexpr bool kNibbles = false;
  const std::uint8_t* base;
  std::size_t stride;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    const std::uint8_t* p = base + r * stride + static_cast<std::size_t>(kLaneGroup) * j;
    a = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
    b = _mm256_cvtepi32_ps(
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8))));
  }
#if KVLAB_FUSED_512
  __m512 load16(std::size_t r, int j) const {
    const std::uint8_t* p = base + r * stride + static_cast<std::size_t>(kLaneGroup) * j;
    return _mm512_cvtepi32_ps(
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
#endif
};

// Two 4-bit codes per byte, LSB-first (docs/FORMAT.md, Bitpack); `stride` in bytes. Eight bytes
// widen to eight 32-bit lanes; the low nibbles are the even channels, the shifted bytes the odd
// ones: no de-interleaving, the folded query is permuted instead (fold_keys) and the value
// sums are put back in channel order on the way out (value_sums).
struct NibbleRows {
  static constexpr bool kNibbles = true;
  const std::uint8_t* base;
  std::size_t stride;
  void prefetch(std::size_t) const {}
  void prefetch_group(std::size_t, int) const {}
  void load(std::size_t r, int j, __m256& a, __m256& b) const {
    const std::uint8_t* p = base + r * stride + static_cast<std::size_t>(8) * j;
    const __m256i d = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    a = _mm256_cvtepi32_ps(_mm256_and_si256(d, _mm256_set1_epi32(15)));
    b = _mm256_cvtepi32_ps(_mm256_srli_epi32(d, 4));
  }
#if KVLAB_FUSED_512
  // Lanes 0-7 the even channels (low nibbles), 8-15 the odd ones, as load() gives them.
  // The 8 bytes twice, widened to 16 lanes, then shifted by 0 or 4 and masked.
  __m512 load16(std::size_t r, int j) const {
    const std::uint8_t* p = base + r * stride + static_cast<std::size_t>(8) * j;
    std::int64_t bytes;
    std::memcpy(&bytes, p, sizeof bytes);
    const __m512i d = _mm512_cvtepu8_epi32(_mm_set1_epi64x(bytes));
    const __m512i shift = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(d, shift), _mm512_set1_epi32(15)));
  }
#endif
};

// The eight horizontal sums of a[0..7], in order, in one register.
inline __m256 reduce8(const __m256* a) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Accumulator registers the loops may fill: with AVX-512VL the compiler has 32 vector registers
// for the same AVX2 code, else 16.
#if defined(__AVX512VL__)
constexpr int kAccumulators = 16;
#else
constexpr int kAccumulators = 8;
#endif

#if KVLAB_FUSED_512
// Whether Rows decodes two neighbouring lane groups at once (load_pair16(r, j, a, b) for j
// even: a block format whose parameters cover 32 channels).
template <class Rows>
constexpr bool kLoadsPairs = requires(const Rows& rows, __m512& a) {
  rows.load_pair16(std::size_t{0}, 0, a, a);
};
#endif

// Dot products of GT query heads with TT rows (GT * TT <= kAccumulators, all in registers): lane
// k % 8 of r[k / 8] = qf[g] . row(rows_idx[t]) for k = g * TT + t, over `groups` groups of 16
// lanes. qf rows are `qstride` floats apart, in the rows' lane order.
template <int GT, int TT, class Rows>
inline void key_dots(const Rows& rows, const std::size_t* row_idx, int groups, const float* qf,
                     std::size_t qstride, __m256* r) {
  constexpr int kRegs = (GT * TT + 7) / 8;
  static_assert(GT * TT <= kAccumulators);
  __m256 acc[8 * kRegs];
#pragma GCC unroll 16
  for (int k = 0; k < 8 * kRegs; ++k) acc[k] = _mm256_setzero_ps();
#if KVLAB_FUSED_512
  // One 16-lane register per lane group: half the FMAs; each sum folds to 8 lanes at the end.
  __m512 wide[GT * TT];
#pragma GCC unroll 16
  for (int k = 0; k < GT * TT; ++k) wide[k] = _mm512_setzero_ps();
  int j = 0;
  if constexpr (kLoadsPairs<Rows>) {
    // Two lane groups a load (a block's parameters read once); each sum takes the same terms
    // in the same order as one group at a time.
    for (; j + 1 < groups; j += 2) {
      const float* qj = qf + static_cast<std::size_t>(kLaneGroup) * j;
#pragma GCC unroll 8
      for (int t = 0; t < TT; ++t) {
        __m512 x0, x1;
        rows.load_pair16(row_idx[t], j, x0, x1);
#pragma GCC unroll 4
        for (int g = 0; g < GT; ++g) {
          __m512& w = wide[g * TT + t];
          w = _mm512_fmadd_ps(x0, _mm512_loadu_ps(qj + g * qstride), w);
          w = _mm512_fmadd_ps(x1, _mm512_loadu_ps(qj + g * qstride + kLaneGroup), w);
        }
      }
    }
  }
  for (; j < groups; ++j) {
    const float* qj = qf + static_cast<std::size_t>(kLaneGroup) * j;
#pragma GCC unroll 8
    for (int t = 0; t < TT; ++t) {
      const __m512 x = rows.load16(row_idx[t], j);
#pragma GCC unroll 4
      for (int g = 0; g < GT; ++g) {
        wide[g * TT + t] = _mm512_fmadd_ps(x, _mm512_loadu_ps(qj + g * qstride), wide[g * TT + t]);
      }
    }
  }
#pragma GCC unroll 16
  for (int k = 0; k < GT * TT; ++k) {
    acc[k] = _mm256_add_ps(_mm512_castps512_ps256(wide[k]),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(wide[k]), 1)));
  }
#else
  for (int j = 0; j < groups; ++j) {
    const float* qj = qf + static_cast<std::size_t>(kLaneGroup) * j;
#pragma GCC unroll 8
    for (int t = 0; t < TT; ++t) {
      __m256 a, b;
      rows.load(row_idx[t], j, a, b);
#pragma GCC unroll 4
      for (int g = 0; g < GT; ++g) {
        const float* qg = qj + g * qstride;
        acc[g * TT + t] = _mm256_fmadd_ps(a, _mm256_loadu_ps(qg), acc[g * TT + t]);
        acc[g * TT + t] = _mm256_fmadd_ps(b, _mm256_loadu_ps(qg + 8), acc[g * TT + t]);
      }
    }
  }
#endif
#pragma GCC unroll 2
  for (int k = 0; k < kRegs; ++k) r[k] = reduce8(acc + 8 * k);
}

// Tokens per key_dots call for a head tile of g heads: 8 for one head, else as many of 4 or 2
// as the accumulators hold.
constexpr int key_rows_per_call(int g) {
  return g == 1 ? 8 : (g * 8 <= kAccumulators ? 8 : (g * 4 <= kAccumulators ? 4 : 2));
}

// Rows per key_tile step: 8 tokens, so that each head's logits leave as one 8-float store.
constexpr int kKeyStep = 8;

// logits for `n` rows and `gt` (1..kHeadTile) heads: out[g * ostride + i] = res + bias[g]. Steps
// of 8 rows transpose the key_dots results into one register per head.
template <class Rows>
inline void key_tile(const Rows& rows, std::size_t row0, int n, int gt, int groups, const float* qf,
                     std::size_t qstride, const float* bias, float* out, std::size_t ostride) {
  auto run = [&](auto gt_c) {
    constexpr int G = decltype(gt_c)::value;
    constexpr int TT = key_rows_per_call(G);
    constexpr int kCalls = kKeyStep / TT;
    constexpr int kRegs = (G * TT + 7) / 8;
    std::size_t idx[kKeyStep];
    int i0 = 0;
    if constexpr (TT == 8 || TT == 4 || G == 4) {
      for (; i0 + kKeyStep <= n; i0 += kKeyStep) {
        __m256 r[kCalls][kRegs];
        for (int t = 0; t < kKeyStep; ++t) rows.prefetch(row0 + static_cast<std::size_t>(i0 + t));
#pragma GCC unroll 4
        for (int c = 0; c < kCalls; ++c) {
          for (int t = 0; t < TT; ++t) idx[t] = row0 + static_cast<std::size_t>(i0 + c * TT + t);
          key_dots<G, TT>(rows, idx, groups, qf, qstride, r[c]);
        }
        __m256 h[kHeadTile];
        if constexpr (TT == 8) {  // r[0][g] = head g's 8 rows
          for (int g = 0; g < G; ++g) h[g] = r[0][g];
        } else if constexpr (TT == 4) {  // r[c][k] = [head 2k: 4 rows | head 2k + 1: 4 rows]
#pragma GCC unroll 2
          for (int k = 0; k < kRegs; ++k) {
            h[2 * k] = _mm256_permute2f128_ps(r[0][k], r[1][k], 0x20);
            h[2 * k + 1] = _mm256_permute2f128_ps(r[0][k], r[1][k], 0x31);
          }
        } else {  // r[c][0] = 2 rows of heads 0..3: a 4 x 4 transpose of row pairs
          const __m256d a = _mm256_castps_pd(r[0][0]), b = _mm256_castps_pd(r[1][0]);
          const __m256d c = _mm256_castps_pd(r[2][0]), d = _mm256_castps_pd(r[3][0]);
          const __m256d lo01 = _mm256_unpacklo_pd(a, b), hi01 = _mm256_unpackhi_pd(a, b);
          const __m256d lo23 = _mm256_unpacklo_pd(c, d), hi23 = _mm256_unpackhi_pd(c, d);
          h[0] = _mm256_castpd_ps(_mm256_permute2f128_pd(lo01, lo23, 0x20));
          h[1] = _mm256_castpd_ps(_mm256_permute2f128_pd(hi01, hi23, 0x20));
          h[2] = _mm256_castpd_ps(_mm256_permute2f128_pd(lo01, lo23, 0x31));
          h[3] = _mm256_castpd_ps(_mm256_permute2f128_pd(hi01, hi23, 0x31));
        }
        for (int g = 0; g < G; ++g) {
          _mm256_storeu_ps(out + g * ostride + i0, _mm256_add_ps(h[g], _mm256_set1_ps(bias[g])));
        }
      }
    }
    alignas(32) float res[8 * kRegs];
    for (; i0 < n; i0 += TT) {
      const int m = n - i0 < TT ? n - i0 : TT;
      for (int t = 0; t < m; ++t) rows.prefetch(row0 + static_cast<std::size_t>(i0 + t));
      for (int t = 0; t < TT; ++t)
        idx[t] = row0 + static_cast<std::size_t>(i0 + (t < m ? t : m - 1));
      __m256 r[kRegs];
      key_dots<G, TT>(rows, idx, groups, qf, qstride, r);
      for (int k = 0; k < kRegs; ++k) _mm256_store_ps(res + 8 * k, r[k]);
      for (int g = 0; g < G; ++g) {
        for (int t = 0; t < m; ++t) out[g * ostride + i0 + t] = res[g * TT + t] + bias[g];
      }
    }
  };
  switch (gt) {
    case 1:
      return run(std::integral_constant<int, 1>{});
    case 2:
      return run(std::integral_constant<int, 2>{});
    case 3:
      return run(std::integral_constant<int, 3>{});
    default:
      return run(std::integral_constant<int, 4>{});
  }
}

// Splits 16 floats into even and odd positions (the nibble lane order of 16 channels).
inline void deinterleave16(const float* p, __m256& even, __m256& odd) {
  const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  even = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xd8));
  odd = _mm256_castpd_ps(
      _mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xdd)), 0xd8));
}

// The folded query of `g` heads (rows of q `dim` apart) for one key block: qf[h][lane] =
// q[h][c] * step[c] * scale in the lane order of the rows, bias[h] = scale * sum q[h][c] * min[c].
template <bool kNibbles>
inline void fold_keys(const float* q, int g, int dim, const float* step, const float* min,
                      float scale, float* qf, float* bias) {
  const __m256 sc = _mm256_set1_ps(scale);
  __m256 acc[8];
  for (int h0 = 0; h0 < g; h0 += 8) {
    const int gh = g - h0 < 8 ? g - h0 : 8;
    for (int h = 0; h < gh; ++h) acc[h] = _mm256_setzero_ps();
    for (int j = 0; j < dim; j += kLaneGroup) {
      __m256 sa, sb, ma, mb;
      if constexpr (kNibbles) {
        deinterleave16(step + j, sa, sb);
        deinterleave16(min + j, ma, mb);
      } else {
        sa = _mm256_loadu_ps(step + j), sb = _mm256_loadu_ps(step + j + 8);
        ma = _mm256_loadu_ps(min + j), mb = _mm256_loadu_ps(min + j + 8);
      }
      sa = _mm256_mul_ps(sa, sc);
      sb = _mm256_mul_ps(sb, sc);
      for (int h = 0; h < gh; ++h) {
        const float* qh = q + static_cast<std::size_t>(h0 + h) * dim + j;
        __m256 qa, qb;
        if constexpr (kNibbles) {
          deinterleave16(qh, qa, qb);
        } else {
          qa = _mm256_loadu_ps(qh), qb = _mm256_loadu_ps(qh + 8);
        }
        float* fh = qf + static_cast<std::size_t>(h0 + h) * dim + j;
        _mm256_storeu_ps(fh, _mm256_mul_ps(qa, sa));
        _mm256_storeu_ps(fh + 8, _mm256_mul_ps(qb, sb));
        acc[h] = _mm256_fmadd_ps(qa, ma, _mm256_fmadd_ps(qb, mb, acc[h]));
      }
    }
    for (int h = 0; h < gh; ++h) {
      alignas(32) float t[8];
      _mm256_store_ps(t, acc[h]);
      bias[h0 + h] = (((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]))) * scale;
    }
  }
}

// Weighted sums of n rows for GT heads over VP groups of 16 lanes starting at group j0:
// out[g][channels] += sum_t w[g * wstride + t] * row(row0 + t), accumulators in registers, the
// lanes put back in channel order on the way out.
template <int GT, int VP, class Rows>
inline void value_sums(const Rows& rows, std::size_t row0, int n, int j0, const float* w,
                       std::size_t wstride, float* out, std::size_t ostride) {
  // A flat array, every loop over it fully unrolled: GCC then keeps it in registers (a loop it
  // leaves rolled sends the accumulators through the stack on every row).
  constexpr int kV = 2 * VP;
  __m256 acc[GT * kV];
#pragma GCC unroll 16
  for (int k = 0; k < GT * kV; ++k) acc[k] = _mm256_setzero_ps();
  for (int t = 0; t < n; ++t) {
    __m256 x[kV];
#pragma GCC unroll 8
    for (int v = 0; v < VP; ++v) rows.prefetch_group(row0 + t, j0 + v);
#pragma GCC unroll 8
    for (int v = 0; v < VP; ++v) rows.load(row0 + t, j0 + v, x[2 * v], x[2 * v + 1]);
#pragma GCC unroll 8
    for (int g = 0; g < GT; ++g) {
      const __m256 wg = _mm256_broadcast_ss(w + g * wstride + t);
#pragma GCC unroll 8
      for (int v = 0; v < kV; ++v) acc[g * kV + v] = _mm256_fmadd_ps(wg, x[v], acc[g * kV + v]);
    }
  }
#pragma GCC unroll 8
  for (int g = 0; g < GT; ++g) {
#pragma GCC unroll 8
    for (int v = 0; v < VP; ++v) {
      __m256 lo = acc[g * kV + 2 * v], hi = acc[g * kV + 2 * v + 1];
      if constexpr (Rows::kNibbles) {  // even channels | odd channels -> channel order
        const __m256 e = _mm256_unpacklo_ps(lo, hi), o = _mm256_unpackhi_ps(lo, hi);
        lo = _mm256_permute2f128_ps(e, o, 0x20);
        hi = _mm256_permute2f128_ps(e, o, 0x31);
      }
      float* o = out + g * ostride + static_cast<std::size_t>(kLaneGroup) * (j0 + v);
      _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), lo));
      _mm256_storeu_ps(o + 8, _mm256_add_ps(_mm256_loadu_ps(o + 8), hi));
    }
  }
}

#if KVLAB_FUSED_512
// value_sums with one 16-lane register per lane group: half the FMAs of the 8-lane loop.
template <int GT, int VP, class Rows>
inline void value_sums512(const Rows& rows, std::size_t row0, int n, int j0, const float* w,
                          std::size_t wstride, float* out, std::size_t ostride) {
  __m512 acc[GT * VP];
#pragma GCC unroll 32
  for (int k = 0; k < GT * VP; ++k) acc[k] = _mm512_setzero_ps();
  // Lane groups two a load where the rows decode pairs and the groups start on one.
  constexpr bool kPairs = VP % 2 == 0 && kLoadsPairs<Rows>;
  const bool paired = kPairs && j0 % 2 == 0;
  for (int t = 0; t < n; ++t) {
    __m512 x[VP];
#pragma GCC unroll 8
    for (int v = 0; v < VP; ++v) rows.prefetch_group(row0 + t, j0 + v);
    if constexpr (kPairs) {
      if (paired) {
#pragma GCC unroll 8
        for (int v = 0; v < VP; v += 2) rows.load_pair16(row0 + t, j0 + v, x[v], x[v + 1]);
      }
    }
    if (!paired) {
#pragma GCC unroll 8
      for (int v = 0; v < VP; ++v) x[v] = rows.load16(row0 + t, j0 + v);
    }
#pragma GCC unroll 8
    for (int g = 0; g < GT; ++g) {
      const __m512 wg = _mm512_set1_ps(w[g * wstride + t]);
#pragma GCC unroll 8
      for (int v = 0; v < VP; ++v) acc[g * VP + v] = _mm512_fmadd_ps(wg, x[v], acc[g * VP + v]);
    }
  }
  // even channels | odd channels -> channel order
  const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
#pragma GCC unroll 8
  for (int g = 0; g < GT; ++g) {
#pragma GCC unroll 8
    for (int v = 0; v < VP; ++v) {
      __m512 a = acc[g * VP + v];
      // The zero-masked form with every lane on: GCC 12 builds the plain one on an undefined
      // register, which -Wuninitialized reports.
      if constexpr (Rows::kNibbles) a = _mm512_maskz_permutexvar_ps(0xffff, order, a);
      float* o = out + g * ostride + static_cast<std::size_t>(kLaneGroup) * (j0 + v);
      _mm512_storeu_ps(o, _mm512_add_ps(_mm512_loadu_ps(o), a));
    }
  }
}
#endif

// value_sums over all `groups` lane groups for `gt` (1..kHeadTile) heads.
template <class Rows>
inline void value_tile(const Rows& rows, std::size_t row0, int n, int gt, int groups,
                       const float* w, std::size_t wstride, float* out, std::size_t ostride) {
  auto run = [&](auto gt_c) {
    constexpr int G = decltype(gt_c)::value;
#if KVLAB_FUSED_512
    // 32 registers: G * VP accumulators, VP rows and a weight.
    constexpr int VP = G <= 2 ? 8 : 4;
    int j = 0;
    for (; j + VP <= groups; j += VP) {
      value_sums512<G, VP>(rows, row0, n, j, w, wstride, out, ostride);
    }
    for (; j < groups; ++j) value_sums512<G, 1>(rows, row0, n, j, w, wstride, out, ostride);
#else
    constexpr int VP = kAccumulators / (2 * G) > 0 ? kAccumulators / (2 * G) : 1;
    int j = 0;
    for (; j + VP <= groups; j += VP) value_sums<G, VP>(rows, row0, n, j, w, wstride, out, ostride);
    for (; j < groups; ++j) value_sums<G, 1>(rows, row0, n, j, w, wstride, out, ostride);
#endif
  };
  switch (gt) {
    case 1:
      return run(std::integral_constant<int, 1>{});
    case 2:
      return run(std::integral_constant<int, 2>{});
    case 3:
      return run(std::integral_constant<int, 3>{});
    default:
      return run(std::integral_constant<int, 4>{});
  }
}

#endif  // KVLAB_FUSED_SIMD

}  // namespace simd512 / simd256
}  // namespace kvlab::detail
