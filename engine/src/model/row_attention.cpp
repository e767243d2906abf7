// The CPU reference RowAttention (row_attention.h): rows kept as handed over, each decoded by
// row_decode.h (the arithmetic the GPU's decode kernel runs) and attended with double sums.
#include "kvlab/engine/model/row_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace kvlab {

RowAttention::~RowAttention() = default;

bool row_attention_takes(row_decode::Format format) {
  using F = row_decode::Format;
  return format == F::Fp16 || format == F::Fp8E4M3 || format == F::Q8_0 || format == F::Q4_0 ||
         format == F::Nvfp4;
}

std::size_t stored_row_bytes(row_decode::Format f, int dim) {
  return f == row_decode::Format::Nvfp4 ? static_cast<std::size_t>(dim / 2)
                                        : static_cast<std::size_t>(row_decode::row_bytes(f, dim));
}

std::size_t stored_scale_bytes(row_decode::Format f, int dim) {
  return f == row_decode::Format::Nvfp4 ? static_cast<std::size_t>(dim / 16) : 0;
}

Status check_row_params(int layer, int kv_heads, const RowParams& params) {
  const row_decode::Format f = params.format;
  if (!row_attention_takes(f)) {
    return make_error(fmt::format("row attention, layer {}: no decode kernel reads {} rows", layer,
                                  row_decode::format_name(f)));
  }
  const std::size_t heads = static_cast<std::size_t>(kv_heads);
  if (f == row_decode::Format::Fp8E4M3 &&
      (params.key_head_scales.size() != heads || params.value_head_scales.size() != heads)) {
    return make_error(
        fmt::format("row attention, layer {}: FP8 needs {} scales a role ({} key, {} value given)",
                    layer, heads, params.key_head_scales.size(), params.value_head_scales.size()));
  }
  if (f == row_decode::Format::Nvfp4) {
    for (const float g : {params.key_global, params.value_global}) {
      if (!std::isfinite(g) || g <= 0.f) {
        return make_error(fmt::format(
            "row attention, layer {}: NVFP4 global scale {} (must be finite and positive)", layer,
            g));
      }
    }
  }
  return Ok{};
}

Status check_stored_rows(int layer, row_decode::Format f, int kv_heads, int head_dim, int held,
                         const StoredRows& rows) {
  if (rows.tokens < 0 || rows.tokens > INT_MAX - held) {
    return make_error(
        fmt::format("row attention, layer {}: {} tokens after {} held", layer, rows.tokens, held));
  }
  const std::size_t n = static_cast<std::size_t>(rows.tokens) * kv_heads;
  const std::size_t data = n * stored_row_bytes(f, head_dim);
  const std::size_t scales = n * stored_scale_bytes(f, head_dim);
  if (rows.keys.size() != data || rows.values.size() != data || rows.key_scales.size() != scales ||
      rows.value_scales.size() != scales) {
    return make_error(fmt::format(
        "row attention, layer {}: {} tokens of {} rows need {} bytes of keys and of values and {} "
        "of block scales each ({}, {}, {}, {} given)",
        layer, rows.tokens, row_decode::format_name(f), data, scales, rows.keys.size(),
        rows.values.size(), rows.key_scales.size(), rows.value_scales.size()));
  }
  return Ok{};
}

namespace {

using row_decode::Format;

class ReferenceRowAttention final : public RowAttention {
 public:
  explicit ReferenceRowAttention(const RowAttentionShape& shape)
      : m_shape(shape), m_layers(static_cast<std::size_t>(shape.layers)) {}

  std::string name() const override { return "cpu reference"; }

  Status begin_layer(int layer, const RowParams& params) override {
    KVLAB_TRY(check_layer(layer));
    Layer& L = m_layers[static_cast<std::size_t>(layer)];
    if (L.begun) return make_error(fmt::format("row attention: layer {} begun twice", layer));
    KVLAB_TRY(check_row_params(layer, m_shape.kv_heads, params));
    L.params = params;
    L.begun = true;
    return Ok{};
  }

  Status append(int layer, const StoredRows& rows) override {
    KVLAB_TRY(check_layer(layer));
    Layer& L = m_layers[static_cast<std::size_t>(layer)];
    if (!L.begun) return make_error(fmt::format("row attention: layer {} not begun", layer));
    KVLAB_TRY(check_stored_rows(layer, L.params.format, m_shape.kv_heads, m_shape.head_dim,
                                L.tokens, rows));
    L.keys.insert(L.keys.end(), rows.keys.begin(), rows.keys.end());
    L.values.insert(L.values.end(), rows.values.begin(), rows.values.end());
    L.key_scales.insert(L.key_scales.end(), rows.key_scales.begin(), rows.key_scales.end());
    L.value_scales.insert(L.value_scales.end(), rows.value_scales.begin(), rows.value_scales.end());
    L.tokens += rows.tokens;
    return Ok{};
  }

  Status attend(int layer, std::span<const float> q, std::span<float> out) override {
    KVLAB_TRY(check_layer(layer));
    const Layer& L = m_layers[static_cast<std::size_t>(layer)];
    const int dim = m_shape.head_dim, heads = m_shape.heads, kv_heads = m_shape.kv_heads;
    const std::size_t qd = static_cast<std::size_t>(heads) * dim;
    if (q.size() != qd || out.size() != qd) {
      return make_error(
          fmt::format("row attention, layer {}: q and out need {} floats", layer, qd));
    }
    if (!L.begun) return make_error(fmt::format("row attention: layer {} not begun", layer));
    std::fill(out.begin(), out.end(), 0.f);
    if (L.tokens == 0) return Ok{};
    const int group = heads / kv_heads;
    const std::size_t rows = static_cast<std::size_t>(L.tokens) * kv_heads;
    std::vector<float> k(rows * dim), v(rows * dim);
    for (std::size_t r = 0; r < rows; ++r) {
      const int h = static_cast<int>(r % kv_heads);
      decode_row(L, true, r, h, k.data() + r * dim);
      decode_row(L, false, r, h, v.data() + r * dim);
    }
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    std::vector<double> p(static_cast<std::size_t>(L.tokens)), acc(static_cast<std::size_t>(dim));
    for (int h = 0; h < heads; ++h) {
      const int kvh = h / group;
      const float* qh = q.data() + static_cast<std::size_t>(h) * dim;
      double top = -INFINITY;
      for (int t = 0; t < L.tokens; ++t) {
        const float* kt = k.data() + (static_cast<std::size_t>(t) * kv_heads + kvh) * dim;
        double s = 0;
        for (int d = 0; d < dim; ++d) s += static_cast<double>(qh[d]) * kt[d];
        p[static_cast<std::size_t>(t)] = s * scale;
        top = std::max(top, s * scale);
      }
      double sum = 0;
      for (double& x : p) sum += (x = std::exp(x - top));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int t = 0; t < L.tokens; ++t) {
        const float* vt = v.data() + (static_cast<std::size_t>(t) * kv_heads + kvh) * dim;
        const double w = p[static_cast<std::size_t>(t)] / sum;
        for (int d = 0; d < dim; ++d) acc[static_cast<std::size_t>(d)] += w * vt[d];
      }
      for (int d = 0; d < dim; ++d) {
        out[static_cast<std::size_t>(h) * dim + d] = static_cast<float>(acc[d]);
      }
    }
    return Ok{};
  }

  std::uint64_t bytes() const override {
    std::uint64_t total = 0;
    for (const Layer& L : m_layers) {
      total +=
          L.keys.size() + L.values.size() + L.key_scales.size() + L.value_scales.size() +
          sizeof(float) * (L.params.key_head_scales.size() + L.params.value_head_scales.size());
    }
    return total;
  }

  int tokens(int layer) const override {
    return layer >= 0 && layer < m_shape.layers ? m_layers[static_cast<std::size_t>(layer)].tokens
                                                : 0;
  }

 private:
  struct Layer {
    RowParams params;
    bool begun = false;
    int tokens = 0;
    std::vector<std::uint8_t> keys, values, key_scales, value_scales;
  };

  Status check_layer(int layer) const {
    if (layer < 0 || layer >= m_shape.layers) {
      return make_error(
          fmt::format("row attention: no layer {} (the model has {})", layer, m_shape.layers));
    }
    return Ok{};
  }

  // Row r ([token][kv head] order, KV head h) of keys or values as floats.
  void decode_row(const Layer& L, bool key, std::size_t r, int h, float* x) const {
    const int dim = m_shape.head_dim;
    const Format f = L.params.format;
    const std::vector<std::uint8_t>& data = key ? L.keys : L.values;
    const std::uint8_t* row = data.data() + r * stored_row_bytes(f, dim);
    // NVFP4's row_decode row is its nibbles then its block scales.
    std::uint8_t joined[256 / 2 + 256 / 16];
    if (f == Format::Nvfp4) {
      const std::vector<std::uint8_t>& scales = key ? L.key_scales : L.value_scales;
      std::memcpy(joined, row, static_cast<std::size_t>(dim / 2));
      std::memcpy(joined + dim / 2, scales.data() + r * stored_scale_bytes(f, dim),
                  static_cast<std::size_t>(dim / 16));
      row = joined;
    }
    for (int sub = 0; sub < dim / 8; ++sub) {
      float c[8];
      switch (f) {
        case Format::Fp16:
          for (int i = 0; i < 8; ++i)
            c[i] = row_decode::half_to_float(row_decode::load_u16(row + 2 * (8 * sub + i)));
          break;
        case Format::Fp8E4M3:
          row_decode::fp8_e4m3(row, sub,
                               (key ? L.params.key_head_scales
                                    : L.params.value_head_scales)[static_cast<std::size_t>(h)],
                               c);
          break;
        case Format::Q8_0:
          row_decode::q8_0(row, sub, c);
          break;
        case Format::Q4_0:
          row_decode::q4_0(row, sub, c);
          break;
        case Format::Nvfp4:
          row_decode::nvfp4(row, dim, sub, key ? L.params.key_global : L.params.value_global, c);
          break;
        default:
          std::fill(c, c + 8, NAN);
          break;
      }
      std::copy(c, c + 8, x + 8 * sub);
    }
  }

  RowAttentionShape m_shape;
  std::vector<Layer> m_layers;
};

}  // namespace

Result<std::unique_ptr<RowAttention>> make_reference_row_attention(const RowAttentionShape& shape) {
  if (shape.layers <= 0 || shape.kv_heads <= 0 || shape.heads <= 0 ||
      shape.heads % shape.kv_heads != 0 || shape.heads / shape.kv_heads > 8 ||
      shape.max_tokens < 0) {
    return make_error(fmt::format(
        "row attention: {} layers, {} query heads over {} KV heads, {} tokens: heads must be a "
        "positive multiple of KV heads, at most 8 of them a KV head",
        shape.layers, shape.heads, shape.kv_heads, shape.max_tokens));
  }
  if (shape.head_dim <= 0 || shape.head_dim % 32 != 0 || shape.head_dim > 256) {
    return make_error(fmt::format(
        "row attention: head_dim {} (the row formats need a multiple of 32, at most 256)",
        shape.head_dim));
  }
  return std::unique_ptr<RowAttention>(new ReferenceRowAttention(shape));
}

}  // namespace kvlab
