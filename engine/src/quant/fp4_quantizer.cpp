// NVFP4 and MXFP4 KV caches: E2M1 codes with block scales (formulas and layouts in
// fp4_quantizer.h, with the engines' functions they follow).
#include "quant/fp4_quantizer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "core/row_loader.h"
#include "kvlab/engine/quant/fp8.h"
#include "quant/fp8_impl.h"

namespace kvlab::detail {

namespace {

constexpr std::size_t kFp4ChunkValues = 8192;

constexpr std::array<float, 8> kE2m1Magnitudes = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};

}  // namespace

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c)
      t[c] = fp8_to_float(static_cast<std::uint8_t>(c), Fp8Format::E4M3);
    return t;
  }();
  return table;
}

namespace {

// llama.cpp's kvalues_mxfp4 (ggml-common.h): E2M1 magnitudes doubled, then their negatives.
constexpr std::array<float, 16> kMxfp4Values = {0, 1,  2,  3,  4,  6,  8,  12,
                                                0, -1, -2, -3, -4, -6, -8, -12};

inline void pack_nibbles(const std::uint8_t* c, int n, std::uint8_t* out) {
  for (int j = 0; j < n / 2; ++j) {
    out[j] = static_cast<std::uint8_t>(c[2 * j] | (c[2 * j + 1] << 4));
  }
}

// Rows of a view as contiguous float, chunk by chunk: f(first_row, floats, count) where rows are
// [token][head] in order and count = rows * dim. Chunks of about kFp4ChunkValues stay in cache
// between a quantizer's passes; contiguous, aligned float32 is read where it lies.
template <class F>
void for_each_chunk(const TensorView& x, std::vector<float>& buf, F&& f) {
  const std::size_t hd = static_cast<std::size_t>(x.heads()) * x.dim();
  if (x.elements() == 0) return;
  const int rows = static_cast<int>(std::max<std::size_t>(1, kFp4ChunkValues / hd));
  const bool in_place = x.dtype() == DType::F32 && x.contiguous() &&
                        reinterpret_cast<std::uintptr_t>(x.row_ptr(0, 0)) % alignof(float) == 0;
  if (!in_place) buf.resize(rows * hd);
  for (int t0 = 0; t0 < x.tokens(); t0 += rows) {
    const int t1 = std::min(t0 + rows, x.tokens());
    const float* v = buf.data();
    if (in_place) {
      v = reinterpret_cast<const float*>(x.row_ptr(t0, 0));
    } else {
      load_rows(x, t0, t1, buf.data());
    }
    f(static_cast<std::size_t>(t0) * hd, v, static_cast<std::size_t>(t1 - t0) * hd);
  }
}

// max |x| over the tensor. fp16 magnitudes order as their bit patterns, so fp16 rows need no
// conversion: the largest pattern below NaN (0x7c00 is infinity) is the amax.
float tensor_amax(const TensorView& x, std::vector<float>& buf) {
  if (x.dtype() == DType::F16) {
    std::uint32_t top = 0;
    for (int t = 0; t < x.tokens(); ++t) {
      for (int h = 0; h < x.heads(); ++h) {
        const auto* in = reinterpret_cast<const std::uint16_t*>(x.row_ptr(t, h));
        std::uint32_t m = top;
#pragma omp simd reduction(max : m)
        for (int i = 0; i < x.dim(); ++i) {
          const std::uint32_t a = in[i] & 0x7fffu;
          m = std::max(m, a <= 0x7c00u ? a : 0u);
        }
        top = m;
      }
    }
    return fp16_to_float(static_cast<std::uint16_t>(top));
  }
  float amax = 0.f;
  for_each_chunk(x, buf, [&](std::size_t, const float* v, std::size_t count) {
    float m = amax;
#pragma omp simd reduction(max : m)
    for (std::size_t i = 0; i < count; ++i) m = std::max(m, std::fabs(v[i]));
    amax = m;
  });
  return amax;
}

// max |x| over a block, NaN left out (as the scalar loops' std::max(amax, |x|) leaves it out).
template <int N>
inline float block_amax(const float* x) {
#if KVLAB_QUANT_AVX512
  // |x| as bit patterns, NaN as 0: their unsigned maximum is the float maximum.
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff);
  const __m512i inf = _mm512_set1_epi32(0x7f800000);
  __m512i m = _mm512_setzero_si512();
  for (int i = 0; i < N; i += 16) {
    const __m512i a = _mm512_and_si512(_mm512_castps_si512(_mm512_loadu_ps(x + i)), abs_mask);
    m = _mm512_mask_max_epu32(m, _mm512_cmple_epu32_mask(a, inf), m, a);
  }
  return std::bit_cast<float>(_mm512_reduce_max_epu32(m));
#else
  float amax = 0.f;
#pragma omp simd reduction(max : amax)
  for (int i = 0; i < N; ++i) amax = std::max(amax, std::fabs(x[i]));
  return amax;
#endif
}

#if KVLAB_QUANT_AVX512
// e2m1_encode of 16 floats, one code a 32-bit lane: the sign bit, then the count of midpoints
// below |y| (ordered compares: NaN counts none).
inline __m512i e2m1_encode16(__m512 y) {
  const __m512i u = _mm512_castps_si512(y);
  const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)));
  const __m512i one = _mm512_set1_epi32(1);
  __m512i c = _mm512_and_si512(_mm512_srli_epi32(u, 28), _mm512_set1_epi32(8));
  c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.25f), _CMP_GT_OQ), c, one);
  c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(0.75f), _CMP_GE_OQ), c, one);
  c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.25f), _CMP_GT_OQ), c, one);
  c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(1.75f), _CMP_GE_OQ), c, one);
  c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.5f), _CMP_GT_OQ), c, one);
  c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(3.5f), _CMP_GE_OQ), c, one);
  c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(5.f), _CMP_GT_OQ), c, one);
  return c;
}

// llama.cpp's index of 16 floats given the block's midpoints t (see mxfp4_quantize_row), one a
// 32-bit lane.
inline __m512i mxfp4_index16(__m512 x, const std::array<float, 7>& t) {
  const __m512 a =
      _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff)));
  const __m512i one = _mm512_set1_epi32(1);
  const __mmask16 nonzero = _mm512_cmp_ps_mask(a, _mm512_set1_ps(t[0]), _CMP_GT_OQ);
  __m512i c = _mm512_maskz_mov_epi32(nonzero, one);
  for (int k = 1; k < 7; ++k) {
    c = _mm512_mask_add_epi32(c, _mm512_cmp_ps_mask(a, _mm512_set1_ps(t[k]), _CMP_GT_OQ), c, one);
  }
  const __mmask16 negative = _mm512_mask_cmp_ps_mask(nonzero, x, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_or_epi32(c, negative, c, _mm512_set1_epi32(8));
}
#endif

// mxfp4_exponent without log2 where the exponent field gives it: amax = 2^k (1 + f) with
// f < 1 - 2^-11 is at least 2^-11 below 2^(k + 1) in ratio, so log2 is below k + 1 by more than
// 3e-4, far more than log2f's error at |k + 1| <= 128 (ulp 2^-16), and floor(log2f) is k.
// The rest (zero, subnormal, the smallest exponents, infinity, f near 1) go to mxfp4_exponent.
inline std::uint8_t mxfp4_exponent_fast(float amax) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(amax);
  const std::uint32_t biased = bits >> 23;
  if (biased >= 3 && biased <= 254 && (bits & 0x7fffffu) < 0x7ff000u) {
    return static_cast<std::uint8_t>(biased - 2);
  }
  return mxfp4_exponent(amax);
}

Status check_block(const TensorView& x, TensorRole role, const char* method, int block) {
  if (x.dim() % block != 0) {
    return make_error(
        fmt::format("{}: head_dim {} of the {} tensor is not a multiple of the {} "
                    "block size {}",
                    method, x.dim(), role_name(role), method, block));
  }
  return Ok{};
}

QuantizedTensor empty_like(const TensorView& x, TensorRole role) {
  return QuantizedTensor{role, x.tokens(), x.heads(), x.dim(), {}, {}, {}, {}, {}};
}

class Nvfp4Quantizer final : public Quantizer {
 public:
  std::string name() const override { return "nvfp4 (e2m1, e4m3 scale per 16, fp32 global)"; }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    KVLAB_TRY(check_block(x, role, "nvfp4", kNvfp4BlockSize));
    QuantizedTensor q = empty_like(x, role);
    const std::size_t n = x.elements();
    std::vector<float> buf;
    const float amax = tensor_amax(x, buf);
    const float global = nvfp4_global_scale(amax);
    q.codes.resize(n / 2 + n / kNvfp4BlockSize);
    std::uint8_t* nibbles = q.codes.data();
    std::uint8_t* scales = q.codes.data() + n / 2;
    for_each_chunk(x, buf, [&](std::size_t first, const float* v, std::size_t count) {
      nvfp4_quantize_row(v, static_cast<int>(count), global, nibbles + first / 2,
                         scales + first / kNvfp4BlockSize);
    });
    q.params = {global};
    q.bytes.codes = n / 2;
    q.bytes.scales = n / kNvfp4BlockSize + sizeof(float);
    q.bytes.metadata = kTensorHeaderBytes;
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out) const override {
    const std::size_t n = static_cast<std::size_t>(q.tokens) * q.heads * q.dim;
    nvfp4_dequantize_row(q.codes.data(), q.codes.data() + n / 2, static_cast<int>(n), q.params[0],
                         out.data());
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    const std::size_t n = static_cast<std::size_t>(q.tokens) * q.heads * q.dim;
    CodeHistogram codes{"e2m1", 4, std::vector<std::uint64_t>(16, 0)};
    CodeHistogram scales{"nvfp4 block scales (e4m3)", 8, std::vector<std::uint64_t>(256, 0)};
    for (std::size_t i = 0; i < n / 2; ++i) {
      ++codes.counts[q.codes[i] & 0xf];
      ++codes.counts[q.codes[i] >> 4];
    }
    for (std::size_t i = n / 2; i < q.codes.size(); ++i) ++scales.counts[q.codes[i]];
    return {codes, scales};
  }
};

class Mxfp4Quantizer final : public Quantizer {
 public:
  std::string name() const override { return "mxfp4 (e2m1, e8m0 exponent per 32, llama.cpp)"; }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    KVLAB_TRY(check_block(x, role, "mxfp4", kMxfp4BlockSize));
    QuantizedTensor q = empty_like(x, role);
    const std::size_t blocks = x.elements() / kMxfp4BlockSize;
    q.codes.resize(blocks * kMxfp4BlockBytes);
    std::vector<float> buf;
    for_each_chunk(x, buf, [&](std::size_t first, const float* v, std::size_t count) {
      mxfp4_quantize_row(v, static_cast<int>(count),
                         q.codes.data() + first / kMxfp4BlockSize * kMxfp4BlockBytes);
    });
    q.bytes.codes = blocks * (kMxfp4BlockSize / 2);
    q.bytes.scales = blocks;
    q.bytes.metadata = kTensorHeaderBytes;
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out) const override {
    const std::size_t blocks = q.codes.size() / kMxfp4BlockBytes;
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::uint8_t* block = q.codes.data() + b * kMxfp4BlockBytes;
      const float d = e8m0_to_float_half(block[0]);
      float* o = out.data() + b * kMxfp4BlockSize;
      for (int j = 0; j < kMxfp4BlockSize / 2; ++j) {
        o[j] = kMxfp4Values[block[1 + j] & 0xf] * d;
        o[j + kMxfp4BlockSize / 2] = kMxfp4Values[block[1 + j] >> 4] * d;
      }
    }
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    CodeHistogram codes{"e2m1 (llama.cpp index)", 4, std::vector<std::uint64_t>(16, 0)};
    CodeHistogram exps{"mxfp4 exponents (e8m0)", 8, std::vector<std::uint64_t>(256, 0)};
    for (std::size_t b = 0; b + kMxfp4BlockBytes <= q.codes.size(); b += kMxfp4BlockBytes) {
      ++exps.counts[q.codes[b]];
      for (int j = 1; j < kMxfp4BlockBytes; ++j) {
        ++codes.counts[q.codes[b + j] & 0xf];
        ++codes.counts[q.codes[b + j] >> 4];
      }
    }
    return {codes, exps};
  }
};

}  // namespace

float e2m1_to_float(std::uint8_t code) {
  const float m = kE2m1Magnitudes[code & 0x7u];
  return (code & 0x8u) ? -m : m;
}

std::uint8_t float_to_e2m1(float x) {
  return e2m1_encode(x);
}

void nvfp4_dequantize_row(const std::uint8_t* nibbles, const std::uint8_t* block_scales, int n,
                          float global_scale, float* out) {
  const auto& e4m3 = e4m3_table();
  std::array<float, 16> values{};
  for (int c = 0; c < 16; ++c) values[c] = e2m1_to_float(static_cast<std::uint8_t>(c));
#if KVLAB_QUANT_AVX512
  const __m512 table = _mm512_loadu_ps(values.data());
  const __m128i low = _mm_set1_epi8(0x0f);
#endif
  for (int b = 0; b < n / kNvfp4BlockSize; ++b) {
    const float s = e4m3[block_scales[b]] / global_scale;
    const std::uint8_t* in = nibbles + b * (kNvfp4BlockSize / 2);
    float* o = out + static_cast<std::size_t>(b) * kNvfp4BlockSize;
#if KVLAB_QUANT_AVX512
    // The block's 8 bytes as 16 nibbles in order (low, then high, of each byte), each a lane's
    // index into the 16 values: one permute looks all 16 up.
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in));
    const __m128i lo = _mm_and_si128(bytes, low);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), low);
    const __m512i codes = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));
    _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_permutexvar_ps(codes, table), _mm512_set1_ps(s)));
#else
    for (int j = 0; j < kNvfp4BlockSize / 2; ++j) {
      o[2 * j] = values[in[j] & 0xf] * s;
      o[2 * j + 1] = values[in[j] >> 4] * s;
    }
#endif
  }
}

void nvfp4_quantize_row(const float* x, int n, float global_scale, std::uint8_t* nibbles,
                        std::uint8_t* block_scales) {
  // TensorRT-LLM cvt_warp_fp16_to_fp4 (cpp/tensorrt_llm/kernels/quantization.cuh), per block,
  // in three passes over groups of blocks: the block amaxes, then their scales (one vectorised
  // loop over the blocks), then the codes.
  const auto& e4m3 = e4m3_table();
  const float inv_global = 1.f / global_scale;
  constexpr int kGroup = 16;
  const int blocks = n / kNvfp4BlockSize;
  for (int g = 0; g < blocks; g += kGroup) {
    const int nb = std::min(kGroup, blocks - g);
    const float* xg = x + static_cast<std::ptrdiff_t>(g) * kNvfp4BlockSize;
    alignas(64) float amax[kGroup];
    alignas(64) float out_scale[kGroup];
    for (int b = 0; b < nb; ++b) amax[b] = block_amax<kNvfp4BlockSize>(xg + b * kNvfp4BlockSize);
#pragma omp simd
    for (int b = 0; b < nb; ++b) {
      const std::uint8_t sf8 = fp8_encode<E4M3>(nvfp4_block_scale(global_scale, amax[b]));
      out_scale[b] = nvfp4_value_factor(e4m3[sf8], inv_global);
      block_scales[g + b] = sf8;
    }
    std::uint8_t* out = nibbles + static_cast<std::ptrdiff_t>(g) * (kNvfp4BlockSize / 2);
    for (int b = 0; b < nb; ++b) {
      const float* xb = xg + b * kNvfp4BlockSize;
      std::uint8_t* ob = out + b * (kNvfp4BlockSize / 2);
      // A NaN scale (sf = 0 * inf: global 0 with an infinite block amax, or global inf with a
      // zero one) makes every x * out NaN, and the code of a NaN is its sign with magnitude 0.
      // Which NaN a product of two NaNs gives is not IEEE's to say: x86 returns the first
      // operand, and the compiler orders a commutative multiply as it likes (the AVX-512 loop
      // got the scale's NaN from operand folding, the SSE one x's). The rule is the scale's NaN
      // for every element, x's own NaN included, written out here so no build depends on that.
      if (std::isnan(out_scale[b])) {
        std::memset(ob, std::signbit(out_scale[b]) ? 0x88 : 0x00, kNvfp4BlockSize / 2);
        continue;
      }
#if KVLAB_QUANT_AVX512
      const __m512 y = _mm512_mul_ps(_mm512_loadu_ps(xb), _mm512_set1_ps(out_scale[b]));
      const __m512i c = e2m1_encode16(y);
      // Lane pairs (2j, 2j + 1) as one 64-bit lane: its low byte becomes c[2j] | c[2j + 1] << 4.
      const __m512i pairs = _mm512_or_si512(c, _mm512_srli_epi64(c, 28));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(ob), _mm512_cvtepi64_epi8(pairs));
#else
      std::uint8_t c[kNvfp4BlockSize];
#pragma omp simd
      for (int i = 0; i < kNvfp4BlockSize; ++i) c[i] = e2m1_encode(xb[i] * out_scale[b]);
      pack_nibbles(c, kNvfp4BlockSize, ob);
#endif
    }
  }
}

std::uint8_t mxfp4_exponent(float amax) {
  if (!(amax > 0.f)) return 0;
  // As quantize_row_mxfp4_ref: floorf(log2f(amax)) - 2 + 127, cast to uint8. That cast is of a
  // value below 0 only where amax < 2^-125 (never for fp16 data); it wraps here as it does on x86.
  const float e = std::floor(std::log2(amax)) - 2.f + 127.f;
  return static_cast<std::uint8_t>(static_cast<int>(std::clamp(e, -256.f, 255.f)));
}

void mxfp4_quantize_row(const float* x, int n, std::uint8_t* blocks) {
  // llama.cpp quantize_row_mxfp4_ref. Its best_index_mxfp4 scans the 16 kvalues for the least
  // |kvalue * d - x| (first wins ties); with d a power of two every difference with a neighbour
  // is exact, so that is the same as comparing |x| with the midpoints between neighbouring
  // magnitudes (0.5, 1.5, 2.5, 3.5, 5, 7, 10 times d), ties to the smaller magnitude, and a value
  // that rounds to zero takes index 0 (+0) whatever its sign.
  //
  // OCP MX v1.0 (section 6.3) picks the same shared exponent, floor(log2(amax)) - emax_elem with
  // emax_elem = 2 (E8M0 = that + 127), but rounds each element to nearest with ties to even,
  // keeps the sign of values that round to zero, clamps the exponent at -127 and gives the
  // block NaN (0xFF) when amax is NaN/Inf; llama.cpp rounds ties toward zero magnitude, writes
  // e = 0 for an all-zero block, and its float-to-uint8 cast wraps for amax < 2^-125.
  for (int b = 0; b < n / kMxfp4BlockSize; ++b) {
    const float* xb = x + static_cast<std::ptrdiff_t>(b) * kMxfp4BlockSize;
    const float amax = block_amax<kMxfp4BlockSize>(xb);
    const std::uint8_t e = mxfp4_exponent_fast(amax);
    const float d = e8m0_to_float_half(e);
    std::array<float, 7> t{};
    for (int k = 0; k < 7; ++k) t[k] = mxfp4_midpoint(k) * d;
    std::uint8_t* out = blocks + static_cast<std::ptrdiff_t>(b) * kMxfp4BlockBytes;
    out[0] = e;
#if KVLAB_QUANT_AVX512
    const __m512i lo = mxfp4_index16(_mm512_loadu_ps(xb), t);
    const __m512i hi = mxfp4_index16(_mm512_loadu_ps(xb + kMxfp4BlockSize / 2), t);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 1),
                     _mm512_cvtepi32_epi8(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4))));
#else
    std::uint8_t c[kMxfp4BlockSize];
#pragma omp simd
    for (int i = 0; i < kMxfp4BlockSize; ++i) c[i] = mxfp4_code(xb[i], t.data());
    for (int j = 0; j < kMxfp4BlockSize / 2; ++j) {
      out[1 + j] = static_cast<std::uint8_t>(c[j] | (c[j + kMxfp4BlockSize / 2] << 4));
    }
#endif
  }
}

std::unique_ptr<Quantizer> make_nvfp4_quantizer() {
  return std::make_unique<Nvfp4Quantizer>();
}

std::unique_ptr<Quantizer> make_mxfp4_quantizer() {
  return std::make_unique<Mxfp4Quantizer>();
}

}  // namespace kvlab::detail
