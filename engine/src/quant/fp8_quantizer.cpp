// FP8 KV cache with a per-tensor (or per-head) scale, as vLLM's kv_cache_dtype=fp8:
// scale = max|x| / fp8_max, code = fp8(x / scale), x_hat = float(code) * scale.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/row_loader.h"
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

}  // namespace

std::unique_ptr<Quantizer> make_fp8_quantizer(Fp8Format format, bool per_head) {
  return std::make_unique<Fp8Quantizer>(format, per_head);
}

}  // namespace kvlab::detail
