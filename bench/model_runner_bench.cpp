// The Llama runner on the real stories260K weights (issue 6): prefill of a 256-token prompt in
// one batch and decode of the same 256 tokens one at a time, beside Eigen GEMMs of exactly the
// runner's matrix products in the same run: forward_matmul_shapes() lists them (projections,
// MLP, attention's scores and weighted values in the runner's causal blocks, the classifier).
// bench/model_runner_report.py prints tokens/s and the share the issue asks for: the time Eigen
// needs for the runner's products over the time the runner needs for its whole forward, i.e. the
// runner's FLOP rate on its products as a share of Eigen's (target: at least 50%). Skipped when
// ../shared/models is absent.
#include <benchmark/benchmark.h>

#include <Eigen/Dense>
#include <algorithm>
#include <filesystem>

#include "kvlab/engine/model/llama_model.h"

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

// The products of a 256-token prefill (weights_only: the projections, MLP and classifier alone,
// the definition of earlier reports), or of decoding the 256 tokens one at a time.
std::vector<MatmulShape> prefill_shapes(bool weights_only) {
  auto shapes = forward_matmul_shapes(model()->config(), 0, kPrompt);
  if (weights_only) {  // the four weight shapes come first, the classifier last
    const MatmulShape classifier = shapes.back();
    shapes.resize(4);
    shapes.push_back(classifier);
  }
  return shapes;
}
std::vector<MatmulShape> decode_shapes() {
  std::vector<MatmulShape> all;
  for (int pos = 0; pos < kPrompt; ++pos) {
    const auto step = forward_matmul_shapes(model()->config(), pos, 1);
    all.insert(all.end(), step.begin(), step.end());
  }
  return all;
}

double flops(const std::vector<MatmulShape>& shapes) {
  double f = 0;
  for (const auto& s : shapes) f += s.flops();
  return f;
}

void BM_Prefill(benchmark::State& state) {
  if (!model()) return state.SkipWithError("stories260K is absent");
  const auto tokens = prompt();
  for (auto _ : state) {
    auto s = model()->new_state();
    benchmark::DoNotOptimize(model()->forward(s, tokens));
  }
  state.SetItemsProcessed(state.iterations() * kPrompt);
  state.counters["matmul_flops"] = flops(prefill_shapes(false));
  state.counters["weight_matmul_flops"] = flops(prefill_shapes(true));
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
  state.counters["matmul_flops"] = flops(decode_shapes());
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

// Eigen products of the given shapes, in order, each `count` times: C = A · Bᵀ (or A · B), every
// operand a map over one buffer per role (as the runner maps its scratch, weights and cache), so
// the operands stay in cache between products: if anything, this favours the baseline.
void run_gemms(benchmark::State& state, const std::vector<MatmulShape>& shapes) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::size_t a_size = 0, b_size = 0, c_size = 0;
  for (const auto& s : shapes) {
    a_size = std::max(a_size, std::size_t(s.rows) * s.depth);
    b_size = std::max(b_size, std::size_t(s.depth) * s.cols);
    c_size = std::max(c_size, std::size_t(s.rows) * s.cols);
  }
  Eigen::VectorXf a = Eigen::VectorXf::Random(static_cast<Eigen::Index>(a_size));
  Eigen::VectorXf b = Eigen::VectorXf::Random(static_cast<Eigen::Index>(b_size));
  Eigen::VectorXf c = Eigen::VectorXf::Zero(static_cast<Eigen::Index>(c_size));
  for (auto _ : state) {
    for (const auto& s : shapes) {
      const Eigen::Map<const M> lhs(a.data(), s.rows, s.depth);
      Eigen::Map<M> out(c.data(), s.rows, s.cols);
      for (int i = 0; i < s.count; ++i) {
        if (s.rhs_transposed) {
          out.noalias() = lhs * Eigen::Map<const M>(b.data(), s.cols, s.depth).transpose();
        } else {
          out.noalias() = lhs * Eigen::Map<const M>(b.data(), s.depth, s.cols);
        }
        benchmark::DoNotOptimize(c.data());
      }
    }
  }
  state.counters["matmul_flops"] = flops(shapes);
}

// Arg 0: every product of the prefill; arg 1: the weight products alone.
void BM_PrefillGemms(benchmark::State& state) {
  if (!model()) return state.SkipWithError("stories260K is absent");
  run_gemms(state, prefill_shapes(state.range(0) == 1));
}
BENCHMARK(BM_PrefillGemms)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

void BM_DecodeGemms(benchmark::State& state) {
  if (!model()) return state.SkipWithError("stories260K is absent");
  run_gemms(state, decode_shapes());
}
BENCHMARK(BM_DecodeGemms)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kvlab::bench

BENCHMARK_MAIN();
