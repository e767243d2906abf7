// Bits a run of codes takes under a table of per-code costs: what the codec chooser and the
// Huffman coder use to size a stream before writing it.
#include <cstdint>

#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
#include <immintrin.h>
#endif

#include "codec/codec_streams.h"

namespace kvlab::detail {

// Two loads and an add per code, four sums in flight. Not vectorized: GCC turns the loop into
// AVX-512 gathers, 2.5x slower than the scalar loop.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-tree-vectorize")
#endif
std::uint64_t sum_code_bits_scalar(const std::uint8_t* codes, std::size_t n,
                                   const std::uint8_t* cost) {
  std::uint64_t b0 = 0, b1 = 0, b2 = 0, b3 = 0;
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    b0 += cost[codes[i]];
    b1 += cost[codes[i + 1]];
    b2 += cost[codes[i + 2]];
    b3 += cost[codes[i + 3]];
  }
  for (; i < n; ++i) b0 += cost[codes[i]];
  return b0 + b1 + b2 + b3;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#if defined(__AVX512VBMI__) && defined(__AVX512BW__)
// 64 codes per step: vpermi2b looks up 128 table entries by the low 7 bits of each code, once
// in each half of the table; the code's top bit picks the half; vpsadbw adds the bytes up.
std::uint64_t sum_code_bits(const std::uint8_t* codes, std::size_t n, const std::uint8_t* cost) {
  const __m512i t0 = _mm512_loadu_si512(cost);
  const __m512i t1 = _mm512_loadu_si512(cost + 64);
  const __m512i t2 = _mm512_loadu_si512(cost + 128);
  const __m512i t3 = _mm512_loadu_si512(cost + 192);
  __m512i acc = _mm512_setzero_si512();
  for (std::size_t i = 0; i < n; i += 64) {
    const __mmask64 live = n - i >= 64 ? ~__mmask64{0} : (__mmask64{1} << (n - i)) - 1;
    const __m512i c = _mm512_maskz_loadu_epi8(live, codes + i);
    const __m512i low = _mm512_permutex2var_epi8(t0, c, t1);
    const __m512i high = _mm512_permutex2var_epi8(t2, c, t3);
    const __m512i bits =
        _mm512_maskz_mov_epi8(live, _mm512_mask_blend_epi8(_mm512_movepi8_mask(c), low, high));
    acc = _mm512_add_epi64(acc, _mm512_sad_epu8(bits, _mm512_setzero_si512()));
  }
  // Halves added by hand, through the zero-masked extract: GCC 12 builds the reduce and cast
  // intrinsics on an undefined register, which -Wuninitialized reports.
  const __m256i half = _mm256_add_epi64(_mm512_maskz_extracti64x4_epi64(0xf, acc, 0),
                                        _mm512_maskz_extracti64x4_epi64(0xf, acc, 1));
  const __m128i quarter =
      _mm_add_epi64(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
  return static_cast<std::uint64_t>(_mm_cvtsi128_si64(quarter)) +
         static_cast<std::uint64_t>(_mm_extract_epi64(quarter, 1));
}
#else
std::uint64_t sum_code_bits(const std::uint8_t* codes, std::size_t n, const std::uint8_t* cost) {
  return sum_code_bits_scalar(codes, n, cost);
}
#endif

}  // namespace kvlab::detail
