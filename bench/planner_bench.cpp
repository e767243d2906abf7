// A planner sweep of one million scenarios with the latency model (issue 21 target: at least a
// million scenarios per second on one core): Llama-3-70B at TP 8 over the first 10 built-in GPUs,
// 10 schemes (fp16, FP8, int8, int4, KIVI, KVComp, eviction, host offload), 100 contexts and 100
// batch sizes; memory, TTFT, TPOT and tokens/s per user and per GPU for each. Beside it, the same
// number of single quick_plan() calls, the path a sweep avoids. Bound by: arithmetic on a few
// numbers per scenario (the per-(GPU, scheme, context) work is done 10,000 times, not a million),
// and writing the million rows out.
#include <benchmark/benchmark.h>

#include "kvlab/planners/solvers.h"

namespace kvlab::planners {
namespace {

SweepSpec million() {
  SweepSpec s;
  s.model = find_model("llama-3-70b").value();
  s.deployment.tp = 8;
  s.gpus.assign(builtin_gpus().begin(), builtin_gpus().begin() + 10);
  for (const char* id : {"fp16", "fp8", "int8", "int4", "kivi2", "kivi4", "kvcomp",
                         "fp16+evict:0.25", "int4+evict:2048", "fp16+offload"}) {
    s.schemes.push_back(parse_scheme(id).value());
  }
  for (int i = 1; i <= 100; ++i) s.contexts.push_back(i * 81);
  for (int b = 1; b <= 100; ++b) s.batches.push_back(b * 4);
  return s;
}

void BM_SweepMillion(benchmark::State& state) {
  const SweepSpec spec = million();
  std::size_t rows = 0;
  for (auto _ : state) {
    auto r = sweep(spec);
    if (!r) {
      state.SkipWithError(r.message().c_str());
      return;
    }
    rows = r->size();
    benchmark::DoNotOptimize(r->data());
  }
  state.counters["scenarios"] = static_cast<double>(rows);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * rows));
}
BENCHMARK(BM_SweepMillion)->Unit(benchmark::kMillisecond)->MinTime(1.0);

void BM_QuickPlanMillion(benchmark::State& state) {
  const SweepSpec spec = million();
  Scenario s;
  s.model = spec.model;
  s.deployment = spec.deployment;
  std::size_t n = 0;
  for (auto _ : state) {
    n = 0;
    for (const auto& g : spec.gpus) {
      s.gpu = g;
      for (const auto& k : spec.schemes) {
        s.scheme = k;
        for (auto c : spec.contexts) {
          s.context = c;
          for (int b : spec.batches) {
            s.batch = b;
            benchmark::DoNotOptimize(quick_plan(s));
            ++n;
          }
        }
      }
    }
  }
  state.counters["scenarios"] = static_cast<double>(n);
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}
BENCHMARK(BM_QuickPlanMillion)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace kvlab::planners

BENCHMARK_MAIN();
