// The GPU engine against the CPU engine (issue 44): every method's GPU quantizer gives the CPU
// quantizer's bytes (codes, parameters, residual, bounds, byte counts, histograms) on odd shapes
// and every source dtype, and a whole run on the GPU (Backend::run_layers) gives the CPU's report:
// the same bytes and codec sizes exactly, the errors within the tolerances stated below. Without
// a usable GPU every test here reports SKIPPED.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/synthetic.h"
#include "kvlab/kernels/cuda_backend.h"
#include "kvlab/kernels/gpu_kv.h"
#include "kvlab/kernels/gpu_quantize.h"

namespace kvlab {
namespace {

struct NamedMethod {
  std::string name;
  MethodConfig config;
};

MethodConfig method(MethodKind kind) {
  MethodConfig m;
  m.kind = kind;
  return m;
}

// Every method the engine ships, with the variants whose rules differ (parameter dtypes, scales
// per head, calibration, llama.cpp's rotation on and off).
std::vector<NamedMethod> all_methods() {
  std::vector<NamedMethod> out;
  const auto add = [&](std::string name, MethodConfig m) { out.push_back({std::move(name), m}); };
  add("int8", method(MethodKind::Int8));
  add("int4", method(MethodKind::Int4));
  for (int bits : {2, 4}) {
    MethodConfig m = method(MethodKind::Kivi);
    m.bits = bits;
    m.residual = 40;
    m.group_size = 32;
    add("kivi-" + std::to_string(bits), m);
    m.param_dtype = DType::BF16;
    add("kivi-" + std::to_string(bits) + " bf16", m);
    m.param_dtype = DType::F32;
    add("kivi-" + std::to_string(bits) + " f32", m);
  }
  {
    MethodConfig m = method(MethodKind::Tiered);
    m.residual = 16;
    m.int8_tokens = 64;
    m.group_size = 16;
    add("tiered", m);
  }
  for (double rel : {0.05, 0.1}) {
    MethodConfig m = method(MethodKind::KvComp);
    m.rel_scale = rel;
    m.block_size = 32;
    add("kvcomp " + std::to_string(rel), m);
    m.param_dtype = DType::F16;
    add("kvcomp f16 " + std::to_string(rel), m);
  }
  for (MethodKind k : {MethodKind::Fp8E4M3, MethodKind::Fp8E5M2}) {
    MethodConfig m = method(k);
    add(std::string(method_id(k)), m);
    m.per_head_scale = true;
    add(std::string(method_id(k)) + " per-head", m);
    m.calib_tokens = 48;
    add(std::string(method_id(k)) + " calibrated", m);
  }
  for (MethodKind k : {MethodKind::Q8_0, MethodKind::Q4_0, MethodKind::Q4_1, MethodKind::Q5_0,
                       MethodKind::Q5_1, MethodKind::IQ4_NL}) {
    MethodConfig m = method(k);
    add(std::string(method_id(k)), m);
    m.llama_rotation = false;
    add(std::string(method_id(k)) + " no-rot", m);
  }
  add("nvfp4", method(MethodKind::Nvfp4));
  add("mxfp4", method(MethodKind::Mxfp4));
  add("kvquant", method(MethodKind::KvQuant));
  {
    // KVQuant's other rules: NormalFloat levels, 2 and 4 bits, more outliers (values get a
    // sparse table at 3 x 64 entries a token), no outliers, and keys turned back before RoPE (a
    // partial rotary span, halves split; quantize() turns them back, dequantize() forward). The
    // 1-token shape is all sink.
    MethodConfig m = method(MethodKind::KvQuant);
    m.normal_float = true;
    m.bits = 2;
    add("kvquant-2 nf", m);
    m = method(MethodKind::KvQuant);
    m.bits = 4;
    m.outlier_fraction = 0.05;
    add("kvquant-4 5%", m);
    m.outlier_fraction = 0.0;
    add("kvquant-4 dense", m);
    m = method(MethodKind::KvQuant);
    m.key_rope.rotary_dims = 16;
    m.key_rope.half_split = true;
    m.key_rope.first_position = 3;
    for (int i = 0; i < 8; ++i) m.key_rope.frequencies.push_back(std::pow(10000.0, -i / 8.0));
    add("kvquant pre-rope", m);
  }
  add("turboquant", method(MethodKind::TurboQuant));
  for (bool hadamard : {false, true}) {
    for (auto [bits, qjl] : {std::pair{1, true}, {3, true}, {4, false}}) {
      MethodConfig m = method(MethodKind::TurboQuant);
      m.bits = bits;
      m.qjl = qjl;
      m.rotation = hadamard ? RotationKind::Hadamard : RotationKind::None;
      m.rotation_seed = 5;
      add("turboquant-" + std::to_string(bits) + (qjl ? " qjl" : "") +
              (hadamard ? " hadamard" : ""),
          m);
    }
  }
  return out;
}

// Keys-like values: per-channel offsets, a few outlier channels, and now and then an exact
// repeat (ties, constant groups).
Tensor random_tensor(DType dtype, int tokens, int heads, int dim, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> offset(static_cast<std::size_t>(heads) * dim);
  for (std::size_t j = 0; j < offset.size(); ++j)
    offset[j] = (j % 13 == 0) ? 9.f * n(rng) : 0.4f * n(rng);
  std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = (i % 97 == 5) ? 0.25f : offset[i % offset.size()] + n(rng);
  }
  return Tensor::from_float(x, dtype, tokens, heads, dim);
}

struct Shape {
  int tokens, heads, dim;
};

// The failures the running test has recorded so far: a case that adds one failed.
int failures_so_far() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
}

TEST(GpuQuantizers, SameBytesAsTheCpu) {
  KVLAB_REQUIRE_GPU();
  // 1 token; a tail of a block and of a group; odd head counts; head_dim 64 and 128 (the block
  // formats need multiples of 32).
  const std::vector<Shape> shapes{{1, 1, 32}, {77, 3, 64}, {200, 5, 128}, {513, 2, 64}};
  std::vector<std::string> missing, failed;
  int compared = 0;
  // Each method on its own: a failing case ends its method (one case's report is enough to act
  // on), not the test, so that the other methods' results still come back from a GPU session.
  const auto compare = [&](const NamedMethod& nm) {
    const int before = failures_so_far();
    auto cpu = make_quantizer(nm.config);
    ASSERT_TRUE(cpu) << nm.name << ": " << cpu.message();
    bool has_gpu = true;
    for (const Shape& sh : shapes) {
      for (DType dtype : {DType::F16, DType::BF16, DType::F32}) {
        for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
          const std::string where = nm.name + " " + std::string(role_name(role)) + " [" +
                                    std::to_string(sh.tokens) + "," + std::to_string(sh.heads) +
                                    "," + std::to_string(sh.dim) + "] " +
                                    std::string(dtype_name(dtype));
          const Tensor x = random_tensor(dtype, sh.tokens, sh.heads, sh.dim,
                                         static_cast<unsigned>(sh.tokens * 7 + sh.dim));
          auto want = (*cpu)->quantize(x.view(), role);
          if (!want) continue;  // a shape the method does not take (the CPU says why)
          auto got = cuda::quantize_on_gpu(x, role, nm.config);
          ASSERT_TRUE(got) << where << ": " << got.message();
          if (!*got) {
            has_gpu = false;
            break;
          }
          const QuantizedTensor& g = (*got)->tensor;
          ++compared;
          ASSERT_EQ(g.codes.size(), want->codes.size()) << where;
          const auto diff = std::mismatch(g.codes.begin(), g.codes.end(), want->codes.begin());
          EXPECT_TRUE(diff.first == g.codes.end())
              << where << ": code byte " << (diff.first - g.codes.begin()) << " is "
              << int(*diff.first) << " on the GPU, " << int(*diff.second) << " on the CPU";
          ASSERT_EQ(g.params.size(), want->params.size()) << where;
          EXPECT_EQ(
              0, std::memcmp(g.params.data(), want->params.data(), g.params.size() * sizeof(float)))
              << where << ": parameters differ";
          EXPECT_EQ(g.residual, want->residual) << where;
          EXPECT_EQ(g.bounds, want->bounds) << where;
          EXPECT_EQ(g.bytes.codes, want->bytes.codes) << where;
          EXPECT_EQ(g.bytes.scales, want->bytes.scales) << where;
          EXPECT_EQ(g.bytes.zero_points, want->bytes.zero_points) << where;
          EXPECT_EQ(g.bytes.residual, want->bytes.residual) << where;
          EXPECT_EQ(g.bytes.metadata, want->bytes.metadata) << where;
          const std::vector<CodeHistogram> hw = (*cpu)->histograms(*want);
          ASSERT_EQ((*got)->histograms.size(), hw.size()) << where;
          for (std::size_t i = 0; i < hw.size(); ++i) {
            EXPECT_EQ((*got)->histograms[i].label, hw[i].label) << where;
            EXPECT_EQ((*got)->histograms[i].bits, hw[i].bits) << where;
            EXPECT_EQ((*got)->histograms[i].counts, hw[i].counts) << where;
          }
          // The reconstruction: the same codes and parameters, so equal up to whether x = min +
          // code * step is one fused multiply-add (the GPU) or two roundings: an ulp of the
          // value, far below 1e-5 of the tensor's largest magnitude.
          std::vector<float> recon(x.elements());
          (*cpu)->dequantize(*want, recon);
          float scale = 1.f, worst = 0.f;
          for (std::size_t i = 0; i < recon.size(); ++i) {
            scale = std::max(scale, std::fabs(recon[i]));
            worst = std::max(worst, std::fabs(recon[i] - (*got)->reconstruction[i]));
          }
          EXPECT_LE(worst, 1e-5f * scale) << where << ": reconstructions differ";
          if (failures_so_far() > before) return;
        }
        if (!has_gpu) break;
      }
      if (!has_gpu) break;
    }
    if (!has_gpu) missing.push_back(nm.name);
  };
  for (const NamedMethod& nm : all_methods()) {
    const int before = failures_so_far();
    compare(nm);
    if (failures_so_far() > before) failed.push_back(nm.name);
  }
  std::string list, bad;
  for (const std::string& m : missing) list += m + "; ";
  for (const std::string& m : failed) bad += m + "; ";
  std::cout << "GPU quantizers compared in " << compared << " cases; none yet for: " << list
            << "\nfailed: " << bad << "\n";
  // The families this build must have on the GPU.
  for (const char* required :
       {"int8", "int4", "kivi-2", "kivi-4", "tiered", "kvcomp 0.050000", "turboquant",
        "turboquant-3 qjl hadamard", "kvquant", "kvquant pre-rope"}) {
    EXPECT_TRUE(std::find(missing.begin(), missing.end(), required) == missing.end()) << required;
  }
}

// TurboQuant's GPU quantizer codes 2^16 vectors a launch: a tensor of more gives the CPU's bytes
// across the chunks' seam, and a vector whose norm is not finite is the CPU's error, naming it.
TEST(GpuQuantizers, TurboQuantAcrossChunksAndOnBadInput) {
  KVLAB_REQUIRE_GPU();
  MethodConfig m = method(MethodKind::TurboQuant);
  m.bits = 3;
  m.qjl = true;
  auto cpu = make_quantizer(m);
  ASSERT_TRUE(cpu) << cpu.message();
  const Tensor x = random_tensor(DType::F16, 33001, 2, 32, 3);  // 66002 vectors
  auto want = (*cpu)->quantize(x.view(), TensorRole::Key);
  ASSERT_TRUE(want) << want.message();
  auto got = cuda::quantize_on_gpu(x, TensorRole::Key, m);
  ASSERT_TRUE(got) << got.message();
  ASSERT_TRUE(*got);
  EXPECT_TRUE((*got)->tensor.codes == want->codes);
  ASSERT_EQ((*got)->tensor.params.size(), want->params.size());
  EXPECT_EQ(0, std::memcmp((*got)->tensor.params.data(), want->params.data(),
                           want->params.size() * sizeof(float)));

  std::vector<float> v(5 * 3 * 32, 0.5f);
  v[(3 * 3 + 2) * 32 + 7] = std::numeric_limits<float>::infinity();  // token 3, head 2
  const Tensor bad = Tensor::from_float(v, DType::F32, 5, 3, 32);
  auto cpu_error = (*cpu)->quantize(bad.view(), TensorRole::Value);
  ASSERT_FALSE(cpu_error);
  auto gpu_error = cuda::quantize_on_gpu(bad, TensorRole::Value, m);
  ASSERT_FALSE(gpu_error);
  EXPECT_EQ(gpu_error.message(), cpu_error.message());
}

// Relative difference, against a floor for numbers near zero.
double rel_diff(double a, double b, double floor) {
  return std::fabs(a - b) / std::max({std::fabs(a), std::fabs(b), floor});
}

void expect_same_report(const CompressionReport& cpu, const CompressionReport& gpu,
                        const std::string& what) {
  ASSERT_EQ(cpu.layers.size(), gpu.layers.size()) << what;
  EXPECT_EQ(cpu.bytes.total(), gpu.bytes.total()) << what;
  for (std::size_t l = 0; l < cpu.layers.size(); ++l) {
    const LayerReport& c = cpu.layers[l];
    const LayerReport& g = gpu.layers[l];
    const std::string at = what + " layer " + std::to_string(l);
    for (auto [cb, gb] :
         {std::pair{&c.key_bytes, &g.key_bytes}, {&c.value_bytes, &g.value_bytes}}) {
      EXPECT_EQ(cb->codes, gb->codes) << at;
      EXPECT_EQ(cb->scales, gb->scales) << at;
      EXPECT_EQ(cb->zero_points, gb->zero_points) << at;
      EXPECT_EQ(cb->residual, gb->residual) << at;
      EXPECT_EQ(cb->metadata, gb->metadata) << at;
    }
    ASSERT_EQ(c.key_histograms.size(), g.key_histograms.size()) << at;
    for (std::size_t i = 0; i < c.key_histograms.size(); ++i) {
      EXPECT_EQ(c.key_histograms[i].counts, g.key_histograms[i].counts) << at;
    }
    for (auto [cc, gc] :
         {std::pair{&c.key_codec, &g.key_codec}, {&c.value_codec, &g.value_codec}}) {
      EXPECT_EQ(cc->codec_bytes, gc->codec_bytes) << at << ": codec sizes";
      EXPECT_EQ(cc->payload_bytes, gc->payload_bytes) << at;
      EXPECT_EQ(cc->metadata_bytes, gc->metadata_bytes) << at;
      EXPECT_EQ(cc->codebook_bytes, gc->codebook_bytes) << at;
      EXPECT_EQ(cc->entropy_bound_bytes, gc->entropy_bound_bytes) << at;
    }
    EXPECT_EQ(c.key_code_lengths, g.key_code_lengths) << at;
    EXPECT_EQ(c.value_code_bits, g.value_code_bits) << at;
    // Element errors: the same codes; sums in double over other orders, and reconstructions an
    // ulp apart (one fma or two roundings): far inside 1e-6.
    EXPECT_LT(rel_diff(c.error.mse, g.error.mse, 1e-30), 1e-6) << at << ": MSE";
    EXPECT_LT(rel_diff(c.error.max_abs, g.error.max_abs, 1e-30), 1e-5) << at << ": max |error|";
    // Attention: logits are float dot products summed in another order on each side (about
    // 1e-6 of a logit apart), and the metrics are differences of nearly equal numbers (logit
    // minus reconstructed logit, two softmaxes), so a float's rounding of a logit of ~10 is
    // 1e-5 beside differences of ~1e-3 for the finest methods; squared and averaged over
    // thousands of logits that moves RMSE, KL and output error by well under 1% and the cosine
    // (near 1) by well under 1e-5.
    EXPECT_LT(rel_diff(c.error.logit_rmse, g.error.logit_rmse, 1e-9), 1e-2) << at << ": logits";
    EXPECT_LT(rel_diff(c.error.softmax_kl, g.error.softmax_kl, 1e-9), 2e-2) << at << ": KL";
    EXPECT_LT(rel_diff(c.error.attn_output_rel_error, g.error.attn_output_rel_error, 1e-7), 1e-2)
        << at << ": output error";
    EXPECT_NEAR(c.error.attn_output_cosine, g.error.attn_output_cosine, 1e-5) << at;
  }
}

// GQA 3 (SmolLM2's 9 query heads over 3 KV heads), float32, 333 tokens, 3 queries.
KvCache gqa3_cache() {
  KvCache c;
  c.shape = ModelShape{"gqa3", 2, 9, 3, 64};
  c.source = "test:gqa3";
  for (int l = 0; l < 2; ++l) {
    LayerKv layer;
    layer.key = random_tensor(DType::F32, 333, 3, 64, 11u + l);
    layer.value = random_tensor(DType::F32, 333, 3, 64, 21u + l);
    layer.query = random_tensor(DType::F32, 3, 9, 64, 31u + l);
    c.layers.push_back(std::move(layer));
  }
  return c;
}

TEST(GpuRun, ReportMatchesTheCpu) {
  KVLAB_REQUIRE_GPU();
  cuda::register_backend();
  auto gpu = make_backend("cuda");
  ASSERT_TRUE(gpu) << gpu.message();
  SyntheticConfig sc;
  sc.preset = "llama3-8b";
  sc.layers = 2;
  sc.context = 1000;
  auto synthetic = generate_synthetic(sc);
  ASSERT_TRUE(synthetic) << synthetic.message();
  std::vector<std::pair<std::string, KvCache>> caches;
  caches.emplace_back("llama3-8b 1000", std::move(*synthetic));
  caches.emplace_back("gqa3 f32", gqa3_cache());
  std::vector<NamedMethod> methods;
  for (const NamedMethod& m : all_methods()) {
    if (m.name.find(' ') == std::string::npos) methods.push_back(m);
  }
  for (CodecKind codec : {CodecKind::Huffman, CodecKind::BitPack}) {
    MethodConfig m = method(MethodKind::KvComp);
    m.codec = codec;
    methods.push_back({"kvcomp + " + std::string(codec_id(codec)), m});
  }
  int on_gpu = 0;
  std::string failed;
  for (const auto& [cache_name, cache] : caches) {
    for (const NamedMethod& m : methods) {
      const std::string what = cache_name + " " + m.name;
      auto cpu = compress_cache(cache, m.config);
      if (!cpu) continue;  // a method this shape does not take
      auto dev = compress_cache(cache, m.config, {}, gpu->get());
      if (!dev) {  // the next method still runs: one session sees every method's result
        ADD_FAILURE() << what << ": " << dev.message();
        failed += what + "; ";
        continue;
      }
      if (dev->stage_backends[0] != "cuda") continue;  // run on the CPU: nothing to compare
      ++on_gpu;
      const int before = failures_so_far();
      EXPECT_EQ(dev->stage_backends[static_cast<std::size_t>(Stage::Metrics)], "cuda") << what;
      // The large cache's layers take whole megabytes of device memory; the small one's pieces
      // may fit pages the driver already holds.
      if (cache_name.starts_with("llama3")) {
        EXPECT_GT(dev->device_memory_peak_bytes, 0u) << what;
      }
      expect_same_report(*cpu, *dev, what);
      if (failures_so_far() > before) failed += what + "; ";
    }
  }
  std::cout << "GPU runs compared: " << on_gpu << "; failed: " << failed << "\n";
  EXPECT_GE(on_gpu, 8);
}

TEST(GpuRun, CancelStopsBetweenLayers) {
  KVLAB_REQUIRE_GPU();
  cuda::register_backend();
  auto gpu = make_backend("cuda");
  ASSERT_TRUE(gpu) << gpu.message();
  SyntheticConfig sc;
  sc.preset = "tiny";
  sc.layers = 4;
  sc.context = 256;
  auto cache = generate_synthetic(sc);
  ASSERT_TRUE(cache) << cache.message();
  int calls = 0;
  const ProgressFn stop_at_second = [&](double, std::string_view) { return ++calls < 2; };
  auto r = compress_cache(*cache, method(MethodKind::Int8), stop_at_second, gpu->get());
  ASSERT_FALSE(r);
  EXPECT_EQ(r.message(), kCancelledMessage);
}

}  // namespace
}  // namespace kvlab
