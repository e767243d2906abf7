// Perplexity, next-token agreement and KL with a quantized KV cache in the loop.
#include "kvlab/engine/model/model_quality.h"

#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/model/model_quality_json.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "core/random.h"
#include "kvlab/engine/model/generate.h"
#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/quant/quantizer.h"
#include "model/loop_hooks.h"

namespace kvlab {
namespace {

// Log-softmax in double.
std::vector<double> log_probs(const std::vector<float>& logits) {
  const double m = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(x - m);
  const double lse = m + std::log(sum);
  std::vector<double> out(logits.size());
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - lse;
  return out;
}

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (const double x : v) sum += x;
  return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
}

// The standard error of the mean of `v` (sample standard deviation over √n, two passes);
// NaN for fewer than two values.
double standard_error(const std::vector<double>& v, double mean) {
  if (v.size() < 2) return std::numeric_limits<double>::quiet_NaN();
  double squares = 0;
  for (const double x : v) squares += (x - mean) * (x - mean);
  const double n = static_cast<double>(v.size());
  return std::sqrt(squares / (n - 1) / n);
}

}  // namespace

std::pair<double, double> wilson_interval(std::int64_t k, std::int64_t n, double z) {
  if (n <= 0) return {0.0, 1.0};
  const double nn = static_cast<double>(n), p = static_cast<double>(k) / nn, z2 = z * z;
  const double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn)) / (1 + z2 / nn);
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

Result<QualityPlan> plan_quality(const LlamaConfig& mc, const QualityConfig& config,
                                 std::size_t text_tokens) {
  QualityPlan plan;
  if (config.window == 0 && text_tokens < 1) return make_error("the text has no tokens to score");
  // Window 0: the model's context, or the whole text (after BOS) where that is shorter.
  const std::size_t whole = text_tokens + 1;
  plan.window =
      config.window > 0
          ? config.window
          : static_cast<int>(std::min<std::size_t>(whole, static_cast<std::size_t>(mc.seq_len)));
  if (plan.window < 2 || plan.window > mc.seq_len) {
    return make_error(fmt::format("--window {}: must be between 2 and the model's {} positions",
                                  plan.window, mc.seq_len));
  }
  plan.per_window = plan.window - 1;  // BOS, then text
  if (config.stride < 0 || config.stride > plan.per_window) {
    return make_error(fmt::format(
        "--stride {}: must be from 1 to the window's {} text tokens (0: windows side by side)",
        config.stride, plan.per_window));
  }
  plan.stride = config.stride > 0 ? config.stride : plan.per_window;
  plan.windows =
      text_tokens < static_cast<std::size_t>(plan.per_window)
          ? 0
          : 1 + static_cast<int>((text_tokens - static_cast<std::size_t>(plan.per_window)) /
                                 static_cast<std::size_t>(plan.stride));
  if (plan.windows < 1) {
    return make_error(fmt::format(
        "the text has {} tokens; at least {} are needed for one window of {} positions (score a "
        "longer text, or use shorter windows: --window 0 fits the window to the text)",
        text_tokens, plan.per_window, plan.window));
  }
  if (!(config.target_se >= 0) || !std::isfinite(config.target_se)) {
    return make_error(
        fmt::format("--target-se {}: must be a standard error of 0 or more", config.target_se));
  }
  if (config.bos < 0 || config.bos >= mc.vocab) {
    return make_error(fmt::format("BOS token {} is outside the vocabulary", config.bos));
  }
  if (!config.method && !config.eviction) {
    return make_error("nothing to measure: give a quantization method, an eviction policy or both");
  }
  if (config.eviction) {
    KVLAB_TRY(detail::check_eviction(*config.eviction, mc.layers));
  }
  const bool prefill_policy =
      config.eviction && eviction_schedule(config.eviction->policy) == EvictionSchedule::Prefill;
  plan.prompt = config.prompt > 0 ? config.prompt : (prefill_policy ? plan.window / 2 : 0);
  if (plan.prompt < 0 || plan.prompt >= plan.per_window) {
    return make_error(
        fmt::format("--prompt {}: must leave at least one of the window's {} "
                    "predicted tokens to score",
                    plan.prompt, plan.per_window));
  }
  if (config.eviction) {
    KVLAB_TRY(config.eviction->validate_prompt(plan.prompt, plan.per_window));
  }
  if (config.method) {
    auto q = make_quantizer(*config.method);
    if (!q) return q.error();
  }
  if (config.stored) {
    if (!config.method) return make_error("--stored: give the method whose stored cache to run");
    if (config.eviction) {
      return make_error(
          "--stored does not combine with eviction: the stored cache keeps every token");
    }
    auto store = make_method_store(mc, *config.method);
    if (!store) return make_error(fmt::format("--stored: {}", store.message()));
  }
  return plan;
}

Result<QualityReport> measure_quality(const LlamaModel& model, const std::vector<int>& tokens,
                                      const QualityConfig& config, const ProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  const LlamaConfig& mc = model.config();
  auto plan = plan_quality(mc, config, tokens.size());
  if (!plan) return plan.error();
  const int window = plan->window, per_window = plan->per_window, windows = plan->windows,
            prompt = plan->prompt, stride = plan->stride;
  // The method sees the model's post-RoPE keys at positions 0, 1, ... of each window.
  std::optional<MethodConfig> method = config.method;
  if (method) method->key_rope = model_rope_spec(mc);
  std::unique_ptr<Quantizer> quantizer;
  if (method) {
    auto q = make_quantizer(*method);
    if (!q) return q.error();
    quantizer = std::move(*q);
  }
  const int kv_heads = mc.kv_heads, hd = mc.head_dim();

  // Attention reads the prefix as the method holds it: quantize, dequantize.
  decltype(LlamaModel::State::attention_reader) reader;
  if (quantizer && !config.stored) reader = detail::quantizing_reader(*quantizer, kv_heads, hd);

  QualityReport r;
  r.method = method ? std::string(method_id(method->kind)) : "none";
  r.method_label = method ? method_label(*method) + (config.stored ? " (stored)" : "") : "none";
  r.policy = config.eviction ? std::string(eviction_policy_id(config.eviction->policy)) : "none";
  r.policy_label = config.eviction ? eviction_label(*config.eviction) : "none";
  r.stored = config.stored;
  const std::string label = config.eviction && config.method
                                ? r.policy_label + " + " + r.method_label
                                : (config.eviction ? r.policy_label : r.method_label);
  r.windows = windows;
  r.window = window;
  r.stride = stride;
  r.prompt = prompt;
  const RopeSpec rope = model_rope_spec(mc);
  // Windows side by side on every core (the runner's own row tiles share them too), each into
  // its own sums, added in window order: the same report on any number of threads.
  struct WindowSums {
    double nll_exact = 0, nll = 0, kl = 0, kept = 0, kept_count = 0;
    std::int64_t agree = 0, count = 0;
    std::vector<double> nll_delta, kl_token;  // per scored token, for the intervals
  };
  std::vector<WindowSums> sums(static_cast<std::size_t>(windows));
  KvCache first_window;
  std::uint64_t stored_bytes = 0, stored_fp16_bytes = 0;  // the first window's store, at its end
  const auto run_window = [&](int w, ItemProgress& progress) -> Status {
    WindowSums& ws = sums[static_cast<std::size_t>(w)];
    auto exact = model.new_state();
    std::optional<detail::LoopEviction> eviction;
    if (config.eviction) eviction.emplace(*config.eviction, mc, per_window, prompt);
    auto lossy = model.new_state(eviction && eviction->needs_queries());
    if (quantizer && !config.stored) lossy.attention_reader = reader;
    if (config.stored) {
      auto store = make_method_store(mc, *config.method, window);
      if (!store) return make_error(fmt::format("{}: {}", label, store.message()));
      lossy.kv_store = std::move(*store);
    }
    // Stored: the tokens up to the first scored one wait here and go in as one prompt.
    std::vector<int> pending;
    if (eviction) eviction->attach(lossy);
    int prev = config.bos;
    const int first_scored = plan->first_scored(w);
    const std::size_t start = static_cast<std::size_t>(w) * static_cast<std::size_t>(stride);
    for (int i = 0; i < per_window; ++i) {
      KVLAB_TRY(progress.keep_going(static_cast<double>(i) / per_window));
      auto le = model.forward(exact, {prev});
      if (!le) return le.error();
      if (eviction && i == prompt && prompt > 0) {
        if (auto s = eviction->press(lossy, rope); !s) {
          return make_error(fmt::format("{}: {}", label, s.message()));
        }
      }
      if (eviction && i >= prompt) eviction->admit(i);
      if (config.stored && i < first_scored) {
        pending.push_back(prev);
        prev = tokens[start + static_cast<std::size_t>(i)];
        continue;
      }
      pending.push_back(prev);
      auto lq = model.forward(lossy, pending);
      pending.clear();
      if (!lq) return make_error(fmt::format("{}: {}", label, lq.message()));
      if (eviction && i >= prompt) {
        ws.kept += eviction->evict(i, lossy);
        ws.kept_count += static_cast<double>(eviction->heads());
      }
      const int next = tokens[start + static_cast<std::size_t>(i)];
      if (i < first_scored) {
        prev = next;
        continue;
      }
      const auto pe = log_probs(*le), pq = log_probs(*lq);
      ws.nll_exact -= pe[next];
      ws.nll -= pq[next];
      ws.nll_delta.push_back(static_cast<double>(pe[next]) - pq[next]);
      double k = 0;
      for (std::size_t v = 0; v < pe.size(); ++v) k += std::exp(pe[v]) * (pe[v] - pq[v]);
      ws.kl += k;
      ws.kl_token.push_back(k);
      ws.agree += greedy_token(*le) == greedy_token(*lq);
      ++ws.count;
      prev = next;
    }
    if (w == 0) {
      first_window = state_to_cache(model, exact, false);
      if (lossy.kv_store) {
        stored_bytes = lossy.kv_store->bytes();
        stored_fp16_bytes = lossy.kv_store->fp16_bytes();
      }
    }
    return Ok{};
  };
  // Every window at once; or, with a target standard error, kTargetBatch windows at a time in
  // text order until the change's standard error over the windows so far is at most the target
  // (a batch that does not depend on the thread count: the same windows on any machine).
  constexpr int kTargetBatch = 8;
  int used = windows;
  if (!(config.target_se > 0)) {
    KVLAB_TRY(for_each_item(windows, progress, "window", run_window));
  } else {
    std::vector<double> deltas;  // of the windows scored so far, in text order
    for (int first = 0; first < windows; first += kTargetBatch) {
      const int n = std::min(kTargetBatch, windows - first);
      const ProgressFn part = [&](double f, std::string_view) {
        return report_progress(progress, (first + f * n) / windows,
                               fmt::format("{} of at most {} windows", first, windows));
      };
      KVLAB_TRY(for_each_item(n, part, "window",
                              [&](int i, ItemProgress& p) { return run_window(first + i, p); }));
      used = first + n;
      for (int w = first; w < used; ++w) {
        const auto& d = sums[static_cast<std::size_t>(w)].nll_delta;
        deltas.insert(deltas.end(), d.begin(), d.end());
      }
      const double mean = mean_of(deltas);
      if (std::exp(mean) * standard_error(deltas, mean) <= config.target_se) break;
    }
    sums.resize(static_cast<std::size_t>(used));
  }
  r.windows = used;
  r.reached_target_se = config.target_se > 0 && used < windows;
  double nll_exact = 0, nll = 0, kl = 0, kept = 0, kept_count = 0;
  std::int64_t agree = 0, count = 0;
  for (const WindowSums& ws : sums) {
    nll_exact += ws.nll_exact;
    nll += ws.nll;
    kl += ws.kl;
    kept += ws.kept;
    kept_count += ws.kept_count;
    agree += ws.agree;
    count += ws.count;
    r.token_nll_delta.insert(r.token_nll_delta.end(), ws.nll_delta.begin(), ws.nll_delta.end());
    r.token_kl.insert(r.token_kl.end(), ws.kl_token.begin(), ws.kl_token.end());
  }
  r.tokens = static_cast<int>(count);
  r.perplexity_exact = std::exp(nll_exact / count);
  r.perplexity = std::exp(nll / count);
  r.perplexity_change = r.perplexity / r.perplexity_exact - 1;
  r.next_token_agreement = static_cast<double>(agree) / count;
  r.kl_mean = kl / count;
  // The intervals (llama.cpp's perplexity does the same): the change in perplexity is
  // exp(mean d) − 1 over the paired per-token differences d of the log-likelihood, so its
  // standard error is exp(mean d) × sd(d) / √n; KL's is sd / √n; agreement is k of n, with
  // Wilson's 95% interval.
  const double d_mean = mean_of(r.token_nll_delta);
  r.perplexity_change_se = std::exp(d_mean) * standard_error(r.token_nll_delta, d_mean);
  r.kl_mean_se = standard_error(r.token_kl, mean_of(r.token_kl));
  std::tie(r.next_token_agreement_low, r.next_token_agreement_high) = wilson_interval(agree, count);
  if (kept_count > 0) r.kept_fraction = kept / kept_count;
  if (config.stored && stored_bytes > 0) {
    r.ratio = static_cast<double>(stored_fp16_bytes) / static_cast<double>(stored_bytes);
    r.bits_per_value = 16.0 / r.ratio;
  } else if (config.method) {
    auto measured = compress_cache(first_window, *config.method);
    if (!measured) return measured.error();
    r.bits_per_value = measured->bits_per_value;
    r.ratio = measured->ratio;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

Result<std::vector<int>> sample_text(const LlamaModel& model, int count, std::uint64_t seed,
                                     int bos, int eos) {
  if (count < 1 || count > kMaxSampledTokens) {
    return make_error(fmt::format("sampled text of {} tokens: the count must be from 1 to {}",
                                  count, kMaxSampledTokens));
  }
  detail::Rng rng(seed);
  std::vector<int> out;
  while (static_cast<int>(out.size()) < count) {
    auto state = model.new_state();
    int token = bos;
    while (state.pos < model.config().seq_len && static_cast<int>(out.size()) < count) {
      auto logits = model.forward(state, {token});
      if (!logits) return logits.error();
      const auto lp = log_probs(*logits);
      double u = rng.uniform();
      int next = static_cast<int>(lp.size()) - 1;
      for (std::size_t v = 0; v < lp.size(); ++v) {
        u -= std::exp(lp[v]);
        if (u <= 0) {
          next = static_cast<int>(v);
          break;
        }
      }
      if (next == eos || next == bos) break;
      out.push_back(next);
      token = next;
    }
  }
  return out;
}

nlohmann::json quality_report_to_json(const QualityReport& r) {
  return {{"method", r.method},
          {"method_label", r.method_label},
          {"policy", r.policy},
          {"policy_label", r.policy_label},
          {"stored", r.stored},
          {"kept_fraction", r.kept_fraction},
          {"tokens", r.tokens},
          {"prompt", r.prompt},
          {"windows", r.windows},
          {"window", r.window},
          {"stride", r.stride},
          {"reached_target_se", r.reached_target_se},
          {"perplexity_exact", r.perplexity_exact},
          {"perplexity", r.perplexity},
          {"perplexity_change", r.perplexity_change},
          {"next_token_agreement", r.next_token_agreement},
          {"kl_mean", r.kl_mean},
          {"perplexity_change_se", r.perplexity_change_se},
          {"kl_mean_se", r.kl_mean_se},
          {"next_token_agreement_low", r.next_token_agreement_low},
          {"next_token_agreement_high", r.next_token_agreement_high},
          {"bits_per_value", r.bits_per_value},
          {"ratio", r.ratio},
          {"seconds", r.seconds}};
}

}  // namespace kvlab
