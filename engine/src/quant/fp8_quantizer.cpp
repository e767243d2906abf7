// FP8 KV cache with a per-tensor (or per-head) scale, as vLLM's kv_cache_dtype=fp8:
// scale = max|x| / fp8_max, code = fp8(x / scale), x_hat = float(code) * scale.
// Also the calibrated mode (fp8_calibrated.h): scales fixed from a prefill or given, then every
// token encoded with them, saturating, and the clipped values counted.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
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

constexpr int kChunkTokens = 64;

template <class F>
void encode_span(const float* x, std::size_t n, float inv, std::uint8_t* out) {
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) out[i] = fp8_encode<F>(x[i] * inv);
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
    const int heads = x.heads(), dim = x.dim();
    const std::size_t hd = static_cast<std::size_t>(heads) * dim;
    q.codes.resize(x.elements());
    std::vector<float> buf(kChunkTokens * hd);
    std::vector<float> amax(heads, 0.f);
    for (int t0 = 0; t0 < x.tokens(); t0 += kChunkTokens) {
      const int rows = std::min(kChunkTokens, x.tokens() - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      for (int r = 0; r < rows; ++r) {
        for (int h = 0; h < heads; ++h) {
          const float* row = buf.data() + r * hd + h * dim;
          float m = amax[h];
#pragma omp simd reduction(max : m)
          for (int i = 0; i < dim; ++i) m = std::max(m, std::fabs(row[i]));
          amax[h] = m;
        }
      }
    }
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
      encode_float(x, inv, buf, q.codes.data());
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
    std::vector<std::array<std::uint8_t, 32768>> tables(m_per_head ? heads : 1);
    for (std::size_t i = 0; i < tables.size(); ++i) {
      for (std::uint32_t h = 0; h < 32768; ++h) {
        tables[i][h] =
            float_to_fp8(fp16_to_float(static_cast<std::uint16_t>(h)) * inv[i], m_format);
      }
    }
    for (int t = 0; t < x.tokens(); ++t) {
      for (int h = 0; h < heads; ++h) {
        const auto* in = reinterpret_cast<const std::uint16_t*>(x.row_ptr(t, h));
        const std::uint8_t* table = tables[m_per_head ? h : 0].data();
        std::uint8_t* out = codes + (static_cast<std::size_t>(t) * heads + h) * dim;
        for (int i = 0; i < dim; ++i) {
          out[i] = static_cast<std::uint8_t>(table[in[i] & 0x7fffu] | ((in[i] >> 8) & 0x80u));
        }
      }
    }
  }

  void encode_float(const TensorView& x, const std::vector<float>& inv, std::vector<float>& buf,
                    std::uint8_t* codes) const {
    const int heads = x.heads(), dim = x.dim();
    const std::size_t hd = static_cast<std::size_t>(heads) * dim;
    for (int t0 = 0; t0 < x.tokens(); t0 += kChunkTokens) {
      const int rows = std::min(kChunkTokens, x.tokens() - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      for (int r = 0; r < rows; ++r) {
        for (int h = 0; h < heads; ++h) {
          const float* row = buf.data() + r * hd + h * dim;
          std::uint8_t* out = codes + (t0 + r) * hd + h * dim;
          if (m_format == Fp8Format::E4M3) {
            encode_span<E4M3>(row, dim, inv[h], out);
          } else {
            encode_span<E5M2>(row, dim, inv[h], out);
          }
        }
      }
    }
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

// Encodes n floats as fp8(x / scale) and returns how many had |x / scale| > max (clipped).
template <class F>
std::uint64_t encode_divided(const float* x, std::size_t n, float scale, float top,
                             std::uint8_t* out) {
  std::uint64_t clipped = 0;
#pragma omp simd reduction(+ : clipped)
  for (std::size_t i = 0; i < n; ++i) {
    const float v = x[i] / scale;
    out[i] = fp8_encode<F>(v);
    clipped += std::fabs(v) > top ? 1u : 0u;
  }
  return clipped;
}

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
    const int heads = x.heads(), dim = x.dim();
    const std::size_t hd = static_cast<std::size_t>(heads) * dim;
    std::vector<float> amax(heads, 0.f);
    std::vector<float> buf(kChunkTokens * hd);
    for (int t0 = 0; t0 < calib; t0 += kChunkTokens) {
      const int rows = std::min(kChunkTokens, calib - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      for (int r = 0; r < rows; ++r) {
        for (int h = 0; h < heads; ++h) {
          const float* row = buf.data() + r * hd + h * dim;
          float m = amax[h];
#pragma omp simd reduction(max : m)
          for (int i = 0; i < dim; ++i) m = std::max(m, std::fabs(row[i]));
          amax[h] = m;
        }
      }
    }
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
  // magnitudes grow with the bit pattern, so the clipped ones are those from the first clipped
  // pattern up to infinity (0x7c00; NaN is not counted).
  std::uint64_t encode_fp16(const TensorView& x, const std::vector<float>& scales,
                            std::uint8_t* codes) const {
    const int heads = x.heads(), dim = x.dim();
    const float top = fp8_max(m_cfg.format);
    std::vector<std::array<std::uint8_t, 32768>> tables(scales.size());
    std::vector<std::uint32_t> first_clipped(scales.size(), 0x7c01u);
    for (std::size_t s = 0; s < scales.size(); ++s) {
      for (std::uint32_t h = 0; h < 32768; ++h) {
        const float v = fp16_to_float(static_cast<std::uint16_t>(h)) / scales[s];
        tables[s][h] = float_to_fp8(v, m_cfg.format);
        if (h <= 0x7c00u && v > top && first_clipped[s] > h) first_clipped[s] = h;
      }
    }
    std::uint64_t clipped = 0;
    for (int t = 0; t < x.tokens(); ++t) {
      for (int h = 0; h < heads; ++h) {
        const std::size_t s = scales.size() == 1 ? 0 : static_cast<std::size_t>(h);
        const auto* in = reinterpret_cast<const std::uint16_t*>(x.row_ptr(t, h));
        const std::uint8_t* table = tables[s].data();
        const std::uint32_t lo = first_clipped[s];
        std::uint8_t* out = codes + (static_cast<std::size_t>(t) * heads + h) * dim;
        for (int i = 0; i < dim; ++i) {
          out[i] = static_cast<std::uint8_t>(table[in[i] & 0x7fffu] | ((in[i] >> 8) & 0x80u));
        }
        // Apart from the lookups so that it vectorises.
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
    const std::size_t hd = static_cast<std::size_t>(heads) * dim;
    const float top = fp8_max(m_cfg.format);
    std::vector<float> buf(kChunkTokens * hd);
    std::uint64_t clipped = 0;
    for (int t0 = 0; t0 < x.tokens(); t0 += kChunkTokens) {
      const int rows = std::min(kChunkTokens, x.tokens() - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      for (int r = 0; r < rows; ++r) {
        for (int h = 0; h < heads; ++h) {
          const float scale = scales[scales.size() == 1 ? 0 : h];
          const float* row = buf.data() + r * hd + h * dim;
          std::uint8_t* out = codes + (t0 + r) * hd + h * dim;
          clipped += m_cfg.format == Fp8Format::E4M3
                         ? encode_divided<E4M3>(row, dim, scale, top, out)
                         : encode_divided<E5M2>(row, dim, scale, top, out);
        }
      }
    }
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
