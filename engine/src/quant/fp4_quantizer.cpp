// NVFP4 and MXFP4 KV caches: E2M1 codes with block scales (formulas and layouts in
// fp4_quantizer.h, with the engines' functions they follow).
#include "quant/fp4_quantizer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/row_loader.h"
#include "kvlab/engine/quant/fp8.h"
#include "quant/fp8_impl.h"

namespace kvlab::detail {

namespace {

constexpr int kChunkTokens = 64;
constexpr float kE2m1Max = 6.f;
constexpr float kE4m3Max = 448.f;
// The kernel multiplies by reciprocal(6.0f): the float nearest 1/6.
constexpr float kInvE2m1Max = 1.f / kE2m1Max;

constexpr std::array<float, 8> kE2m1Magnitudes = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};

// Round to nearest, ties to the even code: each midpoint between neighbours a < b goes to the one
// whose code is even, so the comparison is >= where the upper neighbour's code is even (0.75 ->
// 1.0, 1.75 -> 2.0, 3.5 -> 4.0) and > otherwise. Beyond 5 everything is 6 (satfinite).
inline std::uint8_t e2m1_magnitude_rne(float a) {
  return static_cast<std::uint8_t>((a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) +
                                   (a > 2.5f) + (a >= 3.5f) + (a > 5.f));
}

inline std::uint8_t e2m1_encode(float x) {
  const std::uint32_t sign = (std::bit_cast<std::uint32_t>(x) >> 28) & 0x8u;
  return static_cast<std::uint8_t>(sign | e2m1_magnitude_rne(std::fabs(x)));
}

const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c)
      t[c] = fp8_to_float(static_cast<std::uint8_t>(c), Fp8Format::E4M3);
    return t;
  }();
  return table;
}

// llama.cpp's kvalues_mxfp4 (ggml-common.h): E2M1 magnitudes doubled, then their negatives.
constexpr std::array<float, 16> kMxfp4Values = {0, 1,  2,  3,  4,  6,  8,  12,
                                                0, -1, -2, -3, -4, -6, -8, -12};

inline void pack_nibbles(const std::uint8_t* c, int n, std::uint8_t* out) {
  for (int j = 0; j < n / 2; ++j) {
    out[j] = static_cast<std::uint8_t>(c[2 * j] | (c[2 * j + 1] << 4));
  }
}

// Rows of a view as contiguous float, chunk by chunk: f(first_row, floats, count) where rows are
// [token][head] in order and count = rows * dim.
template <class F>
void for_each_chunk(const TensorView& x, std::vector<float>& buf, F&& f) {
  const std::size_t hd = static_cast<std::size_t>(x.heads()) * x.dim();
  buf.resize(kChunkTokens * hd);
  for (int t0 = 0; t0 < x.tokens(); t0 += kChunkTokens) {
    const int rows = std::min(kChunkTokens, x.tokens() - t0);
    load_rows(x, t0, t0 + rows, buf.data());
    f(static_cast<std::size_t>(t0) * hd, buf.data(), rows * hd);
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
    const std::uint8_t* nibbles = q.codes.data();
    const std::uint8_t* scales = q.codes.data() + n / 2;
    const float global = q.params[0];
    const auto& e4m3 = e4m3_table();
    std::array<float, 16> values{};
    for (int c = 0; c < 16; ++c) values[c] = e2m1_to_float(static_cast<std::uint8_t>(c));
    for (std::size_t b = 0; b < n / kNvfp4BlockSize; ++b) {
      // vLLM's reference dequantization: e2m1 * (float(sf8) / global).
      const float s = e4m3[scales[b]] / global;
      const std::uint8_t* in = nibbles + b * (kNvfp4BlockSize / 2);
      float* o = out.data() + b * kNvfp4BlockSize;
      for (int j = 0; j < kNvfp4BlockSize / 2; ++j) {
        o[2 * j] = values[in[j] & 0xf] * s;
        o[2 * j + 1] = values[in[j] >> 4] * s;
      }
    }
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

float nvfp4_global_scale(float amax) {
  // vLLM / ModelOpt: (FLOAT8_E4M3_MAX * FLOAT4_E2M1_MAX) / amax, in fp32.
  return amax > 0.f ? (kE4m3Max * kE2m1Max) / amax : 1.f;
}

void nvfp4_quantize_row(const float* x, int n, float global_scale, std::uint8_t* nibbles,
                        std::uint8_t* block_scales) {
  // TensorRT-LLM cvt_warp_fp16_to_fp4 (cpp/tensorrt_llm/kernels/quantization.cuh), per block.
  const auto& e4m3 = e4m3_table();
  const float inv_global = 1.f / global_scale;
  for (int b = 0; b < n / kNvfp4BlockSize; ++b) {
    const float* xb = x + b * kNvfp4BlockSize;
    float amax = 0.f;
#pragma omp simd reduction(max : amax)
    for (int i = 0; i < kNvfp4BlockSize; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float sf = global_scale * (amax * kInvE2m1Max);
    const std::uint8_t sf8 = fp8_encode<E4M3>(sf);
    const float narrow = e4m3[sf8];
    const float out_scale = narrow != 0.f ? 1.f / (narrow * inv_global) : 0.f;
    std::uint8_t c[kNvfp4BlockSize];
#pragma omp simd
    for (int i = 0; i < kNvfp4BlockSize; ++i) c[i] = e2m1_encode(xb[i] * out_scale);
    pack_nibbles(c, kNvfp4BlockSize, nibbles + b * (kNvfp4BlockSize / 2));
    block_scales[b] = sf8;
  }
}

std::uint8_t mxfp4_exponent(float amax) {
  if (!(amax > 0.f)) return 0;
  // As quantize_row_mxfp4_ref: floorf(log2f(amax)) - 2 + 127, cast to uint8. That cast is of a
  // value below 0 only where amax < 2^-125 (never for fp16 data); it wraps here as it does on x86.
  const float e = std::floor(std::log2(amax)) - 2.f + 127.f;
  return static_cast<std::uint8_t>(static_cast<int>(std::clamp(e, -256.f, 255.f)));
}

float e8m0_to_float_half(std::uint8_t e) {
  // GGML_E8M0_TO_FP32_HALF (ggml-impl.h): 2^(e - 128), as a subnormal below e = 2.
  const std::uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<std::uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
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
  constexpr std::array<float, 7> kMid = {0.5f, 1.5f, 2.5f, 3.5f, 5.f, 7.f, 10.f};
  for (int b = 0; b < n / kMxfp4BlockSize; ++b) {
    const float* xb = x + b * kMxfp4BlockSize;
    float amax = 0.f;
#pragma omp simd reduction(max : amax)
    for (int i = 0; i < kMxfp4BlockSize; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const std::uint8_t e = mxfp4_exponent(amax);
    const float d = e8m0_to_float_half(e);
    std::array<float, 7> t{};
    for (int k = 0; k < 7; ++k) t[k] = kMid[k] * d;
    std::uint8_t c[kMxfp4BlockSize];
#pragma omp simd
    for (int i = 0; i < kMxfp4BlockSize; ++i) {
      const float a = std::fabs(xb[i]);
      const int m =
          (a > t[0]) + (a > t[1]) + (a > t[2]) + (a > t[3]) + (a > t[4]) + (a > t[5]) + (a > t[6]);
      c[i] = static_cast<std::uint8_t>(m | ((xb[i] < 0.f && m > 0) ? 8 : 0));
    }
    std::uint8_t* out = blocks + b * kMxfp4BlockBytes;
    out[0] = e;
    for (int j = 0; j < kMxfp4BlockSize / 2; ++j) {
      out[1 + j] = static_cast<std::uint8_t>(c[j] | (c[j + kMxfp4BlockSize / 2] << 4));
    }
  }
}

std::unique_ptr<Quantizer> make_nvfp4_quantizer() {
  return std::make_unique<Nvfp4Quantizer>();
}

std::unique_ptr<Quantizer> make_mxfp4_quantizer() {
  return std::make_unique<Mxfp4Quantizer>();
}

}  // namespace kvlab::detail
