// The Llama-architecture CPU runner (see llama_model.h).
#include "kvlab/engine/model/llama_model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include <fmt/format.h>
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include "io/file_mapping.h"
#include "kvlab/engine/model/kv_store.h"
#include "model/llama_attention.h"

namespace kvlab {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstWeights = Eigen::Map<const RowMatrix>;
using ConstRow = Eigen::Map<const Eigen::RowVectorXf>;

// RMSNorm (Zhang & Sennrich 2019) of each of `rows` rows of `n`: x / sqrt(mean(x²) + eps) · w.
void rms_norm_rows(const float* x, const float* w, int rows, int n, float eps, float* out) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * n;
    float* o = out + static_cast<std::size_t>(r) * n;
    double ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < n; ++i) ss += static_cast<double>(xr[i]) * xr[i];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
#pragma omp simd
    for (int i = 0; i < n; ++i) o[i] = xr[i] * scale * w[i];
  }
}

}  // namespace

std::vector<double> rope_frequencies(const LlamaConfig& c) {
  const int head_dim = c.head_dim();
  std::vector<double> freq(static_cast<std::size_t>(std::max(head_dim / 2, 0)));
  const RopeScaling& s = c.rope_scaling;
  constexpr double kTwoPi = 6.283185307179586;
  const double low_wavelen = s.original_max_positions / s.low_freq_factor;
  const double high_wavelen = s.original_max_positions / s.high_freq_factor;
  for (std::size_t i = 0; i < freq.size(); ++i) {
    double f = std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / head_dim);
    if (s.kind == RopeScaling::Kind::Linear) {
      f /= s.factor;
    } else if (s.kind == RopeScaling::Kind::Llama3) {
      const double wavelen = kTwoPi / f;
      if (wavelen > low_wavelen) {
        f /= s.factor;  // low frequencies: interpolated
      } else if (wavelen >= high_wavelen) {
        // In between: a linear blend of interpolated and original, by where the wavelength sits.
        const double smooth = (s.original_max_positions / wavelen - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1.0 - smooth) * f / s.factor + smooth * f;
      }
    }
    if (i < s.freq_divisors.size()) f /= s.freq_divisors[i];
    freq[i] = f;
  }
  return freq;
}

RopeSpec model_rope_spec(const LlamaConfig& config, int first_position) {
  RopeSpec r;
  r.frequencies = rope_frequencies(config);
  r.rotary_dims = config.head_dim();
  r.half_split = config.rope_half_split;
  r.first_position = first_position;
  return r;
}

// Not file-local: LlamaModel::Impl holds one (a unity build puts this file's definitions in
// another's unit, where GCC warns of a class whose member's type is file-local).
namespace detail {

// RoPE (Su et al. 2021, RoFormer, eq. 34): pair i of a head turns by pos · freq_i
// (rope_frequencies: theta^(-2i/head_dim), scaled as the config says).
// A row of the table holds, for one position, the cos of each pair's angle [head_dim / 2] then
// its sin; it is the same for both layouts, which only differ in which two elements make pair i.
// The model keeps the rows of the first kTablePositions positions (16 MiB at head_dim 128); a
// forward past them computes its own rows the same way.
class RopeTable {
 public:
  static constexpr int kTablePositions = 32768;

  explicit RopeTable(const LlamaConfig& c) : m_head_dim(c.head_dim()), m_freq(rope_frequencies(c)) {
    m_positions = std::min(c.seq_len, kTablePositions);
    m_rows.resize(static_cast<std::size_t>(m_positions) * m_head_dim);
    fill(0, m_positions, m_rows.data());
  }

  // The rows of positions pos..pos + n - 1: the model's, or computed into `scratch`.
  const float* rows(int pos, int n, AlignedFloats& scratch) const {
    if (pos + n <= m_positions) return m_rows.data() + static_cast<std::size_t>(pos) * m_head_dim;
    scratch.resize(static_cast<std::size_t>(n) * m_head_dim);
    fill(pos, n, scratch.data());
    return scratch.data();
  }

 private:
  void fill(int pos, int n, float* out) const {
    const int half = m_head_dim / 2;
    for (int r = 0; r < n; ++r) {
      float* t = out + static_cast<std::size_t>(r) * m_head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = static_cast<double>(pos + r) * m_freq[i];
        t[i] = static_cast<float>(std::cos(angle));
        t[half + i] = static_cast<float>(std::sin(angle));
      }
    }
  }

  int m_head_dim = 0, m_positions = 0;
  std::vector<double> m_freq;
  std::vector<float> m_rows;
};

}  // namespace detail

namespace {

// Rotates the `heads` heads of `n` rows (row stride `stride`), row r by table row r.
// Hugging Face pairs (x[i], x[i + hd/2]); llama2.c pairs (x[2i], x[2i+1]).
void apply_rope(float* v, int n, int stride, int heads, int hd, const float* table,
                bool half_split) {
  const int half = hd / 2;
  for (int r = 0; r < n; ++r) {
    const float* c = table + static_cast<std::size_t>(r) * hd;
    const float* s = c + half;
    float* row = v + static_cast<std::size_t>(r) * stride;
    for (int h = 0; h < heads; ++h) {
      float* x = row + static_cast<std::size_t>(h) * hd;
      if (half_split) {
#pragma omp simd
        for (int i = 0; i < half; ++i) {
          const float a = x[i], b = x[i + half];
          x[i] = a * c[i] - b * s[i];
          x[i + half] = a * s[i] + b * c[i];
        }
      } else {
#pragma omp simd
        for (int i = 0; i < half; ++i) {
          const float a = x[2 * i], b = x[2 * i + 1];
          x[2 * i] = a * c[i] - b * s[i];
          x[2 * i + 1] = a * s[i] + b * c[i];
        }
      }
    }
  }
}

// out [n × rows] = x [n × cols] · wᵀ (or += when `accumulate`), for a weight matrix [rows][cols]
// of any type. The rows are split into fixed tiles that the cores share (oneTBB); a tile of
// quantized rows is dequantized into the thread's buffer and multiplied there, so the result
// does not depend on how many threads ran or which ran a tile. One or two tokens (decoding) take
// the dot products of ggml_dot instead, without a buffer.
void project(const WeightMatrix& w, int rows, int cols, const float* x, int n, float* out,
             bool accumulate) {
  const std::size_t row_bytes = w.type == GgmlType::F32
                                    ? sizeof(float) * static_cast<std::size_t>(cols)
                                    : static_cast<std::size_t>(*ggml_row_bytes(w.type, cols));
  const auto* base = static_cast<const std::uint8_t*>(w.data);
  const ConstWeights xs(x, n, cols);
  MatrixMap o(out, n, rows);
  // About 64 KiB of weights per tile as floats, in whole multiples of 16 rows.
  const int tile = std::max(16, (16384 / std::max(cols, 1)) / 16 * 16);
  const int tiles = (rows + tile - 1) / tile;
  const bool vector = n <= 2 && w.type != GgmlType::F32;
  const auto run_tile = [&](int t) {
    const int r0 = t * tile, nr = std::min(tile, rows - r0);
    if (vector) {
      for (int i = 0; i < n; ++i) {
        const float* xi = x + static_cast<std::size_t>(i) * cols;
        float* oi = out + static_cast<std::size_t>(i) * rows;
        for (int r = r0; r < r0 + nr; ++r) {
          const float d =
              ggml_dot(w.type, base + static_cast<std::size_t>(r) * row_bytes, xi, cols);
          oi[r] = accumulate ? oi[r] + d : d;
        }
      }
      return;
    }
    const float* tw =
        reinterpret_cast<const float*>(base + static_cast<std::size_t>(r0) * row_bytes);
    if (w.type != GgmlType::F32) {
      thread_local AlignedFloats buffer;
      buffer.resize(static_cast<std::size_t>(nr) * cols);
      for (int r = 0; r < nr; ++r) {
        ggml_dequantize(w.type, base + static_cast<std::size_t>(r0 + r) * row_bytes,
                        buffer.data() + static_cast<std::size_t>(r) * cols, cols);
      }
      tw = buffer.data();
    }
    if (accumulate) {
      o.middleCols(r0, nr).noalias() += xs * ConstWeights(tw, nr, cols).transpose();
    } else {
      o.middleCols(r0, nr).noalias() = xs * ConstWeights(tw, nr, cols).transpose();
    }
  };
  if (2.0 * n * rows * cols < 2e5 || tiles == 1) {
    for (int t = 0; t < tiles; ++t) run_tile(t);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int>(0, tiles), [&](const tbb::blocked_range<int>& r) {
    for (int t = r.begin(); t < r.end(); ++t) run_tile(t);
  });
}

// Row `r` of the embedding [vocab][dim] as floats.
void embedding_row(const WeightMatrix& w, int r, int dim, float* out) {
  if (w.type == GgmlType::F32) {
    std::memcpy(out, static_cast<const float*>(w.data) + static_cast<std::size_t>(r) * dim,
                sizeof(float) * dim);
    return;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(*ggml_row_bytes(w.type, dim));
  ggml_dequantize(w.type, static_cast<const std::uint8_t*>(w.data) + r * row_bytes, out, dim);
}

float* grow(AlignedFloats& buffer, std::size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

// Rows of the feed-forward per pass in a long forward. Each pass dequantizes the weights' tiles
// again: with 512 rows a 2K prefill of SmolLM2 ran 4% slower than in one pass, with 1024 2-3%
// faster (its activations stay nearer the cores), alternating runs, 2026-11-29.
constexpr int kFfnRows = 1024;

// The buffers of one forward, kept per thread so that decoding one token at a time does not
// allocate them again for each token.
struct ForwardScratch {
  AlignedFloats x, xn, q, k, v, h1, h3, last, rope, read_keys, read_values;
  std::vector<const char*> masks;
  detail::AttentionScratch attention;
  bool busy = false;

  std::size_t bytes() const {
    std::size_t n = 0;
    for (const auto* b :
         {&x, &xn, &q, &k, &v, &h1, &h3, &last, &read_keys, &read_values, &attention.queries,
          &attention.out, &attention.inverse_sums, &attention.row_max}) {
      n += b->capacity() * sizeof(float);
    }
    return n + attention.scores.capacity() * sizeof(float);
  }
};

// Lends the thread's scratch to one forward; a forward started from a hook of another on the
// same thread gets a fresh one. Buffers past kKeepBytes (a long prefill of a large model) are
// freed afterwards rather than held by the thread for good.
class ScratchLease {
 public:
  ScratchLease() {
    static thread_local ForwardScratch t_scratch;
    if (t_scratch.busy) {
      m_own = std::make_unique<ForwardScratch>();
      m_scratch = m_own.get();
    } else {
      m_scratch = &t_scratch;
    }
    m_scratch->busy = true;
  }
  ~ScratchLease() {
    if (m_own) return;
    if (m_scratch->bytes() > kKeepBytes) *m_scratch = ForwardScratch{};
    m_scratch->busy = false;
  }
  ScratchLease(const ScratchLease&) = delete;
  ScratchLease& operator=(const ScratchLease&) = delete;
  ForwardScratch& operator*() { return *m_scratch; }

 private:
  static constexpr std::size_t kKeepBytes = std::size_t{64} << 20;
  ForwardScratch* m_scratch = nullptr;
  std::unique_ptr<ForwardScratch> m_own;
};

}  // namespace

struct LlamaModel::Impl {
  std::string path;
  LlamaConfig config;
  LlamaWeights w;
  std::optional<detail::RopeTable> rope;
};

LlamaModel::LlamaModel(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
LlamaModel::LlamaModel(LlamaModel&&) noexcept = default;
LlamaModel& LlamaModel::operator=(LlamaModel&&) noexcept = default;
LlamaModel::~LlamaModel() = default;
const LlamaConfig& LlamaModel::config() const {
  return m_impl->config;
}
const std::string& LlamaModel::path() const {
  return m_impl->path;
}

Result<LlamaModel> LlamaModel::from_weights(std::string path, LlamaConfig config,
                                            LlamaWeights weights) {
  const LlamaConfig& c = config;
  if (c.dim <= 0 || c.heads <= 0 || c.kv_heads <= 0 || c.dim % c.heads != 0 ||
      c.heads % c.kv_heads != 0 || c.head_dim() % 2 != 0 || c.layers <= 0 || c.vocab <= 0 ||
      c.hidden_dim <= 0 || c.seq_len <= 0) {
    return make_error(fmt::format("{}: inconsistent model shape (dim {}, heads {}, kv_heads {})",
                                  path, c.dim, c.heads, c.kv_heads));
  }
  if (static_cast<int>(weights.layers.size()) != c.layers || !weights.embedding ||
      !weights.final_norm || !weights.classifier) {
    return make_error(fmt::format("{}: weights missing for the model's {} layers", path, c.layers));
  }
  for (int l = 0; l < c.layers; ++l) {
    const LlamaLayerWeights& lw = weights.layers[static_cast<std::size_t>(l)];
    const int biases = (lw.bq != nullptr) + (lw.bk != nullptr) + (lw.bv != nullptr);
    if (biases != (c.qkv_bias ? 3 : 0)) {
      return make_error(
          fmt::format("{}: layer {} has {} of the q, k, v projection biases; the "
                      "config wants {}",
                      path, l, biases, c.qkv_bias ? "all three" : "none"));
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->path = std::move(path);
  impl->config = config;
  impl->w = std::move(weights);
  impl->rope.emplace(impl->config);
  return LlamaModel(std::move(impl));
}

LlamaModel::State LlamaModel::new_state(bool keep_queries, bool keep_pre_rope) const {
  State s;
  const int L = m_impl->config.layers;
  s.keys.resize(L);
  s.values.resize(L);
  s.keep_queries = keep_queries;
  s.keep_pre_rope = keep_pre_rope;
  if (keep_queries) s.queries.resize(L);
  if (keep_pre_rope) s.keys_pre_rope.resize(L);
  return s;
}

Result<std::vector<float>> LlamaModel::forward(State& state, const std::vector<int>& tokens) const {
  const LlamaConfig& c = m_impl->config;
  const int n = static_cast<int>(tokens.size());
  if (n == 0) return make_error("forward: no tokens");
  if (state.pos + n > c.seq_len) {
    return make_error(fmt::format("forward: positions {}..{} pass the model's seq_len {}",
                                  state.pos, state.pos + n - 1, c.seq_len));
  }
  for (int t : tokens) {
    if (t < 0 || t >= c.vocab) {
      return make_error(
          fmt::format("forward: token {} is outside the vocabulary of {}", t, c.vocab));
    }
  }
  if (state.kv_store && (state.attention_reader || state.kept_tokens || state.observe_attention ||
                         state.attention_weights || state.keep_queries || state.keep_pre_rope)) {
    return make_error(
        "forward: a stored cache (kv_store) does not combine with attention readers, eviction "
        "hooks, kept queries or pre-RoPE keys");
  }
  const int D = c.dim, KV = c.kv_dim(), F = c.hidden_dim, hd = c.head_dim();
  ScratchLease lease;
  ForwardScratch& s = *lease;
  const auto matrix = [&](AlignedFloats& buffer, int cols) {
    return MatrixMap(grow(buffer, static_cast<std::size_t>(n) * cols), n, cols);
  };
  // The attention's output `att` takes xn's rows: the projections have read xn by then, and the
  // feed-forward's norm writes it again only after wo has read att.
  MatrixMap x = matrix(s.x, D), xn = matrix(s.xn, D), q = matrix(s.q, D), k = matrix(s.k, KV),
            v = matrix(s.v, KV), att = xn;
  // The feed-forward runs kFfnRows rows at a time (every row's is its own), so a long prompt's
  // hidden activations take kFfnRows × hidden floats twice, not n × hidden: 12 MiB for SmolLM2
  // where its 8K prompt took 95 MiB.
  const int ffn_rows = std::min(n, kFfnRows);
  float* h1 = grow(s.h1, static_cast<std::size_t>(ffn_rows) * F);
  float* h3 = grow(s.h3, static_cast<std::size_t>(ffn_rows) * F);
  const float* rope = m_impl->rope->rows(state.pos, n, s.rope);
  for (int i = 0; i < n; ++i) embedding_row(m_impl->w.embedding, tokens[i], D, x.row(i).data());
  for (int l = 0; l < c.layers; ++l) {
    const LlamaLayerWeights& w = m_impl->w.layers[static_cast<std::size_t>(l)];
    rms_norm_rows(x.data(), w.attn_norm, n, D, c.norm_eps, xn.data());
    project(w.wq, D, D, xn.data(), n, q.data(), false);
    project(w.wk, KV, D, xn.data(), n, k.data(), false);
    project(w.wv, KV, D, xn.data(), n, v.data(), false);
    if (c.qkv_bias) {  // Qwen2: biases on the q, k and v projections
      q.rowwise() += ConstRow(w.bq, D);
      k.rowwise() += ConstRow(w.bk, KV);
      v.rowwise() += ConstRow(w.bv, KV);
    }
    auto& kc = state.keys[l];
    auto& vc = state.values[l];
    if (state.keep_pre_rope) {
      state.keys_pre_rope[l].insert(state.keys_pre_rope[l].end(), k.data(),
                                    k.data() + static_cast<std::size_t>(n) * KV);
    }
    apply_rope(q.data(), n, D, c.heads, hd, rope, c.rope_half_split);
    apply_rope(k.data(), n, KV, c.kv_heads, hd, rope, c.rope_half_split);
    // NaN or inf in the weights (or a broken file) reaches the cache first here: said at once,
    // rather than written into a capture or taken for an eviction mask with nothing left.
    for (const float* rows : {k.data(), v.data()}) {
      const std::size_t count = static_cast<std::size_t>(n) * KV;
      if (std::all_of(rows, rows + count, [](float f) { return std::isfinite(f); })) continue;
      const std::size_t at = static_cast<std::size_t>(
          std::find_if(rows, rows + count, [](float f) { return !std::isfinite(f); }) - rows);
      return make_error(fmt::format(
          "layer {}: the {} of position {} are not finite ({}): the model's weights hold NaN or "
          "infinity (this layer's or an earlier one's)",
          l, rows == k.data() ? "keys" : "values", state.pos + static_cast<int>(at / KV),
          rows[at]));
    }
    if (state.kv_store) {
      if (auto r = state.kv_store->append_and_attend(l, state.pos, n, q.data(), k.data(), v.data(),
                                                     att.data());
          !r) {
        return make_error(fmt::format("layer {}: {}", l, r.message()));
      }
    } else {
      kc.insert(kc.end(), k.data(), k.data() + static_cast<std::size_t>(n) * KV);
      vc.insert(vc.end(), v.data(), v.data() + static_cast<std::size_t>(n) * KV);
      const float* read_k = kc.data();
      const float* read_v = vc.data();
      if (state.attention_reader) {
        if (auto r = state.attention_reader(l, kc, vc, s.read_keys, s.read_values); !r) {
          return make_error(fmt::format("layer {}: {}", l, r.message()));
        }
        if (s.read_keys.size() != kc.size() || s.read_values.size() != vc.size()) {
          return make_error(
              fmt::format("layer {}: the attention reader returned {} keys and {} "
                          "values for a cache of {}",
                          l, s.read_keys.size(), s.read_values.size(), kc.size()));
        }
        read_k = s.read_keys.data();
        read_v = s.read_values.data();
      }
      if (state.keep_queries) {
        state.queries[l].insert(state.queries[l].end(), q.data(),
                                q.data() + static_cast<std::size_t>(n) * D);
      }
      // The kept-token masks, when eviction runs in the loop.
      s.masks.assign(static_cast<std::size_t>(c.kv_heads), nullptr);
      if (state.kept_tokens) {
        for (int h = 0; h < c.kv_heads; ++h) {
          const std::vector<char>* mask = state.kept_tokens(l, h);
          if (mask && static_cast<int>(mask->size()) < state.pos + n) {
            return make_error(
                fmt::format("layer {}, KV head {}: the kept-token mask covers {} positions of {}",
                            l, h, mask->size(), state.pos + n));
          }
          s.masks[static_cast<std::size_t>(h)] = mask ? mask->data() : nullptr;
        }
      }
      detail::AttentionArgs args;
      args.layer = l;
      args.heads = c.heads, args.kv_heads = c.kv_heads, args.head_dim = hd;
      args.pos = state.pos, args.n = n;
      args.q = q.data(), args.keys = read_k, args.values = read_v;
      args.masks = s.masks.data();
      args.observe = &state.observe_attention;
      args.weigh = &state.attention_weights;
      KVLAB_TRY(detail::causal_attention(args, s.attention, att.data()));
    }
    // The residual adds ride on the products (C += A·B).
    project(w.wo, D, D, att.data(), n, x.data(), true);
    rms_norm_rows(x.data(), w.ffn_norm, n, D, c.norm_eps, xn.data());
    for (int r0 = 0; r0 < n; r0 += ffn_rows) {
      const int rows = std::min(ffn_rows, n - r0);
      const std::size_t first = static_cast<std::size_t>(r0) * D;
      project(w.w1, F, D, xn.data() + first, rows, h1, false);
      project(w.w3, F, D, xn.data() + first, rows, h3, false);
      {  // SwiGLU (Shazeer 2020): silu(gate) · up, over the rows × hidden values as one array
        const auto size = static_cast<Eigen::Index>(rows) * F;
        Eigen::Map<Eigen::ArrayXf> gate(h1, size);
        gate = gate / (1.0f + (-gate).exp()) * Eigen::Map<const Eigen::ArrayXf>(h3, size);
      }
      project(w.w2, D, F, h1, rows, x.data() + first, true);
    }
  }
  state.pos += n;
  std::vector<float> logits(static_cast<std::size_t>(c.vocab));
  float* last = grow(s.last, static_cast<std::size_t>(D));
  rms_norm_rows(x.row(n - 1).data(), m_impl->w.final_norm, 1, D, c.norm_eps, last);
  project(m_impl->w.classifier, c.vocab, D, last, 1, logits.data(), false);
  if (!std::all_of(logits.begin(), logits.end(), [](float f) { return std::isfinite(f); })) {
    return make_error(fmt::format(
        "position {}: the model's logits are not finite (NaN or infinity): its weights hold NaN "
        "or infinity (the output or final norm weights, or a feed-forward layer)",
        state.pos - 1));
  }
  return logits;
}

std::vector<MatmulShape> forward_matmul_shapes(const LlamaConfig& c, int pos, int n) {
  const int L = c.layers, D = c.dim, KV = c.kv_dim(), F = c.hidden_dim, hd = c.head_dim();
  std::vector<MatmulShape> shapes = {
      {n, D, D, 2 * L, true},   // q and o projections
      {n, D, KV, 2 * L, true},  // k and v projections
  };
  for (int r0 = 0; r0 < n; r0 += kFfnRows) {  // the feed-forward, a pass of kFfnRows rows at most
    const int rows = std::min(kFfnRows, n - r0);
    shapes.push_back({rows, D, F, 2 * L, true});  // gate and up
    shapes.push_back({rows, F, D, L, true});      // down
  }
  const int group = c.heads / c.kv_heads;
  const int block = detail::attention_block_tokens(group, pos + n, n);
  for (int i0 = 0; i0 < n; i0 += block) {
    const int rows = std::min(block, n - i0) * group, width = pos + i0 + std::min(block, n - i0);
    shapes.push_back({rows, hd, width, L * c.kv_heads, true});   // scores: queries · keysᵀ
    shapes.push_back({rows, width, hd, L * c.kv_heads, false});  // probabilities · values
  }
  shapes.push_back({1, D, c.vocab, 1, true});  // the classifier, last token only
  return shapes;
}

KvCache state_to_cache(const LlamaModel& model, const LlamaModel::State& state, bool pre_rope) {
  const LlamaConfig& c = model.config();
  KvCache cache;
  cache.shape = ModelShape{model.path(), c.layers, c.heads, c.kv_heads, c.head_dim()};
  cache.source = "model:" + model.path();
  cache.key_rope = model_rope_spec(c);
  cache.keys_pre_rope = pre_rope;
  const int T = state.pos;
  for (int l = 0; l < c.layers; ++l) {
    LayerKv lkv;
    const auto& keys = pre_rope ? state.keys_pre_rope[l] : state.keys[l];
    lkv.key = Tensor::from_float(keys, DType::F32, T, c.kv_heads, c.head_dim());
    lkv.value = Tensor::from_float(state.values[l], DType::F32, T, c.kv_heads, c.head_dim());
    if (state.keep_queries) {
      lkv.query = Tensor::from_float(state.queries[l], DType::F32, T, c.heads, c.head_dim());
    }
    cache.layers.push_back(std::move(lkv));
  }
  return cache;
}

}  // namespace kvlab
