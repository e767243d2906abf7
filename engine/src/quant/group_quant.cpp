#include "quant/group_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

#include "codec/bitpack.h"
#include "core/row_loader.h"
#include "kvlab/engine/quant/group_rules.h"
#include "quant/avx512.h"

namespace kvlab::detail {

namespace {

constexpr int kValueChunkTokens = 64;

int value_groups_per_head(const GroupSpec& spec, int dim) {
  const int g = spec.value_group_channels > 0 ? std::min(spec.value_group_channels, dim) : dim;
  return (dim + g - 1) / g;
}

float step_for(const GroupSpec& spec, float range) {
  return round_param(rules::group_step(range, spec.rule == StepRule::Relative,
                                       static_cast<float>(spec.rel_scale), spec.bits),
                     spec.params);
}

// Codes for n elements sharing (min, inv_step): group_rules.h's rule, which the CUDA quantizer
// (kernels/src/quant_group.cu) shares.
inline std::uint8_t encode_one(float x, float mn, float inv, float max_code) {
  return rules::group_code(x, mn, inv, max_code);
}

// The least and the greatest of x[0, n), n >= 1. Sixteen lanes side by side, then across them:
// an element-wise loop the compiler vectorises (the `omp simd` min / max reduction it compiled to
// scalar code, 70% of KVComp's quantization of values). Exact, so the same as a plain walk.
inline std::pair<float, float> range_of(const float* x, int n) {
  constexpr int kLanes = 16;
  float lo[kLanes], hi[kLanes];
  for (int j = 0; j < kLanes; ++j) lo[j] = hi[j] = x[0];
  int i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      lo[j] = std::min(lo[j], x[i + j]);
      hi[j] = std::max(hi[j], x[i + j]);
    }
  }
  float l = x[0], h = x[0];
  for (; i < n; ++i) {
    l = std::min(l, x[i]);
    h = std::max(h, x[i]);
  }
  for (int j = 0; j < kLanes; ++j) {
    l = std::min(l, lo[j]);
    h = std::max(h, hi[j]);
  }
  return {l, h};
}

inline void encode_run(const float* x, std::size_t n, float mn, float inv, float max_code,
                       std::uint8_t* out) {
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) out[i] = encode_one(x[i], mn, inv, max_code);
}

}  // namespace

int value_group_width(const GroupSpec& spec, int dim) {
  return spec.value_group_channels > 0 ? std::min(spec.value_group_channels, dim) : dim;
}

rules::ParamDtype param_dtype(DType params) {
  switch (params) {
    case DType::F16:
      return rules::ParamDtype::F16;
    case DType::BF16:
      return rules::ParamDtype::BF16;
    case DType::F32:
      break;
  }
  return rules::ParamDtype::F32;
}

float round_param(float v, DType params) {
  // fp16 through _Float16: one F16C instruction where the CPU has it (a scalar call per
  // parameter cost KIVI's keys a third of their speed).
  return rules::round_param(v, param_dtype(params));
}

int largest_code(const GroupSpec& spec) {
  const int top = (1 << spec.bits) - 1;
  if (spec.rule == StepRule::Levels || !(spec.rel_scale > 0.0)) return top;
  // A rounded step may be up to half an ulp of its dtype smaller than rel_scale * range.
  const double shrink = spec.params == DType::F16    ? 0x1p-11
                        : spec.params == DType::BF16 ? 0x1p-8
                                                     : 0;
  const double bound = std::floor(1.0 / spec.rel_scale * (1.0 + shrink) + 0.5 + 1e-3);
  return bound >= top ? top : static_cast<int>(bound);
}

std::size_t group_unit_count(const GroupSpec& spec, TensorRole role, int tokens, int heads,
                             int dim) {
  if (role == TensorRole::Key) {
    const std::size_t groups =
        (static_cast<std::size_t>(tokens) + spec.key_group_tokens - 1) / spec.key_group_tokens;
    return groups * static_cast<std::size_t>(heads) * dim;
  }
  return static_cast<std::size_t>(tokens) * heads * value_groups_per_head(spec, dim);
}

void quantize_groups(const TensorView& x, TensorRole role, const GroupSpec& spec,
                     std::uint8_t* codes, std::size_t first_code, float* steps, float* mins) {
  const int tokens = x.tokens();
  const int hd = x.heads() * x.dim();
  const float max_code = static_cast<float>(largest_code(spec));
  if (role == TensorRole::Key) {
    const int g = spec.key_group_tokens;
    std::vector<float> buf(static_cast<std::size_t>(g) * hd);
    std::vector<std::uint8_t> cbuf(buf.size());
    std::vector<float> inv(hd), mx(hd);
    for (int t0 = 0, group = 0; t0 < tokens; t0 += g, ++group) {
      const int rows = std::min(g, tokens - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      float* mn = mins + static_cast<std::size_t>(group) * hd;
      float* step = steps + static_cast<std::size_t>(group) * hd;
      std::copy(buf.begin(), buf.begin() + hd, mx.begin());
      std::copy(buf.begin(), buf.begin() + hd, mn);
      for (int r = 1; r < rows; ++r) {
        const float* row = buf.data() + static_cast<std::size_t>(r) * hd;
#pragma omp simd
        for (int j = 0; j < hd; ++j) {
          mn[j] = std::min(mn[j], row[j]);
          mx[j] = std::max(mx[j], row[j]);
        }
      }
      for (int j = 0; j < hd; ++j) {
        mn[j] = rules::unsigned_zero(mn[j]);
        mx[j] = rules::unsigned_zero(mx[j]);
        step[j] = step_for(spec, mx[j] - mn[j]);
        mn[j] = round_param(mn[j], spec.params);
        inv[j] = rules::group_inverse(step[j]);
      }
      for (int r = 0; r < rows; ++r) {
        const float* row = buf.data() + static_cast<std::size_t>(r) * hd;
        std::uint8_t* out = cbuf.data() + static_cast<std::size_t>(r) * hd;
#pragma omp simd
        for (int j = 0; j < hd; ++j) out[j] = encode_one(row[j], mn[j], inv[j], max_code);
      }
      pack_codes(cbuf.data(), static_cast<std::size_t>(rows) * hd, spec.bits, codes,
                 first_code + static_cast<std::size_t>(t0) * hd);
    }
    return;
  }
  const int dim = x.dim();
  const int width = value_group_width(spec, dim);
  const int per_head = value_groups_per_head(spec, dim);
  const int units_per_token = x.heads() * per_head;
  std::vector<float> buf(static_cast<std::size_t>(kValueChunkTokens) * hd);
  std::vector<std::uint8_t> cbuf(buf.size());
  for (int t0 = 0; t0 < tokens; t0 += kValueChunkTokens) {
    const int rows = std::min(kValueChunkTokens, tokens - t0);
    load_rows(x, t0, t0 + rows, buf.data());
    std::size_t unit = static_cast<std::size_t>(t0) * units_per_token;
    for (int r = 0; r < rows; ++r) {
      for (int h = 0; h < x.heads(); ++h) {
        const std::size_t base =
            static_cast<std::size_t>(r) * hd + static_cast<std::size_t>(h) * dim;
        for (int c0 = 0; c0 < dim; c0 += width, ++unit) {
          const int n = std::min(width, dim - c0);
          const float* seg = buf.data() + base + c0;
          auto [lo, hi] = range_of(seg, n);
          lo = rules::unsigned_zero(lo);
          hi = rules::unsigned_zero(hi);
          const float step = step_for(spec, hi - lo);
          lo = round_param(lo, spec.params);
          steps[unit] = step;
          mins[unit] = lo;
          encode_run(seg, static_cast<std::size_t>(n), lo, rules::group_inverse(step), max_code,
                     cbuf.data() + base + c0);
        }
      }
    }
    pack_codes(cbuf.data(), static_cast<std::size_t>(rows) * hd, spec.bits, codes,
               first_code + static_cast<std::size_t>(t0) * hd);
  }
}

namespace {

// Codes [0, n) of whole bytes at p (n a multiple of 8 / Bits).
template <int Bits, bool PerChannel>
void decode_bytes(const std::uint8_t* p, std::size_t n, const float* mn, const float* step,
                  float* out) {
  constexpr std::size_t kPer = 8 / Bits;
  constexpr unsigned kMask = (1u << Bits) - 1;
  std::size_t b = 0;
#if KVLAB_QUANT_AVX512
  if constexpr (Bits == 2 || Bits == 4) {
    // 16 codes a time: lane i takes bits Bits * i of the 16 codes' 4 (2-bit) or 8 (4-bit)
    // bytes, from the 32-bit word that holds them.
    constexpr std::size_t kBytes = 16 / kPer;
    __m512i shifts;
    if constexpr (Bits == 4) {
      shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    } else {
      shifts = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    }
    const __m512i mask = _mm512_set1_epi32(static_cast<int>(kMask));
    for (; (b + kBytes) * kPer <= n; b += kBytes) {
      __m512i words;
      if constexpr (Bits == 4) {
        std::uint32_t w[2];
        std::memcpy(w, p + b, 8);
        words =
            _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi32(static_cast<int>(w[0]))),
                               _mm256_set1_epi32(static_cast<int>(w[1])), 1);
      } else {
        std::uint32_t w;
        std::memcpy(&w, p + b, 4);
        words = _mm512_set1_epi32(static_cast<int>(w));
      }
      const __m512 c = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(words, shifts), mask));
      const std::size_t i = b * kPer;
      const __m512 m = PerChannel ? _mm512_loadu_ps(mn + i) : _mm512_set1_ps(mn[0]);
      const __m512 s = PerChannel ? _mm512_loadu_ps(step + i) : _mm512_set1_ps(step[0]);
      _mm512_storeu_ps(out + i, _mm512_fmadd_ps(c, s, m));
    }
  }
#endif
  for (; b < n / kPer; ++b) {
    const unsigned byte = p[b];
    for (std::size_t k = 0; k < kPer; ++k) {
      const std::size_t i = b * kPer + k;
      const float c = static_cast<float>((byte >> (Bits * k)) & kMask);
      out[i] = PerChannel ? std::fma(c, step[i], mn[i]) : std::fma(c, step[0], mn[0]);
    }
  }
}

template <bool PerChannel>
void decode_run(const std::uint8_t* packed, std::size_t first, std::size_t n, int bits,
                const float* mn, const float* step, float* out) {
  const unsigned mask = (1u << bits) - 1;
  const std::size_t per = 8 / static_cast<std::size_t>(bits);
  const auto one = [&](std::size_t i) {
    const std::size_t k = (first + i) * bits;  // the code's first bit
    const float c = static_cast<float>((packed[k / 8] >> (k % 8)) & mask);
    out[i] = PerChannel ? std::fma(c, step[i], mn[i]) : std::fma(c, step[0], mn[0]);
  };
  std::size_t i = 0;
  for (; i < n && (first + i) % per != 0; ++i) one(i);  // up to the next byte boundary
  const std::size_t body = (n - i) / per * per;
  if (body > 0) {
    const std::uint8_t* p = packed + (first + i) / per;
    const float* m = PerChannel ? mn + i : mn;
    const float* s = PerChannel ? step + i : step;
    switch (bits) {
      case 8:
        decode_bytes<8, PerChannel>(p, body, m, s, out + i);
        break;
      case 4:
        decode_bytes<4, PerChannel>(p, body, m, s, out + i);
        break;
      case 2:
        decode_bytes<2, PerChannel>(p, body, m, s, out + i);
        break;
      default:
        decode_bytes<1, PerChannel>(p, body, m, s, out + i);
        break;
    }
    i += body;
  }
  for (; i < n; ++i) one(i);
}

}  // namespace

void group_decode_row(const std::uint8_t* packed, std::size_t first, std::size_t n, int bits,
                      const float* mn, const float* step, bool per_channel, float* out) {
  if (per_channel) {
    decode_run<true>(packed, first, n, bits, mn, step, out);
  } else {
    decode_run<false>(packed, first, n, bits, mn, step, out);
  }
}

void dequantize_groups(const std::uint8_t* codes, std::size_t first_code, const float* steps,
                       const float* mins, TensorRole role, const GroupSpec& spec, int heads,
                       int dim, int first, int last, float* out) {
  const auto hd = static_cast<std::size_t>(heads) * static_cast<std::size_t>(dim);
  // Values: units in token order, value_groups_per_head() of them for each head of a token.
  const int width = value_group_width(spec, dim);
  const auto units_per_token =
      static_cast<std::size_t>(heads) * static_cast<std::size_t>(value_groups_per_head(spec, dim));
  for (int t = first; t < last; ++t) {
    const std::size_t at = first_code + static_cast<std::size_t>(t) * hd;  // the row's first code
    float* o = out + static_cast<std::size_t>(t - first) * hd;
    if (role == TensorRole::Key) {  // a unit per channel and group of g tokens
      const std::size_t unit = static_cast<std::size_t>(t / spec.key_group_tokens) * hd;
      group_decode_row(codes, at, hd, spec.bits, mins + unit, steps + unit, true, o);
      continue;
    }
    std::size_t unit = static_cast<std::size_t>(t) * units_per_token;
    for (int h = 0; h < heads; ++h) {
      for (int c0 = 0; c0 < dim; c0 += width, ++unit) {
        const std::size_t base = static_cast<std::size_t>(h) * dim + c0;
        const auto n = static_cast<std::size_t>(std::min(width, dim - c0));
        group_decode_row(codes, at + base, n, spec.bits, mins + unit, steps + unit, false,
                         o + base);
      }
    }
  }
}

}  // namespace kvlab::detail
