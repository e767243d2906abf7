// The Llama-architecture CPU runner (see llama_model.h).
#include "kvlab/engine/llama_model.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "file_mapping.h"

namespace kvlab {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstWeights = Eigen::Map<const RowMatrix>;

void rms_norm(const float* x, const float* w, int n, float eps, float* out) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / n + eps));
  for (int i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

// Rotates the heads of `v` ([heads][head_dim]) for position `pos`.
void rope(float* v, int heads, int head_dim, int pos, double theta, bool half_split) {
  const int half = head_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(theta, -2.0 * i / head_dim);
    const double angle = pos * freq;
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    for (int h = 0; h < heads; ++h) {
      float* x = v + static_cast<std::size_t>(h) * head_dim;
      float& a = half_split ? x[i] : x[2 * i];
      float& b = half_split ? x[i + half] : x[2 * i + 1];
      const float a0 = a, b0 = b;
      a = a0 * c - b0 * s;
      b = a0 * s + b0 * c;
    }
  }
}

}  // namespace

struct LlamaModel::Impl {
  std::string path;
  LlamaConfig config;
  LlamaWeights w;
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

Result<LlamaModel> LlamaModel::load_llama2c(const std::string& path) {
  auto mapping = detail::FileMapping::open(path);
  if (!mapping) return mapping.error();
  LlamaConfig c;
  constexpr std::size_t kHeader = 7 * sizeof(std::int32_t);
  if ((*mapping)->size() < kHeader) {
    return make_error(
        fmt::format("{}: {} bytes, too short for a llama2.c header", path, (*mapping)->size()));
  }
  std::int32_t h[7];
  std::memcpy(h, (*mapping)->data(), kHeader);
  c.dim = h[0], c.hidden_dim = h[1], c.layers = h[2], c.heads = h[3], c.kv_heads = h[4];
  c.shared_classifier = h[5] > 0;
  c.vocab = std::abs(h[5]), c.seq_len = h[6];
  const auto bad = [&](const char* what) {
    return make_error(fmt::format(
        "{}: not a llama2.c v0 checkpoint: {} (dim {}, hidden {}, "
        "layers {}, heads {}, kv_heads {}, vocab {}, seq_len {})",
        path, what, c.dim, c.hidden_dim, c.layers, c.heads, c.kv_heads, c.vocab, c.seq_len));
  };
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.layers <= 0 || c.heads <= 0 || c.kv_heads <= 0 ||
      c.vocab <= 0 || c.seq_len <= 0 || c.dim > 65536 || c.hidden_dim > 262144 || c.layers > 1024 ||
      c.vocab > 1 << 22 || c.seq_len > 1 << 22) {
    return bad("a header field is out of range");
  }
  if (c.dim % c.heads != 0 || c.heads % c.kv_heads != 0 || c.head_dim() % 2 != 0) {
    return bad("dim, heads and kv_heads do not divide");
  }
  const std::size_t L = c.layers, D = c.dim, F = c.hidden_dim, KV = c.kv_dim(), V = c.vocab;
  const std::size_t half_head = c.head_dim() / 2;
  const std::size_t floats = V * D + L * D + L * D * D + 2 * L * KV * D + L * D * D + L * D +
                             2 * L * F * D + L * D * F + D + 2 * c.seq_len * half_head +
                             (c.shared_classifier ? 0 : V * D);
  if ((*mapping)->size() != kHeader + floats * sizeof(float)) {
    return make_error(fmt::format("{}: {} bytes, but a llama2.c checkpoint of this shape has {}",
                                  path, (*mapping)->size(), kHeader + floats * sizeof(float)));
  }
  const float* p = reinterpret_cast<const float*>((*mapping)->data() + kHeader);
  const auto take = [&](std::size_t n) {
    const float* at = p;
    p += n;
    return at;
  };
  LlamaWeights w;
  w.embedding = take(V * D);
  w.layers.resize(L);
  const auto per_layer = [&](auto member, std::size_t n) {
    for (auto& l : w.layers) l.*member = take(n);
  };
  per_layer(&LlamaLayerWeights::attn_norm, D);
  per_layer(&LlamaLayerWeights::wq, D * D);
  per_layer(&LlamaLayerWeights::wk, KV * D);
  per_layer(&LlamaLayerWeights::wv, KV * D);
  per_layer(&LlamaLayerWeights::wo, D * D);
  per_layer(&LlamaLayerWeights::ffn_norm, D);
  per_layer(&LlamaLayerWeights::w1, F * D);
  per_layer(&LlamaLayerWeights::w2, D * F);
  per_layer(&LlamaLayerWeights::w3, F * D);
  w.final_norm = take(D);
  take(2 * c.seq_len * half_head);  // precomputed RoPE tables of old exports: recomputed here
  w.classifier = c.shared_classifier ? w.embedding : take(V * D);
  w.owner = std::shared_ptr<const detail::FileMapping>(std::move(*mapping));
  return from_weights(path, c, std::move(w));
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
  auto impl = std::make_unique<Impl>();
  impl->path = std::move(path);
  impl->config = config;
  impl->w = std::move(weights);
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
  const int D = c.dim, KV = c.kv_dim(), F = c.hidden_dim, hd = c.head_dim();
  const int group = c.heads / c.kv_heads;
  RowMatrix x(n, D), xn(n, D), q(n, D), k(n, KV), v(n, KV), att(n, D), h1(n, F), h3(n, F);
  for (int i = 0; i < n; ++i) {
    std::memcpy(x.row(i).data(), m_impl->w.embedding + static_cast<std::size_t>(tokens[i]) * D,
                sizeof(float) * D);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> scores, read_keys, read_values, probs;
  RowMatrix probs_matrix;
  std::vector<const char*> masks;
  for (int l = 0; l < c.layers; ++l) {
    const LlamaLayerWeights& w = m_impl->w.layers[static_cast<std::size_t>(l)];
    for (int i = 0; i < n; ++i)
      rms_norm(x.row(i).data(), w.attn_norm, D, c.norm_eps, xn.row(i).data());
    q.noalias() = xn * ConstWeights(w.wq, D, D).transpose();
    k.noalias() = xn * ConstWeights(w.wk, KV, D).transpose();
    v.noalias() = xn * ConstWeights(w.wv, KV, D).transpose();
    auto& kc = state.keys[l];
    auto& vc = state.values[l];
    if (state.keep_pre_rope) {
      state.keys_pre_rope[l].insert(state.keys_pre_rope[l].end(), k.data(), k.data() + n * KV);
    }
    for (int i = 0; i < n; ++i) {
      rope(q.row(i).data(), c.heads, hd, state.pos + i, c.rope_theta, c.rope_half_split);
      rope(k.row(i).data(), c.kv_heads, hd, state.pos + i, c.rope_theta, c.rope_half_split);
    }
    kc.insert(kc.end(), k.data(), k.data() + static_cast<std::size_t>(n) * KV);
    vc.insert(vc.end(), v.data(), v.data() + static_cast<std::size_t>(n) * KV);
    const float* read_k = kc.data();
    const float* read_v = vc.data();
    if (state.attention_reader) {
      if (auto r = state.attention_reader(l, kc, vc, read_keys, read_values); !r) {
        return make_error(fmt::format("layer {}: {}", l, r.message()));
      }
      if (read_keys.size() != kc.size() || read_values.size() != vc.size()) {
        return make_error(
            fmt::format("layer {}: the attention reader returned {} keys and {} "
                        "values for a cache of {}",
                        l, read_keys.size(), read_values.size(), kc.size()));
      }
      read_k = read_keys.data();
      read_v = read_values.data();
    }
    if (state.keep_queries) {
      state.queries[l].insert(state.queries[l].end(), q.data(),
                              q.data() + static_cast<std::size_t>(n) * D);
    }
    // The kept-token masks, when eviction runs in the loop.
    masks.assign(static_cast<std::size_t>(c.kv_heads), nullptr);
    if (state.kept_tokens) {
      for (int h = 0; h < c.kv_heads; ++h) {
        const std::vector<char>* mask = state.kept_tokens(l, h);
        if (mask && static_cast<int>(mask->size()) < state.pos + n) {
          return make_error(
              fmt::format("layer {}, KV head {}: the kept-token mask covers {} positions of {}", l,
                          h, mask->size(), state.pos + n));
        }
        masks[static_cast<std::size_t>(h)] = mask ? mask->data() : nullptr;
      }
    }
    // Causal attention of each new token over every cached one. Without hooks: per head, the
    // logits and the weighted values of all new tokens as matrix products.
    const bool plain = !state.observe_attention &&
                       std::all_of(masks.begin(), masks.end(), [](const char* m) { return !m; });
    if (plain) {
      using Strided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
      const int total = state.pos + n;
      for (int head = 0; head < c.heads; ++head) {
        const int kvh = head / group;
        const Strided qh(q.data() + head * hd, n, hd, Eigen::OuterStride<>(D));
        const Strided kh(read_k + kvh * hd, total, hd, Eigen::OuterStride<>(KV));
        const Strided vh(read_v + kvh * hd, total, hd, Eigen::OuterStride<>(KV));
        probs_matrix.noalias() = (qh * kh.transpose()) * scale;
        for (int i = 0; i < n; ++i) {
          const int ctx = state.pos + i + 1;
          auto row = probs_matrix.row(i);
          auto live = row.head(ctx);
          live = (live.array() - live.maxCoeff()).exp();
          live /= live.sum();
          row.tail(total - ctx).setZero();
        }
        Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>(att.data() + head * hd, n, hd,
                                                       Eigen::OuterStride<>(D))
            .noalias() = probs_matrix * vh;
      }
    }
    for (int i = 0; i < n && !plain; ++i) {
      const int ctx = state.pos + i + 1;
      scores.resize(static_cast<std::size_t>(ctx));
      for (int head = 0; head < c.heads; ++head) {
        const int kvh = head / group;
        const char* keep = masks[static_cast<std::size_t>(kvh)];
        const float* qh = q.row(i).data() + head * hd;
        float m = -INFINITY;
        for (int t = 0; t < ctx; ++t) {
          if (keep && !keep[t]) continue;
          const float* kt = read_k + static_cast<std::size_t>(t) * KV + kvh * hd;
          float s = 0;
          for (int d = 0; d < hd; ++d) s += qh[d] * kt[d];
          scores[t] = s * scale;
          m = std::max(m, scores[t]);
        }
        double sum = 0;
        for (int t = 0; t < ctx; ++t) {
          if (keep && !keep[t]) continue;
          sum += (scores[t] = std::exp(scores[t] - m));
        }
        if (!(sum > 0)) {
          return make_error(fmt::format(
              "layer {}, KV head {}: the kept-token mask leaves nothing to attend at position {}",
              l, kvh, ctx - 1));
        }
        if (state.observe_attention) probs.assign(static_cast<std::size_t>(ctx), 0.0f);
        float* out = att.row(i).data() + head * hd;
        std::fill(out, out + hd, 0.0f);
        for (int t = 0; t < ctx; ++t) {
          if (keep && !keep[t]) continue;
          const float p = static_cast<float>(scores[t] / sum);
          if (state.observe_attention) probs[static_cast<std::size_t>(t)] = p;
          const float* vt = read_v + static_cast<std::size_t>(t) * KV + kvh * hd;
          for (int d = 0; d < hd; ++d) out[d] += p * vt[d];
        }
        if (state.observe_attention) state.observe_attention(l, head, probs.data(), ctx);
      }
    }
    x.noalias() += att * ConstWeights(w.wo, D, D).transpose();
    for (int i = 0; i < n; ++i)
      rms_norm(x.row(i).data(), w.ffn_norm, D, c.norm_eps, xn.row(i).data());
    h1.noalias() = xn * ConstWeights(w.w1, F, D).transpose();
    h3.noalias() = xn * ConstWeights(w.w3, F, D).transpose();
    h1 = (h1.array() / (1.0f + (-h1.array()).exp()) * h3.array()).matrix();  // SwiGLU
    x.noalias() += h1 * ConstWeights(w.w2, D, F).transpose();
  }
  state.pos += n;
  std::vector<float> last(static_cast<std::size_t>(D)), logits(static_cast<std::size_t>(c.vocab));
  rms_norm(x.row(n - 1).data(), m_impl->w.final_norm, D, c.norm_eps, last.data());
  Eigen::Map<Eigen::VectorXf>(logits.data(), c.vocab).noalias() =
      ConstWeights(m_impl->w.classifier, c.vocab, D) *
      Eigen::Map<const Eigen::VectorXf>(last.data(), D);
  return logits;
}

KvCache state_to_cache(const LlamaModel& model, const LlamaModel::State& state, bool pre_rope) {
  const LlamaConfig& c = model.config();
  KvCache cache;
  cache.shape = ModelShape{model.path(), c.layers, c.heads, c.kv_heads, c.head_dim()};
  cache.source = "model:" + model.path();
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
