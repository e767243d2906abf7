// The runner's cache stored as each method's reference engine stores a cache it appends to
// (kv_store.h, make_method_store; issue 47).
//
// One layer holds, for keys and for values, the sealed tokens (units of `unit_tokens` rows, each
// encoded to `unit_bytes` bytes, one contiguous allocation) and a tail of fp16 rows not sealed
// yet. A SealRule says when tail rows are sealed:
//  - llama.cpp's block types, INT8 / INT4, FP8, NVFP4, MXFP4: every token's row is encoded as it
//    is written, from the float row, before the attention of that step reads it (llama.cpp's
//    llm_graph_input_attn_kv: cpy_k / cpy_v into the quantized cache, then the attention reads
//    the cache's view, the prompt's own attention included);
//  - KIVI (models/llama_kivi.py, LlamaAttention_KIVI.forward): keys wait in fp16 until R of them
//    have gathered, then all R are quantized per channel in groups of G tokens (at prefill the
//    largest multiple of R of the prompt); values keep the newest R tokens in fp16 and quantize
//    the oldest one per token as each new token arrives (at prefill all but the newest R). The
//    attention of a step reads the state before that step's sealing, and the prompt's attention
//    reads the exact prompt. Here a decode step's sealing waits for the next step (its first
//    act), so the cache between steps is what the last attention read; it holds at most one
//    group of R key rows (or one value row) in fp16 longer than the reference does.
// Parameters a method fixes per tensor (INT8 / INT4 scale, FP8 scales, NVFP4's global scale) are
// what the method's own quantizer gives for the prompt; every later token is encoded with them,
// saturating, as a serving engine with calibrated scales does (vLLM calc_kv_scales; its FP8 cache
// write scaled_vec_conversion divides by the scale).
//
// Encoding and decoding reuse the method's quantizer (quantizer.h) where its codes for one token
// are the unit: a tile of units is handed back to it as one QuantizedTensor to dequantize, so
// the bytes and the reconstruction are the quantizer's, which the reference tests check against
// gguf-py, libggml and NumPy. Attention reads the sealed codes in place (UnitCodec::fused): the
// dequantization folded out of the dot products where the parameters allow it (INT8 / INT4's
// per-tensor scale, KIVI's per-channel key steps), else each lane group decoded in registers
// (attention/format_rows.h). Rows the fused readers do not take (the fp16 tail, head sizes not
// a multiple of 16, builds without AVX2) are decoded a tile of 64 tokens at a time into a
// scratch buffer: scores over the keys tile by tile, a softmax, then the values tile by tile.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <tbb/parallel_for.h>

#include "attention/attention_common.h"
#include "attention/format_rows.h"
#include "attention/fused_kernels.h"
#include "codec/bitpack.h"
#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/model/row_attention.h"
#include "kvlab/engine/quant/channel_stats.h"  // rotation_head_seed
#include "kvlab/engine/quant/group_rules.h"
#include "kvlab/engine/quant/rotation.h"
#include "model/llama_attention.h"
#include "quant/fp4_quantizer.h"
#include "quant/fp8_calibrated.h"
#include "quant/fp8_impl.h"
#include "quant/ggml_block_quantizer.h"
#include "quant/group_quant.h"
#include "quant/symmetric_rows.h"

namespace kvlab {
namespace {

constexpr int kTileTokens = 64;

// Buffers a decode needs, one set per thread.
struct DecodeScratch {
  QuantizedTensor tile;
  std::vector<float> steps, mins;
  std::vector<std::uint16_t> half;
  // The fused readers': the folded query, its biases and the sums of codes.
  std::vector<float> folded, bias, sums;
};

// One role's stored form: `unit_tokens` rows [token][heads * dim] encode to `unit_bytes` bytes.
class UnitCodec {
 public:
  virtual ~UnitCodec() = default;
  int unit_tokens = 1;
  std::size_t unit_bytes = 0;
  std::uint64_t param_bytes = 0;  // parameters held once for the tensor (per-tensor scales)
  // Decoded rows are each head rotated by llama.cpp's attn_rot (llama_attn_rotate): the
  // attention rotates the queries (keys) or its output back (values) instead of every row.
  bool rotated = false;
  // The row format of a decode kernel that reads these one-token units in place (row_attention.h:
  // the unit is the token's KV-head rows back to back; NVFP4's all nibbles, then all block
  // scales), with what the rows need: FP8's scale per KV head, NVFP4's global scale. Empty when
  // no row kernel reads them.
  std::optional<row_decode::Format> row_format;
  std::vector<float> row_scales;
  float row_global = 1.f;
  virtual Status encode(const float* rows, std::uint8_t* dst) = 0;
  // `units` consecutive units at `src` into units * unit_tokens rows at `rows`.
  virtual void decode(const std::uint8_t* src, int units, float* rows,
                      DecodeScratch& scratch) const = 0;

  // Whether the attention reads this codec's codes in place (fused_keys, fused_values) rather
  // than decoding tiles of rows (decode): the codes' dequantization folded out of the dot
  // products, as KVComp's fused kernels do (fused_kernels.h).
  virtual bool fused() const { return false; }
  // For sealed tokens [first, last), whole units from `units` on (the unit of token `first`),
  // and `group` query heads per KV head: scores[qh * total + t] = q[qh] . k_t, the query `q`
  // [heads][dim] as the attention reads it (rotated and scaled).
  virtual void fused_keys(const std::uint8_t* /*units*/, int /*first*/, int /*last*/,
                          const float* /*q*/, int /*group*/, int /*total*/, float* /*scores*/,
                          DecodeScratch& /*scratch*/) const {}
  // out[qh] += sum over t in [first, last) of probs[qh * total + t] * v_t.
  virtual void fused_values(const std::uint8_t* /*units*/, int /*first*/, int /*last*/,
                            const float* /*probs*/, int /*group*/, int /*total*/, float* /*out*/,
                            DecodeScratch& /*scratch*/) const {}
};

#if KVLAB_FUSED_SIMD
// Asks for the cache lines of `bytes` bytes from `p` on: the next tile's while this one is read.
// The heads of a tile take their parts of each row in turn, so the first head's pass would
// otherwise wait on every line of the tile (a step reads the cache from memory: at 8K the
// hardware prefetcher alone left KIVI's key loop waiting on its loads).
inline void prefetch_bytes(const std::uint8_t* p, std::size_t bytes) {
  for (std::size_t i = 0; i < bytes; i += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p + i), _MM_HINT_T0);
  }
}

// body(tile, kv_head, t0, n) for tiles of at most kTileTokens sealed tokens [t0, t0 + n) from
// `first` to `last` and each KV head: `tile` the first token's unit, one-token units of
// `unit_bytes` from `units` (the unit of token `first`) on.
// The next tile's lines are asked for while this one is read.
template <class Body>
void for_token_tiles(const std::uint8_t* units, std::size_t unit_bytes, int heads, int first,
                     int last, Body&& body) {
  for (int t0 = first; t0 < last; t0 += kTileTokens) {
    const int n = std::min(kTileTokens, last - t0);
    const std::uint8_t* tile = units + static_cast<std::size_t>(t0 - first) * unit_bytes;
    if (t0 + n < last) {
      prefetch_bytes(tile + n * unit_bytes,
                     static_cast<std::size_t>(std::min(kTileTokens, last - t0 - n)) * unit_bytes);
    }
    for (int h = 0; h < heads; ++h) body(tile, h, t0, n);
  }
}

// The `group` query heads of one KV head against `n` rows of it: scores[g * total + i] =
// q[g] . row_i + bias[g] (the fused key loops).
template <class Rows>
void head_scores(const Rows& rows, int n, int group, int dim, const float* q, const float* bias,
                 float* scores, int total) {
  for (int g0 = 0; g0 < group; g0 += detail::kHeadTile) {
    detail::key_tile(rows, 0, n, std::min(detail::kHeadTile, group - g0), dim / detail::kLaneGroup,
                     q + static_cast<std::size_t>(g0) * dim, dim, bias + g0,
                     scores + static_cast<std::size_t>(g0) * total,
                     static_cast<std::size_t>(total));
  }
}

// out[g] += sum_i probs[g * total + i] * row_i for the `group` query heads of one KV head (the
// fused value loops).
template <class Rows>
void head_sums(const Rows& rows, int n, int group, int dim, const float* probs, int total,
               float* out) {
  for (int g0 = 0; g0 < group; g0 += detail::kHeadTile) {
    detail::value_tile(rows, 0, n, std::min(detail::kHeadTile, group - g0),
                       dim / detail::kLaneGroup, probs + static_cast<std::size_t>(g0) * total,
                       static_cast<std::size_t>(total), out + static_cast<std::size_t>(g0) * dim,
                       dim);
  }
}
#endif

// INT8 / INT4 per tensor (symmetric_quantizer.cpp): a token's [heads * dim] codes, 8 bits each or
// 4 bits two a byte (low nibble first), standing for (code - 2^(bits-1)) * scale with the scale
// the quantizer gives the prompt; later tokens are encoded with it, saturating.
// With one step and one minimum for the whole tensor the fused readers fold them into the query
// once a step: q . k = scale * (q . code) + min * sum(q), and sum_t p_t v_t = scale * sum_t p_t
// code_t + min * sum_t p_t, min = -2^(bits-1) * scale.
class SymmetricCodec final : public UnitCodec {
 public:
  SymmetricCodec(int heads, int dim, int bits, float scale)
      : m_heads(heads),
        m_dim(dim),
        m_bits(bits),
        m_scale(scale),
        m_inv(1.f / scale),
        m_codes(static_cast<std::size_t>(heads) * dim),
        m_steps(static_cast<std::size_t>(dim), scale),
        m_mins(static_cast<std::size_t>(dim), -static_cast<float>(1 << (bits - 1)) * scale) {
    unit_tokens = 1;
    unit_bytes = m_codes.size() * bits / 8;
    param_bytes = sizeof(float);
  }

  Status encode(const float* x, std::uint8_t* dst) override {
    for (std::size_t i = 0; i < m_codes.size(); ++i) {
      m_codes[i] = rules::symmetric_code(x[i], m_inv, m_bits);
    }
    std::memset(dst, 0, unit_bytes);
    detail::pack_codes(m_codes.data(), m_codes.size(), m_bits, dst, 0);
    return Ok{};
  }

  // In place, by the quantizer's own decoder (symmetric_rows.h).
  void decode(const std::uint8_t* src, int units, float* rows, DecodeScratch&) const override {
    for (int u = 0; u < units; ++u) {
      detail::symmetric_decode(src + u * unit_bytes, 0, m_codes.size(), m_bits, m_scale,
                               rows + u * m_codes.size());
    }
  }

#if KVLAB_FUSED_SIMD
  bool fused() const override {
    return m_dim % detail::kLaneGroup == 0;
  }

  void fused_keys(const std::uint8_t* units, int first, int last, const float* q, int group,
                  int total, float* scores, DecodeScratch& s) const override {
    const std::size_t qd = static_cast<std::size_t>(m_heads) * group * m_dim;
    s.folded.resize(qd), s.bias.resize(static_cast<std::size_t>(m_heads) * group);
    for (int h = 0; h < m_heads; ++h) {
      const std::size_t qh = static_cast<std::size_t>(h) * group;
      if (m_bits == 4) {
        detail::fold_keys<true>(q + qh * m_dim, group, m_dim, m_steps.data(), m_mins.data(), 1.f,
                                s.folded.data() + qh * m_dim, s.bias.data() + qh);
      } else {
        detail::fold_keys<false>(q + qh * m_dim, group, m_dim, m_steps.data(), m_mins.data(), 1.f,
                                 s.folded.data() + qh * m_dim, s.bias.data() + qh);
      }
    }
    for_tiles(units, first, last, [&](const auto& rows, int h, int t0, int n) {
      const std::size_t qh = static_cast<std::size_t>(h) * group;
      head_scores(rows, n, group, m_dim, s.folded.data() + qh * m_dim, s.bias.data() + qh,
                  scores + qh * total + t0, total);
    });
  }

  void fused_values(const std::uint8_t* units, int first, int last, const float* probs, int group,
                    int total, float* out, DecodeScratch& s) const override {
    const int q_heads = m_heads * group;
    s.sums.assign(static_cast<std::size_t>(q_heads) * m_dim, 0.f);
    for_tiles(units, first, last, [&](const auto& rows, int h, int t0, int n) {
      const std::size_t qh = static_cast<std::size_t>(h) * group;
      head_sums(rows, n, group, m_dim, probs + qh * total + t0, total, s.sums.data() + qh * m_dim);
    });
    const float min = m_mins[0];
    for (int qh = 0; qh < q_heads; ++qh) {
      const float* p = probs + static_cast<std::size_t>(qh) * total;
      const float bias = min * detail::lane_sum(p + first, static_cast<std::size_t>(last - first));
      const float* sum = s.sums.data() + static_cast<std::size_t>(qh) * m_dim;
      float* o = out + static_cast<std::size_t>(qh) * m_dim;
      for (int c = 0; c < m_dim; ++c) o[c] += m_scale * sum[c] + bias;
    }
  }
#endif

 private:
#if KVLAB_FUSED_SIMD
  // body(rows, kv_head, t0, n): the codes of each tile and KV head in place.
  template <class Body>
  void for_tiles(const std::uint8_t* units, int first, int last, Body&& body) const {
    const std::size_t head_bytes = static_cast<std::size_t>(m_dim) * m_bits / 8;
    for_token_tiles(units, unit_bytes, m_heads, first, last,
                    [&](const std::uint8_t* tile, int h, int t0, int n) {
                      const std::uint8_t* base = tile + static_cast<std::size_t>(h) * head_bytes;
                      if (m_bits == 4) {
                        body(detail::NibbleRows{base, unit_bytes}, h, t0, n);
                      } else {
                        body(detail::ByteRows{base, unit_bytes}, h, t0, n);
                      }
                    });
  }
#endif

  int m_heads, m_dim, m_bits;
  float m_scale, m_inv;
  std::vector<std::uint8_t> m_codes;  // encode's one row of codes
  // The step and minimum of every channel (all the same): fold_keys's arguments.
  std::vector<float> m_steps, m_mins;
};

// A codec whose unit is one token as the method's quantizer codes it, `bytes` a token.
// `encoder`, when set, encodes a row with the fixed parameters instead of the quantizer (which
// would compute them from the row); `row_decoder`, when set, decodes a unit in place instead of
// handing a tile of units to the quantizer. Where the quantizer lays a tensor out in parts (NVFP4:
// all nibbles, then all block scales), a unit is one token's parts back to back and the codec
// has both, since the quantizer's own layout would differ.
class QuantizerCodec final : public UnitCodec {
 public:
  using RowEncoder = std::function<void(const float* row, std::uint8_t* dst)>;
  using RowDecoder = std::function<void(const std::uint8_t* src, float* row)>;
  // `decoder`: the quantizer that reconstructs, when not `quantizer` (llama.cpp's types decode
  // without the rotation back).
  QuantizerCodec(std::unique_ptr<Quantizer> quantizer, TensorRole role, int heads, int dim,
                 std::size_t bytes, std::vector<float> params, RowEncoder encoder,
                 std::unique_ptr<Quantizer> decoder = nullptr, RowDecoder row_decoder = nullptr)
      : m_quantizer(std::move(quantizer)),
        m_decoder(std::move(decoder)),
        m_role(role),
        m_heads(heads),
        m_dim(dim),
        m_params(std::move(params)),
        m_encoder(std::move(encoder)),
        m_row_decoder(std::move(row_decoder)) {
    unit_tokens = 1;
    unit_bytes = bytes;
    param_bytes = m_params.size() * sizeof(float);
  }

  Status encode(const float* rows, std::uint8_t* dst) override {
    if (m_encoder) {
      m_encoder(rows, dst);
      return Ok{};
    }
    const std::size_t row = static_cast<std::size_t>(m_heads) * m_dim;
    auto q = m_quantizer->quantize(TensorView::of_floats({rows, row}, m_heads, m_dim), m_role);
    if (!q) return q.error();
    if (q->codes.size() != unit_bytes) {
      return make_error(fmt::format("KV store: {} gave {} bytes for a token, not {}",
                                    m_quantizer->name(), q->codes.size(), unit_bytes));
    }
    std::memcpy(dst, q->codes.data(), unit_bytes);
    return Ok{};
  }

  void decode(const std::uint8_t* src, int units, float* rows,
              DecodeScratch& scratch) const override {
    if (m_row_decoder) {
      const std::size_t row = static_cast<std::size_t>(m_heads) * m_dim;
      for (int u = 0; u < units; ++u) m_row_decoder(src + u * unit_bytes, rows + u * row);
      return;
    }
    QuantizedTensor& tile = scratch.tile;
    tile.role = m_role;
    tile.tokens = units, tile.heads = m_heads, tile.dim = m_dim;
    tile.codes.resize(static_cast<std::size_t>(units) * unit_bytes);
    tile.params = m_params;
    std::memcpy(tile.codes.data(), src, tile.codes.size());
    const std::size_t n = static_cast<std::size_t>(units) * m_heads * m_dim;
    const Quantizer& q = m_decoder ? *m_decoder : *m_quantizer;
    if (!q.dequantize_tokens(tile, 0, units, {rows, n})) q.dequantize(tile, {rows, n});
  }

 private:
  std::unique_ptr<Quantizer> m_quantizer, m_decoder;
  TensorRole m_role;
  int m_heads, m_dim;
  std::vector<float> m_params;
  RowEncoder m_encoder;
  RowDecoder m_row_decoder;
};

#if KVLAB_FUSED_SIMD
// A codec of one-token units that the fused loops read in place, each lane group decoded in
// registers by a Rows type of attention/format_rows.h with the format's own arithmetic: the
// keys' scores and the values' weighted sums are the fused fp16 kernel's loops over other rows.
// `make_rows(tile, kv_head)` gives the rows of one KV head from a tile's first unit; encoding
// and tile decoding (the reconstruction, and rows outside the fused path) are `inner`'s.
template <class MakeRows>
class InRegisterCodec final : public UnitCodec {
 public:
  InRegisterCodec(std::unique_ptr<UnitCodec> inner, int heads, int dim, MakeRows make_rows)
      : m_inner(std::move(inner)), m_heads(heads), m_dim(dim), m_make_rows(std::move(make_rows)) {
    unit_tokens = m_inner->unit_tokens;
    unit_bytes = m_inner->unit_bytes;
    param_bytes = m_inner->param_bytes;
    rotated = m_inner->rotated;
    row_format = m_inner->row_format;
    row_scales = m_inner->row_scales;
    row_global = m_inner->row_global;
  }

  Status encode(const float* rows, std::uint8_t* dst) override {
    return m_inner->encode(rows, dst);
  }
  void decode(const std::uint8_t* src, int units, float* rows,
              DecodeScratch& scratch) const override {
    m_inner->decode(src, units, rows, scratch);
  }

  bool fused() const override { return true; }

  void fused_keys(const std::uint8_t* units, int first, int last, const float* q, int group,
                  int total, float* scores, DecodeScratch& s) const override {
    s.bias.assign(static_cast<std::size_t>(group), 0.f);
    for_token_tiles(units, unit_bytes, m_heads, first, last,
                    [&](const std::uint8_t* tile, int h, int t0, int n) {
                      const std::size_t qh = static_cast<std::size_t>(h) * group;
                      head_scores(m_make_rows(tile, h), n, group, m_dim, q + qh * m_dim,
                                  s.bias.data(), scores + qh * total + t0, total);
                    });
  }

  void fused_values(const std::uint8_t* units, int first, int last, const float* probs, int group,
                    int total, float* out, DecodeScratch&) const override {
    for_token_tiles(units, unit_bytes, m_heads, first, last,
                    [&](const std::uint8_t* tile, int h, int t0, int n) {
                      const std::size_t qh = static_cast<std::size_t>(h) * group;
                      head_sums(m_make_rows(tile, h), n, group, m_dim, probs + qh * total + t0,
                                total, out + qh * m_dim);
                    });
  }

 private:
  std::unique_ptr<UnitCodec> m_inner;
  int m_heads, m_dim;
  MakeRows m_make_rows;
};

template <class MakeRows>
std::unique_ptr<UnitCodec> read_in_registers(std::unique_ptr<UnitCodec> inner, int heads, int dim,
                                             MakeRows make_rows) {
  return std::make_unique<InRegisterCodec<MakeRows>>(std::move(inner), heads, dim,
                                                     std::move(make_rows));
}
#endif

// KIVI's groups (group_quant.h): keys a unit of G tokens quantized per channel, values a unit of
// one token quantized in groups of G channels; each unit's codes, then its steps, then its
// minimums in the parameter dtype (fp16 as the reference keeps them).
class KiviCodec final : public UnitCodec {
 public:
  KiviCodec(TensorRole role, int heads, int dim, int bits, int group, DType params)
      : m_role(role), m_heads(heads), m_dim(dim) {
    m_spec = detail::tier_group_spec(bits, group, params);
    unit_tokens = role == TensorRole::Key ? group : 1;
    m_groups = detail::group_unit_count(m_spec, role, unit_tokens, heads, dim);
    m_code_bytes = detail::packed_bytes(static_cast<std::size_t>(unit_tokens) * heads * dim, bits);
    m_param_size = params == DType::F32 ? 4 : 2;
    unit_bytes = m_code_bytes + 2 * m_groups * m_param_size;
    m_steps.resize(m_groups), m_mins.resize(m_groups);
    m_width = detail::value_group_width(m_spec, dim);
  }

  // Whole bytes of codes per unit, so that units' codes concatenate into one stream.
  static bool fits(TensorRole role, int heads, int dim, int bits, int group) {
    const std::size_t values =
        static_cast<std::size_t>(role == TensorRole::Key ? group : 1) * heads * dim;
    return values * bits % 8 == 0;
  }

  Status encode(const float* rows, std::uint8_t* dst) override {
    const std::size_t n = static_cast<std::size_t>(unit_tokens) * m_heads * m_dim;
    std::memset(dst, 0, m_code_bytes);
    detail::quantize_groups(TensorView::of_floats({rows, n}, m_heads, m_dim), m_role, m_spec, dst,
                            0, m_steps.data(), m_mins.data());
    write_params(m_steps, dst + m_code_bytes);
    write_params(m_mins, dst + m_code_bytes + m_groups * m_param_size);
    return Ok{};
  }

  // Straight from each unit's stored bytes: its steps and minimums into floats, then each token
  // row reconstructed by the quantizer's own decoder (group_decode_row: min + code * step; keys a
  // step and minimum per channel, values per G channels of a head), reading the codes in place.
  void decode(const std::uint8_t* src, int units, float* rows,
              DecodeScratch& scratch) const override {
    const std::size_t hd = static_cast<std::size_t>(m_heads) * m_dim;
    scratch.steps.resize(m_groups), scratch.mins.resize(m_groups);
    const float* step = scratch.steps.data();
    const float* mn = scratch.mins.data();
    for (int u = 0; u < units; ++u) {
      const std::uint8_t* at = src + u * unit_bytes;
      read_params(at + m_code_bytes, scratch.steps.data(), scratch);
      read_params(at + m_code_bytes + m_groups * m_param_size, scratch.mins.data(), scratch);
      for (int r = 0; r < unit_tokens; ++r) {
        const std::size_t first = static_cast<std::size_t>(r) * hd;  // its first code
        float* o = rows + (static_cast<std::size_t>(u) * unit_tokens + r) * hd;
        if (m_role == TensorRole::Key) {
          detail::group_decode_row(at, first, hd, m_spec.bits, mn, step, true, o);
          continue;
        }
        std::size_t g = 0;
        for (int h = 0; h < m_heads; ++h) {
          for (int c0 = 0; c0 < m_dim; c0 += m_width, ++g) {
            const std::size_t base = static_cast<std::size_t>(h) * m_dim + c0;
            const auto n = static_cast<std::size_t>(std::min(m_width, m_dim - c0));
            detail::group_decode_row(at, first + base, n, m_spec.bits, mn + g, step + g, false,
                                     o + base);
          }
        }
      }
    }
  }

#if KVLAB_FUSED_SIMD
  // Read in place where the rows' lane groups hold whole codes of one group: 2, 4 or 8 bits,
  // fp16 parameters (the reference's; float32 and bf16 ones take the tile path), value groups a
  // multiple of 16 channels wide.
  bool fused() const override {
    return m_dim % detail::kLaneGroup == 0 &&
           (m_spec.bits == 2 || m_spec.bits == 4 || m_spec.bits == 8) &&
           m_spec.params == DType::F16 &&
           (m_role == TensorRole::Key || m_width % detail::kLaneGroup == 0);
  }

  // Unit by unit: its steps and minimums into floats, folded into each head's queries
  // (fold_keys: q . k = (q * step) . code + q . min), then the plain codes' dot products.
  void fused_keys(const std::uint8_t* units, int first, int last, const float* q, int group,
                  int total, float* scores, DecodeScratch& s) const override {
    with_bits([&](auto bits) {
      constexpr int B = decltype(bits)::value;
      const std::size_t hd = static_cast<std::size_t>(m_heads) * m_dim;
      s.steps.resize(m_groups), s.mins.resize(m_groups);
      s.folded.resize(static_cast<std::size_t>(group) * m_dim), s.bias.resize(group);
      for (int t0 = first; t0 < last; t0 += unit_tokens) {
        const std::uint8_t* at =
            units + static_cast<std::size_t>((t0 - first) / unit_tokens) * unit_bytes;
        if (t0 + unit_tokens < last) prefetch_bytes(at + unit_bytes, unit_bytes);
        read_params(at + m_code_bytes, s.steps.data(), s);
        read_params(at + m_code_bytes + m_groups * m_param_size, s.mins.data(), s);
        for (int h = 0; h < m_heads; ++h) {
          const std::size_t c0 = static_cast<std::size_t>(h) * m_dim;
          const std::size_t q0 = static_cast<std::size_t>(h) * group;
          detail::fold_keys<false>(q + q0 * m_dim, group, m_dim, s.steps.data() + c0,
                                   s.mins.data() + c0, 1.f, s.folded.data(), s.bias.data());
          head_scores(detail::PackedRows<B>{at + c0 * B / 8, hd * B / 8}, unit_tokens, group, m_dim,
                      s.folded.data(), s.bias.data(), scores + q0 * total + t0, total);
        }
      }
    });
  }

  void fused_values(const std::uint8_t* units, int first, int last, const float* probs, int group,
                    int total, float* out, DecodeScratch&) const override {
    with_bits([&](auto bits) {
      constexpr int B = decltype(bits)::value;
      const std::size_t per_head = static_cast<std::size_t>(m_dim / m_width);
      for_token_tiles(units, unit_bytes, m_heads, first, last,
                      [&](const std::uint8_t* tile, int h, int t0, int n) {
                        const std::size_t codes = static_cast<std::size_t>(h) * m_dim * B / 8;
                        const detail::KiviValueRows<B> rows{tile + codes, unit_bytes,
                                                            m_code_bytes - codes + 2 * h * per_head,
                                                            2 * m_groups, m_width};
                        const std::size_t qh = static_cast<std::size_t>(h) * group;
                        head_sums(rows, n, group, m_dim, probs + qh * total + t0, total,
                                  out + qh * m_dim);
                      });
    });
  }
#endif

 private:
#if KVLAB_FUSED_SIMD
  template <class Body>
  void with_bits(Body&& body) const {
    if (m_spec.bits == 2) return body(std::integral_constant<int, 2>{});
    if (m_spec.bits == 4) return body(std::integral_constant<int, 4>{});
    body(std::integral_constant<int, 8>{});
  }
#endif

  void write_params(const std::vector<float>& v, std::uint8_t* dst) const {
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (m_param_size == 4) {
        std::memcpy(dst + 4 * i, &v[i], 4);
      } else {
        const std::uint16_t h =
            m_spec.params == DType::BF16 ? float_to_bf16(v[i]) : float_to_fp16(v[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
    }
  }
  // m_groups parameters at `src` into `out`.
  void read_params(const std::uint8_t* src, float* out, DecodeScratch& scratch) const {
    if (m_param_size == 4) {
      std::memcpy(out, src, m_groups * 4);
      return;
    }
    if (m_spec.params == DType::F16 && m_groups <= 8) {  // a value unit's few: at once
      std::uint16_t h[8] = {};
      std::memcpy(h, src, m_groups * 2);
#if defined(__F16C__)
      float f[8];
      _mm256_storeu_ps(f, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h))));
      std::memcpy(out, f, m_groups * sizeof(float));
#else
      for (std::size_t i = 0; i < m_groups; ++i) out[i] = fp16_to_float(h[i]);
#endif
      return;
    }
    scratch.half.resize(m_groups);
    std::memcpy(scratch.half.data(), src, m_groups * 2);
    if (m_spec.params == DType::BF16) {
      for (std::size_t i = 0; i < m_groups; ++i) out[i] = bf16_to_float(scratch.half[i]);
    } else {
      fp16_to_float(scratch.half, {out, m_groups});
    }
  }

  TensorRole m_role;
  int m_heads, m_dim;
  detail::GroupSpec m_spec;
  std::size_t m_groups = 0, m_code_bytes = 0, m_param_size = 2;
  int m_width = 0;  // channels of a value unit
  std::vector<float> m_steps, m_mins;
};

// fp16 rows as they are: the uncompressed cache a serving engine holds (the baseline), stored
// and read by the same code as every method.
// When tail rows are sealed: whenever `keep` + `quantum` or more wait, the oldest multiple of
// `quantum` beyond the newest `keep`; `direct`: each row is encoded from its float values at
// once (no fp16 tail), before the attention of its step.
// `never`: rows stay in the fp16 tail (the fp16 cache). `prompt_exact`: the prompt's attention
// reads the exact prompt, which the cache takes after it (KIVI); otherwise the prompt is written
// first and its attention reads it back.
struct SealRule {
  int quantum = 1;
  int keep = 0;
  bool direct = true;
  bool never = false;
  bool prompt_exact = false;
};

bool is_kivi(const MethodConfig& m) {
  return m.kind == MethodKind::Kivi;
}

// `m` empty: the fp16 cache.
SealRule seal_rule(const std::optional<MethodConfig>& m, TensorRole role) {
  if (!m) return {1, 0, false, true, false};
  if (!is_kivi(*m)) return {};
  if (role == TensorRole::Key) return {m->residual, 0, false, false, true};
  return {1, m->residual, false, false, true};
}

// The codec of `role` for a layer whose first tokens (the prompt) are `rows` [n][heads * dim]:
// the per-tensor parameters are those the method's quantizer gives the prompt.
Result<std::unique_ptr<UnitCodec>> make_codec(const MethodConfig& m, TensorRole role, int heads,
                                              int dim, const float* rows, int n) {
  const std::size_t row = static_cast<std::size_t>(heads) * dim;
  const TensorView prompt = TensorView::of_floats({rows, row * n}, heads, dim);
  const auto quantizer = [&]() { return make_quantizer(m); };
  // The method's quantizer and what it makes of the whole prompt: the per-tensor parameters.
  struct Fitted {
    std::unique_ptr<Quantizer> quantizer;
    QuantizedTensor prompt;
  };
  const auto fit = [&]() -> Result<Fitted> {
    auto q = quantizer();
    if (!q) return q.error();
    auto fitted = (*q)->quantize(prompt, role);
    if (!fitted) return fitted.error();
    return Fitted{std::move(*q), std::move(*fitted)};
  };
  if (method_is_llama_block(m.kind) || m.kind == MethodKind::Mxfp4) {
    // One token's row of blocks, no parameter outside them. llama.cpp's types are written
    // rotated (attn_rot) and read so: decoded without the rotation back.
    auto q = quantizer();
    if (!q) return q.error();
    auto probe = (*q)->quantize(TensorView::of_floats({rows, row}, heads, dim), role);
    if (!probe) return probe.error();
    std::unique_ptr<Quantizer> decoder;
    const std::optional<GgmlType> type = method_ggml_type(m.kind);
    const bool rotated = type && m.llama_rotation && llama_attn_rot_enabled(*type, dim);
    if (rotated) decoder = detail::make_ggml_block_quantizer(*type, false);
    // A row is the type's blocks back to back, as llama.cpp's cache rows are: decoded in place
    // from the stored bytes, block by block (ggml_quants.cpp), with no copy of the codes.
    QuantizerCodec::RowDecoder rows_of_blocks;
    const auto row_bytes =
        type ? ggml_row_bytes(*type, static_cast<std::int64_t>(row)) : std::nullopt;
    if (row_bytes && *row_bytes == probe->codes.size() && ggml_type_info(*type)->dequantizable) {
      rows_of_blocks = [t = *type, row](const std::uint8_t* src, float* out) {
        ggml_dequantize(t, src, out, static_cast<std::int64_t>(row));
      };
    }
    auto codec = std::make_unique<QuantizerCodec>(
        std::move(*q), role, heads, dim, probe->codes.size(), std::vector<float>{}, nullptr,
        std::move(decoder), std::move(rows_of_blocks));
    codec->rotated = rotated;
    // llama.cpp's q8_0 and q4_0 rows are what the GPU's decode kernel reads (row_decode.h).
    if (type && (*type == GgmlType::Q8_0 || *type == GgmlType::Q4_0)) {
      const auto format =
          *type == GgmlType::Q8_0 ? row_decode::Format::Q8_0 : row_decode::Format::Q4_0;
      if (dim % ggml_block::kValues == 0 &&
          codec->unit_bytes ==
              static_cast<std::size_t>(heads) * row_decode::row_bytes(format, dim)) {
        codec->row_format = format;
      }
    }
#if KVLAB_FUSED_SIMD
    // Rows of 32-value blocks read in place where a head's values are whole blocks (MXFP4's
    // quantizer writes llama.cpp's block_mxfp4 rows).
    const std::optional<GgmlType> blocks =
        m.kind == MethodKind::Mxfp4 ? std::optional<GgmlType>(GgmlType::MXFP4) : type;
    const bool whole_blocks =
        blocks && dim % ggml_block::kValues == 0 &&
        ggml_row_bytes(*blocks, static_cast<std::int64_t>(row)) == codec->unit_bytes;
    const auto in_place = [&](auto type_c) -> std::unique_ptr<UnitCodec> {
      using Rows = detail::GgmlRows<decltype(type_c)::value>;
      const std::size_t unit = codec->unit_bytes;
      const std::size_t head =
          static_cast<std::size_t>(dim / ggml_block::kValues) * Rows::kBlockBytes;
      return read_in_registers(std::move(codec), heads, dim, [=](const std::uint8_t* tile, int h) {
        return Rows{tile + static_cast<std::size_t>(h) * head, unit};
      });
    };
    if (whole_blocks) {
      switch (*blocks) {
        case GgmlType::Q4_0:
          return in_place(std::integral_constant<GgmlType, GgmlType::Q4_0>{});
        case GgmlType::Q4_1:
          return in_place(std::integral_constant<GgmlType, GgmlType::Q4_1>{});
        case GgmlType::Q5_0:
          return in_place(std::integral_constant<GgmlType, GgmlType::Q5_0>{});
        case GgmlType::Q5_1:
          return in_place(std::integral_constant<GgmlType, GgmlType::Q5_1>{});
        case GgmlType::Q8_0:
          return in_place(std::integral_constant<GgmlType, GgmlType::Q8_0>{});
        case GgmlType::IQ4_NL:
          return in_place(std::integral_constant<GgmlType, GgmlType::IQ4_NL>{});
        case GgmlType::MXFP4:
          return in_place(std::integral_constant<GgmlType, GgmlType::MXFP4>{});
        default:
          break;
      }
    }
#endif
    return std::unique_ptr<UnitCodec>(std::move(codec));
  }
  switch (m.kind) {
    case MethodKind::Kivi:
      if (!KiviCodec::fits(role, heads, dim, m.bits, m.group_size)) {
        return make_error(
            fmt::format("kivi: a {}'s {}-bit codes of {} x {} values do not fill "
                        "whole bytes",
                        role_name(role), m.bits, heads, dim));
      }
      return std::unique_ptr<UnitCodec>(std::make_unique<KiviCodec>(
          role, heads, dim, m.bits, m.group_size, method_param_dtype(m)));
    case MethodKind::Int8:
    case MethodKind::Int4: {
      auto fitted = fit();
      if (!fitted) return fitted.error();
      const int bits = m.kind == MethodKind::Int8 ? 8 : 4;
      if (row * bits % 8 != 0) {
        return make_error(
            fmt::format("int{}: a token's {} values do not fill whole bytes", bits, row));
      }
      return std::unique_ptr<UnitCodec>(
          std::make_unique<SymmetricCodec>(heads, dim, bits, fitted->prompt.params.at(0)));
    }
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2: {
      auto fitted = fit();
      if (!fitted) return fitted.error();
      detail::Fp8CalibratedConfig c;
      c.format = m.kind == MethodKind::Fp8E4M3 ? Fp8Format::E4M3 : Fp8Format::E5M2;
      c.per_head = m.per_head_scale;
      c.k_scales = c.v_scales = fitted->prompt.params;  // this codec encodes `role` only
      auto fixed = detail::make_fp8_calibrated_quantizer(c);
      if (!fixed) return fixed.error();
      // Decoded in place, each head's codes times its scale (or the tensor's).
      auto decoder = [format = c.format, scales = fitted->prompt.params, heads, dim](
                         const std::uint8_t* src, float* x) {
        for (int h = 0; h < heads; ++h) {
          const float s = scales.size() == 1 ? scales[0] : scales[static_cast<std::size_t>(h)];
          const std::size_t at = static_cast<std::size_t>(h) * dim;
          if (format == Fp8Format::E4M3) {
            detail::fp8_decode_scaled<detail::E4M3>(src + at, dim, s, x + at);
          } else {
            detail::fp8_decode_scaled<detail::E5M2>(src + at, dim, s, x + at);
          }
        }
      };
      auto codec = std::unique_ptr<UnitCodec>(
          std::make_unique<QuantizerCodec>(std::move(*fixed), role, heads, dim, row,
                                           fitted->prompt.params, nullptr, nullptr, decoder));
      if (c.format == Fp8Format::E4M3) {
        codec->row_format = row_decode::Format::Fp8E4M3;
        for (int h = 0; h < heads; ++h) {
          const std::vector<float>& p = fitted->prompt.params;
          codec->row_scales.push_back(p.size() == 1 ? p[0] : p.at(static_cast<std::size_t>(h)));
        }
      }
#if KVLAB_FUSED_SIMD
      if (dim % detail::kLaneGroup == 0) {
        const auto scale = [scales = fitted->prompt.params](int h) {
          return scales.size() == 1 ? scales[0] : scales[static_cast<std::size_t>(h)];
        };
        const auto head = [dim](const std::uint8_t* tile, int h) {
          return tile + static_cast<std::size_t>(h) * dim;
        };
        if (c.format == Fp8Format::E4M3) {
          return read_in_registers(
              std::move(codec), heads, dim, [=](const std::uint8_t* tile, int h) {
                return detail::Fp8Rows<detail::E4M3>{head(tile, h), row, scale(h)};
              });
        }
        return read_in_registers(
            std::move(codec), heads, dim, [=](const std::uint8_t* tile, int h) {
              return detail::Fp8Rows<detail::E5M2>{head(tile, h), row, scale(h)};
            });
      }
#endif
      return codec;
    }
    case MethodKind::Nvfp4: {
      auto fitted = fit();
      if (!fitted) return fitted.error();
      const float global = fitted->prompt.params.at(0);
      const std::size_t nibbles = row / 2, scales = row / detail::kNvfp4BlockSize;
      auto encoder = [=](const float* x, std::uint8_t* dst) {
        detail::nvfp4_quantize_row(x, static_cast<int>(row), global, dst, dst + nibbles);
      };
      // Decoded in place from a token's nibbles and block scales, as the quantizer decodes.
      auto decoder = [=](const std::uint8_t* src, float* x) {
        detail::nvfp4_dequantize_row(src, src + nibbles, static_cast<int>(row), global, x);
      };
      auto codec = std::unique_ptr<UnitCodec>(std::make_unique<QuantizerCodec>(
          std::move(fitted->quantizer), role, heads, dim, nibbles + scales,
          std::vector<float>{global}, encoder, nullptr, decoder));
      if (dim % detail::kNvfp4BlockSize == 0) {
        codec->row_format = row_decode::Format::Nvfp4;
        codec->row_global = global;
      }
#if KVLAB_FUSED_SIMD
      if (dim % detail::kNvfp4BlockSize == 0) {
        const std::size_t unit = codec->unit_bytes;
        const auto block_scales =
            std::make_shared<const std::array<float, 256>>(detail::nvfp4_block_scales(global));
        return read_in_registers(
            std::move(codec), heads, dim, [=](const std::uint8_t* tile, int h) {
              const std::size_t at = static_cast<std::size_t>(h) * dim;
              return detail::Nvfp4Rows{tile + at / 2, unit,
                                       nibbles - at / 2 + at / detail::kNvfp4BlockSize,
                                       block_scales->data()};
            });
      }
#endif
      return codec;
    }
    default:
      break;
  }
  return make_error(fmt::format(
      "the runner does not store {} yet (it stores kvcomp, kivi, int8, int4, fp8, q8_0, q4_0, "
      "q4_1, q5_0, q5_1, iq4_nl, nvfp4 and mxfp4); `kvlab quality` simulates it",
      method_id(m.kind)));
}

// `--rotation`: each KV head's vectors rotated before the method's codec sees them, by the
// matrices the rotated quantizer (quant/rotated_quantizer.cpp) draws from the same seed, so the
// stored rows are those `kvlab quality` simulates. Keys always, values with rotate_values. The
// attention rotates the query (keys) and the output back (values) instead of the rows, as
// llama.cpp does with its own rotation (which, for its block types, comes on top of this one).
class HeadRotations {
 public:
  static Result<HeadRotations> create(const MethodConfig& m, int kv_heads, int dim) {
    HeadRotations r;
    r.m_values = m.rotate_values;
    r.m_dim = dim;
    for (int h = 0; h < kv_heads; ++h) {
      const std::uint64_t seed = rotation_head_seed(m.rotation_seed, h);
      if (m.rotation == RotationKind::Hadamard) {
        auto made = RandomizedHadamard::create(dim, seed);
        if (!made) return make_error(fmt::format("hadamard rotation: {}", made.message()));
        r.m_hadamard.push_back(std::move(*made));
      } else {
        auto made = RandomOrthogonalRotation::create(dim, seed);
        if (!made) return make_error(fmt::format("orthogonal rotation: {}", made.message()));
        r.m_orthogonal.push_back(std::move(*made));
      }
    }
    return r;
  }
  bool rotates(TensorRole role) const { return role == TensorRole::Key || m_values; }
  // Every [token][KV head] vector of `tokens` rows (or query head qh of KV head qh / group with
  // `group` > 1: one row of heads x group vectors) rotated, or rotated back.
  void apply(float* rows, std::size_t vectors, int kv_heads, int group, bool inverse) const {
    for (std::size_t i = 0; i < vectors; ++i) {
      const int h = static_cast<int>(i % (static_cast<std::size_t>(kv_heads) * group)) / group;
      const std::span<float> x(rows + i * m_dim, static_cast<std::size_t>(m_dim));
      if (!m_hadamard.empty()) {
        inverse ? m_hadamard[static_cast<std::size_t>(h)].inverse(x)
                : m_hadamard[static_cast<std::size_t>(h)].apply(x);
      } else {
        inverse ? m_orthogonal[static_cast<std::size_t>(h)].inverse(x)
                : m_orthogonal[static_cast<std::size_t>(h)].apply(x);
      }
    }
  }

 private:
  bool m_values = false;
  int m_dim = 0;
  std::vector<RandomizedHadamard> m_hadamard;
  std::vector<RandomOrthogonalRotation> m_orthogonal;
};

class MethodStore final : public KvStore {
 public:
  // `method` without its rotation, which `rotations` carries; `label` names the whole method.
  // `decode`: a RowAttention that runs the decode steps' attention over its copy of the rows.
  MethodStore(const LlamaConfig& model, std::optional<MethodConfig> method, int max_tokens,
              std::optional<HeadRotations> rotations = std::nullopt, std::string label = "fp16",
              std::unique_ptr<RowAttention> decode = nullptr)
      : m_heads(model.heads),
        m_kv_heads(model.kv_heads),
        m_head_dim(model.head_dim()),
        m_row(static_cast<std::size_t>(model.kv_dim())),
        m_method(method),
        m_rotations(std::move(rotations)),
        m_label(std::move(label)),
        m_max_tokens(max_tokens),
        m_layers(static_cast<std::size_t>(model.layers)),
        m_decode(std::move(decode)) {}

  Status append_and_attend(int layer, int pos, int n, const float* q, float* keys, float* values,
                           float* out) override {
    KVLAB_TRY(check_append(layer, static_cast<int>(m_layers.size()), pos, n, tokens(layer)));
    Layer& L = m_layers[static_cast<std::size_t>(layer)];
    const bool prompt_exact = seal_rule(m_method, TensorRole::Key).prompt_exact;
    if (pos == 0) {
      detail::AttentionArgs args;
      args.layer = layer;
      args.heads = m_heads, args.kv_heads = m_kv_heads, args.head_dim = m_head_dim;
      args.pos = 0, args.n = n;
      args.q = q, args.keys = keys, args.values = values;
      // KIVI: the prompt's attention reads the exact prompt, before the cache takes it.
      if (prompt_exact) {
        KVLAB_TRY(detail::causal_attention(args, m_scratch, out));
        KVLAB_TRY(store_prompt(L, keys, values, n));
        return hand_over(L, layer);
      }
      // Every other cache: the prompt is written first and its attention reads it back, over the
      // rows it was written from.
      KVLAB_TRY(store_prompt(L, keys, values, n));
      KVLAB_TRY(hand_over(L, layer));
      read_original(L.k, TensorRole::Key, 0, n, keys);
      read_original(L.v, TensorRole::Value, 0, n, values);
      return detail::causal_attention(args, m_scratch, out);
    }
    if (n > 1) {
      // A later chunk of the prompt (llama.cpp's micro-batches): its tokens stored as decode
      // steps store them, its attention read from the cache a tile at a time. As the prompt's:
      // KIVI's reads its own exact rows beside the cache before it, every other cache's is
      // written first and read back.
      if (prompt_exact) {
        KVLAB_TRY(attend_chunk(L, pos, n, q, keys, values, out));
        return append(layer, pos, n, keys, values);
      }
      KVLAB_TRY(append(layer, pos, n, keys, values));
      return attend_chunk(L, pos, n, q, nullptr, nullptr, out);
    }
    KVLAB_TRY(append(layer, pos, 1, keys, values));
    if (m_decode) return attend_on_device(L, layer, q, out);
    attend(L, q, out);
    return Ok{};
  }

  Status append(int layer, int pos, int n, float* keys, float* values) override {
    KVLAB_TRY(check_append(layer, static_cast<int>(m_layers.size()), pos, n, tokens(layer)));
    Layer& L = m_layers[static_cast<std::size_t>(layer)];
    if (pos == 0) {
      KVLAB_TRY(store_prompt(L, keys, values, n));
    } else {
      rotate(keys, values, n);
      for (int i = 0; i < n; ++i) KVLAB_TRY(store_token(L, keys + i * m_row, values + i * m_row));
    }
    return hand_over(L, layer);
  }

  std::uint64_t bytes() const override {
    std::uint64_t total = 0;
    for (const Layer& L : m_layers) total += L.k.bytes(m_row) + L.v.bytes(m_row);
    return total;
  }

  std::uint64_t fp16_bytes() const override {
    std::uint64_t total = 0;
    for (const Layer& L : m_layers) total += 2ull * 2ull * L.tokens() * m_row;
    return total;
  }

  std::string label() const override { return m_label; }

  std::string decode_attention() const override { return m_decode ? m_decode->name() : "cpu"; }
  std::uint64_t decode_copy_bytes() const override { return m_decode ? m_decode->bytes() : 0; }

  Status dequantize_layer(int layer, std::span<float> keys,
                          std::span<float> values) const override {
    if (layer < 0 || layer >= static_cast<int>(m_layers.size())) {
      return make_error(fmt::format("KV store: no layer {}", layer));
    }
    const Layer& L = m_layers[static_cast<std::size_t>(layer)];
    const std::size_t need = static_cast<std::size_t>(L.tokens()) * m_row;
    if (keys.size() != need || values.size() != need) {
      return make_error(fmt::format("KV store, layer {}: {} tokens need {} floats each for K and V",
                                    layer, L.tokens(), need));
    }
    if (L.tokens() == 0) return Ok{};
    read_original(L.k, TensorRole::Key, 0, L.tokens(), keys.data());
    read_original(L.v, TensorRole::Value, 0, L.tokens(), values.data());
    return Ok{};
  }

  int tokens(int layer) const override {
    return layer >= 0 && layer < static_cast<int>(m_layers.size())
               ? m_layers[static_cast<std::size_t>(layer)].tokens()
               : 0;
  }

 private:
  struct Role {
    // Made at the first append, from the prompt; none for fp16 rows, which stay in the tail.
    std::unique_ptr<UnitCodec> codec;
    std::vector<std::uint8_t> sealed;
    int sealed_tokens = 0;
    std::vector<std::uint16_t> tail;  // fp16 rows not sealed yet, oldest first
    int tail_tokens = 0;
    std::vector<float> scratch;
    int tokens() const { return sealed_tokens + tail_tokens; }
    std::uint64_t bytes(std::size_t row) const {
      return sealed.size() + static_cast<std::uint64_t>(tail_tokens) * row * 2 +
             (codec ? codec->param_bytes : 0);
    }
  };
  struct Layer {
    Role k, v;
    int handed_over = 0;        // tokens given to m_decode
    bool decode_begun = false;  // m_decode has the layer's parameters
    int tokens() const { return k.tokens(); }
    Role& role(TensorRole r) { return r == TensorRole::Key ? k : v; }
  };

  void append_tail(Role& c, const float* rows, int n) {
    const std::size_t count = static_cast<std::size_t>(n) * m_row;
    const std::size_t at = c.tail.size();
    c.tail.resize(at + count);
    float_to_fp16({rows, count}, {c.tail.data() + at, count});
    c.tail_tokens += n;
  }

  Status encode_units(Role& c, const float* rows, int tokens) {
    const int unit = c.codec->unit_tokens;
    const std::size_t at = c.sealed.size();
    c.sealed.resize(at + static_cast<std::size_t>(tokens / unit) * c.codec->unit_bytes);
    for (int u = 0; u < tokens / unit; ++u) {
      KVLAB_TRY(c.codec->encode(rows + static_cast<std::size_t>(u) * unit * m_row,
                                c.sealed.data() + at + u * c.codec->unit_bytes));
    }
    c.sealed_tokens += tokens;
    return Ok{};
  }

  // New rows into the cache under `rule`: encoded at once, or through the fp16 tail.
  Status push(Role& c, const SealRule& rule, const float* rows, int n) {
    if (rule.direct) return encode_units(c, rows, n);
    append_tail(c, rows, n);
    return seal(c, rule);
  }

  Status seal(Role& c, const SealRule& rule) {
    if (rule.never) return Ok{};
    const int ready = (c.tail_tokens - rule.keep) / rule.quantum * rule.quantum;
    if (ready <= 0) return Ok{};
    // A unit at a time from fp16, so that sealing a long prompt needs no float copy of it.
    const int unit = c.codec->unit_tokens;
    const std::size_t unit_values = static_cast<std::size_t>(unit) * m_row;
    c.scratch.resize(unit_values);
    for (int t = 0; t < ready; t += unit) {
      fp16_to_float({c.tail.data() + static_cast<std::size_t>(t) * m_row, unit_values}, c.scratch);
      KVLAB_TRY(encode_units(c, c.scratch.data(), unit));
    }
    const std::size_t count = static_cast<std::size_t>(ready) * m_row;
    c.tail.erase(c.tail.begin(), c.tail.begin() + static_cast<std::ptrdiff_t>(count));
    c.tail_tokens -= ready;
    // After a prompt the tail's allocation would stay the prompt's size: it is cut back to what
    // the rule keeps between seals.
    const std::size_t most = static_cast<std::size_t>(rule.keep + rule.quantum + 1) * m_row;
    if (c.tail.capacity() > 2 * most) {
      std::vector<std::uint16_t> kept;
      kept.reserve(most);
      kept.assign(c.tail.begin(), c.tail.end());
      c.tail.swap(kept);
    }
    return Ok{};
  }

  // Token rows [first, last) of a role as the attention reads them (rotated where the codec is);
  // `first` a multiple of the codec's unit.
  void read_rows(const Role& c, int first, int last, float* out, DecodeScratch& scratch) const {
    const int sealed_end = std::min(last, c.sealed_tokens);
    if (first < sealed_end) {
      const int unit = c.codec->unit_tokens;
      c.codec->decode(
          c.sealed.data() + static_cast<std::size_t>(first / unit) * c.codec->unit_bytes,
          (sealed_end - first) / unit, out, scratch);
    }
    const int tail_first = std::max(first, c.sealed_tokens);
    if (tail_first < last) {
      const std::size_t count = static_cast<std::size_t>(last - tail_first) * m_row;
      fp16_to_float(
          {c.tail.data() + static_cast<std::size_t>(tail_first - c.sealed_tokens) * m_row, count},
          {out + static_cast<std::size_t>(tail_first - first) * m_row, count});
    }
  }

  // The sealed bytes from the unit of token `first` (a multiple of the codec's unit) on.
  static const std::uint8_t* sealed_units(const Role& c, int first) {
    return c.sealed.data() +
           static_cast<std::size_t>(first / c.codec->unit_tokens) * c.codec->unit_bytes;
  }

  // The rows as the cache takes them: rotated in place where the method rotates them.
  void rotate(float* keys, float* values, int n) const {
    if (!m_rotations) return;
    const std::size_t vectors = static_cast<std::size_t>(n) * m_kv_heads;
    m_rotations->apply(keys, vectors, m_kv_heads, 1, false);
    if (m_rotations->rotates(TensorRole::Value)) {
      m_rotations->apply(values, vectors, m_kv_heads, 1, false);
    }
  }

  // The prompt (positions 0..n-1): rotated, the codecs fitted to it, the allocations reserved,
  // and its rows written.
  Status store_prompt(Layer& L, float* keys, float* values, int n) {
    rotate(keys, values, n);
    for (int r = 0; r < 2; ++r) {
      const TensorRole role = r == 0 ? TensorRole::Key : TensorRole::Value;
      Role& c = L.role(role);
      if (m_method) {  // fp16 rows have no codec: they stay in the tail
        auto codec = make_codec(*m_method, role, m_kv_heads, m_head_dim, r == 0 ? keys : values, n);
        if (!codec) return codec.error();
        c.codec = std::move(*codec);
      }
      const SealRule rule = seal_rule(m_method, role);
      if (m_max_tokens > 0) {
        if (rule.never) {  // every row stays in the tail: nothing is ever sealed
          c.tail.reserve(static_cast<std::size_t>(m_max_tokens) * m_row);
        } else {
          const int units = (m_max_tokens + c.codec->unit_tokens - 1) / c.codec->unit_tokens;
          c.sealed.reserve(static_cast<std::size_t>(units) * c.codec->unit_bytes);
          if (!rule.direct) c.tail.reserve((rule.keep + rule.quantum + 1) * m_row);
        }
      }
    }
    KVLAB_TRY(push(L.k, seal_rule(m_method, TensorRole::Key), keys, n));
    return push(L.v, seal_rule(m_method, TensorRole::Value), values, n);
  }

  // One later token's rows (already rotated). Sealing rules: what the previous step's attention
  // read and left to seal goes first, so each step reads the cache as the reference's step does
  // before its own sealing.
  Status store_token(Layer& L, const float* k, const float* v) {
    const SealRule key_rule = seal_rule(m_method, TensorRole::Key);
    const SealRule value_rule = seal_rule(m_method, TensorRole::Value);
    if (key_rule.direct) {
      KVLAB_TRY(push(L.k, key_rule, k, 1));
      return push(L.v, value_rule, v, 1);
    }
    KVLAB_TRY(seal(L.k, key_rule));
    KVLAB_TRY(seal(L.v, value_rule));
    append_tail(L.k, k, 1);
    append_tail(L.v, v, 1);
    return Ok{};
  }

  // The same rows in the model's frame: each head rotated back where the codec stores it rotated.
  void read_original(const Role& c, TensorRole role, int first, int last, float* out) const {
    DecodeScratch scratch;
    read_rows(c, first, last, out, scratch);
    const std::size_t heads = static_cast<std::size_t>(last - first) * m_kv_heads;
    if (c.codec && c.codec->rotated) {
      for (std::size_t h = 0; h < heads; ++h) {
        llama_attn_rotate({out + h * m_head_dim, static_cast<std::size_t>(m_head_dim)}, role, true);
      }
    }
    if (m_rotations && m_rotations->rotates(role)) {
      m_rotations->apply(out, heads, m_kv_heads, 1, true);
    }
  }

  // The attention of new tokens pos..pos + n - 1 (q [n][heads × head_dim]) over the cache read a
  // tile at a time in the model's frame (detail::tiled_causal_attention): every row from the
  // store, or, given the chunk's own exact rows, those for positions from pos on.
  Status attend_chunk(Layer& L, int pos, int n, const float* q, const float* own_keys,
                      const float* own_values, float* out) {
    int tile = detail::kTiledAttentionTokens;
    for (const Role* c : {&L.k, &L.v}) {
      if (c->codec) tile = std::lcm(tile, c->codec->unit_tokens);
    }
    detail::TiledAttentionArgs args;
    args.heads = m_heads, args.kv_heads = m_kv_heads, args.head_dim = m_head_dim;
    args.pos = pos, args.n = n, args.q = q, args.tile = tile;
    args.new_keys = own_keys, args.new_values = own_values;
    args.read = [&](int first, int last, float* k, float* v) -> Status {
      read_original(L.k, TensorRole::Key, first, last, k);
      read_original(L.v, TensorRole::Value, first, last, v);
      return Ok{};
    };
    return detail::tiled_causal_attention(args, m_tiled, out);
  }

  static int tile_tokens(const Role& c) {
    const int unit = c.codec->unit_tokens;
    return (kTileTokens + unit - 1) / unit * unit;
  }

  // Scores of the `n` decoded key rows at `tile` (tokens first..first + n - 1) for every query
  // head (the query `q` already scaled), into m_scores [heads][total]: the register-blocked loops
  // of the fused fp16 kernel (fused_kernels.h), so that the fp16 cache and the methods differ only
  // in decoding.
  void key_products(const float* tile, int first, int n, int total, const float* q) {
    const int group = m_heads / m_kv_heads, dim = m_head_dim;
#if KVLAB_FUSED_SIMD
    if (dim % detail::kLaneGroup == 0) {
      const float zero[detail::kHeadTile] = {};
      for (int kvh = 0; kvh < m_kv_heads; ++kvh) {
        const detail::FloatRows rows{tile + static_cast<std::size_t>(kvh) * dim, m_row};
        for (int g0 = 0; g0 < group; g0 += detail::kHeadTile) {
          const std::size_t qh = static_cast<std::size_t>(kvh) * group + g0;
          detail::key_tile(rows, 0, n, std::min(detail::kHeadTile, group - g0),
                           dim / detail::kLaneGroup, q + qh * dim, dim, zero,
                           m_scores.data() + qh * total + first, static_cast<std::size_t>(total));
        }
      }
      return;
    }
#endif
    // Each product summed over the channels in order: Eigen's coefficient-wise product would
    // start its packets where the buffers happen to be aligned, so the same cache could give
    // other roundings from one step to the next (the score buffer moves as it grows).
    for (int h = 0; h < m_heads; ++h) {
      const float* qh = q + static_cast<std::size_t>(h) * dim;
      const float* k = tile + static_cast<std::size_t>(h / group) * dim;
      float* s = m_scores.data() + static_cast<std::size_t>(h) * total + first;
      for (int t = 0; t < n; ++t, k += m_row) {
        float acc = 0.f;
        for (int d = 0; d < dim; ++d) acc += qh[d] * k[d];
        s[t] = acc;
      }
    }
  }

  // out [heads][dim] += the probabilities of tokens first..first + n - 1 times their decoded
  // value rows at `tile`.
  void value_products(const float* tile, int first, int n, int total, float* out) const {
    const int group = m_heads / m_kv_heads, dim = m_head_dim;
#if KVLAB_FUSED_SIMD
    if (dim % detail::kLaneGroup == 0) {
      for (int kvh = 0; kvh < m_kv_heads; ++kvh) {
        const detail::FloatRows rows{tile + static_cast<std::size_t>(kvh) * dim, m_row};
        for (int g0 = 0; g0 < group; g0 += detail::kHeadTile) {
          const std::size_t qh = static_cast<std::size_t>(kvh) * group + g0;
          detail::value_tile(rows, 0, n, std::min(detail::kHeadTile, group - g0),
                             dim / detail::kLaneGroup, m_scores.data() + qh * total + first,
                             static_cast<std::size_t>(total), out + qh * dim, dim);
        }
      }
      return;
    }
#endif
    // Token by token, each channel its own sum (in token order, whatever the alignment).
    for (int h = 0; h < m_heads; ++h) {
      const float* p = m_scores.data() + static_cast<std::size_t>(h) * total + first;
      const float* v = tile + static_cast<std::size_t>(h / group) * dim;
      float* o = out + static_cast<std::size_t>(h) * dim;
      for (int t = 0; t < n; ++t, v += m_row) {
        const float w = p[t];
        for (int d = 0; d < dim; ++d) o[d] += w * v[d];
      }
    }
  }

  // Per thread: the decode buffers, a tile of rows and its part of the output.
  struct Worker {
    DecodeScratch decode;
    std::vector<float> tile, out;
  };

  // Runs body(part, first, last) over `parts` consecutive token ranges of [0, total), each
  // starting at a multiple of `align`, in parallel where there is enough work.
  template <class Body>
  static void for_parts(int total, int align, int parts, Body&& body) {
    const int aligned = (total + align - 1) / align;
    const auto range = [&](int p) {
      const int first = static_cast<int>(static_cast<long long>(aligned) * p / parts) * align;
      const int last = std::min(
          total, static_cast<int>(static_cast<long long>(aligned) * (p + 1) / parts) * align);
      body(p, first, last);
    };
    if (parts == 1) {
      range(0);
      return;
    }
    tbb::parallel_for(0, parts, range);
  }

  // The query as the stored keys read it: rotated where the rows are stored rotated (--rotation,
  // then llama.cpp's attn_rot), into m_query.
  void query_in_store_frame(const Layer& L, const float* q_in) {
    const std::size_t qd = static_cast<std::size_t>(m_heads) * m_head_dim;
    m_query.assign(q_in, q_in + qd);
    if (!m_method) return;
    const int group = m_heads / m_kv_heads;
    if (m_rotations) m_rotations->apply(m_query.data(), m_heads, m_kv_heads, group, false);
    if (L.k.codec->rotated) {
      for (int h = 0; h < m_heads; ++h) {
        llama_attn_rotate({m_query.data() + h * m_head_dim, static_cast<std::size_t>(m_head_dim)},
                          TensorRole::Key, false);
      }
    }
  }

  // An output over rotated value rows rotated back into the model's frame.
  void output_to_model_frame(const Layer& L, float* out) const {
    if (!m_method) return;
    const int dim = m_head_dim;
    if (L.v.codec->rotated) {
      for (int h = 0; h < m_heads; ++h) {
        llama_attn_rotate({out + h * dim, static_cast<std::size_t>(dim)}, TensorRole::Value, true);
      }
    }
    if (m_rotations && m_rotations->rotates(TensorRole::Value)) {
      m_rotations->apply(out, m_heads, m_kv_heads, m_heads / m_kv_heads, true);
    }
  }

  // The rows m_decode keeps for a role's codec: its format and parameters.
  static RowParams row_params(const Layer& L, bool fp16) {
    RowParams p;
    if (fp16) return p;  // fp16 rows: the tail's half bits
    p.format = *L.k.codec->row_format;
    if (p.format == row_decode::Format::Fp8E4M3) {
      p.key_head_scales = L.k.codec->row_scales;
      p.value_head_scales = L.v.codec->row_scales;
    }
    p.key_global = L.k.codec->row_global;
    p.value_global = L.v.codec->row_global;
    return p;
  }

  // Token rows [first, last) of a role in StoredRows' layout: bytes of the sealed units (fp16:
  // of the tail), NVFP4's units split into nibbles and block scales in `data` and `scales`.
  std::span<const std::uint8_t> rows_of(const Role& c, int first, int last,
                                        std::vector<std::uint8_t>& data,
                                        std::vector<std::uint8_t>& scales) const {
    const std::size_t n = static_cast<std::size_t>(last - first);
    if (!c.codec) {
      const std::uint8_t* tail = reinterpret_cast<const std::uint8_t*>(c.tail.data());
      return {tail + static_cast<std::size_t>(first - c.sealed_tokens) * m_row * 2, n * m_row * 2};
    }
    const std::uint8_t* units = sealed_units(c, first);
    if (*c.codec->row_format != row_decode::Format::Nvfp4) return {units, n * c.codec->unit_bytes};
    const std::size_t nibbles = m_row / 2, block_scales = m_row / detail::kNvfp4BlockSize;
    data.resize(n * nibbles);
    scales.resize(n * block_scales);
    for (std::size_t t = 0; t < n; ++t) {
      const std::uint8_t* u = units + t * c.codec->unit_bytes;
      std::memcpy(data.data() + t * nibbles, u, nibbles);
      std::memcpy(scales.data() + t * block_scales, u + nibbles, block_scales);
    }
    return {data.data(), data.size()};
  }

  // Hands m_decode the layer's rows stored since the last hand-over (every row of these formats
  // is stored as it is written: sealed at once, or fp16 in the tail for good).
  Status hand_over(Layer& L, int layer) {
    if (!m_decode) return Ok{};
    const int stored = L.tokens();
    if (L.handed_over == stored) return Ok{};
    if (!L.decode_begun) {
      KVLAB_TRY(m_decode->begin_layer(layer, row_params(L, !m_method)));
      L.decode_begun = true;
    }
    StoredRows rows;
    rows.tokens = stored - L.handed_over;
    rows.keys = rows_of(L.k, L.handed_over, stored, m_rows_k, m_scales_k);
    rows.values = rows_of(L.v, L.handed_over, stored, m_rows_v, m_scales_v);
    if (m_method && *L.k.codec->row_format == row_decode::Format::Nvfp4) {
      rows.key_scales = m_scales_k;
      rows.value_scales = m_scales_v;
    }
    KVLAB_TRY(m_decode->append(layer, rows));
    L.handed_over = stored;
    return Ok{};
  }

  // A decode step's attention by m_decode over its copy of the rows, in the rows' frame.
  Status attend_on_device(const Layer& L, int layer, const float* q, float* out) {
    query_in_store_frame(L, q);
    const std::size_t qd = static_cast<std::size_t>(m_heads) * m_head_dim;
    KVLAB_TRY(m_decode->attend(layer, m_query, {out, qd}));
    output_to_model_frame(L, out);
    return Ok{};
  }

  // One new token's attention over every stored token: scores q . k / sqrt(head_dim) a tile of
  // keys at a time, a softmax per head, then the values a tile at a time; sealed tokens whose
  // codec reads its codes in place (UnitCodec::fused) go to its fused readers instead, with no
  // tile decoded. Threads take
  // consecutive ranges of tokens, each with its own tile and partial output. Where llama.cpp
  // stores rows rotated, the queries are rotated instead of the keys and the output rotated back
  // (the rotation is orthogonal, so q . k and the weighted sum are unchanged), as llama.cpp does.
  void attend(Layer& L, const float* q_in, float* out) {
    const int total = L.tokens();
    if (!m_method) {
      // fp16 rows, all in the tail: the fused fp16 kernel the compressed kernels are measured
      // against (fused_attention.h).
      const Fp16KvView view{total, m_kv_heads, m_head_dim, L.k.tail, L.v.tail};
      const std::size_t qd = static_cast<std::size_t>(m_heads) * m_head_dim;
      (void)fp16_attention(view, {q_in, qd}, m_heads, {out, qd}, m_scores);
      return;
    }
    const int dim = m_head_dim;
    const float scale = 1.f / std::sqrt(static_cast<float>(dim));
    const std::size_t qd = static_cast<std::size_t>(m_heads) * dim;
    // The query rotated where the keys are stored rotated, and scaled by 1 / sqrt(head_dim)
    // once.
    query_in_store_frame(L, q_in);
    const int group = m_heads / m_kv_heads;
    for (float& x : m_query) x *= scale;
    const float* q = m_query.data();
    m_scores.resize(static_cast<std::size_t>(m_heads) * total);
    const int kt = tile_tokens(L.k), vt = tile_tokens(L.v);
    const int align = std::max(kt, vt);
    // Below a few tiles a thread costs more than it saves.
    const int parts = std::max(1, std::min(worker_threads(), total / (4 * align)));
    if (static_cast<int>(m_workers.size()) < parts)
      m_workers.resize(static_cast<std::size_t>(parts));
    for_parts(total, align, parts, [&](int p, int first, int last) {
      Worker& w = m_workers[static_cast<std::size_t>(p)];
      w.tile.resize(static_cast<std::size_t>(align) * m_row);
      int t0 = first;
      if (const int end = std::min(last, L.k.sealed_tokens); L.k.codec->fused() && t0 < end) {
        L.k.codec->fused_keys(sealed_units(L.k, t0), t0, end, q, group, total, m_scores.data(),
                              w.decode);
        t0 = end;
      }
      for (; t0 < last; t0 += kt) {
        const int t1 = std::min(last, t0 + kt);
        read_rows(L.k, t0, t1, w.tile.data(), w.decode);
        key_products(w.tile.data(), t0, t1 - t0, total, q);
      }
    });
    softmax_rows(m_scores, m_heads);
    for_parts(total, align, parts, [&](int p, int first, int last) {
      Worker& w = m_workers[static_cast<std::size_t>(p)];
      w.out.assign(qd, 0.f);
      int t0 = first;
      if (const int end = std::min(last, L.v.sealed_tokens); L.v.codec->fused() && t0 < end) {
        L.v.codec->fused_values(sealed_units(L.v, t0), t0, end, m_scores.data(), group, total,
                                w.out.data(), w.decode);
        t0 = end;
      }
      for (; t0 < last; t0 += vt) {
        const int t1 = std::min(last, t0 + vt);
        read_rows(L.v, t0, t1, w.tile.data(), w.decode);
        value_products(w.tile.data(), t0, t1 - t0, total, w.out.data());
      }
    });
    std::copy(m_workers[0].out.begin(), m_workers[0].out.end(), out);
    for (int p = 1; p < parts; ++p) {
      const float* o = m_workers[static_cast<std::size_t>(p)].out.data();
      for (std::size_t i = 0; i < qd; ++i) out[i] += o[i];
    }
    output_to_model_frame(L, out);
  }

  int m_heads, m_kv_heads, m_head_dim;
  std::size_t m_row;
  std::optional<MethodConfig> m_method;  // empty: fp16 rows
  std::optional<HeadRotations> m_rotations;
  std::string m_label;
  int m_max_tokens;
  std::vector<Layer> m_layers;
  detail::AttentionScratch m_scratch;
  detail::TiledAttentionScratch m_tiled;
  std::vector<float> m_scores, m_query;
  std::vector<Worker> m_workers;
  std::unique_ptr<RowAttention> m_decode;
  std::vector<std::uint8_t> m_rows_k, m_rows_v, m_scales_k, m_scales_v;  // NVFP4's hand-over
};

}  // namespace

Result<std::unique_ptr<KvStore>> make_method_store(const LlamaConfig& model,
                                                   const MethodConfig& method, int max_tokens,
                                                   const CompressedCacheConfig& kvcomp,
                                                   std::unique_ptr<RowAttention> decode) {
  const auto no_row_kernel = [&]() {
    return make_error(fmt::format(
        "{}: no row-reading decode kernel reads its stored rows (they read fp16, fp8-e4m3 "
        "(per-tensor or per-head scales), q8_0, q4_0 and nvfp4 rows); its decode attention runs "
        "on the CPU",
        method_label(method)));
  };
  if (method.kind == MethodKind::KvComp) {
    if (decode) return no_row_kernel();
    CompressedCacheConfig c = kvcomp;
    c.block_size = method.block_size;
    c.rel_scale = method.rel_scale;
    c.codec = method.codec == CodecKind::BitPack || method.codec == CodecKind::Rans
                  ? *method.codec
                  : CodecKind::Huffman;
    return make_kvcomp_store(model, c, max_tokens);
  }
  KVLAB_TRY(make_quantizer(method));
  // The codec stores the method without its rotation; the store rotates the rows it is given.
  MethodConfig plain = method;
  plain.rotation = RotationKind::None;
  plain.rotate_values = false;
  std::optional<HeadRotations> rotations;
  if (method.rotation != RotationKind::None) {
    auto made = HeadRotations::create(method, model.kv_heads, model.head_dim());
    if (!made) return made.error();
    rotations = std::move(*made);
  }
  if (is_kivi(method) && (method.residual <= 0 || method.residual % method.group_size != 0)) {
    return make_error(fmt::format(
        "kivi: the reference cache quantizes keys R = {} at a time in groups of G = {}: R must "
        "be a positive multiple of G",
        method.residual, method.group_size));
  }
  if (max_tokens < 0) return make_error(fmt::format("KV store: {} tokens to reserve", max_tokens));
  // A dry run on a zero token finds what this model's shape cannot store (a head_dim the
  // method's blocks do not divide) before any forward.
  const std::vector<float> zero(static_cast<std::size_t>(model.kv_dim()), 0.f);
  for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    auto codec = make_codec(plain, role, model.kv_heads, model.head_dim(), zero.data(), 1);
    if (!codec) return codec.error();
    if (decode && !(*codec)->row_format) return no_row_kernel();
  }
  return std::unique_ptr<KvStore>(new MethodStore(model, plain, max_tokens, std::move(rotations),
                                                  method_label(method), std::move(decode)));
}

Result<std::unique_ptr<KvStore>> make_fp16_store(const LlamaConfig& model, int max_tokens,
                                                 std::unique_ptr<RowAttention> decode) {
  if (max_tokens < 0) return make_error(fmt::format("KV store: {} tokens to reserve", max_tokens));
  return std::unique_ptr<KvStore>(
      new MethodStore(model, std::nullopt, max_tokens, std::nullopt, "fp16", std::move(decode)));
}

RowAttentionShape row_attention_shape(const LlamaConfig& model, int max_tokens) {
  return {model.layers, model.heads, model.kv_heads, model.head_dim(), max_tokens};
}

Result<std::unique_ptr<KvStore>> make_store_on(std::string_view backend, const LlamaConfig& model,
                                               const std::optional<MethodConfig>& method,
                                               int max_tokens,
                                               const CompressedCacheConfig& kvcomp) {
  const auto make = [&](std::unique_ptr<RowAttention> decode) {
    return method ? make_method_store(model, *method, max_tokens, kvcomp, std::move(decode))
                  : make_fp16_store(model, max_tokens, std::move(decode));
  };
  auto device = make_backend(backend);
  if (!device) return device.error();
  auto decode = (*device)->decode_attention(row_attention_shape(model, max_tokens));
  if (backend == "auto") {
    if (decode && *decode) {
      if (auto made = make(std::move(*decode))) return made;
    }
    return make(nullptr);
  }
  if (!decode) return decode.error();
  return make(std::move(*decode));
}

}  // namespace kvlab
