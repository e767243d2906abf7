// Eviction options: policy names, budgets, validation and labels (eviction.h).
#include <array>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "eviction/presses.h"
#include "kvlab/engine/core/names.h"
#include "kvlab/engine/eviction/eviction.h"

namespace kvlab {
namespace {

struct PolicyInfo {
  EvictionPolicy policy;
  std::string_view id, reference;
  EvictionSchedule schedule;
};

constexpr auto D = EvictionSchedule::Decode;
constexpr auto P = EvictionSchedule::Prefill;
constexpr std::array<PolicyInfo, 17> kPolicies{{
    {EvictionPolicy::Full, "full", "no eviction, the reference", D},
    {EvictionPolicy::Window, "window", "sliding-window attention", D},
    {EvictionPolicy::Streaming, "streaming", "StreamingLLM (Xiao et al. 2024)", D},
    {EvictionPolicy::H2O, "h2o", "H2O (Zhang et al. 2023)", D},
    {EvictionPolicy::Threshold, "threshold",
     "attention threshold, after Scissorhands (Liu et al. 2023)", D},
    {EvictionPolicy::Importance, "importance",
     "weighted importance, after FastGen (Ge et al. 2024)", D},
    {EvictionPolicy::Merge, "merge", "merge instead of drop, after CaM / D2O (2024)", D},
    {EvictionPolicy::TOVA, "tova", "TOVA (Oren et al. 2024)", D},
    {EvictionPolicy::SnapKV, "snapkv", "SnapKV (Li et al. 2024)", P},
    {EvictionPolicy::PyramidKV, "pyramidkv", "PyramidKV (Cai et al. 2024)", P},
    {EvictionPolicy::KNorm, "knorm", "key norm, after Devoto et al. 2024", P},
    {EvictionPolicy::KeyDiff, "keydiff", "KeyDiff (Park et al. 2025)", P},
    {EvictionPolicy::ExpectedAttention, "expected-attention",
     "Expected Attention (Devoto et al. 2025, kvpress)", P},
    {EvictionPolicy::AdaKV, "adakv", "Ada-KV (Feng et al. 2024)", P},
    {EvictionPolicy::ChunkKV, "chunkkv", "ChunkKV (Liu et al. 2025)", P},
    {EvictionPolicy::ThinK, "think", "ThinK (Xu et al. 2025)", P},
    {EvictionPolicy::MiniCache, "minicache", "MiniCache (Liu et al. 2024)", P},
}};

const PolicyInfo& info(EvictionPolicy p) {
  for (const auto& i : kPolicies) {
    if (i.policy == p) return i;
  }
  return kPolicies[0];
}

std::string percent(double f) {
  return fmt::format("{:g}%", std::round(f * 1000.0) / 10.0);
}

}  // namespace

std::string_view eviction_policy_id(EvictionPolicy p) {
  return info(p).id;
}

std::string_view eviction_policy_reference(EvictionPolicy p) {
  return info(p).reference;
}

EvictionSchedule eviction_schedule(EvictionPolicy p) {
  return info(p).schedule;
}

std::string_view eviction_schedule_id(EvictionSchedule s) {
  return s == EvictionSchedule::Prefill ? "prefill" : "decode";
}

bool is_prefill_scorer(EvictionPolicy p) {
  return p == EvictionPolicy::SnapKV || p == EvictionPolicy::PyramidKV ||
         p == EvictionPolicy::KNorm || p == EvictionPolicy::KeyDiff ||
         p == EvictionPolicy::ExpectedAttention;
}

std::vector<std::string_view> eviction_policy_ids() {
  std::vector<std::string_view> ids;
  for (const auto& i : kPolicies) ids.push_back(i.id);
  return ids;
}

Result<EvictionPolicy> parse_eviction_policy(std::string_view id) {
  for (const auto& i : kPolicies) {
    if (i.id == id) return i.policy;
  }
  const auto ids = eviction_policy_ids();
  return make_error(unknown_name_message("eviction policy", id, {ids.begin(), ids.end()}));
}

Result<Budget> Budget::parse(std::string_view text) {
  std::string_view t = text;
  bool pct = false;
  if (!t.empty() && t.back() == '%') pct = true, t.remove_suffix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc{} || end != t.data() + t.size() || !std::isfinite(v)) {
    return make_error(fmt::format(
        "budget '{}' is not a number (a token count like 512, or a fraction like 0.25 or 25%)",
        text));
  }
  Budget b;
  if (pct) {
    b.fraction = true, b.value = v / 100.0;
  } else if (v > 0 && v < 1) {
    b.fraction = true, b.value = v;
  } else {
    // "1.0" reads as 100% to a person but would be one token: a count has no decimal point.
    if (t.find_first_of(".eE") != std::string_view::npos) {
      return make_error(fmt::format(
          "budget '{}': a fraction is below 1 (write {:g}% for a share, {:g} for a token count)",
          text, v * 100, std::floor(v)));
    }
    if (v != std::floor(v)) {
      return make_error(fmt::format(
          "budget '{}': a token count must be a whole number; a fraction must be below 1", text));
    }
    b.fraction = false, b.value = v;
  }
  if (!(b.value > 0) || (b.fraction && b.value > 1.0) || (!b.fraction && b.value > 1e9)) {
    return make_error(fmt::format(
        "budget '{}' is out of range (a fraction in (0, 100%], or at least 1 token)", text));
  }
  return b;
}

int Budget::tokens_at(int context) const {
  const double n = fraction ? std::round(value * context) : value;
  return static_cast<int>(std::clamp(n, 1.0, static_cast<double>(std::max(1, context))));
}

std::string Budget::to_string() const {
  return fraction ? percent(value) : fmt::format("{}", static_cast<long long>(value));
}

Status EvictionConfig::validate(const KvCache& cache) const {
  const int T = cache.tokens();
  if (!cache.has_queries()) {
    return make_error(
        fmt::format("{}: the cache has no decode-time queries; the eviction simulation needs them",
                    cache.source.empty() ? "source" : cache.source));
  }
  if (steps < 1 || steps >= T) {
    return make_error(
        fmt::format("--steps {}: must be at least 1 and below the cache's {} tokens", steps, T));
  }
  if (steps > 16000) return make_error(fmt::format("--steps {}: at most 16000", steps));
  if (auto options = validate_options(static_cast<int>(cache.layers.size())); !options) {
    return options;
  }
  const int prompt = T - steps;
  KVLAB_TRY(validate_prompt(prompt, T, cache.layers.front().query.tokens() >= T));
  if (needs_window(*this)) {
    const int available = observation_queries(cache.layers.front().query.tokens(), T);
    if (window > available) {
      return make_error(
          fmt::format("--obs-window {}: the source has {} queries for the observation window ({})",
                      window, available,
                      available == prompt ? "one per prompt token"
                                          : "its decode-time queries but the last, the question"));
    }
  }
  if (top_k < 1) return make_error("--top-k: must be at least 1");
  if (needle && (*needle < 0 || *needle >= T)) {
    return make_error(
        fmt::format("--needle {}: not a position in the cache's {} tokens", *needle, T));
  }
  for (int t : protected_tokens) {
    if (t < 0 || t >= T) {
      return make_error(fmt::format("--protect {}: not a position in the cache's {} tokens", t, T));
    }
  }
  return Ok{};
}

Status EvictionConfig::validate_prompt(int prompt, int tokens, bool window_in_prompt) const {
  const bool prefill = eviction_schedule(policy) == EvictionSchedule::Prefill;
  const int limit = prefill ? prompt : tokens;
  const char* what = prefill ? "prompt" : "sequence";
  for (const Budget& b : layer_budgets.empty() ? std::vector<Budget>{budget} : layer_budgets) {
    if (!b.fraction && b.value > limit) {
      return make_error(fmt::format("{} {}: above the {}'s {} tokens",
                                    layer_budgets.empty() ? "--budget" : "--layer-budgets",
                                    b.to_string(), what, limit));
    }
  }
  if (prefill && needs_window(*this) && window > prompt) {
    return make_error(
        fmt::format("--obs-window {}: longer than the prompt's {} tokens", window, prompt));
  }
  // SnapKV keeps its observation window whole inside the budget, so the budget must leave room
  // for at least one scored position (SnapKV's own code asserts capacity − window > 0).
  const EvictionPolicy scorer = scoring_policy(*this);
  if (window_in_prompt && prefill &&
      (scorer == EvictionPolicy::SnapKV || scorer == EvictionPolicy::PyramidKV)) {
    for (const Budget& b : layer_budgets.empty() ? std::vector<Budget>{budget} : layer_budgets) {
      const char* option = layer_budgets.empty() ? "--budget" : "--layer-budgets";
      const int tokens = b.tokens_at(prompt);
      if (tokens <= window) {
        return make_error(fmt::format(
            "{} {}: {} tokens of the prompt, not more than the --obs-window of {} that {} keeps "
            "whole (a larger budget or a shorter window)",
            option, b.to_string(), tokens, window, eviction_policy_id(scorer)));
      }
      // ChunkKV keeps whole chunks: the window's chunks score +inf and take their share first.
      if (policy == EvictionPolicy::ChunkKV) {
        const int kept = detail::chunks_kept(prompt, chunk, tokens);
        const int first = std::max(0, prompt - std::min(window, prompt));
        const int window_chunks = (prompt - 1) / chunk - first / chunk + 1;
        if (kept <= window_chunks) {
          return make_error(fmt::format(
              "{} {}: {} chunks of {} tokens, all taken by the {} chunks the --obs-window of {} "
              "covers (a larger budget, a shorter window or smaller --chunk)",
              option, b.to_string(), kept, chunk, window_chunks, window));
        }
      }
    }
  }
  return Ok{};
}

bool wraps_scorer(const EvictionConfig& c) {
  return c.policy == EvictionPolicy::AdaKV || c.policy == EvictionPolicy::ChunkKV ||
         (c.policy == EvictionPolicy::ThinK && c.think_tokens);
}

EvictionPolicy scoring_policy(const EvictionConfig& c) {
  return wraps_scorer(c) ? c.scorer : c.policy;
}

bool needs_window(const EvictionConfig& c) {
  const EvictionPolicy p = scoring_policy(c);
  return p == EvictionPolicy::SnapKV || p == EvictionPolicy::PyramidKV ||
         p == EvictionPolicy::ExpectedAttention || c.policy == EvictionPolicy::ThinK;
}

int observation_queries(int queries, int tokens) {
  // One query per position: the window is the prompt's last queries. Decode-time queries only:
  // all but the last (a synthetic source's last query is the question that seeks the needle).
  return queries >= tokens ? tokens : std::max(0, queries - 1);
}

Status EvictionConfig::validate_options(int layers) const {
  if (!layer_budgets.empty() && static_cast<int>(layer_budgets.size()) != layers) {
    return make_error(fmt::format("--layer-budgets: {} values given for {} layers",
                                  layer_budgets.size(), layers));
  }
  if (!(budget.value > 0)) return make_error("--budget: must be positive");
  if (sinks < 0) return make_error(fmt::format("--sinks {}: must not be negative", sinks));
  if (!(recent_fraction >= 0 && recent_fraction <= 1)) {
    return make_error(
        fmt::format("--recent-fraction {}: must be between 0 and 1", recent_fraction));
  }
  if (recent < 0) return make_error(fmt::format("--recent {}: must not be negative", recent));
  if (!(threshold >= 0 && threshold < 1e6)) {
    return make_error(fmt::format("--threshold {}: must be a non-negative number", threshold));
  }
  if (!(std::isfinite(w_attention) && std::isfinite(w_recency))) {
    return make_error("importance weights must be finite numbers");
  }
  if (!(merge_similarity >= -1 && merge_similarity <= 1)) {
    return make_error(
        fmt::format("--merge-similarity {}: a cosine similarity is in [-1, 1]", merge_similarity));
  }
  if (merge_window < 1) return make_error("--merge-window: must be at least 1");
  if (window < 1 || window > 65536) {
    return make_error(fmt::format("--obs-window {}: must be 1 to 65536 queries", window));
  }
  if (pool < 1 || pool % 2 == 0) {
    return make_error(fmt::format("--pool {}: must be an odd width of at least 1", pool));
  }
  if (needs_window(*this) && pool > window) {
    return make_error(
        fmt::format("--pool {}: wider than the observation window of {}", pool, window));
  }
  if (!(pyramid_beta >= 1 && pyramid_beta <= 1e6)) {
    return make_error(fmt::format("--beta {}: must be at least 1", pyramid_beta));
  }
  if (wraps_scorer(*this) && !is_prefill_scorer(scorer)) {
    return make_error(fmt::format(
        "--scorer {}: {} selects with a prefill scorer: snapkv, pyramidkv, knorm, keydiff or "
        "expected-attention",
        eviction_policy_id(scorer), eviction_policy_id(policy)));
  }
  if (!(ada_safeguard >= 0 && ada_safeguard <= 1)) {
    return make_error(fmt::format("--safeguard {}: must be between 0 and 1", ada_safeguard));
  }
  if (chunk < 1 || chunk > 65536) {
    return make_error(fmt::format("--chunk {}: must be 1 to 65536 tokens", chunk));
  }
  if (!(key_channels > 0 && key_channels <= 1)) {
    return make_error(
        fmt::format("--key-channels {}: a share of the channels in (0, 1]", key_channels));
  }
  if (future < 1 || future > 1000000) {
    return make_error(fmt::format("--future {}: must be 1 to 1000000 positions", future));
  }
  if (!(merge_t >= 0 && merge_t <= 1)) {
    return make_error(fmt::format("--merge-t {}: must be between 0 and 1", merge_t));
  }
  if (!(retain >= 0 && retain <= 1)) {
    return make_error(fmt::format("--retain {}: must be between 0 and 1", retain));
  }
  if (policy == EvictionPolicy::MiniCache && layers < 2) {
    return make_error("minicache merges adjacent layers: the model has only one layer");
  }
  return Ok{};
}

std::string eviction_label(const EvictionConfig& c) {
  std::string s(eviction_policy_id(c.policy));
  const bool prefill = eviction_schedule(c.policy) == EvictionSchedule::Prefill;
  const auto budget_text = [&] {
    std::string b =
        " budget " + (c.layer_budgets.empty() ? c.budget.to_string() : std::string("per layer"));
    return prefill ? b + " of prompt" : b;
  };
  const auto scorer = [&] {
    std::string t = fmt::format(" by {}", eviction_policy_id(c.scorer));
    if (c.scorer == EvictionPolicy::SnapKV || c.scorer == EvictionPolicy::PyramidKV) {
      t += fmt::format(" window {} pool {}", c.window, c.pool);
    }
    return t;
  };
  switch (c.policy) {
    case EvictionPolicy::Full:
      break;
    case EvictionPolicy::Streaming:
      s += budget_text() + fmt::format(" sinks {}", c.sinks);
      break;
    case EvictionPolicy::H2O:
      s += budget_text() + " recent " + percent(c.recent_fraction);
      break;
    case EvictionPolicy::Threshold:
      // The threshold decides the size; the budget only caps it.
      s += fmt::format(" tau {:g} cap ", c.threshold) +
           (c.layer_budgets.empty() ? c.budget.to_string() : std::string("per layer"));
      break;
    case EvictionPolicy::Importance:
      s += budget_text() + fmt::format(" w {:g}/{:g}", c.w_attention, c.w_recency);
      break;
    case EvictionPolicy::Merge:
      s += budget_text() + fmt::format(" cos {:g}", c.merge_similarity);
      break;
    case EvictionPolicy::SnapKV:
      s += budget_text() + fmt::format(" window {} pool {}", c.window, c.pool);
      break;
    case EvictionPolicy::PyramidKV:
      s += budget_text() +
           fmt::format(" window {} pool {} beta {:g}", c.window, c.pool, c.pyramid_beta);
      break;
    case EvictionPolicy::ExpectedAttention:
      s += budget_text() + fmt::format(" window {} future {}", c.window, c.future);
      break;
    case EvictionPolicy::AdaKV:
      s += budget_text() + scorer() + " safeguard " + percent(c.ada_safeguard);
      break;
    case EvictionPolicy::ChunkKV:
      s += budget_text() + scorer() + fmt::format(" chunk {}", c.chunk);
      break;
    case EvictionPolicy::ThinK:
      s += fmt::format(" keys {} of channels", percent(c.key_channels));
      if (c.think_tokens) s += fmt::format(",{}{}", budget_text(), scorer());
      break;
    case EvictionPolicy::MiniCache:
      s += fmt::format(" upper half t {:g} retain {:g}", c.merge_t, c.retain);
      break;
    default:
      s += budget_text();
      break;
  }
  if (c.quant) s += " + " + method_label(*c.quant);
  return s;
}

}  // namespace kvlab
