// A whole run, as a user starts it (issue 24): the synthetic llama3-8b preset's 32 layers at a
// context, written to a .safetensors file layer by layer and read in place as
// `kvlab compress --source file:PATH` does, compressed with int8, KIVI-2 and KVComp + Huffman on
// every core, beside a floor measured in the same program (memory_floor_seconds: the source read
// once, the compressed bytes written once). Each run's counters give it as a multiple of its
// floor (x_floor; target: 32K in <= 10 s and <= 5x the floor on 2 cores) and its peak resident
// memory (peak_GiB). `kvlab bench run` is the same measurement for a user without a build tree.
//
// Also the synthetic generator alone, on one thread, in fp16 bytes per second (target: >= 1 GB/s
// per core).
//
// Contexts: KVLAB_RUN_CONTEXTS (comma-separated, default 4096,32768; 131072 writes a 16 GiB file);
// the files go to KVLAB_RUN_DIR (default: the system's temporary folder) and are deleted when
// the next context starts and at exit.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::bench {
namespace {

SyntheticConfig source_config(int context, int layers = 0) {
  SyntheticConfig s;
  s.preset = "llama3-8b";
  s.context = context;
  s.layers = layers;
  return s;
}

std::filesystem::path source_dir() {
  const char* env = std::getenv("KVLAB_RUN_DIR");
  return env && *env ? std::filesystem::path(env) : std::filesystem::temp_directory_path();
}

// The source of the newest context asked for, one at a time (128K is 16 GiB): written to a file,
// then mapped.
const KvCache& cache(int context) {
  static int held = -1;
  static std::unique_ptr<KvCache> c;
  static std::filesystem::path file;
  static const struct Cleanup {
    ~Cleanup() {
      c.reset();
      if (!file.empty()) std::filesystem::remove(file);
    }
  } cleanup;
  if (held != context) {
    c.reset();
    if (!file.empty()) std::filesystem::remove(file);
    file = source_dir() / fmt::format("kvlab-run-bench-{}-{}.safetensors", ::getpid(), context);
    auto loaded = [&]() -> Result<KvCache> {
      KVLAB_TRY(save_synthetic_file(source_config(context), file));
      return load_cache_file(file);
    }();
    if (!loaded) {
      std::fprintf(stderr, "run bench: %s\n", loaded.message().c_str());
      std::exit(1);
    }
    c = std::make_unique<KvCache>(std::move(*loaded));
    held = context;
  }
  return *c;
}

void BM_Run(benchmark::State& state, const std::string& id) {
  const int context = static_cast<int>(state.range(0));
  const KvCache& c = cache(context);
  const auto m = run_bench_method(id);
  if (!m) {
    state.SkipWithError(m.message().c_str());
    return;
  }
  double run = 0, floor = 0;
  CompressionReport last;
  for (auto _ : state) {
    auto r = compress_cache(c, *m);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    state.SetIterationTime(r->total_seconds);
    run += r->total_seconds;
    floor += memory_floor_seconds(c, r->bytes.total());
    last = std::move(*r);
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["run_s"] = run / n;
  state.counters["floor_s"] = floor / n;
  state.counters["x_floor"] = run / floor;
  state.counters["threads"] = last.threads;
  state.counters["quantize_s"] = last.quantize_seconds;
  state.counters["code_s"] = last.code_seconds;
  state.counters["metrics_s"] = last.metrics_seconds;
  state.counters["fp16_GiB"] = static_cast<double>(c.values_count() * 2) / (1ull << 30);
  state.counters["peak_GiB"] = static_cast<double>(last.memory_peak_bytes) / (1ull << 30);
}

// The generator on one thread: one layer of llama3-8b at 32K (64 MiB of fp16 K and V).
void BM_SyntheticOneThread(benchmark::State& state) {
  const auto limit = limit_threads(1);
  const SyntheticConfig s = source_config(32768, 1);
  std::uint64_t bytes = 0;
  for (auto _ : state) {
    auto r = generate_synthetic(s);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    bytes += r->values_count() * 2;
    benchmark::DoNotOptimize(r->layers[0].key.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_SyntheticOneThread)->Unit(benchmark::kMillisecond)->MinTime(1.0);

std::vector<int> contexts() {
  std::vector<int> out;
  const char* env = std::getenv("KVLAB_RUN_CONTEXTS");
  std::stringstream in(env && *env ? env : "4096,32768");
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

const bool registered = [] {
  for (int context : contexts()) {
    for (const char* id : {"int8", "kivi-2", "kvcomp-huffman"}) {
      benchmark::RegisterBenchmark((std::string("BM_Run/") + id).c_str(), BM_Run, std::string(id))
          ->Arg(context)
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kSecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace kvlab::bench

BENCHMARK_MAIN();
