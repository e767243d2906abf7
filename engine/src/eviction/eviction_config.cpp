// Eviction options: policy names, budgets, validation and labels (eviction.h).
#include <array>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "kvlab/engine/core/names.h"
#include "kvlab/engine/eviction/eviction.h"

namespace kvlab {
namespace {

constexpr std::array<std::pair<EvictionPolicy, std::string_view>, 7> kPolicies{{
    {EvictionPolicy::Full, "full"},
    {EvictionPolicy::Window, "window"},
    {EvictionPolicy::Streaming, "streaming"},
    {EvictionPolicy::H2O, "h2o"},
    {EvictionPolicy::Threshold, "threshold"},
    {EvictionPolicy::Importance, "importance"},
    {EvictionPolicy::Merge, "merge"},
}};

std::string percent(double f) {
  return fmt::format("{:g}%", std::round(f * 1000.0) / 10.0);
}

}  // namespace

std::string_view eviction_policy_id(EvictionPolicy p) {
  for (const auto& [k, id] : kPolicies) {
    if (k == p) return id;
  }
  return "?";
}

std::vector<std::string_view> eviction_policy_ids() {
  std::vector<std::string_view> ids;
  for (const auto& [k, id] : kPolicies) ids.push_back(id);
  return ids;
}

Result<EvictionPolicy> parse_eviction_policy(std::string_view id) {
  for (const auto& [k, name] : kPolicies) {
    if (name == id) return k;
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

Status EvictionConfig::validate_options(int layers) const {
  if (!layer_budgets.empty() && static_cast<int>(layer_budgets.size()) != layers) {
    return make_error(fmt::format("--layer-budgets: {} values given for {} layers",
                                  layer_budgets.size(), layers));
  }
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
  return Ok{};
}

std::string eviction_label(const EvictionConfig& c) {
  std::string s(eviction_policy_id(c.policy));
  if (c.policy != EvictionPolicy::Full) {
    s += " budget " + (c.layer_budgets.empty() ? c.budget.to_string() : std::string("per layer"));
  }
  switch (c.policy) {
    case EvictionPolicy::Streaming:
      s += fmt::format(" sinks {}", c.sinks);
      break;
    case EvictionPolicy::H2O:
      s += " recent " + percent(c.recent_fraction);
      break;
    case EvictionPolicy::Threshold:
      s += fmt::format(" tau {:g}", c.threshold);
      break;
    case EvictionPolicy::Importance:
      s += fmt::format(" w {:g}/{:g}", c.w_attention, c.w_recency);
      break;
    case EvictionPolicy::Merge:
      s += fmt::format(" cos {:g}", c.merge_similarity);
      break;
    default:
      break;
  }
  if (c.quant) s += " + " + method_label(*c.quant);
  return s;
}

}  // namespace kvlab
