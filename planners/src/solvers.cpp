// Fit solvers, the latency model per scenario, and sweeps over both.
#include "kvlab/planners/solvers.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kvlab::planners {
namespace {

constexpr int kMaxBatch = 10'000'000;

Status validate_common(const ModelSpec& m, const GpuSpec& g, const Deployment& d,
                       const Efficiencies& e) {
  KVLAB_TRY(m.validate());
  KVLAB_TRY(g.validate());
  KVLAB_TRY(d.validate(m));
  KVLAB_TRY(e.validate());
  // A GPU without compute figures (one stored before they existed) still plans: its compute is
  // not charged, which the CLI and the GUI say.
  return Ok{};
}

}  // namespace

KvBudget kv_budget(const ModelSpec& m, const GpuSpec& g, const Deployment& d, bool offload) {
  KvBudget b;
  b.weights = weights_bytes_per_gpu(m, d);
  b.usable =
      static_cast<std::uint64_t>(static_cast<double>(g.memory_bytes) * d.gpu_memory_utilization);
  const std::uint64_t taken = b.weights + d.reserve_bytes;
  b.capacity = b.usable > taken ? b.usable - taken : 0;
  b.with_host = b.capacity + (offload && b.capacity > 0 ? d.host_bytes : 0);
  return b;
}

Status Scenario::validate() const {
  KVLAB_TRY(validate_common(model, gpu, deployment, efficiencies()));
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
  const KvBudget b = kv_budget(s.model, s.gpu, s.deployment, s.scheme.offload);
  const std::uint64_t seq = kv_bytes_per_sequence(s.model, s.scheme, s.deployment, s.context);
  q.kv_bytes_batch_per_gpu = seq * static_cast<std::uint64_t>(s.batch);
  q.fits = b.capacity > 0 && q.kv_bytes_batch_per_gpu <= b.with_host;
  q.max_batch = seq > 0 ? static_cast<std::int64_t>(b.with_host / seq) : 0;
  const auto rate = decompression_rate(s.scheme, s.gpu, s.rates);
  const Latency l = estimate_latency(s.model, s.gpu, s.scheme, s.deployment, s.context, s.batch,
                                     rate, s.efficiencies(), b.capacity);
  q.tpot_s = l.tpot_s, q.ttft_s = l.ttft_s;
  q.tokens_per_s_per_user = l.tokens_per_s_per_user;
  q.tokens_per_s_per_gpu = l.tokens_per_s_per_gpu;
  return q;
}

Result<PlanResult> plan(const Scenario& s) {
  KVLAB_TRY(s.validate());
  const ModelSpec& m = s.model;
  const Deployment& d = s.deployment;
  PlanResult r;
  const KvBudget b = kv_budget(m, s.gpu, d, s.scheme.offload);
  r.kv_bytes_per_token_model = kv_bytes_per_token(m, s.scheme);
  r.kv_bytes_per_sequence_per_gpu = kv_bytes_per_sequence(m, s.scheme, d, s.context);
  r.kv_bytes_batch_per_gpu = r.kv_bytes_per_sequence_per_gpu * static_cast<std::uint64_t>(s.batch);
  r.gpus = d.tp * d.pp;
  r.kv_bytes_batch_deployment = r.kv_bytes_batch_per_gpu * static_cast<std::uint64_t>(r.gpus);
  if (s.scheme.offload && r.kv_bytes_batch_per_gpu > b.capacity) {
    r.host_kv_bytes_per_gpu = r.kv_bytes_batch_per_gpu - b.capacity;
  }
  r.weights_bytes_per_gpu = b.weights;
  r.reserve_bytes = d.reserve_bytes;
  r.usable_bytes = b.usable;
  r.kv_capacity_bytes = b.capacity;
  r.gpu_bytes = s.gpu.memory_bytes;
  r.fits = b.capacity > 0 && r.kv_bytes_batch_per_gpu <= b.with_host;
  r.max_batch = r.kv_bytes_per_sequence_per_gpu > 0
                    ? static_cast<std::int64_t>(b.with_host / r.kv_bytes_per_sequence_per_gpu)
                    : 0;

  // The longest context that fits the batch: KV bytes never fall as the context grows.
  const auto fits_at = [&](std::int64_t t) {
    return kv_bytes_per_sequence(m, s.scheme, d, t) * static_cast<std::uint64_t>(s.batch) <=
           b.with_host;
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
    const KvBudget tb = kv_budget(m, s.gpu, trial, s.scheme.offload);
    const std::uint64_t need =
        kv_bytes_per_sequence(m, s.scheme, trial, s.context) * static_cast<std::uint64_t>(s.batch);
    if (tb.capacity > 0 && need <= tb.with_host) {
      r.min_gpus = tp * pp, r.min_tp = tp, r.min_pp = pp;
      break;
    }
  }

  r.decompression = decompression_rate(s.scheme, s.gpu, s.rates);
  r.latency = estimate_latency(m, s.gpu, s.scheme, d, s.context, s.batch, r.decompression,
                               s.efficiencies(), b.capacity);
  r.ttft_s = r.latency.ttft_s;
  r.tpot_s = r.latency.tpot_s;
  r.tokens_per_s_per_user = r.latency.tokens_per_s_per_user;
  r.tokens_per_s_per_gpu = r.latency.tokens_per_s_per_gpu;
  r.tokens_per_s_deployment = r.latency.tokens_per_s_deployment;
  r.formula = explain_kv(m, s.scheme, d, s.context, s.batch);
  return r;
}

nlohmann::json plan_result_to_json(const Scheme& s, const PlanResult& r) {
  const StepCost& st = r.latency.step;
  return {{"scheme", s.id},
          {"scheme_label", s.label},
          {"kv_bytes_per_token_model", r.kv_bytes_per_token_model},
          {"kv_bytes_per_sequence_per_gpu", r.kv_bytes_per_sequence_per_gpu},
          {"kv_bytes_batch_per_gpu", r.kv_bytes_batch_per_gpu},
          {"kv_bytes_batch_deployment", r.kv_bytes_batch_deployment},
          {"host_kv_bytes_per_gpu", r.host_kv_bytes_per_gpu},
          {"weights_bytes_per_gpu", r.weights_bytes_per_gpu},
          {"reserve_bytes_per_gpu", r.reserve_bytes},
          {"usable_bytes_per_gpu", r.usable_bytes},
          {"kv_capacity_bytes_per_gpu", r.kv_capacity_bytes},
          {"gpu_memory_bytes_per_gpu", r.gpu_bytes},
          {"gpus", r.gpus},
          {"fits", r.fits},
          {"max_batch", r.max_batch},
          {"max_context", r.max_context},
          {"min_gpus", r.min_gpus},
          {"min_tp", r.min_tp},
          {"min_pp", r.min_pp},
          {"ttft_ms", r.ttft_s * 1e3},
          {"tpot_ms", r.tpot_s * 1e3},
          {"tokens_per_s_per_user", r.tokens_per_s_per_user},
          {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
          {"tokens_per_s_deployment", r.tokens_per_s_deployment},
          {"decode_step",
           {{"per_gpu_weights_bytes", st.weights_bytes},
            {"per_gpu_kv_bytes", st.kv_bytes},
            {"per_gpu_host_bytes", st.host_bytes},
            {"per_gpu_dense_flops", st.dense_flops},
            {"per_gpu_attention_flops", st.attention_flops},
            {"per_gpu_decompress_values", st.decompress_values},
            {"weights_read_ms", st.t_weights * 1e3},
            {"dense_compute_ms", st.t_dense * 1e3},
            {"kv_read_ms", st.t_kv * 1e3},
            {"attention_compute_ms", st.t_attention * 1e3},
            {"decompression_ms", st.t_decompress * 1e3},
            {"host_link_ms", st.t_host * 1e3},
            {"bound_by", st.bound_by},
            {"compute_bound", st.compute_bound},
            {"arithmetic_intensity_flops_per_byte", st.intensity()},
            {"achieved_tflops_per_gpu", st.achieved_flops() / 1e12}}},
          {"prefill",
           {{"deployment_flops", r.latency.prefill.flops},
            {"compute_ms", r.latency.prefill.t_compute * 1e3},
            {"memory_ms", r.latency.prefill.t_memory * 1e3},
            {"compress_ms", r.latency.prefill.t_compress * 1e3},
            {"compute_bound", r.latency.prefill.compute_bound}}},
          {"decompression_values_per_s_per_gpu", r.decompression.values_per_s},
          {"decompression_source", r.decompression.source},
          {"formula", r.formula}};
}

Result<std::vector<SweepRow>> sweep(const SweepSpec& spec) {
  if (spec.gpus.empty() || spec.schemes.empty() || spec.contexts.empty() || spec.batches.empty()) {
    return make_error("sweep: give at least one GPU, scheme, context and batch");
  }
  const Efficiencies eff{spec.bandwidth_efficiency, spec.compute_efficiency, spec.link_efficiency};
  for (const auto& g : spec.gpus) {
    if (auto v = validate_common(spec.model, g, spec.deployment, eff); !v) return v.error();
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
  const std::size_t nc = spec.contexts.size();
  std::vector<SweepRow> rows;
  rows.reserve(spec.gpus.size() * spec.schemes.size() * nc * spec.batches.size());
  for (std::size_t g = 0; g < spec.gpus.size(); ++g) {
    const GpuSpec& gpu = spec.gpus[g];
    for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
      const Scheme& scheme = spec.schemes[k];
      const KvBudget b = kv_budget(spec.model, gpu, spec.deployment, scheme.offload);
      const DecompressionRate rate = decompression_rate(scheme, gpu, spec.rates);
      for (std::size_t c = 0; c < nc; ++c) {
        // Everything but the batch, once per (GPU, scheme, context).
        const LatencyInputs in =
            latency_inputs(spec.model, gpu, scheme, spec.deployment, spec.contexts[c], rate, eff);
        const auto s = static_cast<std::uint64_t>(in.kv_bytes_per_sequence);
        const std::int64_t max_batch = s > 0 ? static_cast<std::int64_t>(b.with_host / s) : 0;
        for (int batch : spec.batches) {
          SweepRow row;
          row.gpu = static_cast<int>(g), row.scheme = static_cast<int>(k);
          row.context = spec.contexts[c], row.batch = batch;
          row.plan.kv_bytes_batch_per_gpu = s * static_cast<std::uint64_t>(batch);
          row.plan.fits = b.capacity > 0 && row.plan.kv_bytes_batch_per_gpu <= b.with_host;
          row.plan.max_batch = max_batch;
          const Latency l = decode_latency(in, batch, b.capacity);
          row.plan.tpot_s = l.tpot_s, row.plan.ttft_s = l.ttft_s;
          row.plan.tokens_per_s_per_user = l.tokens_per_s_per_user;
          row.plan.tokens_per_s_per_gpu = l.tokens_per_s_per_gpu;
          rows.push_back(row);
        }
      }
    }
  }
  return rows;
}

std::string sweep_to_csv(const SweepSpec& spec, const std::vector<SweepRow>& rows) {
  std::string out =
      "gpu,scheme,context,batch,fits,kv_bytes_batch_per_gpu,max_batch,ttft_ms,tpot_ms,"
      "tokens_per_s_per_user,tokens_per_s_per_gpu\r\n";
  for (const auto& r : rows) {
    out +=
        fmt::format("{},{},{},{},{},{},{},{:.2f},{:.3f},{:.1f},{:.1f}\r\n", spec.gpus[r.gpu].id,
                    spec.schemes[r.scheme].id, r.context, r.batch, r.plan.fits ? 1 : 0,
                    r.plan.kv_bytes_batch_per_gpu, r.plan.max_batch, r.plan.ttft_s * 1e3,
                    r.plan.tpot_s * 1e3, r.plan.tokens_per_s_per_user, r.plan.tokens_per_s_per_gpu);
  }
  return out;
}

}  // namespace kvlab::planners
