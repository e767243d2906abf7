// FP8 KV cache with a per-tensor (or per-head) scale, as vLLM's kv_cache_dtype=fp8:
// scale = max|x| / fp8_max, code = fp8(x / scale), x_hat = float(code) * scale.
// Also the calibrated mode (fp8_calibrated.h): scales fixed from a prefill or given, then every
// token encoded with them, saturating, and the clipped values counted.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "core/row_loader.h"
#include "quant/fp8_calibrated.h"
#include "quant/fp8_impl.h"
#include "quant/quantizers.h"

namespace kvlab::detail {

namespace {

constexpr std::size_t kFp8ChunkValues = 8192;

// Rows of a view as contiguous float, chunk by chunk: f(first_row, floats, rows) with rows
// [token][head] in order, whole tokens at a time. Contiguous, aligned float32 is read where it
// lies; the rest is converted into `buf` (a chunk of about kFp8ChunkValues stays in cache).
template <class Fn>
void for_each_chunk(const TensorView& x, int t_end, std::vector<float>& buf, Fn&& f) {
  const std::size_t hd = static_cast<std::size_t>(x.heads()) * x.dim();
  if (hd == 0 || t_end <= 0) return;
  const int rows = static_cast<int>(std::max<std::size_t>(1, kFp8ChunkValues / hd));
  const bool in_place = x.dtype() == DType::F32 && x.contiguous() &&
                        reinterpret_cast<std::uintptr_t>(x.row_ptr(0, 0)) % alignof(float) == 0;
  if (!in_place) buf.resize(rows * hd);
  for (int t0 = 0; t0 < t_end; t0 += rows) {
    const int t1 = std::min(t0 + rows, t_end);
    const float* v = buf.data();
    if (in_place) {
      v = reinterpret_cast<const float*>(x.row_ptr(t0, 0));
    } else {
      load_rows(x, t0, t1, buf.data());
    }
    f(static_cast<std::size_t>(t0) * x.heads(), v, static_cast<std::size_t>(t1 - t0) * x.heads());
  }
}

// Per-head max |x| over tokens [0, t_end) (NaN left out).
std::vector<float> head_amax(const TensorView& x, int t_end) {
  const int heads = x.heads(), dim = x.dim();
  std::vector<float> amax(heads, 0.f);
  std::vector<float> buf;
  for_each_chunk(x, t_end, buf, [&](std::size_t first, const float* v, std::size_t rows) {
    for (std::size_t r = 0; r < rows; ++r) {
      const float* row = v + r * dim;
      const std::size_t h = (first + r) % heads;
      float m = amax[h];
#pragma omp simd reduction(max : m)
      for (int i = 0; i < dim; ++i) m = std::max(m, std::fabs(row[i]));
      amax[h] = m;
    }
  });
  return amax;
}

// out[i] = fp8(x[i] / s) (Divide) or fp8(x[i] * s); returns how many of those scaled values have
// a magnitude above top (Count; 0 otherwise).
template <class F, bool Divide, bool Count>
std::uint64_t encode_scaled(const float* x, std::size_t n, float s, float top, std::uint8_t* out) {
  std::size_t i = 0;
  std::uint64_t clipped = 0;
#if KVLAB_QUANT_AVX512
  const __m512 vs = _mm512_set1_ps(s);
  const __m512 vtop = _mm512_set1_ps(top);
  for (const std::size_t end = n / 16 * 16; i < end; i += 16) {
    const __m512 in = _mm512_loadu_ps(x + i);
    const __m512 v = Divide ? _mm512_div_ps(in, vs) : _mm512_mul_ps(in, vs);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtepi32_epi8(fp8_encode16<F>(v)));
    if constexpr (Count) {
      const __mmask16 over = _mm512_cmp_ps_mask(_mm512_abs_ps(v), vtop, _CMP_GT_OQ);
      clipped += static_cast<std::uint64_t>(std::popcount(static_cast<unsigned>(over)));
    }
  }
#endif
  for (; i < n; ++i) {
    const float v = Divide ? x[i] / s : x[i] * s;
    out[i] = fp8_encode<F>(v);
    if constexpr (Count) clipped += std::fabs(v) > top ? 1u : 0u;
  }
  return clipped;
}

template <bool Divide, bool Count>
std::uint64_t encode_scaled(Fp8Format format, const float* x, std::size_t n, float s, float top,
                            std::uint8_t* out) {
  return format == Fp8Format::E4M3 ? encode_scaled<E4M3, Divide, Count>(x, n, s, top, out)
                                   : encode_scaled<E5M2, Divide, Count>(x, n, s, top, out);
}

using Fp16Table = std::array<std::uint8_t, 32768>;

// The fp8 code of every fp16 magnitude h (0 .. 0x7fff) scaled: fp8(float(h) / s) (Divide) or
// fp8(float(h) * s), converted a run of patterns at a time.
template <bool Divide>
void fill_fp16_table(Fp8Format format, float s, Fp16Table& table) {
  constexpr std::uint32_t kRun = 1024;
  alignas(64) std::uint16_t h[kRun];
  alignas(64) float f[kRun];
  for (std::uint32_t h0 = 0; h0 < table.size(); h0 += kRun) {
    for (std::uint32_t i = 0; i < kRun; ++i) h[i] = static_cast<std::uint16_t>(h0 + i);
    fp16_to_float(std::span<const std::uint16_t>(h, kRun), std::span<float>(f, kRun));
    encode_scaled<Divide, false>(format, f, kRun, s, 0.f, table.data() + h0);
  }
}

// Codes of an fp16 row through a table of its magnitudes, the sign bit put back.
inline void encode_fp16_row(const std::uint16_t* in, int n, const std::uint8_t* table,
                            std::uint8_t* out) {
  for (int i = 0; i < n; ++i) {
    out[i] = static_cast<std::uint8_t>(table[in[i] & 0x7fffu] | ((in[i] >> 8) & 0x80u));
  }
}

class Fp8Quantizer final : public Quantizer {
 public:
  Fp8Quantizer(Fp8Format format, bool per_head) : m_format(format), m_per_head(per_head) {
    for (int c = 0; c < 256; ++c) m_table[c] = fp8_to_float(static_cast<std::uint8_t>(c), format);
  }

  std::string name() const override {
    return fmt::format("fp8-{} ({})", m_format == Fp8Format::E4M3 ? "e4m3" : "e5m2",
                       m_per_head ? "per-head scale" : "per-tensor scale");
  }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    QuantizedTensor q{role, x.tokens(), x.heads(), x.dim(), {}, {}, {}, {}, {}};
    const int heads = x.heads();
    q.codes.resize(x.elements());
    std::vector<float> amax = head_amax(x, x.tokens());
    if (!m_per_head) {
      const float all = *std::max_element(amax.begin(), amax.end());
      std::fill(amax.begin(), amax.end(), all);
    }
    std::vector<float> inv(heads);
    const float top = fp8_max(m_format);
    for (int h = 0; h < heads; ++h) {
      const float scale = amax[h] > 0.f ? amax[h] / top : 1.f;
      if (m_per_head || h == 0) q.params.push_back(scale);
      inv[h] = 1.f / scale;
    }
    if (x.dtype() == DType::F16) {
      encode_fp16(x, inv, q.codes.data());
    } else {
      encode_float(x, inv, q.codes.data());
    }
    q.bytes.codes = q.codes.size();
    q.bytes.scales = q.params.size() * sizeof(float);
    q.bytes.metadata = kTensorHeaderBytes;
    return q;
  }

  // fp16 input has only 2^15 magnitudes: encode each once per scale into a table, then every
  // element is one lookup (the same codes as encoding float(x) * inv directly).
  void encode_fp16(const TensorView& x, const std::vector<float>& inv, std::uint8_t* codes) const {
    const int heads = x.heads(), dim = x.dim();
    std::vector<Fp16Table> tables(m_per_head ? heads : 1);
    for (std::size_t i = 0; i < tables.size(); ++i) {
      fill_fp16_table<false>(m_format, inv[i], tables[i]);
    }
    for (int t = 0; t < x.tokens(); ++t) {
      for (int h = 0; h < heads; ++h) {
        encode_fp16_row(reinterpret_cast<const std::uint16_t*>(x.row_ptr(t, h)), dim,
                        tables[m_per_head ? h : 0].data(),
                        codes + (static_cast<std::size_t>(t) * heads + h) * dim);
      }
    }
  }

  void encode_float(const TensorView& x, const std::vector<float>& inv, std::uint8_t* codes) const {
    const int heads = x.heads(), dim = x.dim();
    std::vector<float> buf;
    for_each_chunk(x, x.tokens(), buf, [&](std::size_t first, const float* v, std::size_t rows) {
      for (std::size_t r = 0; r < rows; ++r) {
        encode_scaled<false, false>(m_format, v + r * dim, dim, inv[(first + r) % heads], 0.f,
                                    codes + (first + r) * dim);
      }
    });
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out_span) const override {
    float* const out = out_span.data();
    const std::size_t rows = static_cast<std::size_t>(q.tokens) * q.heads;
    for (std::size_t r = 0; r < rows; ++r) {
      const float scale = m_per_head ? q.params[r % q.heads] : q.params[0];
      const std::uint8_t* c = q.codes.data() + r * q.dim;
      float* o = out + r * q.dim;
      for (int i = 0; i < q.dim; ++i) o[i] = m_table[c[i]] * scale;
    }
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    CodeHistogram h{m_format == Fp8Format::E4M3 ? "fp8-e4m3" : "fp8-e5m2", 8,
                    std::vector<std::uint64_t>(256, 0)};
    for (std::uint8_t c : q.codes) ++h.counts[c];
    return {h};
  }

 private:
  Fp8Format m_format;
  bool m_per_head;
  std::array<float, 256> m_table{};
};

class Fp8CalibratedQuantizer final : public Quantizer {
 public:
  explicit Fp8CalibratedQuantizer(Fp8CalibratedConfig config) : m_cfg(std::move(config)) {
    for (int c = 0; c < 256; ++c) {
      m_table[c] = fp8_to_float(static_cast<std::uint8_t>(c), m_cfg.format);
    }
  }

  std::string name() const override {
    const auto role_text = [&](const std::vector<float>& given, float range) {
      return given.empty() ? fmt::format("amax/{:g}", range) : std::string("checkpoint");
    };
    return fmt::format("fp8-{} calibrated ({}, {} prefill tokens, K {}, V {})",
                       m_cfg.format == Fp8Format::E4M3 ? "e4m3" : "e5m2",
                       m_cfg.per_head ? "per-head scale" : "per-tensor scale", m_cfg.calib_tokens,
                       role_text(m_cfg.k_scales, m_cfg.k_range),
                       role_text(m_cfg.v_scales, m_cfg.v_range));
  }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    QuantizedTensor q{role, x.tokens(), x.heads(), x.dim(), {}, {}, {}, {}, {}};
    const int heads = x.heads();
    const std::vector<float>& given = role == TensorRole::Key ? m_cfg.k_scales : m_cfg.v_scales;
    int calib = 0;
    if (!given.empty()) {
      if (given.size() != 1 && static_cast<int>(given.size()) != heads) {
        return make_error(
            fmt::format("fp8 calibrated: {} {} scales given for a tensor of {} KV "
                        "heads (give 1 or {})",
                        given.size(), role_name(role), heads, heads));
      }
      q.params = given;
      if (m_cfg.per_head && given.size() == 1) q.params.assign(heads, given[0]);
    } else {
      calib = std::min(m_cfg.calib_tokens, x.tokens());
      q.params = calibrate(x, calib, role == TensorRole::Key ? m_cfg.k_range : m_cfg.v_range);
    }
    q.codes.resize(x.elements());
    const std::uint64_t clipped = x.dtype() == DType::F16
                                      ? encode_fp16(x, q.params, q.codes.data())
                                      : encode_float(x, q.params, q.codes.data());
    q.bounds = {calib, static_cast<int>(clipped & 0x7fffffffu), static_cast<int>(clipped >> 31)};
    q.bytes.codes = q.codes.size();
    q.bytes.scales = q.params.size() * sizeof(float);  // fp32, as vLLM's _k_scale / _v_scale
    q.bytes.metadata = kTensorHeaderBytes;
    return q;
  }

  // vLLM calc_kv_scales: torch.abs(key).max() / k_range, in fp32. A zero amax would give a zero
  // scale (and x / 0); it gives 1.0, vLLM's scale before any calibration, instead.
  std::vector<float> calibrate(const TensorView& x, int calib, float range) const {
    std::vector<float> amax = head_amax(x, calib);
    if (!m_cfg.per_head) {
      amax = {amax.empty() ? 0.f : *std::max_element(amax.begin(), amax.end())};
    }
    std::vector<float> scales(amax.size());
    for (std::size_t h = 0; h < amax.size(); ++h) {
      scales[h] = amax[h] > 0.f ? amax[h] / range : 1.f;
    }
    return scales;
  }

  // fp16 input: each of the 2^15 magnitudes encoded once per scale (x / scale, as vLLM divides);
  // magnitudes grow with the bit pattern and x / scale with them, so the clipped ones are those
  // from the first clipped pattern up to infinity (0x7c00; NaN is not counted).
  std::uint64_t encode_fp16(const TensorView& x, const std::vector<float>& scales,
                            std::uint8_t* codes) const {
    const int heads = x.heads(), dim = x.dim();
    const float top = fp8_max(m_cfg.format);
    std::vector<Fp16Table> tables(scales.size());
    std::vector<std::uint32_t> first_clipped(scales.size());
    for (std::size_t s = 0; s < scales.size(); ++s) {
      fill_fp16_table<true>(m_cfg.format, scales[s], tables[s]);
      std::uint32_t lo = 0, hi = 0x7c01u;  // the first clipped pattern is in [lo, hi]
      while (lo < hi) {
        const std::uint32_t mid = (lo + hi) / 2;
        if (fp16_to_float(static_cast<std::uint16_t>(mid)) / scales[s] > top) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      first_clipped[s] = lo;
    }
    std::uint64_t clipped = 0;
    for (int t = 0; t < x.tokens(); ++t) {
      for (int h = 0; h < heads; ++h) {
        const std::size_t s = scales.size() == 1 ? 0 : static_cast<std::size_t>(h);
        const auto* in = reinterpret_cast<const std::uint16_t*>(x.row_ptr(t, h));
        encode_fp16_row(in, dim, tables[s].data(),
                        codes + (static_cast<std::size_t>(t) * heads + h) * dim);
        // Apart from the lookups so that it vectorises.
        const std::uint32_t lo = first_clipped[s];
        std::uint32_t row_clipped = 0;
#pragma omp simd reduction(+ : row_clipped)
        for (int i = 0; i < dim; ++i) {
          const std::uint32_t m = in[i] & 0x7fffu;
          row_clipped += (m >= lo && m <= 0x7c00u) ? 1u : 0u;
        }
        clipped += row_clipped;
      }
    }
    return clipped;
  }

  std::uint64_t encode_float(const TensorView& x, const std::vector<float>& scales,
                             std::uint8_t* codes) const {
    const int heads = x.heads(), dim = x.dim();
    const float top = fp8_max(m_cfg.format);
    std::vector<float> buf;
    std::uint64_t clipped = 0;
    for_each_chunk(x, x.tokens(), buf, [&](std::size_t first, const float* v, std::size_t rows) {
      for (std::size_t r = 0; r < rows; ++r) {
        const float scale = scales[scales.size() == 1 ? 0 : (first + r) % heads];
        clipped += encode_scaled<true, true>(m_cfg.format, v + r * dim, dim, scale, top,
                                             codes + (first + r) * dim);
      }
    });
    return clipped;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out_span) const override {
    float* const out = out_span.data();
    const std::size_t rows = static_cast<std::size_t>(q.tokens) * q.heads;
    for (std::size_t r = 0; r < rows; ++r) {
      const float scale = q.params.size() == 1 ? q.params[0] : q.params[r % q.heads];
      const std::uint8_t* c = q.codes.data() + r * q.dim;
      float* o = out + r * q.dim;
      for (int i = 0; i < q.dim; ++i) o[i] = m_table[c[i]] * scale;
    }
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    CodeHistogram codes{m_cfg.format == Fp8Format::E4M3 ? "fp8-e4m3" : "fp8-e5m2", 8,
                        std::vector<std::uint64_t>(256, 0)};
    for (std::uint8_t c : q.codes) ++codes.counts[c];
    const Fp8CalibrationReport report = fp8_calibration_report(q);
    CodeHistogram clip{
        "clipped (saturated to the fp8 max)", 1, {report.values - report.clipped, report.clipped}};
    return {codes, clip};
  }

 private:
  Fp8CalibratedConfig m_cfg;
  std::array<float, 256> m_table{};
};

}  // namespace

std::unique_ptr<Quantizer> make_fp8_quantizer(Fp8Format format, bool per_head) {
  return std::make_unique<Fp8Quantizer>(format, per_head);
}

Result<std::unique_ptr<Quantizer>> make_fp8_calibrated_quantizer(Fp8CalibratedConfig config) {
  if (config.calib_tokens < 0) {
    return make_error(
        fmt::format("fp8 calibrated: calib_tokens is {}, must be 0 or more", config.calib_tokens));
  }
  const auto positive = [](float v) { return std::isfinite(v) && v > 0.f; };
  for (const auto& [role, range, given] : {std::tuple{"key", config.k_range, &config.k_scales},
                                           std::tuple{"value", config.v_range, &config.v_scales}}) {
    if (given->empty()) {
      if (config.calib_tokens == 0) {
        return make_error(
            fmt::format("fp8 calibrated: no {} scales given and calib_tokens is 0; "
                        "give scales or calibration tokens",
                        role));
      }
      if (!positive(range)) {
        return make_error(
            fmt::format("fp8 calibrated: {} range {} must be finite and positive", role, range));
      }
      continue;
    }
    if (given->size() > 1 && !config.per_head) {
      return make_error(
          fmt::format("fp8 calibrated: {} {} scales given for a per-tensor scale "
                      "(one scale, or set per_head)",
                      given->size(), role));
    }
    for (float s : *given) {
      if (!positive(s)) {
        return make_error(
            fmt::format("fp8 calibrated: {} scale {} must be finite and positive", role, s));
      }
    }
  }
  return std::unique_ptr<Quantizer>(std::make_unique<Fp8CalibratedQuantizer>(std::move(config)));
}

Fp8CalibrationReport fp8_calibration_report(const QuantizedTensor& q) {
  Fp8CalibrationReport r;
  r.scales = q.params;
  r.values = static_cast<std::uint64_t>(q.tokens) * q.heads * q.dim;
  if (q.bounds.size() >= 3) {
    r.calib_tokens = q.bounds[0];
    r.clipped = static_cast<std::uint64_t>(static_cast<std::uint32_t>(q.bounds[1])) |
                (static_cast<std::uint64_t>(static_cast<std::uint32_t>(q.bounds[2])) << 31);
  }
  return r;
}

}  // namespace kvlab::detail
