// A rotation as a pre-transform of any quantizer (issue 22 part 4): every head vector is rotated
// by an orthogonal matrix before the inner quantizer sees it, and rotated back after
// dequantization. The queries are rotated the same way in a real engine, so attention is
// unchanged before quantization ((Rq)·(Rk) = q·k); rotating back here gives the cache in the
// model's frame, which is what every metric and the model loop compare with.
//
// Why it helps: an outlier channel (a few channels of a key head much larger than the rest) sets
// the scale of every per-tensor, per-token or per-block quantizer, wasting codes on the others.
// A rotation spreads it over all channels of the head (QuaRot, Ashkboos et al. 2024, Sec. 4;
// SpinQuant, Liu et al. 2024; QJL's and TurboQuant's random rotations). Where quantization is
// already per channel (KIVI's keys, KVQuant), the outlier has its own scale and a rotation mixes
// it back into the others: it does not help there (docs/QUALITY.md measures both).
//
// One matrix per KV head, from the seed and the head's index (a randomized Hadamard for
// power-of-two head sizes, or a Haar-random orthogonal matrix). The matrices are regenerated
// from the seed, so what is stored is the seed: 8 bytes of metadata per tensor.
#include "quant/rotated_quantizer.h"

#include <variant>
#include <vector>

#include <fmt/format.h>
#include <Eigen/Core>

#include "core/row_loader.h"
#include "kvlab/engine/quant/channel_stats.h"  // rotation_head_seed
#include "kvlab/engine/quant/rotation.h"

namespace kvlab::detail {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using HeadRows = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

constexpr std::uint64_t kSeedBytes = sizeof(std::uint64_t);

class RotatedQuantizer final : public Quantizer {
 public:
  RotatedQuantizer(std::unique_ptr<Quantizer> inner, RotationSpec spec)
      : m_inner(std::move(inner)), m_spec(spec) {}

  std::string name() const override {
    return fmt::format("{} after {} rotation{}", m_inner->name(), rotation_id(m_spec.kind),
                       m_spec.values ? " (keys and values)" : " (keys)");
  }

  bool rotates(TensorRole role) const { return role == TensorRole::Key || m_spec.values; }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    if (!rotates(role)) return m_inner->quantize(x, role);
    std::vector<float> rows(x.elements());
    load_rows(x, 0, x.tokens(), rows.data());
    KVLAB_TRY(rotate(rows, x.tokens(), x.heads(), x.dim(), false));
    const Tensor rotated = Tensor::from_float(rows, DType::F32, x.tokens(), x.heads(), x.dim());
    auto q = m_inner->quantize(rotated.view(), role);
    if (!q) return q;
    q->bytes.metadata += kSeedBytes;
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out) const override {
    m_inner->dequantize(q, out);
    if (!rotates(q.role)) return;
    // The same rotations quantize() built, so they exist for this head size.
    (void)rotate(out, q.tokens, q.heads, q.dim, true);
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    return m_inner->histograms(q);
  }

 private:
  // Rotates (or rotates back) every [token][head] vector of `rows` in place.
  Status rotate(std::span<float> rows, int tokens, int heads, int dim, bool inverse) const {
    for (int h = 0; h < heads; ++h) {
      const std::uint64_t seed = rotation_head_seed(m_spec.seed, h);
      if (m_spec.kind == RotationKind::Hadamard) {
        auto r = RandomizedHadamard::create(dim, seed);
        if (!r) return make_error(fmt::format("hadamard rotation: {}", r.message()));
        for (int t = 0; t < tokens; ++t) {
          std::span<float> v = rows.subspan((static_cast<std::size_t>(t) * heads + h) * dim, dim);
          inverse ? r->inverse(v) : r->apply(v);
        }
      } else {
        auto r = RandomOrthogonalRotation::create(dim, seed);
        if (!r) return make_error(fmt::format("orthogonal rotation: {}", r.message()));
        // All tokens of the head at once: X <- X Qᵀ (or X Q to undo), one GEMM.
        const Eigen::Map<const RowMatrix> qm(r->matrix().data(), dim, dim);
        HeadRows x(rows.data() + static_cast<std::size_t>(h) * dim, tokens, dim,
                   Eigen::OuterStride<>(static_cast<Eigen::Index>(heads) * dim));
        const RowMatrix product = inverse ? RowMatrix(x * qm) : RowMatrix(x * qm.transpose());
        x = product;
      }
    }
    return Ok{};
  }

  std::unique_ptr<Quantizer> m_inner;
  RotationSpec m_spec;
};

}  // namespace

std::unique_ptr<Quantizer> make_rotated_quantizer(std::unique_ptr<Quantizer> inner,
                                                  RotationSpec spec) {
  if (spec.kind == RotationKind::None) return inner;
  return std::make_unique<RotatedQuantizer>(std::move(inner), spec);
}

}  // namespace kvlab::detail
