// Quantize and dequantize throughput of every method, in GB/s of fp16 input, on one layer's
// keys and values shaped like Llama-3-8B (4096 tokens x 8 KV heads x 128) from the synthetic
// source. The fp16 -> float conversion alone runs beside them as the floor every method pays.
// bench/quantizer_report.py turns the JSON output into the table in docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <cmath>

#include <vector>

#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"
#include "quant/kvquant_quantizer.h"

namespace {

const kvlab::KvCache& cache() {
  static const kvlab::KvCache c = [] {
    kvlab::SyntheticConfig s;
    s.preset = "llama3-8b";
    s.layers = 1;
    s.context = 4096;
    return std::move(*kvlab::generate_synthetic(s));
  }();
  return c;
}

const kvlab::Tensor& tensor(kvlab::TensorRole role) {
  const auto& l = cache().layers[0];
  return role == kvlab::TensorRole::Key ? l.key : l.value;
}

kvlab::MethodConfig config(int index) {
  kvlab::MethodConfig c;
  c.kind = *kvlab::parse_method(kvlab::method_ids()[index]);
  return c;
}

void set_label(benchmark::State& state, kvlab::TensorRole role) {
  state.SetLabel(std::string(kvlab::method_ids()[state.range(0)]) + "/" + kvlab::role_name(role));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(tensor(role).elements() * 2));
}

void BM_Quantize(benchmark::State& state) {
  const auto role = static_cast<kvlab::TensorRole>(state.range(1));
  auto q = kvlab::make_quantizer(config(static_cast<int>(state.range(0))));
  const kvlab::TensorView x = tensor(role).view();
  for (auto _ : state) {
    auto r = (*q)->quantize(x, role);
    benchmark::DoNotOptimize(r);
  }
  set_label(state, role);
}

// Methods away from their registry defaults whose speed differs: TurboQuant with its QJL bit and
// with the randomized Hadamard instead of the random orthogonal rotation.
struct Variant {
  const char* label;
  kvlab::MethodConfig config;
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = [] {
    kvlab::MethodConfig qjl;
    qjl.kind = kvlab::MethodKind::TurboQuant;
    qjl.bits = 3;
    qjl.qjl = true;
    kvlab::MethodConfig hadamard;
    hadamard.kind = kvlab::MethodKind::TurboQuant;
    hadamard.rotation = kvlab::RotationKind::Hadamard;
    return std::vector<Variant>{{"turboquant-3 qjl", qjl}, {"turboquant-2 hadamard", hadamard}};
  }();
  return v;
}

void BM_QuantizeVariant(benchmark::State& state) {
  const auto role = static_cast<kvlab::TensorRole>(state.range(1));
  const Variant& v = variants()[static_cast<std::size_t>(state.range(0))];
  auto q = kvlab::make_quantizer(v.config);
  const kvlab::TensorView x = tensor(role).view();
  for (auto _ : state) {
    auto r = (*q)->quantize(x, role);
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel(std::string(v.label) + "/" + kvlab::role_name(role));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(tensor(role).elements() * 2));
}

void BM_Dequantize(benchmark::State& state) {
  const auto role = static_cast<kvlab::TensorRole>(state.range(1));
  auto q = kvlab::make_quantizer(config(static_cast<int>(state.range(0))));
  const auto packed = (*q)->quantize(tensor(role).view(), role);
  std::vector<float> out(tensor(role).elements());
  for (auto _ : state) {
    (*q)->dequantize(*packed, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_label(state, role);
}

// The floor: converting the fp16 input to float, which every quantizer does first.
void BM_Fp16ToFloat(benchmark::State& state) {
  const kvlab::Tensor& t = tensor(kvlab::TensorRole::Key);
  std::vector<float> out(t.elements());
  for (auto _ : state) {
    kvlab::convert_to_float(t.dtype(), {t.data(), t.nbytes()}, out);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(t.elements() * 2));
}

// KVQuant's two steps apart: the offline calibration (levels by k-means, key thresholds) on the
// tensor's first 512 tokens, and the online quantization with that calibration, which is what
// the 1 GB/s target is about (BM_Quantize's kvquant rows calibrate inside every call).
void BM_KvQuantCalibrate(benchmark::State& state) {
  const auto role = static_cast<kvlab::TensorRole>(state.range(1));
  kvlab::detail::KvQuantConfig c;
  c.bits = static_cast<int>(state.range(0));
  c.calibration_tokens = 512;
  const auto q = kvlab::detail::make_kvquant_quantizer(c);
  const kvlab::TensorView x = tensor(role).view();
  for (auto _ : state) {
    auto cal = q->calibrate(x, role);
    benchmark::DoNotOptimize(cal);
  }
  state.SetLabel("kvquant-" + std::to_string(c.bits) + " calibrate 512 tokens/" +
                 kvlab::role_name(role));
}

// Third argument 1: keys arrive post-RoPE (Llama-3's theta 500000 over the head) and are turned
// back before quantizing, as `kvlab compress` does for a model's cache.
void BM_KvQuantOnline(benchmark::State& state) {
  const auto role = static_cast<kvlab::TensorRole>(state.range(1));
  kvlab::detail::KvQuantConfig c;
  c.bits = static_cast<int>(state.range(0));
  c.calibration_tokens = 512;
  const bool rope = state.range(2) != 0;
  if (rope) {
    const int dim = tensor(role).dim();
    c.rope.rotary_dims = dim;
    for (int i = 0; i < dim / 2; ++i)
      c.rope.frequencies.push_back(std::pow(500000.0, -2.0 * i / dim));
  }
  const auto q = kvlab::detail::make_kvquant_quantizer(c);
  const kvlab::TensorView x = tensor(role).view();
  const auto cal = q->calibrate(x, role);
  for (auto _ : state) {
    auto r = q->quantize(x, role, *cal);
    benchmark::DoNotOptimize(r);
  }
  state.SetLabel("kvquant-" + std::to_string(c.bits) + " online" + (rope ? " pre-RoPE" : "") + "/" +
                 kvlab::role_name(role));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(tensor(role).elements() * 2));
}

void kvquant_args(benchmark::internal::Benchmark* b) {
  for (int bits : {2, 3, 4}) {
    for (int role = 0; role < 2; ++role) b->Args({bits, role});
  }
}

void kvquant_online_args(benchmark::internal::Benchmark* b) {
  for (int bits : {2, 3, 4}) {
    for (int role = 0; role < 2; ++role) b->Args({bits, role, 0});
    b->Args({bits, 0, 1});  // keys turned back from RoPE first
  }
}

void methods(benchmark::internal::Benchmark* b) {
  for (int m = 0; m < static_cast<int>(kvlab::method_ids().size()); ++m) {
    for (int role = 0; role < 2; ++role) b->Args({m, role});
  }
}

}  // namespace

BENCHMARK(BM_Fp16ToFloat)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Quantize)->Apply(methods)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QuantizeVariant)->ArgsProduct({{0, 1}, {0, 1}})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Dequantize)->Apply(methods)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_KvQuantCalibrate)->Apply(kvquant_args)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_KvQuantOnline)->Apply(kvquant_online_args)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
