#include "kvlab/store/run_records.h"
#include "kvlab/engine/codec/stream_sim_json.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/engine/model/generate.h"
#include "kvlab/engine/model/model_quality_json.h"
#include "kvlab/engine/quant/method_json.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include "kvlab/engine/io/report_json.h"
#include "kvlab/planners/memory_formula.h"

namespace kvlab {

namespace {

using nlohmann::json;

constexpr std::array<std::pair<RunKind, std::string_view>, 8> kKindIds = {{
    {RunKind::Compression, "compression"},
    {RunKind::Eviction, "eviction"},
    {RunKind::Quality, "quality"},
    {RunKind::Plan, "plan"},
    {RunKind::Stream, "stream"},
    {RunKind::Bench, "bench"},        // kvlab bench gpu --save: kernel rates for the planner
    {RunKind::Needle, "needle"},      // kvlab quality --needle --save: passkey retrieval
    {RunKind::Generate, "generate"},  // kvlab generate --save: a model on a stored cache
}};

// The number at a dotted path ("error.mse"), if the run has one.
std::optional<double> number_at(const json& j, std::string_view path) {
  const json* p = &j;
  while (!path.empty()) {
    const auto dot = path.find('.');
    const std::string part(path.substr(0, dot));
    if (!p->is_object()) return std::nullopt;
    const auto it = p->find(part);
    if (it == p->end()) return std::nullopt;
    p = &*it;
    path = dot == std::string_view::npos ? std::string_view() : path.substr(dot + 1);
  }
  if (!p->is_number()) return std::nullopt;
  return p->get<double>();
}

// A quality run's memory against fp16 with eviction counted; runs saved before it was stored
// have the method's ratio and the kept fraction to compute it from.
std::optional<double> quality_memory_ratio(const json& m) {
  if (auto stored = number_at(m, "memory_ratio")) return stored;
  const auto ratio = number_at(m, "ratio");
  const auto kept = number_at(m, "kept_fraction");
  if (!ratio) return std::nullopt;
  return kept && *kept > 0 ? *ratio / *kept : *ratio;
}

std::optional<double> quality_memory_bits(const json& m) {
  if (auto stored = number_at(m, "memory_bits_per_value")) return stored;
  const auto bits = number_at(m, "bits_per_value");
  const auto kept = number_at(m, "kept_fraction");
  if (!bits) return std::nullopt;
  return kept ? *bits * *kept : *bits;
}

struct MetricSpec {
  const char* key;
  const char* name;
  MetricFormat format;
};

// What each kind stores, in the order a person reads it.
constexpr MetricSpec kCompressionMetrics[] = {
    {"ratio", "ratio vs fp16", MetricFormat::Ratio},
    {"bits_per_value", "bits per value", MetricFormat::Bits},
    {"tokens", "tokens", MetricFormat::Count},
    {"bytes.total", "stored bytes", MetricFormat::Bytes},
    {"fp16_bytes", "fp16 bytes", MetricFormat::Bytes},
    {"error.mse", "MSE", MetricFormat::Number},
    {"error.max_abs", "max abs error", MetricFormat::Number},
    {"error.snr_db", "SNR", MetricFormat::Decibels},
    {"error.logit_rmse", "logit RMSE", MetricFormat::Number},
    {"error.softmax_kl", "softmax KL", MetricFormat::Nats},
    {"error.attn_output_rel_error", "attention output rel. error", MetricFormat::Number},
    {"error.attn_output_cosine", "attention output cosine", MetricFormat::Number},
    {"entropy_bits_per_code", "entropy per code (bits)", MetricFormat::Bits},
    {"payload_bits_per_code", "payload per code (bits)", MetricFormat::Bits},
    {"timings.total_s", "time", MetricFormat::Seconds},
};
constexpr MetricSpec kEvictionMetrics[] = {
    {"memory_ratio", "memory vs full fp16 cache", MetricFormat::Ratio},
    {"memory_bytes", "memory", MetricFormat::Bytes},
    {"full_memory_bytes", "full fp16 cache", MetricFormat::Bytes},
    {"tokens", "tokens", MetricFormat::Count},
    {"steps", "decode steps", MetricFormat::Count},
    {"kept_tokens", "kept tokens", MetricFormat::Number},
    {"attention_mass_retained", "attention mass retained", MetricFormat::Percent},
    {"attn_output_rel_error", "attention output rel. error", MetricFormat::Number},
    {"attn_output_cosine", "attention output cosine", MetricFormat::Number},
    {"needle_retained", "needle retained (KV heads)", MetricFormat::Percent},
    {"needle_in_top_k", "needle in top-k (KV heads)", MetricFormat::Percent},
    {"seconds", "time", MetricFormat::Seconds},
};
constexpr MetricSpec kQualityMetrics[] = {
    {"memory_ratio", "memory vs fp16 (eviction counted)", MetricFormat::Ratio},
    {"memory_bits_per_value", "bits per value (eviction counted)", MetricFormat::Bits},
    {"ratio", "method ratio vs fp16", MetricFormat::Ratio},
    {"bits_per_value", "method bits per value", MetricFormat::Bits},
    {"kept_fraction", "tokens kept", MetricFormat::Percent},
    {"perplexity_exact", "perplexity, exact cache", MetricFormat::Number},
    {"perplexity", "perplexity, compressed cache", MetricFormat::Number},
    {"perplexity_change", "perplexity change", MetricFormat::SignedPercent},
    {"perplexity_change_se", "perplexity change, standard error", MetricFormat::Percent},
    {"next_token_agreement", "next-token agreement", MetricFormat::Percent},
    {"next_token_agreement_low", "next-token agreement, 95% low", MetricFormat::Percent},
    {"next_token_agreement_high", "next-token agreement, 95% high", MetricFormat::Percent},
    {"kl_mean", "mean KL", MetricFormat::Nats},
    {"kl_mean_se", "mean KL, standard error", MetricFormat::Nats},
    {"tokens", "tokens predicted", MetricFormat::Count},
    {"windows", "windows", MetricFormat::Count},
    {"seconds", "time", MetricFormat::Seconds},
};
constexpr MetricSpec kStreamMetrics[] = {
    {"ratio", "ratio vs fp16", MetricFormat::Ratio},
    {"tokens", "tokens", MetricFormat::Count},
    {"total_bytes", "memory", MetricFormat::Bytes},
    {"fp16_bytes", "fp16 bytes", MetricFormat::Bytes},
};
constexpr MetricSpec kGenerateMetrics[] = {
    {"ratio", "cache vs fp16", MetricFormat::Ratio},
    {"memory_bits_per_value", "bits per value held", MetricFormat::Bits},
    {"cache_bytes", "cache held", MetricFormat::Bytes},
    {"fp16_bytes", "fp16 cache", MetricFormat::Bytes},
    {"tokens", "tokens held", MetricFormat::Count},
    {"prompt_tokens", "prompt tokens", MetricFormat::Count},
    {"decode_steps", "decode steps", MetricFormat::Count},
    {"prefill_tokens_per_second", "prefill tokens/s", MetricFormat::Number},
    {"decode_tokens_per_second", "decode tokens/s", MetricFormat::Number},
    {"fp16_decode_tokens_per_second", "fp16 cache: decode tokens/s", MetricFormat::Number},
    {"decode_speed_vs_fp16", "decode speed vs fp16", MetricFormat::Ratio},
    {"greedy_tokens_agreeing", "greedy tokens before departing from fp16", MetricFormat::Count},
    {"peak_resident_bytes", "peak resident memory", MetricFormat::Bytes},
    {"fp16_peak_resident_bytes", "fp16 cache: peak resident memory", MetricFormat::Bytes},
    {"decode_copy_bytes", "decode attention's copy of the cache (GPU)", MetricFormat::Bytes},
    {"threads", "threads", MetricFormat::Count},
};
constexpr MetricSpec kPlanMetrics[] = {
    {"context", "context", MetricFormat::Count},
    {"batch", "batch", MetricFormat::Count},
    {"tp", "tensor parallel", MetricFormat::Count},
    {"pp", "pipeline parallel", MetricFormat::Count},
};

std::span<const MetricSpec> metric_specs(std::string_view kind) {
  switch (run_kind_from_id(kind).value_or(RunKind::Bench)) {
    case RunKind::Compression:
      return kCompressionMetrics;
    case RunKind::Eviction:
      return kEvictionMetrics;
    case RunKind::Quality:
      return kQualityMetrics;
    case RunKind::Stream:
      return kStreamMetrics;
    case RunKind::Plan:
      return kPlanMetrics;
    case RunKind::Generate:
      return kGenerateMetrics;
    case RunKind::Bench:
    case RunKind::Needle:
      break;
  }
  return {};
}

}  // namespace

std::string_view run_kind_id(RunKind kind) {
  for (const auto& [k, id] : kKindIds) {
    if (k == kind) return id;
  }
  return "?";
}

std::optional<RunKind> run_kind_from_id(std::string_view id) {
  for (const auto& [k, name] : kKindIds) {
    if (name == id) return k;
  }
  return std::nullopt;
}

// ---- Results into runs ------------------------------------------------------------------

NewRun compression_run(const CompressionReport& report, const std::string& label,
                       const json* stream) {
  NewRun run;
  run.kind = run_kind_id(RunKind::Compression);
  run.source = report.source;
  run.method = report.method;
  run.label = label.empty() ? report.method_label : label;
  run.params = method_params_json(report.config);
  run.metrics = report_to_json(report);
  run.artifacts.emplace_back(kHistogramsArtifact, histograms_to_json(report));
  if (stream != nullptr) run.artifacts.emplace_back(kStreamArtifact, *stream);
  return run;
}

NewRun eviction_run(const EvictionReport& report, const std::string& label, const json& source) {
  NewRun run;
  run.kind = run_kind_id(RunKind::Eviction);
  run.source = report.source;
  run.method = report.policy;
  run.label = label.empty() ? report.label : label;
  run.params = eviction_params_json(report.config);
  if (!source.is_null()) run.params["source"] = source;
  run.metrics = eviction_report_to_json(report);
  run.artifacts.emplace_back(kEvictionMapArtifact, eviction_maps_to_json(report));
  return run;
}

namespace {

// A model-loop run's method column and params: the quantization, the eviction policy or both.
// The decode-time simulation's own options (steps, needle, top_k, quant) do not apply in the loop.
void loop_method_and_params(NewRun& run, const std::optional<MethodConfig>& method,
                            const std::optional<EvictionConfig>& eviction,
                            const std::string& method_label, const std::string& policy_label) {
  run.method = eviction && method ? policy_label + " + " + method_label
               : eviction         ? policy_label
                                  : method_label;
  run.params = method ? method_params_json(*method) : json::object();
  if (eviction) {
    json e = eviction_params_json(*eviction);
    for (const char* simulation_only : {"steps", "needle", "top_k", "quant"})
      e.erase(simulation_only);
    run.params["eviction"] = e;
  }
}

}  // namespace

NewRun quality_run(const QualityReport& report, const QualityConfig& config,
                   const QualityRunContext& context) {
  NewRun run;
  run.kind = run_kind_id(RunKind::Quality);
  run.source = "model:" + context.model;
  loop_method_and_params(run, config.method, config.eviction, report.method_label,
                         report.policy_label);
  run.label = context.label;
  run.params["text"] = context.text;
  run.params["window"] = context.window;
  if (config.stride > 0) run.params["stride"] = config.stride;  // absent: windows side by side
  if (config.stored) run.params["stored"] = true;  // absent: the whole-prefix simulation
  json m = quality_report_to_json(report);
  m["model"] = context.model;
  m["text"] = context.text;
  const double kept = report.kept_fraction > 0 ? report.kept_fraction : 1.0;
  m["memory_ratio"] = report.ratio / kept;
  m["memory_bits_per_value"] = report.bits_per_value * kept;
  run.metrics = std::move(m);
  return run;
}

namespace {

// What a needle run keeps of the prompt, for the retrieval chart's x: the token budget's share
// for a token policy; ThinK keeps every token and a share of the key channels; MiniCache keeps
// every token and merges layers (no budget); a count of tokens has no share of its own.
struct NeedleSize {
  double fraction = 1;
  const char* of = "tokens";
};

NeedleSize needle_size(const std::optional<EvictionConfig>& e) {
  if (!e) return {};
  if (e->policy == EvictionPolicy::ThinK && !e->think_tokens)
    return {e->key_channels, "key channels"};
  if (e->policy == EvictionPolicy::MiniCache) return {1.0, "none"};
  return {e->budget.fraction ? e->budget.value : 1.0, e->budget.fraction ? "tokens" : "none"};
}

}  // namespace

NewRun needle_run(const NeedleReport& report, const NeedleConfig& config, const std::string& model,
                  const std::string& label) {
  const NeedleSize size = needle_size(config.eviction);
  NewRun run;
  run.kind = run_kind_id(RunKind::Needle);
  run.source = "model:" + model;
  loop_method_and_params(run, config.method, config.eviction, report.method_label,
                         report.policy_label);
  run.label = label;
  run.params["lengths"] = config.lengths;
  run.params["depths"] = config.depths;
  run.params["trials"] = config.trials;
  run.params["seed"] = config.seed;
  run.params["press_before_question"] = config.press_before_question;
  json cells = json::array();
  for (const auto& c : report.cells) {
    cells.push_back({{"length", c.length},
                     {"depth", c.depth},
                     {"trials", c.trials},
                     {"found", c.found},
                     {"answer", c.answer}});
  }
  run.metrics = {
      {"model", model},
      {"method", report.method_label},
      {"policy", report.policy_label},
      {"policy_id", config.eviction ? std::string(eviction_policy_id(config.eviction->policy))
                                    : std::string("none")},
      {"budget", config.eviction ? config.eviction->budget.to_string() : "100%"},
      {"budget_fraction", size.fraction},
      {"budget_of", size.of},
      {"press_before_question", report.press_before_question},
      {"accuracy", report.accuracy},
      {"found", report.found},
      {"trials", report.trials},
      {"accuracy_low", report.accuracy_low},
      {"accuracy_high", report.accuracy_high},
      {"seconds", report.seconds},
      {"cells", cells}};
  return run;
}

NewRun plan_run(const planners::Scenario& s,
                const std::vector<std::pair<planners::Scheme, planners::PlanResult>>& results,
                const PlanRunContext& context) {
  NewRun run;
  run.kind = run_kind_id(RunKind::Plan);
  run.source = s.model.id;
  run.method = fmt::format("{} on {}", fmt::join(context.scheme_ids, ", "), s.gpu.id);
  run.label = context.label;
  run.params = {{"model", planners::model_to_json(s.model)},
                {"gpu", planners::gpu_to_json(s.gpu)},
                {"context", s.context},
                {"batch", s.batch},
                {"schemes", context.scheme_ids},
                {"tp", s.deployment.tp},
                {"pp", s.deployment.pp},
                {"util", s.deployment.gpu_memory_utilization},
                {"reserve_gib", context.reserve_gib},
                {"page_tokens", s.deployment.page_tokens},
                {"efficiency", s.bandwidth_efficiency}};
  if (!context.evict.empty()) run.params["evict"] = context.evict;
  json m = {{"model", s.model.id},
            {"model_name", s.model.name},
            {"gpu", s.gpu.id},
            {"gpu_name", s.gpu.name},
            {"context", s.context},
            {"batch", s.batch},
            {"tp", s.deployment.tp},
            {"pp", s.deployment.pp},
            {"util", s.deployment.gpu_memory_utilization},
            {"page_tokens", s.deployment.page_tokens},
            {"efficiency", s.bandwidth_efficiency}};
  auto& rows = m["schemes"] = json::array();
  for (const auto& [scheme, result] : results) {
    rows.push_back(planners::plan_result_to_json(scheme, result));
  }
  // The first scheme's numbers also at the top, for scripts asking about one scheme.
  if (!rows.empty()) {
    for (const auto& [k, v] : rows.front().items()) m[k] = v;
  }
  run.metrics = std::move(m);
  return run;
}

NewRun stream_run(const StreamReport& report, const StreamConfig& config,
                  const std::string& label) {
  NewRun run;
  run.kind = run_kind_id(RunKind::Stream);
  run.source = report.source;
  run.method = fmt::format("kvcomp+{}", codec_id(config.codec));
  run.label = label.empty()
                  ? fmt::format("stream {} prefill={} B={} S={}", codec_id(config.codec),
                                config.prefill_tokens, config.block_size, config.buffer_size)
                  : label;
  run.params = stream_config_to_json(config);
  if (!report.points.empty()) {
    const StreamPoint& last = report.points.back();
    run.metrics = {{"tokens", last.tokens},
                   {"ratio", last.ratio()},
                   {"total_bytes", last.memory.total()},
                   {"fp16_bytes", last.fp16_bytes},
                   {"points", report.points.size()}};
  } else {
    run.metrics = json::object();
  }
  run.artifacts.emplace_back(kStreamArtifact, stream_to_json(report));
  return run;
}

json generate_result(const GenerateMeasurement& run, const GenerateMeasurement* fp16) {
  const auto per_second = [](double count, double seconds) {
    return count / std::max(seconds, 1e-9);
  };
  const double prompt = static_cast<double>(run.prompt_ids.size());
  // The model's text and the path as text: a greedy run may stop inside a UTF-8 sequence.
  json j = {{"model", valid_utf8(run.model)},
            {"prompt_tokens", run.prompt_ids.size()},
            {"prompt_ids", run.prompt_ids},
            {"generated_ids", run.generated_ids},
            {"generated", valid_utf8(run.text)},
            {"prefill_seconds", run.prefill_seconds},
            {"prefill_batch", run.prefill_batch},
            {"prefill_tokens_per_second", per_second(prompt, run.prefill_seconds)},
            {"decode_steps", run.decode_steps},
            {"decode_seconds", run.decode_seconds},
            {"decode_tokens_per_second", per_second(run.decode_steps, run.decode_seconds)},
            {"threads", run.threads},
            {"cache",
             {{"method", run.cache},
              {"bytes", run.cache_bytes},
              {"fp16_bytes", run.fp16_bytes},
              {"ratio", static_cast<double>(run.fp16_bytes) /
                            static_cast<double>(std::max<std::uint64_t>(run.cache_bytes, 1))}}}};
  if (run.peak_resident_bytes > 0) j["peak_resident_bytes"] = run.peak_resident_bytes;
  j["decode_attention"] = run.decode_attention;
  if (run.decode_copy_bytes > 0) j["cache"]["decode_copy_bytes"] = run.decode_copy_bytes;
  if (fp16) {
    const double decode = per_second(fp16->decode_steps, fp16->decode_seconds);
    j["fp16"] = {{"generated_ids", fp16->generated_ids},
                 {"prefill_tokens_per_second", per_second(prompt, fp16->prefill_seconds)},
                 {"decode_tokens_per_second", decode},
                 {"cache_bytes", fp16->cache_bytes}};
    if (fp16->peak_resident_bytes > 0) {
      j["fp16"]["peak_resident_bytes"] = fp16->peak_resident_bytes;
    }
    j["greedy_tokens_agreeing"] = tokens_agreeing(run.generated_ids, fp16->generated_ids);
    j["decode_speed_vs_fp16"] =
        per_second(run.decode_steps, run.decode_seconds) / std::max(decode, 1e-9);
  }
  return j;
}

NewRun generate_run(const json& result, const std::optional<MethodConfig>& method,
                    const std::string& label) {
  NewRun run;
  run.kind = run_kind_id(RunKind::Generate);
  const json& cache = result.value("cache", json::object());
  run.source = "model:" + result.value("model", std::string());
  run.method = cache.value("method", std::string());
  run.label = label;
  // Without a method: the fp16 store ("fp16") or the runner's own float cache ("float32").
  run.params = method ? method_params_json(*method) : json{{"method", run.method}};
  run.params["prompt_tokens"] = result.value("prompt_tokens", 0);
  run.params["tokens"] = result.value("generated_ids", json::array()).size();
  // How the prompt ran (kvlab generate --batch): it sets what per-tensor scales and KVComp's
  // codebooks were fitted to.
  run.params["prefill_batch"] = result.value("prefill_batch", 0);
  // Where the decode steps attended, when not on the CPU (kvlab generate --backend).
  if (const std::string where = result.value("decode_attention", std::string("cpu"));
      where != "cpu") {
    run.params["decode_attention"] = where;
  }
  json m;
  m["model"] = result.value("model", std::string());
  for (const char* key :
       {"prompt_tokens", "decode_steps", "prefill_seconds", "decode_seconds",
        "prefill_tokens_per_second", "decode_tokens_per_second", "threads", "peak_resident_bytes",
        "greedy_tokens_agreeing", "decode_speed_vs_fp16", "generated"}) {
    if (result.contains(key)) m[key] = result[key];
  }
  m["cache_bytes"] = cache.value("bytes", std::uint64_t{0});
  m["fp16_bytes"] = cache.value("fp16_bytes", std::uint64_t{0});
  m["ratio"] = cache.value("ratio", 0.0);
  if (cache.contains("decode_copy_bytes")) m["decode_copy_bytes"] = cache["decode_copy_bytes"];
  if (m["ratio"].get<double>() > 0) m["memory_bits_per_value"] = 16.0 / m["ratio"].get<double>();
  // The tokens the cache holds: the prompt and every generated token but the last.
  m["tokens"] = result.value("prompt_tokens", 0) + result.value("decode_steps", 0);
  if (result.contains("fp16")) {
    const json& f = result["fp16"];
    m["fp16_prefill_tokens_per_second"] = f.value("prefill_tokens_per_second", 0.0);
    m["fp16_decode_tokens_per_second"] = f.value("decode_tokens_per_second", 0.0);
    m["fp16_cache_bytes"] = f.value("cache_bytes", std::uint64_t{0});
    m["fp16_peak_resident_bytes"] = f.value("peak_resident_bytes", std::uint64_t{0});
  }
  run.metrics = std::move(m);
  return run;
}

// ---- Runs into numbers ------------------------------------------------------------------

std::string format_metric_value(double value, MetricFormat format) {
  if (!std::isfinite(value)) return "–";
  switch (format) {
    case MetricFormat::Ratio:
      return fmt::format("{:.2f}×", value);
    case MetricFormat::Bits:
      return fmt::format("{:.2f}", value);
    case MetricFormat::Percent:
      return fmt::format("{:.3g} %", 100.0 * value);
    case MetricFormat::SignedPercent:
      return fmt::format("{}{:.3g} %", value >= 0 ? "+" : "", 100.0 * value);
    case MetricFormat::Number:
      // Three significant digits, but never an exponent a person has to decode for numbers
      // from a thousand up to a quadrillion ("3790 tokens", not "3.79e+03").
      if (std::isfinite(value) && std::fabs(value) >= 1e3 && std::fabs(value) < 1e15) {
        return fmt::format("{:.0f}", value);
      }
      return value == 0.0 ? std::string("0") : fmt::format("{:.3g}", value);
    case MetricFormat::Nats:
      return (value == 0.0 ? std::string("0") : fmt::format("{:.3g}", value)) + " nats";
    case MetricFormat::Decibels:
      return fmt::format("{:.1f} dB", value);
    case MetricFormat::Bytes:
      return planners::format_bytes(value);
    case MetricFormat::Count:
      return fmt::format("{:.0f}", value);
    case MetricFormat::Seconds:
      if (value < 1.0) return fmt::format("{:.0f} ms", std::round(value * 1000.0));
      return fmt::format("{:.2f} s", value);
  }
  return fmt::format("{}", value);
}

std::vector<RunMetric> run_metrics(const RunSummary& run) {
  std::vector<RunMetric> out;
  const bool quality = is_run_kind(run.kind, RunKind::Quality);
  for (const MetricSpec& spec : metric_specs(run.kind)) {
    std::optional<double> value = number_at(run.metrics, spec.key);
    if (quality && std::string_view(spec.key) == "memory_ratio") {
      value = quality_memory_ratio(run.metrics);
    } else if (quality && std::string_view(spec.key) == "memory_bits_per_value") {
      value = quality_memory_bits(run.metrics);
    }
    if (value) out.push_back({spec.key, spec.name, *value, spec.format});
  }
  return out;
}

RunRow run_row(const RunSummary& run) {
  RunRow row;
  row.id = run.id;
  row.created_at = run.created_at;
  row.kind = run.kind;
  row.source = run.source;
  row.method = run.method;
  row.label = run.label;
  const json& m = run.metrics;
  const auto kind = run_kind_from_id(run.kind);
  if (!kind) return row;
  switch (*kind) {
    case RunKind::Compression:
      row.context = number_at(m, "tokens");
      row.ratio = number_at(m, "ratio");
      row.bits_per_value = number_at(m, "bits_per_value");
      row.error = number_at(m, "error.attn_output_rel_error");
      break;
    case RunKind::Eviction:
      row.context = number_at(m, "tokens");
      row.ratio = number_at(m, "memory_ratio");
      if (row.ratio && *row.ratio > 0) row.bits_per_value = 16.0 / *row.ratio;
      row.error = number_at(m, "attn_output_rel_error");
      row.needle_kept = number_at(m, "needle_retained");
      break;
    case RunKind::Quality: {
      // The window the model read; runs stored before the report had it: tokens predicted per
      // window + 1.
      const auto window = number_at(m, "window");
      const auto tokens = number_at(m, "tokens");
      const auto windows = number_at(m, "windows");
      if (window && *window > 0) {
        row.context = window;
      } else if (tokens && windows && *windows > 0) {
        row.context = *tokens / *windows + 1;
      }
      row.ratio = quality_memory_ratio(m);
      row.bits_per_value = quality_memory_bits(m);
      row.perplexity_change = number_at(m, "perplexity_change");
      row.perplexity_change_se = number_at(m, "perplexity_change_se");
      row.kl = number_at(m, "kl_mean");
      break;
    }
    case RunKind::Plan:
      row.context = number_at(m, "context");
      break;
    case RunKind::Bench:
      break;
    case RunKind::Needle:
      row.needle_kept = number_at(m, "accuracy");
      break;
    case RunKind::Stream:
    case RunKind::Generate:
      row.context = number_at(m, "tokens");
      row.ratio = number_at(m, "ratio");
      if (row.ratio && *row.ratio > 0) row.bits_per_value = 16.0 / *row.ratio;
      break;
  }
  return row;
}

Result<planners::Scheme> run_scheme(const RunRecord& run, std::string_view id) {
  const RunRow row = run_row(run);
  const auto kind = run_kind_from_id(run.kind);
  const bool measured = kind == RunKind::Compression || kind == RunKind::Quality ||
                        kind == RunKind::Eviction || kind == RunKind::Stream ||
                        kind == RunKind::Generate;
  if (!measured || !row.bits_per_value || !(*row.bits_per_value > 0)) {
    return make_error(fmt::format(
        "--scheme {}: run {} is a '{}' run without a measured bits per value; use a compression, "
        "eviction, stream, quality or generate run",
        id, run.id, run.kind));
  }
  return planners::measured_scheme(std::string(id), fmt::format("run {} ({})", run.id, run.method),
                                   *row.bits_per_value, run_kernel(run));
}

planners::SchemeKernel run_kernel(const RunRecord& run) {
  // The engine kernel that reads what the run's method stores (planners/latency.h).
  const std::string method = run.params.is_object() ? run.params.value("method", "") : "";
  if (method == "none" || method.empty()) {
    return is_run_kind(run.kind, RunKind::Eviction) ? planners::SchemeKernel::None
                                                    : planners::SchemeKernel::Packed;
  }
  if (method.rfind("fp8", 0) == 0 || method == "int8") return planners::SchemeKernel::Fp8;
  if (method == "kvcomp" && run.params.value("codec", "") == "huffman") {
    return planners::SchemeKernel::Huffman;
  }
  return planners::SchemeKernel::Packed;
}

}  // namespace kvlab
