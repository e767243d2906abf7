// The decode-time eviction and merging simulation; the model is described in eviction.h.
//
// Work is split by (layer, KV head): a KV head's policy only ever sees the attention of its own
// query-head group, so heads are independent. For each head, the logits of a chunk of decode
// steps (every query head of the group, every token position) come from one matrix product,
// the per-step softmaxes and the policy run over rows of it, and the attention outputs come from
// two more matrix products: the full-cache probabilities times V, and the kept entries'
// probabilities (spread back over the tokens each entry holds) times V. The policy's state and
// rules live in EvictionHeadPolicy (eviction_policy.h), shared with the model loop.
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "core/row_loader.h"
#include "eviction/eviction_policy.h"
#include "eviction/presses.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/quant/compress.h"

namespace kvlab {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using HeadRows = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

constexpr double kFp16BytesPerValue = 2.0;
constexpr double kMergeCountBytes = 4.0;  // the token count a merged entry carries

// Per-step sums over heads; the report divides them into means.
struct StepSums {
  double kept = 0, memory = 0, kv_heads = 0;        // per KV head
  double mass = 0, cosine = 0, err2 = 0, out2 = 0;  // per query head
  double rows = 0;
  StepSums& operator+=(const StepSums& o) {
    kept += o.kept, memory += o.memory, kv_heads += o.kv_heads;
    mass += o.mass, cosine += o.cosine, err2 += o.err2, out2 += o.out2, rows += o.rows;
    return *this;
  }
};

// One layer as float, [tokens][heads][dim]: the source's K and V, and what the cache holds of
// them when that differs (quantized, ThinK's pruned key channels, MiniCache's shared directions;
// empty otherwise).
struct LayerData {
  std::vector<float> keys, values, keys_seen, values_seen, queries;
  bool seen() const { return !keys_seen.empty(); }
};

struct HeadOutcome {
  std::vector<StepSums> steps;
  EvictionHeadResult result;
  EvictionMap map;
  double flops = 0;
};

struct HeadParams {
  const EvictionConfig* config = nullptr;
  Budget budget;
  int tokens = 0, prompt = 0, steps = 0, group = 0, dim = 0, kv_heads = 0, q_heads = 0;
  int queries = 0;
  int kv_head = 0;
  double bytes_per_entry = 0;
  // A prefill policy's decision for this head: the prompt positions it keeps, and their bytes.
  const std::vector<int>* prompt_kept = nullptr;
  double prompt_bytes = 0;
};

// Which of the cache's queries step s uses: the last `steps` of them, cycling when there are
// fewer, so the last step always gets the last query.
int query_for_step(int s, int steps, int queries) {
  return queries - 1 - (steps - 1 - s) % queries;
}

class HeadSimulation {
 public:
  HeadSimulation(const HeadParams& p, const LayerData& layer)
      : m_p(p), m_c(*p.config), m_layer(layer) {}

  HeadOutcome run() {
    m_policy.emplace(m_c, m_p.budget, m_p.tokens, m_p.prompt, m_p.group);
    if (m_p.prompt_kept) m_policy->retain_prompt(*m_p.prompt_kept);
    if (m_c.policy == EvictionPolicy::Merge) {
      m_policy->set_merge_keys(head_rows(policy_keys(), m_p.tokens));
    }
    m_out.steps.assign(m_p.steps, {});

    // Chunks of steps small enough that a chunk's matrices stay around 16 MB each.
    const std::int64_t cells_per_step = static_cast<std::int64_t>(m_p.group) * m_p.tokens;
    const int chunk = static_cast<int>(std::clamp<std::int64_t>(
        (std::int64_t{1} << 22) / std::max<std::int64_t>(1, cells_per_step), 1, m_p.steps));
    for (int s0 = 0; s0 < m_p.steps; s0 += chunk) run_chunk(s0, std::min(m_p.steps, s0 + chunk));

    auto& r = m_out.result;
    r.kept_tokens = static_cast<int>(m_policy->kept().size());
    if (m_p.prompt_kept) r.prompt_kept = static_cast<int>(m_p.prompt_kept->size());
    double mass = 0;
    for (const auto& st : m_out.steps) mass += st.mass;
    r.attention_mass_retained = mass / (static_cast<double>(m_p.steps) * m_p.group);
    m_out.map = m_policy->take_map();
    return std::move(m_out);
  }

 private:
  const std::vector<float>& policy_keys() const {
    return m_layer.seen() ? m_layer.keys_seen : m_layer.keys;
  }
  const std::vector<float>& policy_values() const {
    return m_layer.seen() ? m_layer.values_seen : m_layer.values;
  }
  HeadRows head_rows(const std::vector<float>& x, int rows) const {
    return HeadRows(x.data() + static_cast<std::size_t>(m_p.kv_head) * m_p.dim, rows, m_p.dim,
                    Eigen::OuterStride<>(static_cast<Eigen::Index>(m_p.kv_heads) * m_p.dim));
  }

  void run_chunk(int s0, int s1) {
    const int G = m_p.group, D = m_p.dim;
    const int rows = (s1 - s0) * G;
    const int cols = m_p.prompt + s1;  // tokens present at the chunk's last step
    RowMatrix q(rows, D);
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    for (int s = s0; s < s1; ++s) {
      const int qi = query_for_step(s, m_p.steps, m_p.queries);
      for (int g = 0; g < G; ++g) {
        const float* src = m_layer.queries.data() +
                           (static_cast<std::size_t>(qi) * m_p.q_heads + m_p.kv_head * G + g) * D;
        for (int d = 0; d < D; ++d) q((s - s0) * G + g, d) = src[d] * scale;
      }
    }
    m_logits_full.noalias() = q * head_rows(m_layer.keys, cols).transpose();
    if (m_layer.seen()) {
      m_logits_kept.noalias() = q * head_rows(m_layer.keys_seen, cols).transpose();
    }
    const RowMatrix& logits_kept = m_layer.seen() ? m_logits_kept : m_logits_full;
    m_probs_full.setZero(rows, cols);
    m_probs_kept.setZero(rows, cols);
    for (int s = s0; s < s1; ++s) step(s, s0, logits_kept);

    const RowMatrix out_full = m_probs_full * head_rows(m_layer.values, cols);
    const RowMatrix out_kept = m_probs_kept * head_rows(policy_values(), cols);
    m_out.flops += 2.0 * rows * cols * D * (m_layer.seen() ? 4 : 3);
    for (int s = s0; s < s1; ++s) {
      StepSums& st = m_out.steps[s];
      for (int g = 0; g < G; ++g) {
        const int r = (s - s0) * G + g;
        const double o2 = out_full.row(r).cast<double>().squaredNorm();
        const double h2 = out_kept.row(r).cast<double>().squaredNorm();
        const double dot = out_full.row(r).cast<double>().dot(out_kept.row(r).cast<double>());
        st.err2 += (out_full.row(r) - out_kept.row(r)).cast<double>().squaredNorm();
        st.out2 += o2;
        st.cosine += (o2 > 0 && h2 > 0) ? dot / std::sqrt(o2 * h2) : (o2 == h2 ? 1.0 : 0.0);
      }
    }
  }

  void step(int s, int s0, const RowMatrix& logits_kept) {
    const int G = m_p.group;
    const int t_new = m_p.prompt + s;
    const int context = t_new + 1;
    detail::EvictionHeadPolicy& policy = *m_policy;
    policy.admit(t_new);
    const std::vector<int>& kept = policy.kept();
    const std::vector<char>& held = policy.held();
    StepSums& st = m_out.steps[s];
    const bool last = s == m_p.steps - 1;
    const bool needle = last && m_c.needle && *m_c.needle < context;
    bool needle_in_top = needle && policy.is_entry(*m_c.needle);

    const std::size_t n = kept.size();
    m_p_entry.resize(n);
    for (int g = 0; g < G; ++g) {
      const int r = (s - s0) * G + g;
      // The full cache: every token so far, original keys.
      float* pf = m_probs_full.row(r).data();
      const float* lf = m_logits_full.row(r).data();
      const float mf = *std::max_element(lf, lf + context);
      double sum = 0;
      for (int t = 0; t < context; ++t) sum += (pf[t] = std::exp(lf[t] - mf));
      const float inv = static_cast<float>(1.0 / sum);
      double mass = 0;
      for (int t = 0; t < context; ++t) {
        pf[t] *= inv;
        if (held[t]) mass += pf[t];
      }
      st.mass += mass;
      st.rows += 1;

      // What the model sees: the kept entries.
      const float* lk = logits_kept.row(r).data();
      double mk = -INFINITY;
      for (std::size_t i = 0; i < n; ++i) {
        m_p_entry[i] = policy.entry_logit(lk, kept[i]);
        mk = std::max(mk, m_p_entry[i]);
      }
      double sk = 0;
      for (std::size_t i = 0; i < n; ++i) sk += (m_p_entry[i] = std::exp(m_p_entry[i] - mk));
      float* pk = m_probs_kept.row(r).data();
      double p_needle = -1;
      for (std::size_t i = 0; i < n; ++i) {
        const int e = kept[i];
        const double p = m_p_entry[i] / sk;
        m_p_entry[i] = p;
        policy.add_attention(e, p);
        const auto& members = policy.members(e);
        if (members.empty()) {
          pk[e] = static_cast<float>(p);
        } else {
          for (const auto& [t, c] : members) pk[t] += static_cast<float>(p * c);
        }
        if (needle && e == *m_c.needle) p_needle = p;
      }
      if (needle_in_top) {
        int above = 0;
        for (std::size_t i = 0; i < n; ++i) above += m_p_entry[i] > p_needle;
        needle_in_top = above < m_c.top_k;
      }
    }
    if (needle) {
      m_out.result.needle_retained = policy.is_entry(*m_c.needle);
      m_out.result.needle_in_top_k = needle_in_top;
    }

    policy.evict(s, context);

    const std::size_t merged = policy.merged_entries();
    st.kept += static_cast<double>(kept.size());
    if (m_p.prompt_kept) {
      st.memory += m_p.prompt_bytes +
                   static_cast<double>(kept.size() - m_p.prompt_kept->size()) * m_p.bytes_per_entry;
    } else {
      st.memory += static_cast<double>(kept.size()) * m_p.bytes_per_entry +
                   static_cast<double>(merged) * kMergeCountBytes;
    }
    st.kv_heads += 1;
  }

  const HeadParams m_p;
  const EvictionConfig& m_c;
  const LayerData& m_layer;
  HeadOutcome m_out;
  std::optional<detail::EvictionHeadPolicy> m_policy;
  RowMatrix m_logits_full, m_logits_kept, m_probs_full, m_probs_kept;
  std::vector<double> m_p_entry;
};

}  // namespace

CellState EvictionMap::state(int step, int position) const {
  if (step < arrival_step(position)) return CellState::Absent;
  const std::uint16_t cell = cells[static_cast<std::size_t>(position)];
  const int leave = cell & 0x3FFF;
  const int how = cell >> 14;
  if (leave == kNever || step < leave) {
    return how == detail::kLeftSink ? CellState::Sink : CellState::Kept;
  }
  return how == detail::kLeftMerged ? CellState::Merged : CellState::Evicted;
}

namespace {

void finish_step(const StepSums& sums, int context, EvictionStep& out) {
  out.context = context;
  out.kept = sums.kv_heads > 0 ? sums.kept / sums.kv_heads : 0;
  out.memory_bytes = sums.memory;
  out.attention_mass_retained = sums.rows > 0 ? sums.mass / sums.rows : 1;
  out.attn_output_rel_error = sums.out2 > 0 ? std::sqrt(sums.err2 / sums.out2) : 0;
  out.attn_output_cosine = sums.rows > 0 ? sums.cosine / sums.rows : 1;
}

// Means over steps of the per-step numbers, with the error pooled over every step.
void finish_totals(const std::vector<StepSums>& steps, double& mass, double& rel_error,
                   double& cosine) {
  StepSums all;
  for (const auto& s : steps) all += s;
  mass = all.rows > 0 ? all.mass / all.rows : 1;
  rel_error = all.out2 > 0 ? std::sqrt(all.err2 / all.out2) : 0;
  cosine = all.rows > 0 ? all.cosine / all.rows : 1;
}

Result<LayerData> load_layer(const KvCache& cache, int l, const Quantizer* quantizer) {
  const LayerKv& lkv = cache.layers[static_cast<std::size_t>(l)];
  LayerData d;
  const auto to_float = [](const Tensor& t) {
    std::vector<float> out(t.elements());
    if (!out.empty()) detail::load_rows(t.view(), 0, t.tokens(), out.data());
    return out;
  };
  d.keys = to_float(lkv.key);
  d.values = to_float(lkv.value);
  d.queries = to_float(lkv.query);
  if (quantizer) {
    for (auto [src, dst, role] : {std::tuple{&lkv.key, &d.keys_seen, TensorRole::Key},
                                  std::tuple{&lkv.value, &d.values_seen, TensorRole::Value}}) {
      auto q = quantizer->quantize(src->view(), role);
      if (!q) return make_error(fmt::format("layer {}: {}", l, q.message()));
      dst->resize(src->elements());
      quantizer->dequantize(*q, *dst);
    }
  }
  return d;
}

// What a prefill policy decided for one layer, and what its kept prompt costs per head.
struct LayerPress {
  detail::PressResult press;
  std::vector<double> prompt_bytes;    // [kv head]
  std::vector<std::uint8_t> retained;  // minicache: [position][head]
  bool merged = false;
};

// Runs the layer's prefill policy over its prompt: the kept positions per head, ThinK's pruned
// key channels and MiniCache's shared directions written into what the cache holds (`d.*_seen`),
// and the bytes of the kept prompt per head.
Result<LayerPress> press_layer(const KvCache& cache, const EvictionConfig& config, int l,
                               const Quantizer* quantizer, const std::vector<double>& bpe,
                               LayerData& d) {
  const ModelShape& shape = cache.shape;
  const int T = cache.tokens(), P = T - config.steps, H = shape.kv_heads, D = shape.head_dim;
  const int L = static_cast<int>(cache.layers.size());
  LayerPress out;
  detail::PressLayer in;
  in.layer = l, in.layers = L, in.prompt = P;
  in.kv_heads = H, in.q_heads = shape.q_heads, in.dim = D;
  in.keys = d.keys.data(), in.values = d.values.data();
  in.kv_stride = static_cast<std::int64_t>(H) * D;
  const int Q = cache.layers[static_cast<std::size_t>(l)].query.tokens();
  in.q_stride = static_cast<std::int64_t>(shape.q_heads) * D;
  in.window = d.queries.data();
  if (Q >= T) {  // one query per position: the window is the prompt's last queries
    in.window_rows = P;
    in.window_positions.resize(static_cast<std::size_t>(P));
    std::iota(in.window_positions.begin(), in.window_positions.end(), 0);
  } else {  // decode-time queries: all but the last, the question
    in.window_rows = observation_queries(Q, T);
  }
  in.rope = &cache.key_rope;
  const Budget& budget = config.layer_budgets.empty()
                             ? config.budget
                             : config.layer_budgets[static_cast<std::size_t>(l)];
  out.press = detail::run_press(config, budget, in);
  const bool think = config.policy == EvictionPolicy::ThinK;
  const int partner =
      config.policy == EvictionPolicy::MiniCache ? detail::minicache_partner(l, L) : -1;
  if ((think || partner >= 0) && !d.seen()) d.keys_seen = d.keys, d.values_seen = d.values;
  int kept_channels = D;
  if (think) {
    detail::apply_channel_masks(out.press, in, d.keys_seen.data());
    kept_channels = static_cast<int>(
        std::count(out.press.channel_masks[0].begin(), out.press.channel_masks[0].end(), 1));
  }
  if (partner >= 0) {
    auto other = load_layer(cache, partner, quantizer);
    if (!other) return other.error();
    if (!other->seen()) other->keys_seen = other->keys, other->values_seen = other->values;
    float* lower_k = (partner < l ? other->keys_seen : d.keys_seen).data();
    float* upper_k = (partner < l ? d.keys_seen : other->keys_seen).data();
    float* lower_v = (partner < l ? other->values_seen : d.values_seen).data();
    float* upper_v = (partner < l ? d.values_seen : other->values_seen).data();
    std::vector<std::uint8_t> retained_v;
    detail::minicache_merge(lower_k, upper_k, in.kv_stride, P, H, D, config.merge_t, config.retain,
                            out.retained);
    detail::minicache_merge(lower_v, upper_v, in.kv_stride, P, H, D, config.merge_t, config.retain,
                            retained_v);
    for (std::size_t i = 0; i < out.retained.size(); ++i) out.retained[i] |= retained_v[i];
    out.merged = true;
  }
  const double entry = bpe[static_cast<std::size_t>(l)];
  out.prompt_bytes.assign(static_cast<std::size_t>(H), 0.0);
  for (int h = 0; h < H; ++h) {
    const double kept = static_cast<double>(out.press.kept[static_cast<std::size_t>(h)].size());
    double bytes = kept * entry;
    if (think) {  // the keys' half of an entry shrinks to the kept channels; one bit per channel
      bytes = kept * entry * (1.0 + static_cast<double>(kept_channels) / D) / 2.0 + D / 8.0;
    } else if (out.merged) {
      // A merged token: half of the pair's shared direction plus this layer's two norms (fp16);
      // a retained one: its own vectors plus its position.
      double retained = 0;
      for (int p = 0; p < P; ++p) retained += out.retained[static_cast<std::size_t>(p) * H + h];
      bytes = (kept - retained) * (entry / 2.0 + 2 * kFp16BytesPerValue) +
              retained * (entry + kMergeCountBytes);
    }
    out.prompt_bytes[static_cast<std::size_t>(h)] = bytes;
  }
  return out;
}

}  // namespace

Result<EvictionReport> simulate_eviction(const KvCache& cache, const EvictionConfig& config,
                                         const ProgressFn& progress) {
  const auto t_start = std::chrono::steady_clock::now();
  KVLAB_TRY(cache.validate());
  KVLAB_TRY(config.validate(cache));
  const ModelShape& shape = cache.shape;
  const int L = static_cast<int>(cache.layers.size());
  const int T = cache.tokens();

  EvictionReport rep;
  rep.source = cache.source;
  rep.policy = std::string(eviction_policy_id(config.policy));
  rep.config = config;
  rep.shape = shape;
  rep.tokens = T;
  rep.steps = config.steps;
  rep.prompt = T - config.steps;

  // With quantization: each layer's bytes per (token, KV head) as the method measures them.
  std::vector<double> bytes_per_entry(L, 2.0 * shape.head_dim * kFp16BytesPerValue);
  std::unique_ptr<Quantizer> quantizer;
  if (config.quant) {
    auto q = make_quantizer(method_for_cache(*config.quant, cache));
    if (!q) return q.error();
    quantizer = std::move(*q);
    if (!report_progress(progress, 0.0, "measuring the quantized size")) {
      return make_error(std::string(kCancelledMessage));
    }
    auto measured = compress_cache(cache, *config.quant);
    if (!measured) return measured.error();
    double total = 0;
    for (int l = 0; l < L; ++l) {
      const auto& lr = measured->layers[static_cast<std::size_t>(l)];
      bytes_per_entry[l] = static_cast<double>(lr.key_bytes.total() + lr.value_bytes.total()) /
                           (static_cast<double>(T) * shape.kv_heads);
      total += bytes_per_entry[l];
    }
    rep.quant_bytes_per_token = total / L;
  }

  const int H = shape.kv_heads;
  const int tasks = L * H;
  std::vector<HeadOutcome> outcomes(static_cast<std::size_t>(tasks));
  const bool prefill = eviction_schedule(config.policy) == EvictionSchedule::Prefill;
  std::vector<LayerPress> presses(static_cast<std::size_t>(prefill ? L : 0));
  // One item per layer (its float copies are shared by the layer's heads), on every core.
  const auto run_layer = [&](int l, ItemProgress& progress) -> Status {
    auto data = load_layer(cache, l, quantizer.get());
    if (!data) return data.error();
    if (prefill) {
      auto press = press_layer(cache, config, l, quantizer.get(), bytes_per_entry, *data);
      if (!press) return press.error();
      presses[static_cast<std::size_t>(l)] = std::move(*press);
    }
    HeadParams hp;
    hp.config = &config;
    hp.budget = config.layer_budgets.empty() ? config.budget
                                             : config.layer_budgets[static_cast<std::size_t>(l)];
    hp.tokens = T;
    hp.prompt = rep.prompt;
    hp.steps = config.steps;
    hp.group = shape.q_heads / shape.kv_heads;
    hp.dim = shape.head_dim;
    hp.kv_heads = H;
    hp.q_heads = shape.q_heads;
    hp.queries = cache.layers[static_cast<std::size_t>(l)].query.tokens();
    hp.bytes_per_entry = bytes_per_entry[static_cast<std::size_t>(l)];
    for (int h = 0; h < H; ++h) {
      KVLAB_TRY(progress.keep_going(static_cast<double>(h) / H));
      hp.kv_head = h;
      if (prefill) {
        const LayerPress& lp = presses[static_cast<std::size_t>(l)];
        hp.prompt_kept = &lp.press.kept[static_cast<std::size_t>(h)];
        hp.prompt_bytes = lp.prompt_bytes[static_cast<std::size_t>(h)];
      }
      outcomes[static_cast<std::size_t>(l * H + h)] = HeadSimulation(hp, *data).run();
    }
    return Ok{};
  };
  KVLAB_TRY(for_each_item(L,
                          with_stage_prefix(progress, fmt::format("simulating {}: ", rep.policy)),
                          "layer", run_layer));

  // Gather: per layer over its heads, then over layers.
  const int S = config.steps;
  std::vector<StepSums> total_steps(static_cast<std::size_t>(S));
  const double fp16_per_entry = 2.0 * shape.head_dim * kFp16BytesPerValue;
  double needle_kept = 0, needle_top = 0;
  rep.maps.resize(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) {
    EvictionLayerResult lr;
    lr.layer = l;
    const Budget& b = config.layer_budgets.empty()
                          ? config.budget
                          : config.layer_budgets[static_cast<std::size_t>(l)];
    lr.budget_tokens = config.policy == EvictionPolicy::Full ? T : b.tokens_at(T);
    if (prefill) {  // the prompt's share, plus every decoded token
      const LayerPress& lp = presses[static_cast<std::size_t>(l)];
      lr.budget_tokens = lp.press.budget + S;
      if (!lp.press.channel_masks.empty()) {
        lr.channel_masks = lp.press.channel_masks;
        lr.key_channels =
            static_cast<int>(std::count(lr.channel_masks[0].begin(), lr.channel_masks[0].end(), 1));
      }
      lr.merged = lp.merged;
      if (lp.merged && !lp.retained.empty()) {
        lr.retained = static_cast<double>(std::count(lp.retained.begin(), lp.retained.end(), 1)) /
                      static_cast<double>(lp.retained.size());
      }
    }
    std::vector<StepSums> layer_steps(static_cast<std::size_t>(S));
    for (int h = 0; h < H; ++h) {
      HeadOutcome& o = outcomes[static_cast<std::size_t>(l * H + h)];
      for (int s = 0; s < S; ++s) layer_steps[s] += o.steps[s];
      lr.heads.push_back(o.result);
      lr.needle_retained += o.result.needle_retained;
      lr.needle_in_top_k += o.result.needle_in_top_k;
      rep.matmul_flops += o.flops;
      rep.maps[static_cast<std::size_t>(l)].push_back(std::move(o.map));
    }
    needle_kept += lr.needle_retained;
    needle_top += lr.needle_in_top_k;
    lr.needle_retained /= H;
    lr.needle_in_top_k /= H;
    lr.steps.resize(static_cast<std::size_t>(S));
    for (int s = 0; s < S; ++s) {
      finish_step(layer_steps[s], rep.prompt + s + 1, lr.steps[s]);
      total_steps[s] += layer_steps[s];
    }
    finish_totals(layer_steps, lr.attention_mass_retained, lr.attn_output_rel_error,
                  lr.attn_output_cosine);
    lr.kept_tokens = lr.steps.back().kept;
    lr.memory_bytes = lr.steps.back().memory_bytes;
    lr.full_memory_bytes = static_cast<double>(T) * H * fp16_per_entry;
    rep.memory_bytes += lr.memory_bytes;
    rep.full_memory_bytes += lr.full_memory_bytes;
    rep.kept_tokens += lr.kept_tokens / L;
    rep.layers.push_back(std::move(lr));
  }
  rep.steps_total.resize(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) finish_step(total_steps[s], rep.prompt + s + 1, rep.steps_total[s]);
  finish_totals(total_steps, rep.attention_mass_retained, rep.attn_output_rel_error,
                rep.attn_output_cosine);
  if (config.needle) {
    rep.needle_retained = needle_kept / (static_cast<double>(L) * H);
    rep.needle_in_top_k = needle_top / (static_cast<double>(L) * H);
    if (S > 1) {  // the last step is the needle query: the totals without it
      const std::vector<StepSums> before(total_steps.begin(), total_steps.end() - 1);
      double mass = 1, err = 0, cosine = 1;
      finish_totals(before, mass, err, cosine);
      rep.mass_without_needle_step = mass;
      rep.rel_error_without_needle_step = err;
    }
  }
  // A policy whose size is not its budget (the threshold, ChunkKV's whole chunks, Ada-KV's
  // spread) says what it keeps.
  rep.label = eviction_label(config);
  double budget = 0;
  for (const auto& lr : rep.layers) budget += static_cast<double>(lr.budget_tokens) / L;
  if (config.policy != EvictionPolicy::Full && std::abs(rep.kept_tokens - budget) >= 0.5) {
    rep.label += fmt::format(", keeps {:.0f} of {} ({:.1f}%)", rep.kept_tokens, T,
                             100.0 * rep.kept_tokens / T);
  }
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count();
  report_progress(progress, 1.0, "done");
  return rep;
}

}  // namespace kvlab
