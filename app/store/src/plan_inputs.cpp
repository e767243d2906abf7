// Quality cost and kernel rates for the planner from a runs database (see plan_inputs.h).
#include "kvlab/store/plan_inputs.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "kvlab/engine/core/interval.h"
#include "kvlab/engine/core/names.h"
#include "kvlab/store/run_records.h"

namespace kvlab {

bool quality_run_is_model(const std::string& run_model, const planners::ModelSpec& model) {
  const std::string file = canonical_id(std::filesystem::path(run_model).filename().string());
  std::vector<std::string> names{model.id, model.name};
  names.insert(names.end(), model.aliases.begin(), model.aliases.end());
  if (!model.hf_id.empty()) {
    names.push_back(model.hf_id.substr(model.hf_id.find('/') + 1));
  }
  for (const auto& n : names) {
    const std::string want = canonical_id(n);
    if (!want.empty() && file.rfind(want, 0) == 0) return true;
  }
  return false;
}

bool quality_run_is_scheme(const nlohmann::json& p, const planners::Scheme& s) {
  using planners::SchemeKind;
  if (!p.is_object() || p.contains("eviction") || s.evict_tokens || s.evict_fraction || s.offload) {
    return false;
  }
  const std::string method = p.value("method", "");
  switch (s.kind) {
    case SchemeKind::Fp16:
      return false;
    case SchemeKind::Fp8:
      return method == "fp8-e4m3" || method == "fp8-e5m2";
    case SchemeKind::Int8:
      return method == "int8";
    case SchemeKind::Int4:
      return method == "int4";
    case SchemeKind::Kivi:
      return method == "kivi" && p.value("bits", 0) == s.bits;
    case SchemeKind::Measured:
      return s.kernel == planners::SchemeKernel::Huffman && method == "kvcomp" &&
             p.value("codec", "") == "huffman";
    case SchemeKind::Engine: {
      const MethodKind kind = s.method.kind;
      if (method != method_id(kind)) return false;
      if ((kind == MethodKind::KvQuant || kind == MethodKind::TurboQuant) &&
          p.value("bits", 0) != s.bits) {
        return false;
      }
      // A rotation before the method is another scheme (TurboQuant's own is part of it).
      return kind == MethodKind::TurboQuant || !p.contains("rotation");
    }
  }
  return false;
}

Result<std::vector<SchemeQuality>> scheme_quality(const RunsStore& store,
                                                  const planners::ModelSpec& model,
                                                  const std::vector<planners::Scheme>& schemes) {
  std::vector<SchemeQuality> out(schemes.size());
  for (std::size_t k = 0; k < schemes.size(); ++k) {
    if (schemes[k].kind == planners::SchemeKind::Fp16 && !schemes[k].evict_tokens &&
        !schemes[k].evict_fraction) {
      out[k] = {"exact (the baseline)", 0.0, std::nullopt};
    }
  }
  auto runs = store.list_runs(-1);
  if (!runs) return runs.error();
  // Newest first: the first match for a scheme is the one kept.
  for (const auto& r : *runs) {
    if (!is_run_kind(r.kind, RunKind::Quality) || !r.metrics.is_object() ||
        !r.metrics.contains("model") || !r.metrics["model"].is_string() ||
        !quality_run_is_model(r.metrics["model"].get<std::string>(), model)) {
      continue;
    }
    auto record = store.load_run(r.id);
    if (!record) return record.error();
    for (std::size_t k = 0; k < schemes.size(); ++k) {
      if (!out[k].text.empty() || !quality_run_is_scheme(record->params, schemes[k])) continue;
      const auto& m = record->metrics;
      std::string text;
      std::optional<double> change, change_se;
      if (m.contains("perplexity_change") && m["perplexity_change"].is_number()) {
        change = m["perplexity_change"].get<double>();
        text = "perplexity " + format_metric_value(*change, MetricFormat::SignedPercent);
        // With its standard error (issue 48), for runs that stored one.
        if (m.contains("perplexity_change_se") && m["perplexity_change_se"].is_number()) {
          const double se = m["perplexity_change_se"].get<double>();
          change_se = se;
          text += fmt::format(" ± {:.2f}", 100 * se);
          // Its 95% interval holds 0: not a cost the run can tell from exact.
          if (interval_holds(*change, se, 0)) text += " (within noise of exact)";
        }
      }
      if (m.contains("kl_mean") && m["kl_mean"].is_number()) {
        text += fmt::format("{}KL {:.4f}", text.empty() ? "" : ", ", m["kl_mean"].get<double>());
      }
      if (text.empty()) continue;
      const double tokens =
          m.contains("tokens") && m["tokens"].is_number() ? m["tokens"].get<double>() : 0.0;
      out[k] = {fmt::format("{} (run {}, {:.0f} tokens)", text, r.id, tokens), change, change_se};
    }
  }
  return out;
}

Result<std::optional<planners::KernelRates>> stored_kernel_rates(const RunsStore& store,
                                                                 const planners::GpuSpec& gpu) {
  auto runs = store.list_runs(-1);
  if (!runs) return runs.error();
  for (const auto& r : *runs) {  // newest first
    if (!is_run_kind(r.kind, RunKind::Bench)) continue;
    auto record = store.load_run(r.id);
    if (!record) return record.error();
    const auto& p = record->params;
    if (!p.is_object() || !p.contains("gpu_id") || !p["gpu_id"].is_string() ||
        p["gpu_id"].get<std::string>() != gpu.id) {
      continue;
    }
    const auto& m = record->metrics;
    const std::string device = m.is_object() && m.contains("device") && m["device"].is_string()
                                   ? m["device"].get<std::string>()
                                   : std::string("?");
    auto rates =
        planners::kernel_rates_from_bench(m, gpu.id, gpu.tflops.fp32,
                                          fmt::format("kvlab bench gpu on {} (run {}, {})", device,
                                                      r.id, r.created_at.substr(0, 10)));
    if (!rates) return make_error(fmt::format("run {}: {}", r.id, rates.message()));
    return std::optional<planners::KernelRates>(std::move(*rates));
  }
  return std::optional<planners::KernelRates>();
}

}  // namespace kvlab
