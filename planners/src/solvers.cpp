// Fit solvers, the decode roofline and sweeps over the memory model.
#include "kvlab/planners/solvers.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kvlab::planners {
namespace {

constexpr int kMaxBatch = 10'000'000;

// What one GPU of the deployment offers the KV cache.
struct Budgets {
  std::uint64_t weights = 0, usable = 0, capacity = 0;
};

Budgets budgets(const ModelSpec& m, const GpuSpec& g, const Deployment& d) {
  Budgets b;
  b.weights = weights_bytes_per_gpu(m, d);
  b.usable =
      static_cast<std::uint64_t>(static_cast<double>(g.memory_bytes) * d.gpu_memory_utilization);
  const std::uint64_t taken = b.weights + d.reserve_bytes;
  b.capacity = b.usable > taken ? b.usable - taken : 0;
  return b;
}

// Seconds of one decode step: every pipeline stage reads its weights and its share of the
// batch's KV once, one stage after another.
double step_seconds(const GpuSpec& g, const Deployment& d, std::uint64_t weights,
                    std::uint64_t kv_total, double efficiency) {
  const double bytes = static_cast<double>(weights) + static_cast<double>(kv_total);
  return d.pp * bytes / (g.bandwidth_gbs * 1e9 * efficiency);
}

Status validate_common(const ModelSpec& m, const GpuSpec& g, const Deployment& d,
                       double efficiency) {
  KVLAB_TRY(m.validate());
  KVLAB_TRY(g.validate());
  KVLAB_TRY(d.validate(m));
  if (!(efficiency > 0 && efficiency <= 1)) {
    return make_error(fmt::format("--efficiency {}: must be in (0, 1]", efficiency));
  }
  return Ok{};
}

}  // namespace

Status Scenario::validate() const {
  KVLAB_TRY(validate_common(model, gpu, deployment, bandwidth_efficiency));
  if (batch < 1 || batch > kMaxBatch) {
    return make_error(fmt::format("--batch {}: must be between 1 and {}", batch, kMaxBatch));
  }
  if (context < 1) return make_error(fmt::format("--context {}: must be at least 1", context));
  if (context > model.max_context) {
    return make_error(fmt::format("--context {}: beyond {}'s limit of {} tokens", context,
                                  model.name, model.max_context));
  }
  if (scheme.kind == SchemeKind::Measured && !(scheme.measured_bits_per_value > 0)) {
    return make_error(
        fmt::format("scheme '{}': the measured bits per value must be positive", scheme.id));
  }
  return Ok{};
}

QuickPlan quick_plan(const Scenario& s) {
  QuickPlan q;
  const Budgets b = budgets(s.model, s.gpu, s.deployment);
  const std::uint64_t seq = kv_bytes_per_sequence(s.model, s.scheme, s.deployment, s.context);
  q.kv_bytes_total = seq * static_cast<std::uint64_t>(s.batch);
  q.fits = b.capacity > 0 && q.kv_bytes_total <= b.capacity;
  q.max_batch = seq > 0 ? static_cast<std::int64_t>(b.capacity / seq) : 0;
  const double t =
      step_seconds(s.gpu, s.deployment, b.weights, q.kv_bytes_total, s.bandwidth_efficiency);
  q.decode_tokens_per_s = t > 0 ? s.batch / t : 0;
  return q;
}

Result<PlanResult> plan(const Scenario& s) {
  KVLAB_TRY(s.validate());
  const ModelSpec& m = s.model;
  const Deployment& d = s.deployment;
  PlanResult r;
  const Budgets b = budgets(m, s.gpu, d);
  r.kv_bytes_per_token = kv_bytes_per_token(m, s.scheme);
  r.kv_bytes_per_sequence = kv_bytes_per_sequence(m, s.scheme, d, s.context);
  r.kv_bytes_total = r.kv_bytes_per_sequence * static_cast<std::uint64_t>(s.batch);
  r.weights_bytes = b.weights;
  r.reserve_bytes = d.reserve_bytes;
  r.usable_bytes = b.usable;
  r.kv_capacity_bytes = b.capacity;
  r.gpu_bytes = s.gpu.memory_bytes;
  r.gpus = d.tp * d.pp;
  r.fits = b.capacity > 0 && r.kv_bytes_total <= b.capacity;
  r.max_batch = r.kv_bytes_per_sequence > 0
                    ? static_cast<std::int64_t>(b.capacity / r.kv_bytes_per_sequence)
                    : 0;

  // The longest context that fits the batch: KV bytes never fall as the context grows.
  const auto fits_at = [&](std::int64_t t) {
    return kv_bytes_per_sequence(m, s.scheme, d, t) * static_cast<std::uint64_t>(s.batch) <=
           b.capacity;
  };
  if (b.capacity > 0 && fits_at(1)) {
    std::int64_t lo = 1, hi = m.max_context;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo + 1) / 2;
      if (fits_at(mid)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    r.max_context = lo;
  }

  // The fewest GPUs: one node of 1, 2, 4 or 8 with tensor parallelism, then nodes of 8 joined by
  // pipeline parallelism.
  std::vector<std::pair<int, int>> layouts = {{1, 1}, {2, 1}, {4, 1}, {8, 1}};
  for (int nodes = 2; nodes <= 8; ++nodes) layouts.emplace_back(8, nodes);
  for (auto [tp, pp] : layouts) {
    Deployment trial = d;
    trial.tp = tp, trial.pp = pp;
    if (!trial.validate(m)) continue;
    Scenario t = s;
    t.deployment = trial;
    if (quick_plan(t).fits) {
      r.min_gpus = tp * pp, r.min_tp = tp, r.min_pp = pp;
      break;
    }
  }

  r.decode_seconds_per_step =
      step_seconds(s.gpu, d, b.weights, r.kv_bytes_total, s.bandwidth_efficiency);
  r.decode_tokens_per_s_per_sequence = 1.0 / r.decode_seconds_per_step;
  r.decode_tokens_per_s = s.batch / r.decode_seconds_per_step;
  r.formula = explain_kv(m, s.scheme, d, s.context, s.batch);
  return r;
}

nlohmann::json plan_result_to_json(const Scheme& s, const PlanResult& r) {
  return {{"scheme", s.id},
          {"scheme_label", s.label},
          {"kv_bytes_per_token", r.kv_bytes_per_token},
          {"kv_bytes_per_sequence", r.kv_bytes_per_sequence},
          {"kv_bytes_total", r.kv_bytes_total},
          {"weights_bytes", r.weights_bytes},
          {"reserve_bytes", r.reserve_bytes},
          {"usable_bytes", r.usable_bytes},
          {"kv_capacity_bytes", r.kv_capacity_bytes},
          {"gpu_bytes", r.gpu_bytes},
          {"fits", r.fits},
          {"max_batch", r.max_batch},
          {"max_context", r.max_context},
          {"min_gpus", r.min_gpus},
          {"min_tp", r.min_tp},
          {"min_pp", r.min_pp},
          {"decode_tokens_per_s", r.decode_tokens_per_s},
          {"decode_tokens_per_s_per_sequence", r.decode_tokens_per_s_per_sequence},
          {"formula", r.formula}};
}

Result<std::vector<SweepRow>> sweep(const SweepSpec& spec) {
  if (spec.gpus.empty() || spec.schemes.empty() || spec.contexts.empty() || spec.batches.empty()) {
    return make_error("sweep: give at least one GPU, scheme, context and batch");
  }
  for (const auto& g : spec.gpus) {
    if (auto v = validate_common(spec.model, g, spec.deployment, spec.bandwidth_efficiency); !v) {
      return v.error();
    }
  }
  for (auto c : spec.contexts) {
    if (c < 1 || c > spec.model.max_context) {
      return make_error(fmt::format("sweep: context {} is outside 1..{} for {}", c,
                                    spec.model.max_context, spec.model.name));
    }
  }
  for (int b : spec.batches) {
    if (b < 1 || b > kMaxBatch)
      return make_error(fmt::format("sweep: batch {} is out of range", b));
  }
  // KV bytes per sequence depend on the scheme and the context only: compute each once.
  const std::size_t nc = spec.contexts.size();
  std::vector<std::uint64_t> seq(spec.schemes.size() * nc);
  for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
    for (std::size_t c = 0; c < nc; ++c) {
      seq[k * nc + c] =
          kv_bytes_per_sequence(spec.model, spec.schemes[k], spec.deployment, spec.contexts[c]);
    }
  }
  std::vector<SweepRow> rows;
  rows.reserve(spec.gpus.size() * seq.size() * spec.batches.size());
  for (std::size_t g = 0; g < spec.gpus.size(); ++g) {
    const GpuSpec& gpu = spec.gpus[g];
    const Budgets b = budgets(spec.model, gpu, spec.deployment);
    const double per_byte =
        spec.deployment.pp / (gpu.bandwidth_gbs * 1e9 * spec.bandwidth_efficiency);
    for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
      for (std::size_t c = 0; c < nc; ++c) {
        const std::uint64_t s = seq[k * nc + c];
        const std::int64_t max_batch = s > 0 ? static_cast<std::int64_t>(b.capacity / s) : 0;
        for (int batch : spec.batches) {
          SweepRow row;
          row.gpu = static_cast<int>(g), row.scheme = static_cast<int>(k);
          row.context = spec.contexts[c], row.batch = batch;
          row.plan.kv_bytes_total = s * static_cast<std::uint64_t>(batch);
          row.plan.fits = b.capacity > 0 && row.plan.kv_bytes_total <= b.capacity;
          row.plan.max_batch = max_batch;
          row.plan.decode_tokens_per_s =
              batch / (per_byte * (static_cast<double>(b.weights) +
                                   static_cast<double>(row.plan.kv_bytes_total)));
          rows.push_back(row);
        }
      }
    }
  }
  return rows;
}

std::string sweep_to_csv(const SweepSpec& spec, const std::vector<SweepRow>& rows) {
  std::string out =
      "gpu,scheme,context,batch,fits,kv_bytes_total,max_batch,decode_tokens_per_s\r\n";
  for (const auto& r : rows) {
    out += fmt::format("{},{},{},{},{},{},{},{:.1f}\r\n", spec.gpus[r.gpu].id,
                       spec.schemes[r.scheme].id, r.context, r.batch, r.plan.fits ? 1 : 0,
                       r.plan.kv_bytes_total, r.plan.max_batch, r.plan.decode_tokens_per_s);
  }
  return out;
}

}  // namespace kvlab::planners
