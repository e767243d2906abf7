// Frontier, service-level search and advice over the latency model (see serving.h).
#include "kvlab/planners/serving.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kvlab/engine/core/interval.h"
#include "kvlab/planners/memory_formula.h"

namespace kvlab::planners {
namespace {

constexpr std::int64_t kMaxServed = 10'000'000;

// What does not change with the batch, for one scheme at one context.
struct Prepared {
  LatencyInputs inputs;
  std::uint64_t capacity = 0;  // one GPU's KV budget
  std::int64_t max_batch = 0;  // sequences that fit (host memory too, for an offloading scheme)
};

Prepared prepare(const Scenario& base, const Scheme& scheme, std::int64_t context) {
  Scenario s = base;
  s.scheme = scheme;
  s.context = context;
  s.batch = 1;
  Prepared p;
  const auto rate = decompression_rate(scheme, s.gpu, s.rates);
  p.inputs = latency_inputs(s.model, s.gpu, scheme, s.deployment, context, rate, s.efficiencies());
  const KvBudget b = kv_budget(s.model, s.gpu, s.deployment, scheme.offload);
  const auto seq = static_cast<std::uint64_t>(p.inputs.kv_bytes_per_sequence);
  p.capacity = b.capacity;
  p.max_batch =
      seq > 0 ? std::min<std::int64_t>(static_cast<std::int64_t>(b.with_host / seq), kMaxServed)
              : 0;
  return p;
}

std::string percent(double f) {
  return fmt::format("{:+.0f}%", f * 100);
}

std::string rate_text(double values_per_s) {
  return values_per_s >= 1e12 ? fmt::format("{:.2f} T values/s", values_per_s / 1e12)
                              : fmt::format("{:.0f} G values/s", values_per_s / 1e9);
}

}  // namespace

std::vector<FrontierPoint> frontier(const Scenario& base) {
  std::vector<FrontierPoint> out;
  const Prepared p = prepare(base, base.scheme, base.context);
  if (p.max_batch < 1) return out;
  std::vector<std::int64_t> batches;
  for (std::int64_t b = 1; b < p.max_batch; b *= 2) batches.push_back(b);
  batches.push_back(p.max_batch);
  for (std::int64_t b : batches) {
    const Latency l = decode_latency(p.inputs, static_cast<int>(b), p.capacity);
    out.push_back({static_cast<int>(b), l.tokens_per_s_per_user, l.tokens_per_s_per_gpu, l.tpot_s});
  }
  return out;
}

Result<SloChoice> best_under_slo(const Scenario& base, const std::vector<Scheme>& schemes,
                                 const Slo& slo) {
  if (!(slo.ttft_ms >= 0) || !(slo.tpot_ms >= 0)) {
    return make_error("--ttft-ms and --tpot-ms must not be negative");
  }
  Scenario check = base;
  check.batch = 1;
  KVLAB_TRY(check.validate());
  SloChoice best;
  bool best_hit_target = false;  // the TPOT target, not memory, limited the best's batch
  std::vector<std::string> misses;
  for (std::size_t k = 0; k < schemes.size(); ++k) {
    const Prepared p = prepare(base, schemes[k], base.context);
    const double ttft_ms = p.inputs.prefill.seconds * 1e3;
    if (p.max_batch < 1) {
      misses.push_back(
          fmt::format("{}: not one sequence of {} tokens fits", schemes[k].id, base.context));
      continue;
    }
    if (slo.ttft_ms > 0 && ttft_ms > slo.ttft_ms) {
      misses.push_back(fmt::format("{}: time to first token {:.0f} ms is over {:g} ms",
                                   schemes[k].id, ttft_ms, slo.ttft_ms));
      continue;
    }
    // TPOT grows with the batch: the largest batch within the target.
    const auto tpot_ms = [&](std::int64_t b) {
      return decode_latency(p.inputs, static_cast<int>(b), p.capacity).tpot_s * 1e3;
    };
    std::int64_t batch = p.max_batch;
    const bool hit_target = slo.tpot_ms > 0 && tpot_ms(batch) > slo.tpot_ms;
    if (hit_target) {
      if (tpot_ms(1) > slo.tpot_ms) {
        misses.push_back(fmt::format("{}: even one sequence takes {:.1f} ms per token, over {:g}",
                                     schemes[k].id, tpot_ms(1), slo.tpot_ms));
        continue;
      }
      std::int64_t lo = 1, hi = p.max_batch;
      while (lo < hi) {
        const std::int64_t mid = lo + (hi - lo + 1) / 2;
        if (tpot_ms(mid) <= slo.tpot_ms) {
          lo = mid;
        } else {
          hi = mid - 1;
        }
      }
      batch = lo;
    }
    const Latency l = decode_latency(p.inputs, static_cast<int>(batch), p.capacity);
    if (!best.found || l.tokens_per_s_per_gpu > best.tokens_per_s_per_gpu * 1.0000001) {
      best.found = true;
      best.scheme = static_cast<int>(k);
      best.batch = static_cast<int>(batch);
      best.tokens_per_s_per_gpu = l.tokens_per_s_per_gpu;
      best.tokens_per_s_per_user = l.tokens_per_s_per_user;
      best.ttft_ms = ttft_ms;
      best.tpot_ms = l.tpot_s * 1e3;
      best_hit_target = hit_target;
    }
  }
  if (best.found) {
    best.reason = fmt::format(
        "{} at batch {}: {:.0f} tokens/s per GPU, {:.1f} tokens/s per user, TTFT {:.0f} ms, TPOT "
        "{:.1f} ms (batch limited by {})",
        schemes[static_cast<std::size_t>(best.scheme)].id, best.batch, best.tokens_per_s_per_gpu,
        best.tokens_per_s_per_user, best.ttft_ms, best.tpot_ms,
        best_hit_target ? "the TPOT target" : "memory");
  } else {
    best.reason = "no scheme meets the targets: " + fmt::format("{}", fmt::join(misses, "; "));
  }
  return best;
}

Result<Advice> advise(const AdviceSpec& spec) {
  if (spec.schemes.empty() || spec.schemes.front().kernel != SchemeKernel::None ||
      spec.schemes.front().evict_tokens || spec.schemes.front().evict_fraction) {
    return make_error("advice: the first scheme must be the uncompressed baseline (fp16 or bf16)");
  }
  if (spec.contexts.empty() || spec.concurrencies.empty()) {
    return make_error("advice: give at least one context and one concurrency");
  }
  if (!(spec.min_gain >= 0 && spec.min_gain < 10)) {
    return make_error(fmt::format("--min-gain {}: must be between 0 and 10", spec.min_gain));
  }
  Scenario check = spec.base;
  check.batch = 1;
  check.context = 1;
  KVLAB_TRY(check.validate());
  for (auto c : spec.contexts) {
    if (c < 1 || c > spec.base.model.max_context) {
      return make_error(fmt::format("advice: context {} is outside 1..{} for {}", c,
                                    spec.base.model.max_context, spec.base.model.name));
    }
  }
  for (int c : spec.concurrencies) {
    if (c < 1 || c > kMaxServed) {
      return make_error(fmt::format("advice: concurrency {} is out of range", c));
    }
  }
  Advice a;
  a.contexts = spec.contexts;
  a.concurrencies = spec.concurrencies;
  a.quality = spec.quality;
  if (spec.max_perplexity_change && !(*spec.max_perplexity_change >= 0)) {
    return make_error(fmt::format("--max-perplexity-change {}: must not be negative",
                                  *spec.max_perplexity_change));
  }
  for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
    bool ok = true, near = false;
    if (k > 0 && spec.max_perplexity_change) {
      const auto change =
          k < spec.perplexity_change.size() ? spec.perplexity_change[k] : std::nullopt;
      const auto se =
          k < spec.perplexity_change_se.size() ? spec.perplexity_change_se[k] : std::nullopt;
      ok = change && *change <= *spec.max_perplexity_change;
      near = change && se && interval_holds(*change, *se, *spec.max_perplexity_change);
    }
    a.allowed.push_back(ok);
    a.limit_within_noise.push_back(near);
  }
  a.rates_source = spec.base.rates.source;
  for (const auto& s : spec.schemes) {
    a.scheme_ids.push_back(s.id);
    a.scheme_labels.push_back(s.label);
  }
  for (const std::int64_t context : spec.contexts) {
    std::vector<Prepared> prepared;
    for (const auto& s : spec.schemes) prepared.push_back(prepare(spec.base, s, context));
    for (const int concurrency : spec.concurrencies) {
      AdviceCell cell;
      cell.context = context;
      cell.concurrency = concurrency;
      const Prepared& fp16 = prepared.front();
      cell.memory_pressure = fp16.capacity > 0 ? fp16.inputs.kv_bytes_per_sequence * concurrency /
                                                     static_cast<double>(fp16.capacity)
                                               : INFINITY;
      for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
        const Prepared& p = prepared[k];
        SchemeOutcome o;
        o.served = static_cast<int>(std::min<std::int64_t>(concurrency, p.max_batch));
        if (o.served > 0) {
          const Latency l = decode_latency(p.inputs, o.served, p.capacity);
          o.tokens_per_s_per_gpu = l.tokens_per_s_per_gpu;
          o.tokens_per_s_per_user = l.tokens_per_s_per_user;
          o.tpot_ms = l.tpot_s * 1e3;
          o.compute_bound = l.step.compute_bound;
          o.bound_by = l.step.bound_by;
          o.attention_bound_by = l.step.attention_bound_by;
        }
        cell.outcomes.push_back(o);
      }
      const double base_rate = cell.outcomes.front().tokens_per_s_per_gpu;
      for (auto& o : cell.outcomes) {
        o.gain = base_rate > 0 ? o.tokens_per_s_per_gpu / base_rate - 1
                               : (o.tokens_per_s_per_gpu > 0 ? INFINITY : 0);
      }
      // The best: most tokens/s per GPU; within 2% the earlier scheme (the cheaper in quality).
      int best = -1;
      for (std::size_t k = 0; k < cell.outcomes.size(); ++k) {
        const auto& o = cell.outcomes[k];
        if (o.served == 0 || !a.allowed[k]) continue;
        if (best < 0 ||
            o.tokens_per_s_per_gpu >
                cell.outcomes[static_cast<std::size_t>(best)].tokens_per_s_per_gpu * 1.02) {
          best = static_cast<int>(k);
        }
      }
      const auto& f = cell.outcomes.front();
      std::string excluded;
      std::vector<bool> left_out(cell.outcomes.size(), false);
      for (std::size_t k = 1; k < cell.outcomes.size(); ++k) {
        if (!a.allowed[k] && cell.outcomes[k].served > 0 &&
            cell.outcomes[k].tokens_per_s_per_gpu >
                cell.outcomes[static_cast<std::size_t>(std::max(best, 0))].tokens_per_s_per_gpu) {
          excluded += (excluded.empty() ? "" : ", ") + a.scheme_ids[k];
          left_out[k] = true;
        }
      }
      if (!excluded.empty()) {
        excluded = fmt::format(
            " Faster but over the quality limit (perplexity +{:g}%) or not "
            "measured: {}.",
            *spec.max_perplexity_change * 100, excluded);
      }
      // The scheme that loses most against fp16, to say why compressing can cost.
      int worst = -1;
      for (std::size_t k = 1; k < cell.outcomes.size(); ++k) {
        const auto& o = cell.outcomes[k];
        if (o.served > 0 && f.served > 0 && o.gain < 0 &&
            (worst < 0 || o.gain < cell.outcomes[static_cast<std::size_t>(worst)].gain)) {
          worst = static_cast<int>(k);
        }
      }
      std::string loss;
      if (worst > 0) {
        const auto& w = cell.outcomes[static_cast<std::size_t>(worst)];
        const auto& wp = prepared[static_cast<std::size_t>(worst)];
        loss = fmt::format(" {} loses {:.0f}% of the tokens/s per GPU: its attention waits on {}",
                           a.scheme_ids[worst], -w.gain * 100, w.attention_bound_by);
        if (w.attention_bound_by == "decompression") {
          loss += fmt::format(" ({} against reading fp16 at {:.0f} GB/s)",
                              rate_text(wp.inputs.decompress_rate), wp.inputs.bw / 1e9);
        }
        loss += ".";
      }
      const std::string pressure = fmt::format(
          "fp16 KV for {} {} of {} tokens is {:.0f}% of the KV memory per GPU", concurrency,
          concurrency == 1 ? "user" : "users", context, cell.memory_pressure * 100);
      if (best < 0) {
        cell.verdict = "nothing fits";
        cell.reason = pressure + "; not one sequence fits with any scheme.";
      } else if (f.served == concurrency &&
                 cell.outcomes[static_cast<std::size_t>(best)].gain < spec.min_gain) {
        cell.recommended = 0;
        cell.verdict = "don't compress";
        const auto& b = cell.outcomes[static_cast<std::size_t>(best)];
        cell.reason = fmt::format(
            "{}; fp16 holds all {} at a TPOT of {:.1f} ms and its step is {}-bound (waits on "
            "{}). The best compression gains {} (below the {:.0f}% that pays for its quality "
            "cost).{}",
            pressure, concurrency, f.tpot_ms, f.compute_bound ? "compute" : "memory", f.bound_by,
            best == 0 ? std::string("nothing")
                      : fmt::format("{}, {}", percent(b.gain), a.scheme_ids[best]),
            spec.min_gain * 100, loss);
      } else {
        cell.recommended = best;
        const auto& b = cell.outcomes[static_cast<std::size_t>(best)];
        cell.verdict = best == 0 ? "don't compress" : "compress: " + a.scheme_ids[best];
        if (best == 0) {
          cell.reason = fmt::format("{}; fp16 holds {} of {} and nothing serves more tokens/s.{}",
                                    pressure, f.served, concurrency, loss);
        } else {
          cell.reason = fmt::format(
              "{}; fp16 holds {}. {} holds {} and serves {} tokens/s per GPU ({:.0f} "
              "against {:.0f}) at a TPOT of {:.1f} ms{}; its step is {}-bound (waits on {}).{}",
              pressure,
              f.served == concurrency ? "all of them"
                                      : fmt::format("{} of {}", f.served, concurrency),
              a.scheme_ids[best], b.served == concurrency ? "all" : std::to_string(b.served),
              f.served > 0 ? percent(b.gain) : std::string("all the"), b.tokens_per_s_per_gpu,
              f.tokens_per_s_per_gpu, b.tpot_ms,
              f.served > 0 ? fmt::format(" (fp16: {:.1f} ms)", f.tpot_ms) : std::string(),
              b.compute_bound ? "compute" : "memory", b.bound_by, loss);
        }
      }
      cell.reason += excluded;
      // The schemes this cell's verdict rests on whose side of the limit the measurement cannot
      // tell: the recommended one, and the faster ones the limit left out.
      std::string near;
      for (std::size_t k = 1; k < cell.outcomes.size(); ++k) {
        if ((static_cast<int>(k) == cell.recommended || left_out[k]) && a.limit_within_noise[k]) {
          near += (near.empty() ? "" : ", ") + a.scheme_ids[k];
        }
      }
      if (!near.empty()) {
        cell.reason += fmt::format(
            " Within noise of the quality limit (its 95% interval holds +{:g}%), so the limit "
            "cannot rank: {}.",
            *spec.max_perplexity_change * 100, near);
      }
      a.cells.push_back(std::move(cell));
    }
  }
  return a;
}

nlohmann::json advice_to_json(const Advice& a) {
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : a.cells) {
    nlohmann::json schemes = nlohmann::json::array();
    for (std::size_t k = 0; k < c.outcomes.size(); ++k) {
      const auto& o = c.outcomes[k];
      schemes.push_back({{"scheme", a.scheme_ids[k]},
                         {"sequences_served_per_deployment", o.served},
                         {"tokens_per_s_per_gpu", o.tokens_per_s_per_gpu},
                         {"tokens_per_s_per_user", o.tokens_per_s_per_user},
                         {"tpot_ms", o.tpot_ms},
                         {"gain_vs_fp16", std::isfinite(o.gain) ? nlohmann::json(o.gain)
                                                                : nlohmann::json("fp16 fits none")},
                         {"compute_bound", o.compute_bound},
                         {"bound_by", o.bound_by},
                         {"attention_bound_by", o.attention_bound_by}});
    }
    cells.push_back(
        {{"context_tokens_per_sequence", c.context},
         {"concurrent_sequences", c.concurrency},
         {"recommended",
          c.recommended >= 0 ? nlohmann::json(a.scheme_ids[c.recommended]) : nlohmann::json()},
         {"verdict", c.verdict},
         {"memory_pressure_fp16_per_gpu",
          std::isfinite(c.memory_pressure) ? nlohmann::json(c.memory_pressure) : nlohmann::json()},
         {"reason", c.reason},
         {"schemes", schemes}});
  }
  nlohmann::json quality = nlohmann::json::object();
  nlohmann::json excluded = nlohmann::json::array();
  nlohmann::json near = nlohmann::json::array();
  for (std::size_t k = 0; k < a.scheme_ids.size(); ++k) {
    if (k < a.allowed.size() && !a.allowed[k]) excluded.push_back(a.scheme_ids[k]);
    if (k < a.limit_within_noise.size() && a.limit_within_noise[k]) {
      near.push_back(a.scheme_ids[k]);
    }
    quality[a.scheme_ids[k]] = k < a.quality.size() && !a.quality[k].empty()
                                   ? nlohmann::json(a.quality[k])
                                   : nlohmann::json();
  }
  return {{"schemes", a.scheme_ids},
          {"contexts", a.contexts},
          {"concurrencies", a.concurrencies},
          {"quality", quality},
          {"over_the_quality_limit", excluded},
          {"within_noise_of_the_quality_limit", near},
          {"decompression_rates_source", a.rates_source},
          {"cells", cells}};
}

}  // namespace kvlab::planners
