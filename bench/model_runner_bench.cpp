// The Llama runner on the real stories260K weights (issue 6): prefill of a 256-token prompt in
// one batch and decode one token at a time, beside Eigen GEMMs of exactly the runner's matrix
// products (the same shapes in the same order, weights read from the same mapped file) in the
// same run. bench/model_runner_report.py prints tokens/s and the runner's matrix-product GFLOP/s
// as a share of the GEMMs' (target: at least 50%). Skipped when ../shared/models is absent.
#include <benchmark/benchmark.h>

#include <Eigen/Dense>
#include <filesystem>

#include "kvlab/engine/llama_model.h"

namespace kvlab::bench {
namespace {

const std::string kModel = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";
constexpr int kPrompt = 256;

const LlamaModel* model() {
  static const auto m = [] {
    auto r = LlamaModel::load_llama2c(kModel);
    return r ? std::make_unique<LlamaModel>(std::move(*r)) : nullptr;
  }();
  return m.get();
}

std::vector<int> prompt() {
  std::vector<int> t(kPrompt);
  for (int i = 0; i < kPrompt; ++i) t[i] = 3 + (i * 37) % 500;
  return t;
}

// Multiply-adds × 2 of the runner's matrix products for `n` tokens (projections, MLP, classifier
// for the last token).
double matmul_flops(const LlamaConfig& c, int n) {
  const double D = c.dim, KV = c.kv_dim(), F = c.hidden_dim;
  return 2.0 * n * c.layers * (2 * D * D + 2 * KV * D + 3 * F * D) + 2.0 * c.vocab * D;
}

void BM_Prefill(benchmark::State& state) {
  if (!model()) return state.SkipWithError("stories260K is absent");
  const auto tokens = prompt();
  for (auto _ : state) {
    auto s = model()->new_state();
    benchmark::DoNotOptimize(model()->forward(s, tokens));
  }
  state.SetItemsProcessed(state.iterations() * kPrompt);
  state.counters["matmul_flops"] = matmul_flops(model()->config(), kPrompt);
}
BENCHMARK(BM_Prefill)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& state) {
  if (!model()) return state.SkipWithError("stories260K is absent");
  const auto tokens = prompt();
  for (auto _ : state) {
    auto s = model()->new_state();
    for (int t : tokens) benchmark::DoNotOptimize(model()->forward(s, {t}));
  }
  state.SetItemsProcessed(state.iterations() * kPrompt);
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

// The prefill's matrix products alone, with Eigen, same shapes and count.
void BM_PrefillGemms(benchmark::State& state) {
  if (!model()) return state.SkipWithError("stories260K is absent");
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const LlamaConfig& c = model()->config();
  const int D = c.dim, KV = c.kv_dim(), F = c.hidden_dim;
  const M x = M::Random(kPrompt, D), h = M::Random(kPrompt, F);
  const M wd = M::Random(D, D), wkv = M::Random(KV, D), wf = M::Random(F, D), wdf = M::Random(D, F);
  const M cls = M::Random(c.vocab, D);
  M out_d(kPrompt, D), out_kv(kPrompt, KV), out_f(kPrompt, F);
  Eigen::VectorXf logits(c.vocab);
  for (auto _ : state) {
    for (int l = 0; l < c.layers; ++l) {
      out_d.noalias() = x * wd.transpose();
      out_kv.noalias() = x * wkv.transpose();
      out_kv.noalias() = x * wkv.transpose();
      out_d.noalias() += x * wd.transpose();
      out_f.noalias() = x * wf.transpose();
      out_f.noalias() = x * wf.transpose();
      out_d.noalias() += h * wdf.transpose();
    }
    logits.noalias() = cls * x.row(0).transpose();
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["matmul_flops"] = matmul_flops(c, kPrompt);
}
BENCHMARK(BM_PrefillGemms)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvlab::bench

BENCHMARK_MAIN();
