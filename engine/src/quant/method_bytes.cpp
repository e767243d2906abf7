// method_tensor_bytes(): each quantizer's byte count as a formula (method.h). The formulas follow
// the layouts the quantizers document; tests/engine/test_method_bytes.cpp holds every one to the
// quantizer's own count.
#include <cmath>

#include "codec/bitpack.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/kivi.h"
#include "kvlab/engine/quant/method.h"
#include "quant/fp4_quantizer.h"
#include "quant/turboquant_quantizer.h"

namespace kvlab {

namespace {

std::optional<std::uint64_t> base_bytes(const MethodConfig& c, TensorRole role, std::uint64_t t,
                                        int heads, int dim) {
  const std::uint64_t h = static_cast<std::uint64_t>(heads);
  const std::uint64_t n = t * h * static_cast<std::uint64_t>(dim);
  const auto ggml = [&](GgmlType type) -> std::optional<std::uint64_t> {
    const auto row = ggml_row_bytes(type, dim);
    if (!row) return std::nullopt;
    return t * h * *row + kTensorHeaderBytes;
  };
  switch (c.kind) {
    case MethodKind::Int8:
    case MethodKind::Int4:
      return detail::packed_bytes(n, c.kind == MethodKind::Int8 ? 8 : 4) + sizeof(float) +
             kTensorHeaderBytes;
    case MethodKind::Kivi: {
      KiviShape shape{t, h, static_cast<std::uint64_t>(dim), c.bits, c.group_size, c.residual};
      shape.param_bytes = static_cast<int>(dtype_size(method_param_dtype(c)));
      return kivi_tensor_bytes(shape, role).total();
    }
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      if (c.calib_tokens > 0) return std::nullopt;  // the clip count's metadata
      return n + (c.per_head_scale ? h : 1) * sizeof(float) + kTensorHeaderBytes;
    case MethodKind::Q8_0:
      return ggml(GgmlType::Q8_0);
    case MethodKind::Q4_0:
      return ggml(GgmlType::Q4_0);
    case MethodKind::Q4_1:
      return ggml(GgmlType::Q4_1);
    case MethodKind::Q5_0:
      return ggml(GgmlType::Q5_0);
    case MethodKind::Q5_1:
      return ggml(GgmlType::Q5_1);
    case MethodKind::IQ4_NL:
      return ggml(GgmlType::IQ4_NL);
    case MethodKind::Nvfp4:  // E2M1 nibbles, an E4M3 byte per 16, one fp32 global scale
      return n / 2 + n / 16 + sizeof(float) + kTensorHeaderBytes;
    case MethodKind::Mxfp4:
      return n / 32 * detail::kMxfp4BlockBytes + kTensorHeaderBytes;
    case MethodKind::TurboQuant: {
      detail::TurboQuantConfig tq;
      tq.bits = c.bits;
      tq.qjl = c.qjl;
      return detail::turboquant_bytes(tq, static_cast<int>(t), heads, dim).total();
    }
    case MethodKind::KvQuant: {
      // Layout in kvquant_quantizer.h: one fp16 sink token, packed codes of the rest, an fp16
      // lower and upper bound per channel (keys) or per token (values), the 2^b fp32 levels, and
      // a CSR table of the outliers (fp16 value, int32 column, int32 row pointers).
      const std::uint64_t sinks = std::min<std::uint64_t>(t, 1);
      const std::uint64_t tq = t - sinks;
      const std::uint64_t cols = h * static_cast<std::uint64_t>(dim);
      const std::uint64_t units = role == TensorRole::Key ? cols : tq;
      const std::uint64_t per_side =
          static_cast<std::uint64_t>(std::llround(c.outlier_fraction * cols / 2.0));
      const std::uint64_t nnz =
          role == TensorRole::Value
              ? tq * 2 * per_side
              : static_cast<std::uint64_t>(std::llround(c.outlier_fraction * tq * cols));
      return detail::packed_bytes(tq * cols, c.bits) + 2 * units * 2 + 2 * (sinks * cols + nnz) +
             kTensorHeaderBytes + (std::uint64_t{1} << c.bits) * sizeof(float) + 8 + 4 * (tq + 1) +
             4 * nnz;
    }
    case MethodKind::Tiered:
    case MethodKind::KvComp:
      return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::uint64_t> method_tensor_bytes(const MethodConfig& c, TensorRole role,
                                                 std::uint64_t tokens, int heads, int dim) {
  auto b = base_bytes(c, role, tokens, heads, dim);
  const bool rotated = wraps_rotation(c) && (role == TensorRole::Key || c.rotate_values);
  if (b && rotated) *b += sizeof(std::uint64_t);  // the rotation's seed
  return b;
}

}  // namespace kvlab
