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
#include "kvlab/engine/core/threads.h"
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
  const std::filesystem::path dir =
      o.dir.empty() ? std::filesystem::temp_directory_path() : std::filesystem::path(o.dir);
  const ProgressFn progress = terminal_progress(o.json);
  nlohmann::json rows = nlohmann::json::array();
  if (!o.json) {
    fmt::print("{:>8} {:>16} {:>9} {:>9} {:>8} {:>10} {:>8}\n", "context", "method", "run s",
               "floor s", "x floor", "peak GiB", "ratio");
  }
  std::string device;
  for (const int context : o.contexts) {
    SyntheticConfig source;
    source.preset = o.preset;
    source.layers = o.layers;
    source.context = context;
    const RemoveOnExit file{dir /
                            fmt::format("kvlab-bench-run-{}-{}.safetensors", ::getpid(), context)};
    if (auto s =
            save_synthetic_file(source, file.path,
                                with_stage_prefix(progress, fmt::format("{} tokens: writing the "
                                                                        "source ",
                                                                        context)));
        !s) {
      return fail(s.message());
    }
    auto cache = load_cache_file(file.path);
    if (!cache) return fail(cache.message());
    for (std::size_t i = 0; i < methods.size(); ++i) {
      auto report = compress_cache(
          *cache, methods[i],
          with_stage_prefix(progress, fmt::format("{} tokens, {}: ", context, o.methods[i])));
      if (!report) return fail(report.message());
      const double floor = memory_floor_seconds(*cache, report->bytes.total());
      device = report->device;
      const nlohmann::json row = {{"context", context},
                                  {"layers", cache->shape.layers},
                                  {"method", o.methods[i]},
                                  {"run_s", report->total_seconds},
                                  {"floor_s", floor},
                                  {"x_floor", report->total_seconds / floor},
                                  {"threads", report->threads},
                                  {"peak_bytes", report->memory_peak_bytes},
                                  {"source_bytes", cache->stored_bytes()},
                                  {"compressed_bytes", report->bytes.total()},
                                  {"ratio", report->ratio},
                                  {"quantize_s", report->quantize_seconds},
                                  {"code_s", report->code_seconds},
                                  {"dequantize_s", report->dequantize_seconds},
                                  {"metrics_s", report->metrics_seconds}};
      rows.push_back(row);
      if (!o.json) {
        fmt::print("{:>8} {:>16} {:>9.3f} {:>9.4f} {:>8.1f} {:>10.2f} {:>8.3f}\n", context,
                   o.methods[i], report->total_seconds, floor, report->total_seconds / floor,
                   report->memory_peak_bytes / kGiB, report->ratio);
      }
    }
  }
  if (o.json) {
    const nlohmann::json out = {
        {"preset", o.preset}, {"device", device}, {"threads", worker_threads()}, {"runs", rows}};
    fmt::print("{}\n", out.dump(2));
  } else {
    fmt::print(
        "\n{}. run: compress_cache's wall time over every layer (source read in place from its "
        "file; quantize, code, metrics); floor: the source read once and the compressed bytes "
        "written once, in the same program; peak: resident memory while compressing.\n",
        device);
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
                  "int8, int4, kivi-2, kivi-4, kvcomp-huffman, kvcomp-bitpack: M,M,...")
      ->delimiter(',')
      ->capture_default_str();
  run->add_option("--preset", o->preset, "synthetic preset")->capture_default_str();
  run->add_option("--layers", o->layers, "layers (0: the preset's)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  run->add_option("--dir", o->dir,
                  "folder for the source files, deleted after each context (default: the "
                  "system's temporary folder; 128K of llama3-8b takes 16 GiB)");
  run->add_flag("--json", o->json, "print the measurements as JSON");
  run->callback([o] { exit_code() = run_bench(*o); });
}

}  // namespace kvlab::cli
