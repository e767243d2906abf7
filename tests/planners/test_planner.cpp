// The planner against numbers worked out by hand (in the comments), and KIVI's bytes against what
// the engine's KIVI quantizer really allocates for the same shape.
#include <gtest/gtest.h>

#include <random>

#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"
#include "kvlab/planners/solvers.h"

namespace kvlab::planners {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

ModelSpec model(const char* id) {
  return find_model(id).value();
}
Scheme scheme(const char* id) {
  return parse_scheme(id).value();
}

TEST(Catalogue, EveryBuiltInEntryIsValid) {
  EXPECT_GE(builtin_models().size(), 12u);
  EXPECT_GE(builtin_gpus().size(), 9u);
  for (const auto& m : builtin_models()) EXPECT_TRUE(m.validate().ok()) << m.id;
  for (const auto& g : builtin_gpus()) {
    EXPECT_TRUE(g.validate().ok()) << g.id;
    EXPECT_FALSE(g.source.empty()) << g.id;
    EXPECT_FALSE(g.memory_stated.empty()) << g.id;
  }
  auto bad = find_gpu("h900");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("unknown GPU 'h900'"), std::string::npos);
  EXPECT_NE(bad.message().find("h100-sxm"), std::string::npos);
  EXPECT_TRUE(find_model("Llama-3-8B").ok());  // ids are case-insensitive
}

TEST(KvMemory, GoldenBytesPerToken) {
  // 2 × 80 layers × 8 kv_heads × 128 × 2 bytes.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("llama-3-70b"), scheme("fp16")), 327680.0);
  // (512 + 64) × 61 layers × 2 bytes.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("deepseek-v3"), scheme("bf16")), 70272.0);
  // int4: a quarter of fp16.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(model("llama-3-70b"), scheme("int4")), 81920.0);
}

TEST(KvMemory, GoldenBytesPerSequence) {
  Deployment d;
  // 2 × 32 × 32 × 128 × 4096 × 2 = 2 GiB.
  EXPECT_EQ(kv_bytes_per_sequence(model("llama-2-7b"), scheme("fp16"), d, 4096), 2ull << 30);
  // Pages of 16: 4097 tokens take 4112.
  EXPECT_EQ(kv_bytes_per_sequence(model("llama-2-7b"), scheme("fp16"), d, 4097),
            4112ull * 2 * 32 * 32 * 128 * 2);
  d.page_tokens = 1;
  EXPECT_EQ(kv_bytes_per_sequence(model("llama-2-7b"), scheme("fp16"), d, 4097),
            4097ull * 2 * 32 * 32 * 128 * 2);
}

TEST(KvMemory, TensorParallelismSplitsAndReplicatesHeads) {
  const ModelSpec m = model("llama-3-8b");
  Deployment d;
  d.tp = 2;
  EXPECT_EQ(kv_heads_per_gpu(m, 2), 4);
  EXPECT_EQ(kv_bytes_per_sequence(m, scheme("fp16"), d, 1024), 1024ull * 2 * 32 * 4 * 128 * 2);
  // TP 16 > 8 KV heads: every GPU holds one (replicated) head, not half of one.
  d.tp = 16;
  EXPECT_EQ(kv_heads_per_gpu(m, 16), 1);
  EXPECT_EQ(kv_bytes_per_sequence(m, scheme("fp16"), d, 1024), 1024ull * 2 * 32 * 1 * 128 * 2);
  d.tp = 3;
  auto v = d.validate(m);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("--tp 3"), std::string::npos);
  // The MLA latent is not split by TP.
  Deployment d8;
  d8.tp = 8;
  const ModelSpec ds = model("deepseek-v3");
  EXPECT_EQ(kv_bytes_per_sequence(ds, scheme("bf16"), d8, 4096), 4096ull * 70272);
  // Pipeline parallelism: 61 layers over 2 stages, the larger one holds 31.
  d8.pp = 2;
  EXPECT_EQ(kv_bytes_per_sequence(ds, scheme("bf16"), d8, 4096), 4096ull * 31 * 576 * 2);
}

TEST(KvMemory, SlidingWindowAndHybridLayers) {
  Deployment d;
  // Gemma-2-9B at 8192: 21 sliding layers keep 4096 tokens, 21 global ones 8192; each token is
  // 2 × 8 × 256 × 2 = 8192 bytes per layer.
  EXPECT_EQ(kv_bytes_per_sequence(model("gemma-2-9b"), scheme("bf16"), d, 8192),
            21ull * 4096 * 8192 + 21ull * 8192 * 8192);
  // Mistral-7B: every layer capped at 4096.
  EXPECT_EQ(kv_bytes_per_sequence(model("mistral-7b"), scheme("fp16"), d, 32768),
            kv_bytes_per_sequence(model("mistral-7b"), scheme("fp16"), d, 4096));
  // An eviction budget caps every layer.
  EXPECT_EQ(kv_bytes_per_sequence(model("llama-3-8b"), scheme("fp16+evict:1024"), d, 8192),
            kv_bytes_per_sequence(model("llama-3-8b"), scheme("fp16"), d, 1024));
  EXPECT_EQ(kv_bytes_per_sequence(model("llama-3-8b"), scheme("fp16+evict:25%"), d, 8192),
            kv_bytes_per_sequence(model("llama-3-8b"), scheme("fp16"), d, 2048));
}

TEST(KvMemory, KiviMatchesTheEngineQuantizer) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0, 1);
  for (int bits : {2, 4}) {
    MethodConfig mc;
    mc.kind = MethodKind::Kivi;
    mc.bits = bits;
    auto q = make_quantizer(mc).value();
    const Scheme s = scheme(bits == 2 ? "kivi2" : "kivi4");
    for (int tokens : {1, 31, 127, 128, 129, 160, 161, 300, 1000}) {
      for (auto [heads, dim] : {std::pair{2, 64}, std::pair{1, 40}}) {
        std::vector<float> x(static_cast<std::size_t>(tokens) * heads * dim);
        for (float& v : x) v = n(rng);
        const Tensor t = Tensor::from_float(x, DType::F16, tokens, heads, dim);
        for (auto role : {TensorRole::Key, TensorRole::Value}) {
          const auto qt = q->quantize(t.view(), role).value();
          EXPECT_EQ(scheme_tensor_bytes(s, role == TensorRole::Key, tokens, heads, dim),
                    qt.bytes.total())
              << "kivi-" << bits << " " << role_name(role) << " tokens " << tokens << " heads "
              << heads << " dim " << dim;
        }
      }
    }
  }
}

Scenario llama2_on_a100(int batch, std::int64_t context) {
  Scenario s;
  s.model = model("llama-2-7b");
  s.gpu = find_gpu("a100-80gb").value();
  s.scheme = scheme("fp16");
  s.batch = batch;
  s.context = context;
  return s;
}

TEST(Solvers, GoldenFitAndLimits) {
  // usable = 80 GiB × 0.9 = 77,309,411,328; weights = 6.74e9 × 2 = 13,480,000,000;
  // reserve 1 GiB → KV capacity 62,755,669,504 bytes = 29.2 sequences of 2 GiB.
  auto r = plan(llama2_on_a100(29, 4096)).value();
  EXPECT_EQ(r.weights_bytes_per_gpu, 13'480'000'000ull);
  EXPECT_EQ(r.kv_capacity_bytes, 62'755'669'504ull);
  EXPECT_TRUE(r.fits);
  EXPECT_EQ(r.max_batch, 29);
  EXPECT_EQ(r.max_context, 4096);  // the model's own limit
  EXPECT_EQ(r.min_gpus, 1);
  r = plan(llama2_on_a100(30, 4096)).value();
  EXPECT_FALSE(r.fits);
  // 62,755,669,504 / 30 = 2,091,855,650 bytes per sequence at 524,288 per token: 3989.9 tokens,
  // and in pages of 16 the last whole page ends at 3984.
  EXPECT_EQ(r.max_context, 3984);
  EXPECT_EQ(r.min_gpus, 2);
  // Roofline: (weights + KV) / (2039 GB/s × 0.8) per step.
  r = plan(llama2_on_a100(1, 4096)).value();
  const double step = (13.48e9 + 2.0 * kGiB) / (2039e9 * 0.8);
  EXPECT_NEAR(r.tokens_per_s_deployment, 1.0 / step, 1e-9);
  EXPECT_NE(r.formula.find(
                "2 (K and V) × 32 layers × 32 kv_heads × 128 head_dim × 4,096 tokens × 2 bytes = "
                "2.0 GiB"),
            std::string::npos)
      << r.formula;
}

TEST(Solvers, ImpossibleScenariosAreErrors) {
  auto s = llama2_on_a100(0, 4096);
  auto r = plan(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("--batch 0"), std::string::npos);
  s = llama2_on_a100(1, 8192);
  r = plan(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("limit of 4096"), std::string::npos) << r.message();
  s = llama2_on_a100(1, 1024);
  s.deployment.gpu_memory_utilization = 1.5;
  EXPECT_FALSE(plan(s).ok());
  // DeepSeek-V3 (671 GB of fp8 weights) on RTX 4090s: one GPU cannot hold it, 4 nodes of 8 can
  // (21 GB of weights each), but no layout up to 8 nodes holds 1000 sequences of 4K tokens,
  // since the MLA latent (288 MB per sequence) is not split by TP.
  s.deployment.gpu_memory_utilization = 0.9;
  s.model = model("deepseek-v3");
  s.gpu = find_gpu("rtx-4090").value();
  r = plan(s);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->fits);
  EXPECT_EQ(r->max_batch, 0);
  EXPECT_EQ(r->min_gpus, 32);
  EXPECT_EQ(r->min_tp, 8);
  s.batch = 1000;
  s.context = 4096;
  r = plan(s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->min_gpus, 0);
}

TEST(Solvers, SweepAgreesWithSinglePlans) {
  SweepSpec spec;
  spec.model = model("llama-3-8b");
  spec.gpus = {find_gpu("h100-sxm").value(), find_gpu("l40s").value()};
  spec.schemes = {scheme("fp16"), scheme("kivi2"), scheme("int4+evict:0.5")};
  spec.contexts = {512, 4096, 8192};
  spec.batches = {1, 16, 64, 256};
  auto rows = sweep(spec).value();
  ASSERT_EQ(rows.size(), 2u * 3 * 3 * 4);
  for (const auto& row : rows) {
    Scenario s;
    s.model = spec.model;
    s.gpu = spec.gpus[row.gpu];
    s.scheme = spec.schemes[row.scheme];
    s.context = row.context;
    s.batch = row.batch;
    const QuickPlan q = quick_plan(s);
    EXPECT_EQ(row.plan.fits, q.fits);
    EXPECT_EQ(row.plan.kv_bytes_batch_per_gpu, q.kv_bytes_batch_per_gpu);
    EXPECT_EQ(row.plan.max_batch, q.max_batch);
    EXPECT_NEAR(row.plan.tokens_per_s_per_gpu, q.tokens_per_s_per_gpu,
                1e-9 * q.tokens_per_s_per_gpu);
    EXPECT_NEAR(row.plan.tpot_s, q.tpot_s, 1e-12 * q.tpot_s);
    EXPECT_NEAR(row.plan.ttft_s, q.ttft_s, 1e-12 * q.ttft_s);
  }
  const std::string csv = sweep_to_csv(spec, rows);
  EXPECT_EQ(csv.rfind("gpu,scheme,context,batch,fits", 0), 0u);
  spec.contexts = {100000};
  EXPECT_FALSE(sweep(spec).ok());
}

TEST(Schemes, ParseAndReject) {
  EXPECT_EQ(scheme("kivi2").kind, SchemeKind::Kivi);
  EXPECT_EQ(*scheme("fp8+evict:2048").evict_tokens, 2048);
  EXPECT_DOUBLE_EQ(*scheme("fp8+evict:0.2").evict_fraction, 0.2);
  for (const char* bad : {"fp12", "kivi3", "fp16+evict:", "fp16+evict:-1", "fp16+keep:3",
                          "fp16+evict:150%", "fp16+evict:10.5"}) {
    EXPECT_FALSE(parse_scheme(bad).ok()) << bad;
  }
}

TEST(HfImport, FamiliesAndTraps) {
  // Qwen2.5: a sliding_window that is switched off.
  nlohmann::json qwen = {{"model_type", "qwen2"},     {"num_hidden_layers", 28},
                         {"num_attention_heads", 28}, {"num_key_value_heads", 4},
                         {"hidden_size", 3584},       {"intermediate_size", 18944},
                         {"vocab_size", 152064},      {"max_position_embeddings", 32768},
                         {"sliding_window", 131072},  {"use_sliding_window", false},
                         {"max_window_layers", 28}};
  auto m = import_hf_config(qwen, "qwen").value();
  EXPECT_FALSE(m.sliding_window.has_value());
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_NEAR(m.params_billion, 7.6, 0.1);
  // Gemma-2: head_dim 256 although hidden / heads = 224; alternating sliding layers.
  nlohmann::json gemma = {{"model_type", "gemma2"},
                          {"num_hidden_layers", 42},
                          {"num_attention_heads", 16},
                          {"num_key_value_heads", 8},
                          {"head_dim", 256},
                          {"hidden_size", 3584},
                          {"intermediate_size", 14336},
                          {"vocab_size", 256000},
                          {"max_position_embeddings", 8192},
                          {"sliding_window", 4096},
                          {"tie_word_embeddings", true}};
  m = import_hf_config(gemma, "gemma").value();
  EXPECT_EQ(m.head_dim, 256);
  EXPECT_TRUE(m.layer_is_sliding(0));
  EXPECT_FALSE(m.layer_is_sliding(1));
  EXPECT_EQ(kv_bytes_per_sequence(m, scheme("bf16"), Deployment{}, 8192),
            kv_bytes_per_sequence(model("gemma-2-9b"), scheme("bf16"), Deployment{}, 8192));
  EXPECT_NEAR(m.params_billion, 9.24, 0.1);
  // DeepSeek-V3: MLA.
  nlohmann::json ds = {{"model_type", "deepseek_v3"},
                       {"num_hidden_layers", 61},
                       {"num_attention_heads", 128},
                       {"num_key_value_heads", 128},
                       {"hidden_size", 7168},
                       {"intermediate_size", 18432},
                       {"moe_intermediate_size", 2048},
                       {"n_routed_experts", 256},
                       {"n_shared_experts", 1},
                       {"first_k_dense_replace", 3},
                       {"kv_lora_rank", 512},
                       {"q_lora_rank", 1536},
                       {"qk_rope_head_dim", 64},
                       {"qk_nope_head_dim", 128},
                       {"v_head_dim", 128},
                       {"vocab_size", 129280},
                       {"max_position_embeddings", 163840}};
  m = import_hf_config(ds, "ds").value();
  EXPECT_TRUE(m.is_mla());
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m, scheme("bf16")), 70272.0);
  EXPECT_NEAR(m.params_billion, 671, 15);
  // Errors name the field.
  auto broken = qwen;
  broken.erase("num_hidden_layers");
  auto e = import_hf_config(broken, "x");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("num_hidden_layers"), std::string::npos);
  broken = qwen;
  broken["num_key_value_heads"] = 5;
  e = import_hf_config(broken, "x");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("num_key_value_heads 5"), std::string::npos) << e.message();
  broken = qwen;
  broken["model_type"] = "gpt2";
  e = import_hf_config(broken, "x");
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("model_type 'gpt2'"), std::string::npos);
  broken = qwen;
  broken["hidden_size"] = "big";
  EXPECT_FALSE(import_hf_config(broken, "x").ok());
}

}  // namespace
}  // namespace kvlab::planners
