// A whole run, as a user starts it (issue 24): the synthetic llama3-8b preset's 32 layers at a
// context, compressed with int8, KIVI-2 and KVComp + Huffman on every core, beside a floor
// measured in the same program: memcpy of the bytes a run must at least move (read the fp16
// source once, write the compressed bytes once). bench/run_report.py prints each run as a
// multiple of its floor (target: 32K in <= 10 s and <= 5x the floor on 2 cores).
//
// Also the synthetic generator alone, on one thread, in fp16 bytes per second (target: >= 1 GB/s
// per core).
//
// Contexts: KVLAB_RUN_CONTEXTS (comma-separated, default 4096,32768); the source of a context
// is generated once and kept while its runs are timed.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/quant/compress.h"
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

// The source of the newest context asked for (one at a time: 32K is 4 GiB).
const KvCache& cache(int context) {
  static int held = -1;
  static std::unique_ptr<KvCache> c;
  if (held != context) {
    c.reset();
    auto r = generate_synthetic(source_config(context));
    if (!r) {
      std::fprintf(stderr, "run bench: %s\n", r.message().c_str());
      std::exit(1);
    }
    c = std::make_unique<KvCache>(std::move(*r));
    held = context;
  }
  return *c;
}

MethodConfig method(const std::string& id) {
  MethodConfig m;
  if (id == "int8") m.kind = MethodKind::Int8;
  if (id == "kivi-2") m.kind = MethodKind::Kivi;
  if (id == "kvcomp-huffman") {
    m.kind = MethodKind::KvComp;
    m.codec = CodecKind::Huffman;
  }
  return m;
}

// Seconds to read every byte of the fp16 source once (a sum of its 64-bit words) and write
// `write` bytes (the run's compressed size, memset), spread over the cores as the run's layers
// are: the memory traffic no run can avoid.
double floor_seconds(const KvCache& c, std::uint64_t write) {
  std::vector<const Tensor*> tensors;
  for (const LayerKv& l : c.layers) tensors.insert(tensors.end(), {&l.key, &l.value});
  const double share = static_cast<double>(write) / static_cast<double>(c.values_count() * 2);
  const auto start = std::chrono::steady_clock::now();
  const Status s = for_each_item(
      static_cast<int>(tensors.size()), {}, "tensor", [&](int i, ItemProgress&) -> Status {
        const Tensor& t = *tensors[static_cast<std::size_t>(i)];
        const auto* words = reinterpret_cast<const std::uint64_t*>(t.data());
        std::uint64_t sum = 0;
        for (std::size_t w = 0; w < t.nbytes() / 8; ++w) sum += words[w];
        benchmark::DoNotOptimize(sum);
        const auto out_bytes = static_cast<std::size_t>(static_cast<double>(t.nbytes()) * share);
        const std::unique_ptr<char[]> out(new char[out_bytes]);
        std::memset(out.get(), 1, out_bytes);
        benchmark::DoNotOptimize(out.get());
        benchmark::ClobberMemory();
        return Ok{};
      });
  (void)s;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_Run(benchmark::State& state, const std::string& id) {
  const int context = static_cast<int>(state.range(0));
  const KvCache& c = cache(context);
  const MethodConfig m = method(id);
  double run = 0, floor = 0;
  CompressionReport last;
  for (auto _ : state) {
    auto r = compress_cache(c, m);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    state.SetIterationTime(r->total_seconds);
    run += r->total_seconds;
    floor += floor_seconds(c, r->bytes.total());
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
