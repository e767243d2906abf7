// The eviction simulator against the matrix product it is built on (issue 4): every policy
// (issue 23) over the synthetic llama3-8b preset, all 32 layers, a 4K prompt and 256 decode steps
// (the targets: under a minute on 2 cores, interactive), beside Eigen single-precision GEMMs of the
// simulator's own shape (rows = 256 steps × 4 query heads of a group, inner = head_dim 128, columns
// = 4352 tokens), run on every core as the simulator runs, in the same program. Both report GFLOP/s
// of matrix-product work; bench/eviction_report.py prints the ratio (target: the simulator at ≥ 50%
// of the GEMM).
#include <benchmark/benchmark.h>

#include <Eigen/Dense>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::bench {
namespace {

constexpr int kPrompt = 4096;
constexpr int kSteps = 256;

const KvCache& cache() {
  static const KvCache c = [] {
    SyntheticConfig s;
    s.preset = "llama3-8b";
    s.context = kPrompt + kSteps;
    s.queries = kSteps;
    auto r = generate_synthetic(s);
    if (!r) {
      std::fprintf(stderr, "eviction bench: %s\n", r.message().c_str());
      std::exit(1);
    }
    return std::move(*r);
  }();
  return c;
}

// One simulation of `policy` at a 20% budget (ThinK: 20% of the key channels; MiniCache: no
// budget), timed by its own clock.
void BM_Eviction(benchmark::State& state, EvictionPolicy policy) {
  const KvCache& c = cache();
  EvictionConfig config;
  config.policy = policy;
  config.budget = Budget{0.2, true};
  config.key_channels = 0.2;
  config.steps = kSteps;
  double flops = 0, seconds = 0;
  for (auto _ : state) {
    auto r = simulate_eviction(c, config);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    flops += r->matmul_flops;
    seconds += r->seconds;
    state.SetIterationTime(r->seconds);
  }
  state.counters["gflops"] = flops / seconds / 1e9;
  state.counters["seconds"] = seconds / static_cast<double>(state.iterations());
  state.counters["threads"] = std::max(1u, std::thread::hardware_concurrency());
}

// Every policy, as BM_Eviction/<id>: --benchmark_filter picks some.
const bool kRegistered = [] {
  for (const auto id : eviction_policy_ids()) {
    const EvictionPolicy p = parse_eviction_policy(id).value();
    benchmark::RegisterBenchmark(("BM_Eviction/" + std::string(id)).c_str(),
                                 [p](benchmark::State& s) { BM_Eviction(s, p); })
        ->Unit(benchmark::kSecond)
        ->UseManualTime()
        ->Iterations(1);
  }
  return true;
}();

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// One thread per core, each multiplying its own matrices of the simulator's shape: the logits
// product (rows × dim) · (dim × tokens), as the simulator does per KV head.
void BM_EigenGemm(benchmark::State& state) {
  const int rows = kSteps * 4, dim = 128, cols = kPrompt + kSteps;
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<RowMatrix> a(threads), b(threads), out(threads);
  for (unsigned t = 0; t < threads; ++t) {
    a[t] = RowMatrix::Random(rows, dim);
    b[t] = RowMatrix::Random(cols, dim);
  }
  const int reps = 8;
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (unsigned t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < reps; ++i) out[t].noalias() = a[t] * b[t].transpose();
      });
    }
    for (auto& th : pool) th.join();
    benchmark::DoNotOptimize(out[0].data());
  }
  const double flops = 2.0 * rows * dim * cols * reps * threads;
  state.counters["gflops"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = threads;
}
BENCHMARK(BM_EigenGemm)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);

}  // namespace
}  // namespace kvlab::bench

BENCHMARK_MAIN();
