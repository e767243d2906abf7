// Age-tiered asymmetric quantization. KIVI (Liu et al. 2024, "KIVI: A Tuning-Free Asymmetric
// 2bit Quantization for KV Cache") is the one-tier case: keys per channel over groups of G
// tokens, values per token over groups of G channels, the newest tokens kept in fp16. The
// hierarchical variant adds tiers so bits fall with token age (newest fp16, then INT8, then
// INT4/INT2 for the oldest). Each group's step and minimum are stored in the configured dtype
// (fp16 by default, as KIVI's reference keeps them in the tensor's dtype).
#include <algorithm>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "codec/bitpack.h"
#include "core/row_loader.h"
#include "quant/group_quant.h"
#include "quant/quantizers.h"

namespace kvlab::detail {

namespace {

class TieredQuantizer final : public Quantizer {
 public:
  TieredQuantizer(std::string label, std::vector<AgeTier> tiers, int group_size, int residual,
                  DType params)
      : m_label(std::move(label)),
        m_tiers(std::move(tiers)),
        m_group(group_size),
        m_residual(residual),
        m_params(params) {}

  std::string name() const override { return m_label; }

  std::vector<int> boundaries(int tokens) const {
    return age_tier_boundaries(m_tiers, m_group, m_residual, tokens);
  }

  GroupSpec spec(int bits) const { return tier_group_spec(bits, m_group, m_params); }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    QuantizedTensor q{role, x.tokens(), x.heads(), x.dim(), {}, {}, {}, {}, {}};
    q.bounds = boundaries(x.tokens());
    const std::size_t hd = static_cast<std::size_t>(x.heads()) * x.dim();
    const int n = static_cast<int>(m_tiers.size());
    std::size_t code_bytes = 0, units = 0;
    for (int i = 0; i < n; ++i) {
      const int rows = q.bounds[i + 1] - q.bounds[i];
      code_bytes += packed_bytes(rows * hd, m_tiers[i].bits);
      units += group_unit_count(spec(m_tiers[i].bits), role, rows, x.heads(), x.dim());
    }
    q.codes.assign(code_bytes, 0);
    q.params.resize(2 * units);
    std::uint8_t* codes = q.codes.data();
    float* params = q.params.data();
    for (int i = 0; i < n; ++i) {
      const int t0 = q.bounds[i], t1 = q.bounds[i + 1];
      if (t1 == t0) continue;
      const GroupSpec s = spec(m_tiers[i].bits);
      const std::size_t u = group_unit_count(s, role, t1 - t0, x.heads(), x.dim());
      quantize_groups(x.token_range(t0, t1), role, s, codes, 0, params, params + u);
      codes += packed_bytes((t1 - t0) * hd, s.bits);
      params += 2 * u;
    }
    const int r0 = q.bounds[n], r1 = q.bounds[n + 1];
    std::vector<float> tmp((r1 - r0) * hd);
    load_rows(x, r0, r1, tmp.data());
    q.residual.resize(tmp.size());
    float_to_fp16(tmp, q.residual);

    q.bytes.codes = q.codes.size();
    q.bytes.scales = units * dtype_size(m_params);
    q.bytes.zero_points = units * dtype_size(m_params);
    q.bytes.residual = q.residual.size() * sizeof(std::uint16_t);
    q.bytes.metadata = kTensorHeaderBytes + q.bounds.size() * sizeof(std::uint32_t);
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out) const override {
    dequantize_tokens(q, 0, q.tokens, out);
  }

  bool dequantize_tokens(const QuantizedTensor& q, int first, int last,
                         std::span<float> out_span) const override {
    const std::size_t hd = static_cast<std::size_t>(q.heads) * q.dim;
    const auto rows_at = [&](int t) { return out_span.data() + (t - first) * hd; };
    const int n = static_cast<int>(m_tiers.size());
    const std::uint8_t* codes = q.codes.data();
    const float* params = q.params.data();
    for (int i = 0; i < n; ++i) {  // each tier's share of [first, last), in its own token order
      const int t0 = q.bounds[i], t1 = q.bounds[i + 1];
      const GroupSpec s = spec(m_tiers[i].bits);
      const std::size_t u = group_unit_count(s, q.role, t1 - t0, q.heads, q.dim);
      const int a = std::max(first, t0), z = std::min(last, t1);
      if (a < z) {
        dequantize_groups(codes, 0, params, params + u, q.role, s, q.heads, q.dim, a - t0, z - t0,
                          rows_at(a));
      }
      codes += packed_bytes((t1 - t0) * hd, s.bits);
      params += 2 * u;
    }
    const int r0 = q.bounds[n], a = std::max(first, r0), z = std::min(last, q.bounds[n + 1]);
    if (a < z) {
      fp16_to_float(std::span<const std::uint16_t>(q.residual).subspan((a - r0) * hd, (z - a) * hd),
                    {rows_at(a), (z - a) * hd});
    }
    return true;
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    const std::size_t hd = static_cast<std::size_t>(q.heads) * q.dim;
    const int n = static_cast<int>(m_tiers.size());
    std::vector<CodeHistogram> out;
    const std::uint8_t* codes = q.codes.data();
    for (int i = 0; i < n; ++i) {
      const int bits = m_tiers[i].bits;
      const std::size_t count = (q.bounds[i + 1] - q.bounds[i]) * hd;
      CodeHistogram h{n == 1
                          ? fmt::format("int{}", bits)
                          : fmt::format("int{} (tokens {}-{})", bits, q.bounds[i], q.bounds[i + 1]),
                      bits, std::vector<std::uint64_t>(std::size_t{1} << bits, 0)};
      count_packed_codes(codes, count, bits, h.counts.data());
      codes += packed_bytes(count, bits);
      out.push_back(std::move(h));
    }
    return out;
  }

 private:
  std::string m_label;
  std::vector<AgeTier> m_tiers;
  int m_group;
  int m_residual;
  DType m_params;
};

}  // namespace

std::vector<int> age_tier_boundaries(const std::vector<AgeTier>& tiers, int group_size,
                                     int residual, int tokens) {
  const int n = static_cast<int>(tiers.size());
  std::vector<int> b(n + 2, 0);
  const int quantized = std::max(0, tokens - residual) / group_size * group_size;
  b[n] = quantized;
  b[n + 1] = tokens;
  int end = quantized;
  for (int i = n - 1; i >= 1; --i) {
    const int want = (tiers[i].tokens + group_size - 1) / group_size * group_size;
    b[i] = std::max(0, end - want);
    end = b[i];
  }
  return b;
}

std::unique_ptr<Quantizer> make_tiered_quantizer(std::string label, std::vector<AgeTier> tiers,
                                                 int group_size, int residual, DType params) {
  return std::make_unique<TieredQuantizer>(std::move(label), std::move(tiers), group_size, residual,
                                           params);
}

}  // namespace kvlab::detail
