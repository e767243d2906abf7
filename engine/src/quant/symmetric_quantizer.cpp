// Per-tensor symmetric INT8 / INT4: scale = max|x| / (2^(b-1) - 1), the naive baseline.
// Codes are stored offset by 2^(b-1) (so -7..7 is 1..15 for INT4), packed b bits each. The
// element rules are group_rules.h's, which the CUDA quantizer (kernels/src/quant_group.cu) shares.
#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "codec/bitpack.h"
#include "core/row_loader.h"
#include "kvlab/engine/quant/group_rules.h"
#include "quant/quantizers.h"
#include "quant/symmetric_rows.h"

namespace kvlab::detail {

namespace {

constexpr int kChunkTokens = 64;

class SymmetricQuantizer final : public Quantizer {
 public:
  explicit SymmetricQuantizer(int bits) : m_bits(bits) {}

  std::string name() const override { return fmt::format("int{} per-tensor", m_bits); }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    QuantizedTensor q{role, x.tokens(), x.heads(), x.dim(), {}, {}, {}, {}, {}};
    const std::size_t n = x.elements();
    const std::size_t hd = static_cast<std::size_t>(x.heads()) * x.dim();
    q.codes.assign(packed_bytes(n, m_bits), 0);
    std::vector<float> buf(kChunkTokens * hd);
    std::vector<std::uint8_t> cbuf(buf.size());
    float amax = 0.f;
    for (int t0 = 0; t0 < x.tokens(); t0 += kChunkTokens) {
      const int rows = std::min(kChunkTokens, x.tokens() - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      const std::size_t m = rows * hd;
#pragma omp simd reduction(max : amax)
      for (std::size_t i = 0; i < m; ++i) amax = std::max(amax, std::fabs(buf[i]));
    }
    const float scale = rules::symmetric_scale(amax, m_bits);
    const float inv = 1.f / scale;
    for (int t0 = 0; t0 < x.tokens(); t0 += kChunkTokens) {
      const int rows = std::min(kChunkTokens, x.tokens() - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      const std::size_t m = rows * hd;
#pragma omp simd
      for (std::size_t i = 0; i < m; ++i) cbuf[i] = rules::symmetric_code(buf[i], inv, m_bits);
      pack_codes(cbuf.data(), m, m_bits, q.codes.data(), t0 * hd);
    }
    q.params = {scale};
    q.bytes.codes = q.codes.size();
    q.bytes.scales = sizeof(float);
    q.bytes.metadata = kTensorHeaderBytes;
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out) const override {
    dequantize_tokens(q, 0, q.tokens, out);
  }

  bool dequantize_tokens(const QuantizedTensor& q, int first, int last,
                         std::span<float> out) const override {
    const std::size_t hd = static_cast<std::size_t>(q.heads) * q.dim;
    symmetric_decode(q.codes.data(), static_cast<std::size_t>(first) * hd,
                     static_cast<std::size_t>(last - first) * hd, m_bits, q.params.at(0),
                     out.data());
    return true;
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    CodeHistogram h{fmt::format("int{}", m_bits), m_bits,
                    std::vector<std::uint64_t>(std::size_t{1} << m_bits, 0)};
    const std::size_t n = static_cast<std::size_t>(q.tokens) * q.heads * q.dim;
    count_packed_codes(q.codes.data(), n, m_bits, h.counts.data());
    return {h};
  }

 private:
  int m_bits;
};

}  // namespace

std::unique_ptr<Quantizer> make_symmetric_quantizer(int bits) {
  return std::make_unique<SymmetricQuantizer>(bits);
}

}  // namespace kvlab::detail
