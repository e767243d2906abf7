// Run records in one place: for each kind of run, the one function that turns an engine or
// planner result into the run the store keeps (used by the command line and the app alike), and
// the functions that read a stored run back as the numbers every view shows (the CLI's
// `runs list/show`, the HTML report, the app's Runs page) with one way of writing each unit.
// No Qt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/model/model_needle.h"
#include "kvlab/engine/model/model_quality.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/planners/kv_memory.h"
#include "kvlab/planners/solvers.h"
#include "kvlab/store/runs_store.h"

namespace kvlab {

enum class RunKind { Compression, Eviction, Quality, Plan, Stream, Bench, Needle, Generate };

// The id stored in the kind column: "compression", "eviction", "quality", "plan", "stream",
// "bench", "needle", "generate".
std::string_view run_kind_id(RunKind kind);
std::optional<RunKind> run_kind_from_id(std::string_view id);
// Whether a stored kind string is `kind` (the one way code asks what kind a run is).
inline bool is_run_kind(std::string_view id, RunKind kind) {
  return run_kind_from_id(id) == kind;
}

// The artifacts the builders store, by name, for those who read them back.
inline constexpr const char* kHistogramsArtifact = "histograms";     // compression
inline constexpr const char* kStreamArtifact = "stream";             // compression, stream
inline constexpr const char* kEvictionMapArtifact = "eviction_map";  // eviction

// ---- Results into runs ------------------------------------------------------------------

// `label` empty: the method's own label. `stream`: the streaming chart's data, when there is one.
NewRun compression_run(const CompressionReport& report, const std::string& label = {},
                       const nlohmann::json* stream = nullptr);

// `source`: how the source was given (the CLI's --source as JSON), kept in the params.
NewRun eviction_run(const EvictionReport& report, const std::string& label = {},
                    const nlohmann::json& source = {});

struct QualityRunContext {
  std::string model;  // the model's path as the user gave it
  std::string text;   // "file:PATH" or "sampled:N tokens, seed S"
  int window = 0;     // tokens per window as asked (0: the model's context)
  std::string label;
};
// Stores the report's numbers and, with eviction, what the cache really held: memory_ratio and
// memory_bits_per_value count the kept fraction (a policy keeping half the tokens halves the
// memory), so a run with eviction is not shown as 1× / 16 bits.
NewRun quality_run(const QualityReport& report, const QualityConfig& config,
                   const QualityRunContext& context);

// Passkey retrieval (kvlab quality --needle --save): the cells and the accuracy, with the
// eviction policy's id and budget in the params (the Quality view draws accuracy against budget).
NewRun needle_run(const NeedleReport& report, const NeedleConfig& config, const std::string& model,
                  const std::string& label = {});

struct PlanRunContext {
  std::vector<std::string> scheme_ids;  // as the user named them (run:ID included)
  double reserve_gib = 0;
  std::string evict;  // the app's eviction budget choice, empty from the command line
  std::string label;
};
NewRun plan_run(const planners::Scenario& scenario,
                const std::vector<std::pair<planners::Scheme, planners::PlanResult>>& results,
                const PlanRunContext& context);

NewRun stream_run(const StreamReport& report, const StreamConfig& config,
                  const std::string& label = {});

// One greedy generation from a cache held in a stored form (kv_store.h), as `kvlab generate` and
// the app's Generate tab measure it.
struct GenerateMeasurement {
  std::string model;
  std::vector<int> prompt_ids, generated_ids;
  std::string text;  // the generated tokens' text
  double prefill_seconds = 0, decode_seconds = 0;
  int prefill_batch = 0;  // prompt tokens per forward pass (0: the whole prompt in one)
  int decode_steps = 0;   // decode forwards: every generated token but the last
  int threads = 0;
  std::string cache;  // the store's label: "fp16", "q4_0", "float32" (the runner's own)
  std::uint64_t cache_bytes = 0, fp16_bytes = 0;
  std::uint64_t peak_resident_bytes = 0;  // 0: not measured (the app shares its process)
  // Where the decode steps' attention ran (KvStore::decode_attention: "cpu", "cuda (...)") and
  // the bytes of its copy of the cache there (0: none, the store's own rows were read).
  std::string decode_attention = "cpu";
  std::uint64_t decode_copy_bytes = 0;
};
// What `kvlab generate --json` prints for `run`, beside the same prompt's fp16 run when there is
// one: speeds, the cache's bytes, greedy agreement with fp16 and the decode speed against it.
nlohmann::json generate_result(const GenerateMeasurement& run,
                               const GenerateMeasurement* fp16 = nullptr);

// kvlab generate --save: a real model generating from a cache held in a method's stored form
// (kv_store.h). `result` is what `kvlab generate --json` prints (the speeds, the cache's bytes,
// the peak memory, and with --compare the fp16 run's); `method`: none for the fp16 store.
NewRun generate_run(const nlohmann::json& result, const std::optional<MethodConfig>& method,
                    const std::string& label = {});

// ---- Runs into numbers ------------------------------------------------------------------

// How a number is written, the same in the CLI, the HTML report and the app.
enum class MetricFormat {
  Ratio,          // 4.94×
  Bits,           // 3.24
  Percent,        // a fraction: 0.0123 -> 1.23 %
  SignedPercent,  // a change: 7.207 -> +721 %
  Number,         // three significant digits: 0.0123, 1.2e-05
  Nats,           // a KL divergence: three significant digits and "nats"
  Decibels,       // 24.1 dB
  Bytes,          // 1.5 MiB
  Count,          // 8192
  Seconds,        // 840 ms, 12.34 s
};
std::string format_metric_value(double value, MetricFormat format);

struct RunMetric {
  std::string key;   // where it is in the metrics JSON: "error.mse", "perplexity_change"
  std::string name;  // what a person reads: "perplexity change"
  double value = 0;
  MetricFormat format = MetricFormat::Number;
  std::string text() const { return format_metric_value(value, format); }
};
// Every stored metric of the run's kind that the run has, in reading order.
std::vector<RunMetric> run_metrics(const RunSummary& run);

// The columns every runs table shows; a number a run of its kind does not have is empty (a
// quality run has no attention error, a plan no ratio), never a made-up zero.
struct RunRow {
  std::int64_t id = 0;
  std::string created_at, kind, source, method, label;
  std::optional<double> context;  // tokens: the cache's length, a quality window, a plan's context
  std::optional<double> ratio;    // memory against the fp16 cache, eviction included
  std::optional<double> bits_per_value;
  std::optional<double> error;  // attention output relative error
  std::optional<double> perplexity_change;
  std::optional<double> perplexity_change_se;  // its standard error, where the run stored one
  std::optional<double> kl;                    // nats
  std::optional<double> needle_kept;           // fraction of KV heads that kept the needle
};
RunRow run_row(const RunSummary& run);

// A stored run as a planner scheme (`--scheme run:ID`): the bits per value it measured, with
// eviction counted. `id` is how the user named it. An error says why a run cannot be one.
Result<planners::Scheme> run_scheme(const RunRecord& run, std::string_view id);
// The engine kernel that would read what the run's method stores, for the latency model.
planners::SchemeKernel run_kernel(const RunRecord& run);

}  // namespace kvlab
