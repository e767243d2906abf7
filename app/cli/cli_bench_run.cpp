// kvlab bench run: whole compression runs as a user starts them (issue 24, part 4). For each
// context the synthetic preset's layers are written to a .safetensors file a few layers at a
// time and read in place (as `kvlab compress --source file:PATH` does, so 128K fits in memory),
// then each method compresses all of them on every core. Beside each run, in the same program, a
// floor: the memory traffic no run can avoid (memory_floor_seconds: the source read once, the
// compressed bytes written once). Prints each run's wall time, its multiple of the floor and its
// peak resident memory. bench/run_bench.cpp is the Google Benchmark twin.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::cli {

namespace {

struct RunBenchOptions {
  std::vector<int> contexts{4096, 32768};
  std::vector<std::string> methods{"int8", "kivi-2", "kvcomp-huffman"};
  std::string preset = "llama3-8b";
  int layers = 0;
  std::string dir;  // where the sources are written; empty: the system's temporary folder
  std::vector<std::string> backends{"cpu"};
  bool in_memory = false;  // the source generated in memory rather than read from its file
  bool json = false;
};

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// Removes the source file however the run ends.
struct RemoveOnExit {
  std::filesystem::path path;
  ~RemoveOnExit() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
};

int run_bench(const RunBenchOptions& o) {
  std::vector<MethodConfig> methods;
  for (const std::string& id : o.methods) {
    auto m = run_bench_method(id);
    if (!m) return fail("--methods: " + m.message());
    methods.push_back(*m);
  }
  std::vector<std::unique_ptr<Backend>> backends;
  for (const std::string& id : o.backends) {
    auto b = make_backend(id);
    if (!b) return fail("--backends " + id + ": " + b.message());
    backends.push_back(std::move(*b));
  }
  const std::filesystem::path dir =
      o.dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(o.dir);
  const ProgressFn progress = terminal_progress(o.json);
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json) {
    fmt::print("{:>8} {:>16} {:>7} {:>9} {:>9} {:>8} {:>10} {:>8}  {}\n", "context", "method",
               "backend", "run s", "floor s", "x floor", "peak GiB", "ratio", "stages");
  }
  std::string device;
  for (const int context : o.contexts) {
    SyntheticConfig source;
    source.preset = o.preset;
    source.layers = o.layers;
    source.context = context;
    const RemoveOnExit file{dir /
                            fmt::format("kvlab-bench-run-{}-{}.safetensors", ::getpid(), context)};
    Result<KvCache> cache = make_error("no source");
    if (o.in_memory) {
      cache = generate_synthetic(
          source, with_stage_prefix(progress, fmt::format("{} tokens: generating ", context)));
    } else {
      if (auto s = save_synthetic_file(
              source, file.path,
              with_stage_prefix(progress, fmt::format("{} tokens: writing the source ", context)));
          !s) {
        return fail(s.message());
      }
      cache = load_cache_file(file.path);
    }
    if (!cache) return fail(cache.message());
    for (std::size_t i = 0; i < methods.size(); ++i) {
      for (const std::unique_ptr<Backend>& backend : backends) {
        auto report =
            compress_cache(*cache, methods[i],
                           with_stage_prefix(progress, fmt::format("{} tokens, {} on {}: ", context,
                                                                   o.methods[i], backend->id())),
                           backend.get());
        if (!report) return fail(report.message());
        const double floor = memory_floor_seconds(*cache, report->bytes.total());
        device = device.empty() || device == report->device ? report->device
                                                            : device + "; " + report->device;
        nlohmann::json stages = nlohmann::json::object();
        for (Stage stage : kStages) {
          const std::string& where = report->stage_backends[static_cast<std::size_t>(stage)];
          if (!where.empty()) stages[std::string(stage_id(stage))] = where;
        }
        const nlohmann::json row = {{"context", context},
                                    {"layers", cache->shape.layers},
                                    {"method", o.methods[i]},
                                    {"backend", backend->id()},
                                    {"device", report->device},
                                    {"stage_backends", stages},
                                    {"in_memory", o.in_memory},
                                    {"run_s", report->total_seconds},
                                    {"floor_s", floor},
                                    {"x_floor", report->total_seconds / floor},
                                    {"threads", report->threads},
                                    {"peak_bytes", report->memory_peak_bytes},
                                    {"device_peak_bytes", report->device_memory_peak_bytes},
                                    {"source_bytes", cache->stored_bytes()},
                                    {"compressed_bytes", report->bytes.total()},
                                    {"ratio", report->ratio},
                                    {"quantize_s", report->quantize_seconds},
                                    {"code_s", report->code_seconds},
                                    {"dequantize_s", report->dequantize_seconds},
                                    {"metrics_s", report->metrics_seconds}};
        rows.push_back(row);
        if (!o.json) {
          fmt::print("{:>8} {:>16} {:>7} {:>9.3f} {:>9.4f} {:>8.1f} {:>10.2f} {:>8.3f}  {}\n",
                     context, o.methods[i], backend->id(), report->total_seconds, floor,
                     report->total_seconds / floor, report->memory_peak_bytes / kGiB, report->ratio,
                     stage_summary(*report));
        }
      }
    }
  }
  if (o.json) {
    const nlohmann::json out = {
        {"preset", o.preset}, {"device", device}, {"threads", worker_threads()}, {"runs", rows}};
    fmt::print("{}\n", json_text(out, 2));
  } else {
    fmt::print(
        "\n{}. run: compress_cache's wall time over every layer ({}; quantize, code, "
        "dequantize, metrics, on the backend named); floor: the source read once and the "
        "compressed bytes written once, in the same program; peak: resident memory while "
        "compressing.\n",
        device, o.in_memory ? "source in memory" : "source read in place from its file");
  }
  return 0;
}

}  // namespace

void add_bench_run_command(CLI::App& bench) {
  auto o = std::make_shared<RunBenchOptions>();
  CLI::App* run = bench.add_subcommand(
      "run",
      "Time whole compression runs (every layer of a synthetic preset, written to a file and read "
      "in place) for each method and context, beside the memory floor measured in the same run");
  run->add_option("--contexts", o->contexts, "context lengths in tokens: N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  run->add_option("--methods", o->methods,
                  "int8, int4, kivi-2, kivi-4, fp8-e4m3, q4_0, nvfp4, kvcomp-huffman, "
                  "kvcomp-bitpack: M,M,...")
      ->delimiter(',')
      ->capture_default_str();
  run->add_option("--preset", o->preset, "synthetic preset")->capture_default_str();
  run->add_option("--layers", o->layers, "layers (0: the preset's)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  run->add_option("--dir", o->dir,
                  "folder for the source files, deleted after each context (default: the "
                  "system's temporary folder; 128K of llama3-8b takes 16 GiB)");
  run->add_option("--backends", o->backends,
                  "where the runs happen, each method on each in turn: cpu, cuda, auto: B,B,...")
      ->delimiter(',')
      ->capture_default_str();
  run->add_flag("--in-memory", o->in_memory,
                "generate each context's source in memory instead of writing it to a file and "
                "reading it in place (llama3-8b at 128K holds 16 GiB)");
  run->add_flag("--json", o->json, "print the measurements as JSON");
  run->callback([o] { exit_code() = run_bench(*o); });
}

}  // namespace kvlab::cli
