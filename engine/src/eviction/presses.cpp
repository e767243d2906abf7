// The prefill policies (presses.h). Each follows its paper and the reference code named beside
// it; "kvpress" is NVIDIA/kvpress (kvpress/presses/*_press.py, read at 08a43bfc and 19a63745).
// Keys and queries are post-RoPE, as kvpress's cache holds them; a KV head's score pools its
// query-head group by the mean, as kvpress does for GQA. Ties in a top-k go to the lower position
// (kvpress leaves them to torch.topk), and a position a press must keep scores +infinity.
// Scores are double: Expected Attention's on a peaked head reach 1e-120, zero in float.
#include "eviction/presses.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace kvlab::detail {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Rows = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
constexpr double kForced = std::numeric_limits<double>::infinity();

Rows head_rows(const float* base, std::int64_t stride, int head, int rows, int dim) {
  return Rows(base + static_cast<std::ptrdiff_t>(head) * dim, rows, dim,
              Eigen::OuterStride<>(static_cast<Eigen::Index>(stride)));
}

// The last `w` window queries of query head qh.
Rows window_rows(const PressLayer& in, int qh, int w) {
  return Rows(in.window + static_cast<std::ptrdiff_t>(in.window_rows - w) * in.q_stride +
                  static_cast<std::ptrdiff_t>(qh) * in.dim,
              w, in.dim, Eigen::OuterStride<>(static_cast<Eigen::Index>(in.q_stride)));
}

int window_used(const EvictionConfig& c, const PressLayer& in) {
  return std::min(c.window, in.window_rows);
}

// The first position of the prompt that the window's own queries sit on (they are kept whole);
// the prompt's length when the window is decode-time queries.
int window_start(const PressLayer& in, int w) {
  if (in.window_positions.empty()) return in.prompt;
  return std::min(in.prompt, in.window_positions[static_cast<std::size_t>(in.window_rows - w)]);
}

// The `k` best positions of `score` (higher first, ties to the lower position), ascending.
std::vector<int> top_positions(const std::vector<double>& score, int k) {
  std::vector<int> idx(score.size());
  std::iota(idx.begin(), idx.end(), 0);
  k = std::clamp(k, 0, static_cast<int>(idx.size()));
  const auto better = [&](int a, int b) {
    return score[a] != score[b] ? score[a] > score[b] : a < b;
  };
  std::nth_element(idx.begin(), idx.begin() + k, idx.end(), better);
  idx.resize(static_cast<std::size_t>(k));
  std::sort(idx.begin(), idx.end());
  return idx;
}

// SnapKV (Li et al. 2024, arXiv 2404.14469; FasterDecoding/SnapKV snapkv_utils.py, kvpress
// snapkv_press.py): each window query's softmax over the prompt's keys (causal inside the window),
// the mean over the window's queries and the group's query heads, then an average pool of width
// `pool` over positions (zero-padded at the edges and divided by the full width, as
// torch's avg_pool1d). The window's own positions are kept whole and count against the budget.
std::vector<double> snapkv_scores(const EvictionConfig& c, const PressLayer& in, int h) {
  const int P = in.prompt, D = in.dim, G = in.q_heads / in.kv_heads;
  const int w = window_used(c, in), start = window_start(in, w);
  const Rows keys = head_rows(in.keys, in.kv_stride, h, P, D);
  Eigen::ArrayXd acc = Eigen::ArrayXd::Zero(start);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  RowMatrix logits;
  for (int g = 0; g < G; ++g) {
    logits.noalias() = (window_rows(in, h * G + g, w) * scale) * keys.transpose();
    for (int i = 0; i < w; ++i) {
      const int visible =
          in.window_positions.empty()
              ? P
              : std::min(P,
                         in.window_positions[static_cast<std::size_t>(in.window_rows - w + i)] + 1);
      auto row = logits.row(i).head(visible).array();
      const float m = row.maxCoeff();
      row = (row - m).exp();
      const double inv = 1.0 / row.cast<double>().sum();
      const int n = std::min(visible, start);
      acc.head(n) += row.head(n).cast<double>() * inv;
    }
  }
  acc /= static_cast<double>(w) * G;
  std::vector<double> score(static_cast<std::size_t>(P), kForced);
  const int half = c.pool / 2;
  for (int t = 0; t < start; ++t) {
    double s = 0;
    for (int j = std::max(0, t - half); j <= std::min(start - 1, t + half); ++j) s += acc[j];
    score[static_cast<std::size_t>(t)] = s / c.pool;
  }
  return score;
}

// KNorm (Devoto et al. 2024, arXiv 2406.11430; kvpress knorm_press.py): keys with a low L2 norm
// draw the most attention, so the score is minus the norm.
std::vector<double> knorm_scores(const PressLayer& in, int h) {
  const Rows keys = head_rows(in.keys, in.kv_stride, h, in.prompt, in.dim);
  std::vector<double> score(static_cast<std::size_t>(in.prompt));
  for (int t = 0; t < in.prompt; ++t) score[t] = -keys.row(t).cast<double>().norm();
  return score;
}

// KeyDiff (Park et al. 2025, arXiv 2504.15364; kvpress keydiff_press.py): the anchor is the mean
// of the prompt's unit keys, and a key scores minus its cosine similarity to the anchor, so the
// most distinctive keys stay.
std::vector<double> keydiff_scores(const PressLayer& in, int h) {
  const Rows keys = head_rows(in.keys, in.kv_stride, h, in.prompt, in.dim);
  Eigen::RowVectorXd anchor = Eigen::RowVectorXd::Zero(in.dim);
  std::vector<double> norms(static_cast<std::size_t>(in.prompt));
  for (int t = 0; t < in.prompt; ++t) {
    norms[t] = keys.row(t).cast<double>().norm();
    if (norms[t] > 0) anchor += keys.row(t).cast<double>() / norms[t];
  }
  anchor /= std::max(1, in.prompt);
  const double an = anchor.norm();
  std::vector<double> score(static_cast<std::size_t>(in.prompt));
  for (int t = 0; t < in.prompt; ++t) {
    const double d = norms[t] * an;
    score[t] = d > 0 ? -keys.row(t).cast<double>().dot(anchor) / d : 0.0;
  }
  return score;
}

// The pairs RoPE turns, as (first index, second index) within a head.
std::vector<std::pair<int, int>> rope_pairs(const RopeSpec& r) {
  std::vector<std::pair<int, int>> pairs;
  const int half = r.rotary_dims / 2;
  for (int i = 0; i < half; ++i) {
    pairs.emplace_back(r.half_split ? i : 2 * i, r.half_split ? i + half : 2 * i + 1);
  }
  return pairs;
}

// Expected Attention (Devoto et al. 2025, arXiv 2510.00636; kvpress expected_attention_press.py):
// future queries are taken as Gaussian, with the mean and (biased) covariance of the window's
// queries before RoPE, turned by the mean RoPE rotation over the next `future` positions. A key's
// expected logit is mu'·k/sqrt(d) + k'Σ'k/(2d) (E[exp(q·k/sqrt d)] of a Gaussian q), softmaxed
// over the keys after the first `sinks` and averaged over the group, times the value's norm; the
// sinks are kept. kvpress takes the statistics over the whole prompt; here over the window (give
// --window up to the prompt's length for the same).
std::vector<double> expected_attention_scores(const EvictionConfig& c, const PressLayer& in,
                                              int h) {
  const int P = in.prompt, D = in.dim, G = in.q_heads / in.kv_heads;
  const int w = window_used(c, in);
  const int sinks = std::min(c.sinks, P);
  const Rows keys = head_rows(in.keys, in.kv_stride, h, P, D);
  const Rows values = head_rows(in.values, in.kv_stride, h, P, D);
  const bool turn = in.rope && in.rope->enabled() && !in.window_positions.empty();
  // The mean rotation of each RoPE pair over positions P .. P + future - 1.
  std::vector<std::pair<int, int>> pairs;
  std::vector<double> mean_cos, mean_sin;
  if (turn) {
    pairs = rope_pairs(*in.rope);
    for (std::size_t i = 0; i < pairs.size(); ++i) {
      double cs = 0, sn = 0;
      for (int p = 0; p < c.future; ++p) {
        const double a = static_cast<double>(P + p) * in.rope->frequencies[i];
        cs += std::cos(a), sn += std::sin(a);
      }
      mean_cos.push_back(cs / c.future), mean_sin.push_back(sn / c.future);
    }
  }
  Eigen::ArrayXd acc = Eigen::ArrayXd::Zero(P - sinks);
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(D));
  for (int g = 0; g < G; ++g) {
    Eigen::MatrixXd q = window_rows(in, h * G + g, w).cast<double>();
    if (turn) {  // back to before RoPE, each query by the angle of its own position
      for (int i = 0; i < w; ++i) {
        const int pos = in.window_positions[static_cast<std::size_t>(in.window_rows - w + i)];
        for (std::size_t k = 0; k < pairs.size(); ++k) {
          const double a = -static_cast<double>(pos) * in.rope->frequencies[k];
          const double x = q(i, pairs[k].first), y = q(i, pairs[k].second);
          q(i, pairs[k].first) = x * std::cos(a) - y * std::sin(a);
          q(i, pairs[k].second) = x * std::sin(a) + y * std::cos(a);
        }
      }
    }
    // Σ = CᵀC / w with C the centred queries, so k'Σk = |C k|² / w: a product of the keys with
    // the w centred queries instead of a d × d form per key.
    Eigen::RowVectorXd mu = q.colwise().mean();
    Eigen::MatrixXd centered = q.rowwise() - mu;
    if (turn) {  // mu' = R̄ mu and C' = C R̄ᵀ (so Σ' = R̄ Σ R̄ᵀ), R̄ acting on each pair as [c -s; s c]
      const auto rotate = [&](auto&& row) {
        for (std::size_t k = 0; k < pairs.size(); ++k) {
          const double x = row(pairs[k].first), y = row(pairs[k].second);
          row(pairs[k].first) = mean_cos[k] * x - mean_sin[k] * y;
          row(pairs[k].second) = mean_sin[k] * x + mean_cos[k] * y;
        }
      };
      rotate(mu);
      for (int i = 0; i < w; ++i) rotate(centered.row(i));
    }
    const RowMatrix cf = centered.cast<float>();
    const Eigen::VectorXf muf = mu.transpose().cast<float>();
    const auto k_rest = keys.bottomRows(P - sinks);
    Eigen::VectorXd z = (k_rest * muf).cast<double>() * inv_sqrt_d;
    if (c.covariance) {
      const RowMatrix kc = k_rest * cf.transpose();
      z += kc.rowwise().squaredNorm().cast<double>() / (static_cast<double>(w) * 2.0 * D);
    }
    if (z.size() > 0) {
      const double m = z.maxCoeff();
      Eigen::ArrayXd e = (z.array() - m).exp();
      acc += e / e.sum();
    }
  }
  acc /= G;
  std::vector<double> score(static_cast<std::size_t>(P), kForced);
  for (int t = sinks; t < P; ++t) {
    double s = acc[t - sinks];
    if (c.value_norm) s *= values.row(t).cast<double>().norm();
    score[static_cast<std::size_t>(t)] = s;
  }
  return score;
}

}  // namespace

std::vector<std::vector<double>> press_scores(EvictionPolicy scorer, const EvictionConfig& c,
                                              const PressLayer& in) {
  std::vector<std::vector<double>> out(static_cast<std::size_t>(in.kv_heads));
  for (int h = 0; h < in.kv_heads; ++h) {
    switch (scorer) {
      case EvictionPolicy::SnapKV:
      case EvictionPolicy::PyramidKV:
        out[h] = snapkv_scores(c, in, h);
        break;
      case EvictionPolicy::KNorm:
        out[h] = knorm_scores(in, h);
        break;
      case EvictionPolicy::KeyDiff:
        out[h] = keydiff_scores(in, h);
        break;
      case EvictionPolicy::ExpectedAttention:
        out[h] = expected_attention_scores(c, in, h);
        break;
      default:
        out[h].assign(static_cast<std::size_t>(in.prompt), 0.0);
        break;
    }
  }
  return out;
}

// PyramidKV (Cai et al. 2024, arXiv 2406.02069; Zefan-Cai/KVCache-Factory pyramidkv_utils.py,
// PyramidKVCluster): the budget of positions outside the observation window falls
// arithmetically with depth: with B' the uniform budget less the window, min_n = B' / beta,
// max_n = 2B' − min_n (clamped to the prompt outside the window, min_n then 2B' − max_n), and
// layer l keeps round(max_n − l·(max_n − min_n)/(layers − 1)) plus the window, so the layers
// average the uniform budget. In real arithmetic, as kvpress computes it: the original's integer
// division makes the step 0 whenever max_n − min_n < layers − 1, and every layer then keeps
// max_n, about twice the budget. (kvpress counts the window inside the budget and falls back to
// uniform whenever min_n is below the window, at beta 20 any budget under 20 windows; the window
// on top is the original's.)
int press_budget(const EvictionConfig& c, const Budget& budget, const PressLayer& in) {
  const int P = in.prompt;
  const int uniform = budget.tokens_at(P);
  if (scoring_policy(c) != EvictionPolicy::PyramidKV || in.layers < 2) return uniform;
  const int w = window_used(c, in);
  const std::int64_t window = P - window_start(in, w);  // kept by every layer on top
  const std::int64_t rest = uniform - window;
  if (rest <= 0) return uniform;
  double min_n = static_cast<double>(rest) / c.pyramid_beta, max_n = 2.0 * rest - min_n;
  if (max_n >= P - window) max_n = static_cast<double>(P - window), min_n = 2.0 * rest - max_n;
  const double steps = (max_n - min_n) / (in.layers - 1);
  const auto kept = std::lround(max_n - in.layer * steps) + window;
  return static_cast<int>(std::clamp<std::int64_t>(kept, 1, P));
}

int chunks_kept(int prompt, int chunk, int tokens) {
  const int chunks = (prompt + chunk - 1) / chunk;
  return std::max(1, static_cast<int>(static_cast<double>(chunks) * tokens / std::max(1, prompt)));
}

PressResult run_press(const EvictionConfig& c, const Budget& budget, const PressLayer& in) {
  PressResult r;
  const int H = in.kv_heads, P = in.prompt, D = in.dim;
  r.budget = press_budget(c, budget, in);
  r.kept.assign(static_cast<std::size_t>(H), {});
  const auto everything = [&] {
    r.budget = P;
    for (auto& k : r.kept) {
      k.resize(static_cast<std::size_t>(P));
      std::iota(k.begin(), k.end(), 0);
    }
  };
  switch (c.policy) {
    case EvictionPolicy::SnapKV:
    case EvictionPolicy::PyramidKV:
    case EvictionPolicy::KNorm:
    case EvictionPolicy::KeyDiff:
    case EvictionPolicy::ExpectedAttention: {
      const auto scores = press_scores(c.policy, c, in);
      for (int h = 0; h < H; ++h) r.kept[h] = top_positions(scores[h], r.budget);
      break;
    }
    case EvictionPolicy::AdaKV: {
      // Ada-KV (Feng et al. 2024, arXiv 2407.11550; kvpress adakv_press.py): each head's best
      // floor(alpha * B) positions are safe, then the layer keeps its best H * B (head,
      // position) pairs over all heads, so heads whose attention is concentrated give budget to
      // heads whose attention is spread.
      auto scores = press_scores(c.scorer, c, in);
      const int safe = static_cast<int>(r.budget * c.ada_safeguard);
      std::vector<double> flat;
      flat.reserve(static_cast<std::size_t>(H) * P);
      for (int h = 0; h < H; ++h) {
        for (int t : top_positions(scores[h], safe)) scores[h][t] = kForced;
        flat.insert(flat.end(), scores[h].begin(), scores[h].end());
      }
      for (int i : top_positions(flat, H * r.budget)) r.kept[i / P].push_back(i % P);
      break;
    }
    case EvictionPolicy::ChunkKV: {
      // ChunkKV (Liu et al. 2025, arXiv 2502.00299; kvpress chunkkv_press.py): a chunk of `chunk`
      // consecutive positions scores the mean over its positions of the scores summed over heads
      // (a short last chunk by its own mean); the best chunks are kept, the same for every head.
      const auto scores = press_scores(c.scorer, c, in);
      const int chunks = (P + c.chunk - 1) / c.chunk;
      std::vector<double> chunk_score(static_cast<std::size_t>(chunks));
      for (int k = 0; k < chunks; ++k) {
        const int t0 = k * c.chunk, t1 = std::min(P, t0 + c.chunk);
        double s = 0;
        for (int t = t0; t < t1; ++t) {
          for (int h = 0; h < H; ++h) s += scores[h][t];
        }
        chunk_score[k] = s / (t1 - t0);
      }
      const int keep = chunks_kept(P, c.chunk, r.budget);
      std::vector<int> tokens;
      for (int k : top_positions(chunk_score, keep)) {
        for (int t = k * c.chunk; t < std::min(P, (k + 1) * c.chunk); ++t) tokens.push_back(t);
      }
      for (auto& k : r.kept) k = tokens;
      break;
    }
    case EvictionPolicy::ThinK: {
      // ThinK (Xu et al. 2025, arXiv 2407.21018; SalesforceAIResearch/ThinK kv_pruning_utils.py,
      // kvpress think_press.py): key channel c of a head scores mean(q_c²) over the window (and
      // the group) times mean(k_c²) over the prompt, the squared Frobenius norm of that channel's
      // share of QKᵀ up to a constant; the lowest int(dim × (1 − key_channels)) are zeroed in
      // the prompt's keys. Values and the decoded tokens' keys stay whole.
      const int w = window_used(c, in), G = in.q_heads / H;
      const int pruned = static_cast<int>(D * (1.0 - c.key_channels) + 1e-9);
      r.channel_masks.assign(static_cast<std::size_t>(H), std::vector<std::uint8_t>(D, 1));
      for (int h = 0; h < H; ++h) {
        const auto squares = [](const Rows& rows) -> Eigen::ArrayXd {
          return rows.cast<double>().array().square().colwise().sum().transpose();
        };
        Eigen::ArrayXd qn = Eigen::ArrayXd::Zero(D);
        for (int g = 0; g < G; ++g) qn += squares(window_rows(in, h * G + g, w));
        const Eigen::ArrayXd kn = squares(head_rows(in.keys, in.kv_stride, h, P, D));
        std::vector<double> score(static_cast<std::size_t>(D));
        for (int d = 0; d < D; ++d) score[d] = qn[d] * kn[d];
        std::vector<double> neg(score.size());
        for (int d = 0; d < D; ++d) neg[d] = -score[d];
        for (int d : top_positions(neg, pruned)) r.channel_masks[h][d] = 0;
      }
      if (c.think_tokens) {
        const auto scores = press_scores(c.scorer, c, in);
        for (int h = 0; h < H; ++h) r.kept[h] = top_positions(scores[h], r.budget);
      } else {
        everything();
      }
      break;
    }
    default:
      everything();
      break;
  }
  return r;
}

void apply_channel_masks(const PressResult& r, const PressLayer& in, float* keys) {
  if (r.channel_masks.empty()) return;
  for (int t = 0; t < in.prompt; ++t) {
    float* row = keys + static_cast<std::ptrdiff_t>(t) * in.kv_stride;
    for (int h = 0; h < in.kv_heads; ++h) {
      const auto& mask = r.channel_masks[static_cast<std::size_t>(h)];
      for (int d = 0; d < in.dim; ++d) {
        if (!mask[d]) row[h * in.dim + d] = 0.0f;
      }
    }
  }
}

// MiniCache (Liu et al. 2024, arXiv 2405.14366, sec. 4): from the middle of the model, layers
// (S, S+1), (S+2, S+3), ... with S = layers / 2 share each token's direction. The paper publishes
// no code; this follows its equations, per KV head: Ω is the angle between the two layers'
// vectors, the shared direction is the SLERP sin((1−t)Ω)/sin Ω · x̂_lower + sin(tΩ)/sin Ω · x̂_upper,
// each layer keeps its own norm, and the tokens whose angular distance Ω/π lies in the top
// `retain` of the range [d_min, d_max] over the prompt stay unmerged (our reading of its
// retention rule, which keeps a few percent at γ = 0.05).
void minicache_merge(float* lower, float* upper, std::int64_t stride, int prompt, int heads,
                     int dim, double t, double retain, std::vector<std::uint8_t>& retained) {
  retained.assign(static_cast<std::size_t>(prompt) * heads, 0);
  std::vector<double> dist(retained.size());
  double dmin = INFINITY, dmax = -INFINITY;
  for (int p = 0; p < prompt; ++p) {
    for (int h = 0; h < heads; ++h) {
      const Eigen::Map<const Eigen::VectorXf> a(lower + p * stride + h * dim, dim);
      const Eigen::Map<const Eigen::VectorXf> b(upper + p * stride + h * dim, dim);
      const double na = a.cast<double>().norm(), nb = b.cast<double>().norm();
      const double cosine =
          na > 0 && nb > 0
              ? std::clamp(a.cast<double>().dot(b.cast<double>()) / (na * nb), -1.0, 1.0)
              : 1.0;
      const double d = std::acos(cosine) / M_PI;
      dist[static_cast<std::size_t>(p) * heads + h] = d;
      dmin = std::min(dmin, d), dmax = std::max(dmax, d);
    }
  }
  const double cut = dmin + (1.0 - retain) * (dmax - dmin);
  for (int p = 0; p < prompt; ++p) {
    for (int h = 0; h < heads; ++h) {
      const std::size_t i = static_cast<std::size_t>(p) * heads + h;
      if (retain > 0 && dmax > dmin && dist[i] >= cut) {
        retained[i] = 1;
        continue;
      }
      Eigen::Map<Eigen::VectorXf> a(lower + p * stride + h * dim, dim);
      Eigen::Map<Eigen::VectorXf> b(upper + p * stride + h * dim, dim);
      const double na = a.cast<double>().norm(), nb = b.cast<double>().norm();
      if (!(na > 0 && nb > 0)) continue;
      const Eigen::VectorXd ua = a.cast<double>() / na, ub = b.cast<double>() / nb;
      const double omega = dist[i] * M_PI;
      Eigen::VectorXd e;
      if (std::sin(omega) < 1e-6) {
        e = (1 - t) * ua + t * ub;  // (anti)parallel: the limit of SLERP, linear
      } else {
        e = std::sin((1 - t) * omega) / std::sin(omega) * ua +
            std::sin(t * omega) / std::sin(omega) * ub;
      }
      const double ne = e.norm();
      if (ne > 0) e /= ne;
      a = (e * na).cast<float>();
      b = (e * nb).cast<float>();
    }
  }
}

int minicache_partner(int layer, int layers) {
  const int start = layers / 2;
  if (layer < start) return -1;
  const int partner = (layer - start) % 2 == 0 ? layer + 1 : layer - 1;
  return partner < layers ? partner : -1;
}

}  // namespace kvlab::detail
