// The hooks the quality loops put into the runner (llama_model.h's State): eviction in the
// loop, one policy per layer and KV head, and attention reading a quantized cache. Shared by
// measure_quality (model_quality.cpp) and measure_needle (model_needle.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "eviction/eviction_policy.h"
#include "eviction/presses.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::detail {

// The options of `e` the model loop uses: the simulation's cache-free checks, and the loop's own;
// the error names the option.
inline Status check_eviction(const EvictionConfig& e, int layers) {
  KVLAB_TRY(e.validate_options(layers));
  if (e.quant) return make_error("eviction: give the quantization as the method, not as quant");
  for (const Budget& b : e.layer_budgets) {
    if (!(b.value > 0)) return make_error("--layer-budgets: budgets must be positive");
  }
  return Ok{};
}

// Attention reads the prefix as `quantizer` holds it: the whole cache quantized and dequantized
// again at every call (so per-tensor scales and KIVI's fp16 window follow the prefix as it
// grows).
inline auto quantizing_reader(const Quantizer& quantizer, int kv_heads, int head_dim) {
  return [&quantizer, kv_heads, head_dim](int, const AlignedFloats& keys,
                                          const AlignedFloats& values, AlignedFloats& keys_read,
                                          AlignedFloats& values_read) -> Status {
    const int t = static_cast<int>(keys.size() / (static_cast<std::size_t>(kv_heads) * head_dim));
    for (auto [src, dst, role] : {std::tuple{&keys, &keys_read, TensorRole::Key},
                                  std::tuple{&values, &values_read, TensorRole::Value}}) {
      const TensorView view(reinterpret_cast<const std::byte*>(src->data()), DType::F32, t,
                            kv_heads, head_dim, static_cast<std::ptrdiff_t>(kv_heads) * head_dim,
                            head_dim);
      auto q = quantizer.quantize(view, role);
      if (!q) return q.error();
      dst->resize(src->size());
      quantizer.dequantize(*q, *dst);
    }
    return Ok{};
  };
}

// One window's eviction: a policy per (layer, KV head), driven one decode step at a time.
// Policies whose entries are single tokens run on the runner's kept-token masks (its vectorised
// masked softmax) and observe the probabilities; merging runs on attention_weights, since a
// merged entry's logit is its members' weighted logit + log(count) (eviction.h) and its
// probability goes to its members by their weights, exactly as the simulation computes it.
// The first `prompt` positions are the prefill: every policy keeps them whole until the prompt
// is done; then a prefill policy's press() compresses them once (decode policies start cutting
// at the first decode step, as in the simulation).
class LoopEviction {
 public:
  LoopEviction(const EvictionConfig& config, const LlamaConfig& mc, int tokens, int prompt = 0)
      : m_config(config),
        m_layers(mc.layers),
        m_kv_heads(mc.kv_heads),
        m_q_heads(mc.heads),
        m_group(mc.heads / mc.kv_heads),
        m_head_dim(mc.head_dim()),
        m_prompt(prompt),
        m_merge(config.policy == EvictionPolicy::Merge) {
    m_heads.reserve(static_cast<std::size_t>(mc.layers) * mc.kv_heads);
    for (int l = 0; l < mc.layers; ++l) {
      const Budget& b = config.layer_budgets.empty()
                            ? config.budget
                            : config.layer_budgets[static_cast<std::size_t>(l)];
      for (int h = 0; h < mc.kv_heads; ++h) {
        auto& p = m_heads.emplace_back(config, b, tokens, prompt, m_group);
        // Keys arrive as the window runs; evict() fills each token's row before it is compared.
        if (m_merge)
          p.set_merge_keys(detail::EvictionHeadPolicy::RowMatrix::Zero(tokens, m_head_dim));
      }
    }
  }

  // Hooks the state's attention to the kept entries and the policies to its probabilities.
  void attach(LlamaModel::State& state) {
    if (m_merge) {
      state.attention_weights = [this](int l, int q_head, std::span<float> scores) {
        weigh(head(l, q_head / m_group), scores.data(), static_cast<int>(scores.size()));
      };
      return;
    }
    state.kept_tokens = [this](int l, int h) { return &head(l, h).held(); };
    if (prefill()) return;  // a press decides from the keys and queries, not from attention
    state.observe_attention = [this](int l, int q_head, std::span<const float> probs) {
      detail::EvictionHeadPolicy& p = head(l, q_head / m_group);
      // While a prompt runs the policy already holds its later positions; kept is ascending.
      for (int e : p.kept()) {
        if (e >= static_cast<int>(probs.size())) break;
        p.add_attention(e, probs[e]);
      }
    };
  }

  void admit(int t) {
    for (auto& p : m_heads) p.admit(t);
  }

  bool prefill() const { return eviction_schedule(m_config.policy) == EvictionSchedule::Prefill; }
  // Whether press() reads the prompt's queries (the state must keep them).
  bool needs_queries() const { return prefill() && needs_window(m_config); }

  // A prefill policy's one decision, when the state holds exactly the prompt: the kept positions
  // of every layer and KV head; ThinK's pruned channels and MiniCache's shared directions are
  // written into the state's keys and values, which attention reads from then on.
  Status press(LlamaModel::State& state, const RopeSpec& rope) {
    if (!prefill()) return Ok{};
    if (state.pos != m_prompt) {
      return make_error(fmt::format("eviction: the press ran at {} tokens, not at the prompt's {}",
                                    state.pos, m_prompt));
    }
    KVLAB_TRY(m_config.validate_prompt(m_prompt, m_prompt));
    if (needs_queries() &&
        static_cast<int>(state.queries[0].size()) < m_prompt * m_q_heads * m_head_dim) {
      return make_error("eviction: the prompt's queries were not kept for the press");
    }
    const std::int64_t kv_stride = static_cast<std::int64_t>(m_kv_heads) * m_head_dim;
    for (int l = 0; l < m_layers; ++l) {
      detail::PressLayer in;
      in.layer = l, in.layers = m_layers, in.prompt = m_prompt;
      in.kv_heads = m_kv_heads, in.q_heads = m_q_heads, in.dim = m_head_dim;
      in.keys = state.keys[static_cast<std::size_t>(l)].data();
      in.values = state.values[static_cast<std::size_t>(l)].data();
      in.kv_stride = kv_stride;
      if (needs_queries()) {
        in.window = state.queries[static_cast<std::size_t>(l)].data();
        in.q_stride = static_cast<std::int64_t>(m_q_heads) * m_head_dim;
        in.window_rows = m_prompt;
        in.window_positions.resize(static_cast<std::size_t>(m_prompt));
        std::iota(in.window_positions.begin(), in.window_positions.end(), 0);
      }
      in.rope = &rope;
      const Budget& b = m_config.layer_budgets.empty()
                            ? m_config.budget
                            : m_config.layer_budgets[static_cast<std::size_t>(l)];
      const detail::PressResult r = detail::run_press(m_config, b, in);
      for (int h = 0; h < m_kv_heads; ++h)
        head(l, h).retain_prompt(r.kept[static_cast<std::size_t>(h)]);
      detail::apply_channel_masks(r, in, state.keys[static_cast<std::size_t>(l)].data());
    }
    if (m_config.policy == EvictionPolicy::MiniCache) {
      std::vector<std::uint8_t> retained;
      for (int l = 0; l < m_layers; ++l) {
        const int partner = detail::minicache_partner(l, m_layers);
        if (partner <= l) continue;  // each pair once, from its lower layer
        for (auto* x : {&state.keys, &state.values}) {
          detail::minicache_merge((*x)[static_cast<std::size_t>(l)].data(),
                                  (*x)[static_cast<std::size_t>(partner)].data(), kv_stride,
                                  m_prompt, m_kv_heads, m_head_dim, m_config.merge_t,
                                  m_config.retain, retained);
        }
      }
    }
    return Ok{};
  }

  // Evicts after the step at position `t` (the state holds its keys); returns the kept fraction
  // summed over heads.
  double evict(int t, const LlamaModel::State& state) {
    double kept = 0;
    for (std::size_t i = 0; i < m_heads.size(); ++i) {
      auto& p = m_heads[i];
      if (m_merge) {  // the keys of every position since the last step (the prompt's at first)
        const int l = static_cast<int>(i) / m_kv_heads, h = static_cast<int>(i) % m_kv_heads;
        for (int u = m_keys_set; u <= t; ++u) {
          const float* key = state.keys[static_cast<std::size_t>(l)].data() +
                             static_cast<std::size_t>(u) * m_kv_heads * m_head_dim + h * m_head_dim;
          p.set_merge_key(u, key);
        }
      }
      p.evict(t, t + 1);
      kept += static_cast<double>(p.kept().size()) / (t + 1);
    }
    m_keys_set = t + 1;
    return kept;
  }

  std::size_t heads() const { return m_heads.size(); }

 private:
  detail::EvictionHeadPolicy& head(int l, int h) {
    return m_heads[static_cast<std::size_t>(l) * m_kv_heads + h];
  }

  // Scaled token scores in, probabilities out: softmax over the entries' logits, each entry's
  // probability added to the policy's attention and shared among its tokens by their weights.
  void weigh(detail::EvictionHeadPolicy& policy, float* p, int tokens) {
    const std::vector<int>& all = policy.kept();
    // While a prompt runs, the policy already holds its later positions: only those the
    // scores cover (kept is ascending) take part.
    const std::span<const int> kept(
        all.data(),
        static_cast<std::size_t>(std::lower_bound(all.begin(), all.end(), tokens) - all.begin()));
    m_entry.resize(kept.size());
    double max = -INFINITY;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      m_entry[i] = policy.entry_logit(p, kept[i]);
      max = std::max(max, m_entry[i]);
    }
    double sum = 0;
    for (double& z : m_entry) sum += (z = std::exp(z - max));
    std::fill(p, p + tokens, 0.0f);  // scores of tokens no longer held must not stay behind
    for (std::size_t i = 0; i < kept.size(); ++i) {
      const int e = kept[i];
      const double prob = m_entry[i] / sum;
      policy.add_attention(e, prob);
      const auto& members = policy.members(e);
      if (members.empty()) {
        p[e] = static_cast<float>(prob);
      } else {
        for (const auto& [t, c] : members) p[t] += static_cast<float>(prob * c);
      }
    }
  }

  const EvictionConfig& m_config;
  int m_layers, m_kv_heads, m_q_heads, m_group, m_head_dim, m_prompt;
  int m_keys_set = 0;  // merge: the positions whose keys the policies have
  bool m_merge;
  std::vector<detail::EvictionHeadPolicy> m_heads;
  std::vector<double> m_entry;
};

}  // namespace kvlab::detail
