// Quality cost of planner schemes from stored quality runs (see plan_quality.h).
#include "kvlab/store/plan_quality.h"

#include <filesystem>

#include <fmt/format.h>

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
      out[k] = {"exact (the baseline)", 0.0};
    }
  }
  auto runs = store.list_runs(-1);
  if (!runs) return runs.error();
  // Newest first: the first match for a scheme is the one kept.
  for (const auto& r : *runs) {
    if (r.kind != "quality" || !r.metrics.is_object() || !r.metrics.contains("model") ||
        !r.metrics["model"].is_string() ||
        !quality_run_is_model(r.metrics["model"].get<std::string>(), model)) {
      continue;
    }
    auto record = store.load_run(r.id);
    if (!record) return record.error();
    for (std::size_t k = 0; k < schemes.size(); ++k) {
      if (!out[k].text.empty() || !quality_run_is_scheme(record->params, schemes[k])) continue;
      const auto& m = record->metrics;
      std::string text;
      std::optional<double> change;
      if (m.contains("perplexity_change") && m["perplexity_change"].is_number()) {
        change = m["perplexity_change"].get<double>();
        text = "perplexity " + format_metric_value(*change, MetricFormat::SignedPercent);
      }
      if (m.contains("kl_mean") && m["kl_mean"].is_number()) {
        text += fmt::format("{}KL {:.4f}", text.empty() ? "" : ", ", m["kl_mean"].get<double>());
      }
      if (text.empty()) continue;
      const double tokens =
          m.contains("tokens") && m["tokens"].is_number() ? m["tokens"].get<double>() : 0.0;
      out[k] = {fmt::format("{} (run {}, {:.0f} tokens)", text, r.id, tokens), change};
    }
  }
  return out;
}

}  // namespace kvlab
