// KVComp's blockwise, error-bounded quantizer (Jiang et al. 2025, "KVComp: A High-Performance,
// LLM-Aware, Lossy Compression Framework for KV Cache", Sec. 3): keys in blocks of B tokens,
// per channel inside a block; values per token; step = rel_scale * (max - min) of the unit and
// code = round((x - min) / step) as uint8, so |x - x_hat| <= step / 2. The codes are left
// byte-wide here: their entropy coding is the codec's job. The paper does not say in what
// precision a unit's step and minimum are kept; float32 is the default here (as the SZ family of
// error-bounded compressors it comes from keeps them), fp16 / bf16 by --param-dtype.
#include <vector>

#include <fmt/format.h>

#include "kvlab/engine/codec/huffman_book.h"
#include "quant/group_quant.h"
#include "quant/quantizers.h"

namespace kvlab::detail {

namespace {

class KvCompQuantizer final : public Quantizer {
 public:
  KvCompQuantizer(int block_size, double rel_scale, DType params)
      : m_block(block_size), m_rel(rel_scale), m_params(params) {}

  std::string name() const override { return fmt::format("kvcomp B={} rel={:g}", m_block, m_rel); }

  GroupSpec spec() const { return kvcomp_group_spec(m_block, m_rel, m_params); }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    QuantizedTensor q{role, x.tokens(), x.heads(), x.dim(), {}, {}, {}, {}, {}};
    const GroupSpec s = spec();
    const std::size_t units = group_unit_count(s, role, x.tokens(), x.heads(), x.dim());
    q.codes.resize(x.elements());
    q.params.resize(2 * units);
    quantize_groups(x, role, s, q.codes.data(), 0, q.params.data(), q.params.data() + units);
    q.bytes.codes = q.codes.size();
    q.bytes.scales = units * dtype_size(m_params);
    q.bytes.zero_points = units * dtype_size(m_params);
    q.bytes.metadata = kTensorHeaderBytes;
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out) const override {
    dequantize_tokens(q, 0, q.tokens, out);
  }

  bool dequantize_tokens(const QuantizedTensor& q, int first, int last,
                         std::span<float> out) const override {
    const std::size_t units = q.params.size() / 2;
    dequantize_groups(q.codes.data(), 0, q.params.data(), q.params.data() + units, q.role, spec(),
                      q.heads, q.dim, first, last, out.data());
    return true;
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    const CodeCounts counts = count_codes(q.codes);
    return {CodeHistogram{"uint8", 8, std::vector<std::uint64_t>(counts.begin(), counts.end())}};
  }

 private:
  int m_block;
  double m_rel;
  DType m_params;
};

}  // namespace

std::unique_ptr<Quantizer> make_kvcomp_quantizer(int block_size, double rel_scale, DType params) {
  return std::make_unique<KvCompQuantizer>(block_size, rel_scale, params);
}

}  // namespace kvlab::detail

namespace kvlab {

int kvcomp_max_code(double rel_scale) {
  return detail::largest_code(detail::kvcomp_group_spec(1, rel_scale));
}

}  // namespace kvlab
