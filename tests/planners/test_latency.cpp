// The latency model and the advice against numbers worked out by hand in the comments (datasheet
// figures from assets/gpus.json, shapes from assets/models.json, the default efficiencies:
// bandwidth 0.8, compute 0.6).
#include <gtest/gtest.h>

#include <cmath>

#include "kvlab/planners/serving.h"

namespace kvlab::planners {
namespace {

Scenario scenario(const char* model, const char* gpu, const char* scheme, std::int64_t context,
                  int batch, int tp = 1) {
  Scenario s;
  s.model = find_model(model).value();
  s.gpu = find_gpu(gpu).value();
  s.scheme = parse_scheme(scheme).value();
  s.context = context;
  s.batch = batch;
  s.deployment.tp = tp;
  return s;
}

TEST(Latency, GoldenTtftLlama3_8bOnOneH100At8k) {
  // Dense: 2 × 8.03e9 parameters × 8,192 tokens = 1.3156352e14 FLOPs.
  // Attention: causal pairs 8,192 × 8,193 / 2 = 33,558,528 per layer, × 32 layers, each pair
  // 4 × 32 query heads × 128 = 16,384 FLOPs: 1.7594333e13 FLOPs.
  // Compute: 989.5 TFLOPS (bf16 dense) × 0.6 = 593.7e12 FLOP/s → 0.25123 s.
  // Memory: weights 16.06e9 B + KV 8,192 × 131,072 B = 1.0737e9 B, at 3,350 GB/s × 0.8: 6.4 ms.
  // TTFT = max(compute, memory), nothing to compress for fp16.
  const auto r = plan(scenario("llama-3-8b", "h100-sxm", "fp16", 8192, 1)).value();
  const double dense = 2 * 8.03e9 * 8192;
  const double attention = 8192.0 * 8193 / 2 * 32 * 4 * 32 * 128;
  EXPECT_NEAR(r.latency.prefill.flops, dense + attention, 1e3);
  EXPECT_NEAR(r.ttft_s, (dense + attention) / (989.5e12 * 0.6), 1e-9);
  EXPECT_NEAR(r.ttft_s, 0.25123, 5e-5);
  EXPECT_TRUE(r.latency.prefill.compute_bound);
  EXPECT_NEAR(r.latency.prefill.t_memory, (16.06e9 + 8192.0 * 131072) / (3350e9 * 0.8), 1e-12);
}

TEST(Latency, GoldenTpotLlama31_70bAtTp4With32SequencesOf16k) {
  // Per GPU of TP 4: weights 70.6e9 × 2 B / 4 = 35.3e9 B; KV per sequence 16,384 tokens × 80
  // layers × 2 (K, V) × 2 KV heads × 128 × 2 B = 1,342,177,280 B, × 32 = 42,949,672,960 B.
  // Dense part: weights read 35.3e9 / 2.68e12 = 13.172 ms against 2 × 70.6e9 × 32 / 4 =
  // 1.1296e12 FLOPs / 593.7e12 = 1.903 ms: the read.
  // Attention part: KV read 42,949,672,960 / 2.68e12 = 16.026 ms against 16 query heads × 4 × 128
  // × 16,384 tokens × 80 layers × 32 = 3.436e11 FLOPs / 593.7e12 = 0.579 ms: the read.
  // TPOT = 13.172 + 16.026 = 29.198 ms. (It does not fit one H100's 80 GB at fp16: 40.6e9 B of
  // KV capacity per GPU.)
  const auto r = plan(scenario("llama-3.1-70b", "h100-sxm", "fp16", 16384, 32, 4)).value();
  const double bw = 3350e9 * 0.8;
  EXPECT_EQ(r.kv_bytes_per_sequence_per_gpu, 1'342'177'280ull);
  EXPECT_EQ(r.kv_bytes_batch_per_gpu, 42'949'672'960ull);
  EXPECT_EQ(r.kv_bytes_batch_deployment, 4 * 42'949'672'960ull);
  EXPECT_NEAR(r.tpot_s, 35.3e9 / bw + 42'949'672'960.0 / bw, 1e-9);
  EXPECT_NEAR(r.tpot_s * 1e3, 29.198, 0.001);
  EXPECT_FALSE(r.fits);
  EXPECT_EQ(r.latency.step.bound_by, "KV read");
  EXPECT_NEAR(r.latency.step.t_dense, 2 * 70.6e9 * 32 / 4 / (989.5e12 * 0.6), 1e-12);
  EXPECT_NEAR(r.latency.step.attention_flops, 16.0 * 4 * 128 * 16384 * 80 * 32, 1.0);
  EXPECT_NEAR(r.tokens_per_s_per_user, 1 / r.tpot_s, 1e-9);
  EXPECT_NEAR(r.tokens_per_s_per_gpu, 32 / r.tpot_s / 4, 1e-9);
}

TEST(Latency, GoldenSlidingLayersGptOssAndGemma3) {
  Deployment d;
  const Scheme fp16 = parse_scheme("fp16").value();
  // GPT-OSS-120B at 32K: 18 full layers keep 32,768 tokens and 18 sliding layers 128, at 2 × 8
  // KV heads × 64 × 2 B = 2,048 B per token per layer: 2,048 × (18 × 32,768 + 18 × 128).
  const ModelSpec oss = find_model("gpt-oss-120b").value();
  EXPECT_EQ(kv_bytes_per_sequence(oss, fp16, d, 32768), 2048ull * (18 * 32768 + 18 * 128));
  EXPECT_EQ(kv_bytes_per_token(oss, fp16), 2048.0 * 36);
  EXPECT_TRUE(oss.attention_sinks);
  EXPECT_TRUE(oss.is_moe());
  // Gemma 3 27B at 32K: 10 global layers keep 32,768 tokens, 52 local layers 1,024, at 2 × 16 ×
  // 128 × 2 B = 8,192 B per token per layer.
  const ModelSpec gemma = find_model("gemma-3-27b").value();
  EXPECT_EQ(gemma.layers_of(LayerKind::Sliding), 52);
  EXPECT_EQ(kv_bytes_per_sequence(gemma, fp16, d, 32768), 8192ull * (10 * 32768 + 52 * 1024));
  // Prefill attention pairs on a sliding layer of window 1,024 over 4,096 tokens: the first
  // 1,024 tokens see 1..1,024 keys, the other 3,072 see 1,024 each.
  EXPECT_DOUBLE_EQ(causal_pairs(gemma, LayerKind::Sliding, 4096),
                   1024.0 * 1025 / 2 + 3072.0 * 1024);
  // Linear-attention layers keep nothing: Qwen3-Next holds KV in 12 of its 48 layers.
  const ModelSpec next = find_model("qwen3-next-80b-a3b").value();
  EXPECT_EQ(kv_bytes_per_token(next, fp16), 12.0 * 2 * 2 * 256 * 2);
}

TEST(Latency, MixtureOfExpertsReadsTheExpertsItsBatchRoutesTo) {
  // Qwen3-30B-A3B: P = 30.5B, A = 3.3B, 128 experts, 8 per token (share 1/16). The routed experts
  // hold X = (30.5 − 3.3) / (1 − 1/16) = 29.013B; the rest, 1.487B, is read every step.
  const ModelSpec m = find_model("qwen3-30b-a3b").value();
  const double routed = (30.5 - 3.3) / (1 - 1.0 / 16);
  EXPECT_NEAR(weights_read_fraction(m, 1), 3.3 / 30.5, 1e-12);
  const double touched8 = 1 - std::pow(15.0 / 16, 8);  // 40.3% of the experts for 8 tokens
  EXPECT_NEAR(weights_read_fraction(m, 8), (30.5 - routed + routed * touched8) / 30.5, 1e-12);
  EXPECT_NEAR(weights_read_fraction(m, 4096), 1.0, 1e-9);
  EXPECT_EQ(weights_read_fraction(find_model("llama-3-8b").value(), 1), 1.0);
  // One user on an H100: the step reads 3.3B × 2 B of weights, not 30.5B × 2 B; compute is
  // 2 × 3.3e9 FLOPs per token.
  const auto r = plan(scenario("qwen3-30b-a3b", "h100-sxm", "fp16", 1024, 1)).value();
  EXPECT_NEAR(r.latency.step.weights_bytes, 30.5e9 * 2 * 3.3 / 30.5, 1e3);
  EXPECT_NEAR(r.latency.step.dense_flops, 2 * 3.3e9, 1);
  const auto b8 = plan(scenario("qwen3-30b-a3b", "h100-sxm", "fp16", 1024, 8)).value();
  EXPECT_NEAR(b8.latency.step.weights_bytes, 61e9 * weights_read_fraction(m, 8), 1e3);
}

TEST(Latency, DecompressionIsChargedAtTheEnginesMeasuredRate) {
  // The default FP8 rate: two tensors of 32,768 × 8 × 128 values in 16.4 + 19.3 µs.
  const KernelRates& r = default_kernel_rates();
  EXPECT_NEAR(r.fp8, 2 * 32768.0 * 8 * 128 / 35.7e-6, 1e3);
  // KVComp's Huffman kernel (3.1e11 values/s) is slower than reading fp16 (2.68e12 B/s = 1.34e12
  // values/s), so its attention waits on decompression: layer tokens × 2 × 8 KV heads × 128 × batch
  // values at that rate.
  const auto k = plan(scenario("llama-3-8b", "h100-sxm", "kvcomp", 8192, 16)).value();
  const double values = 8192.0 * 32 * 2 * 8 * 128 * 16;
  EXPECT_NEAR(k.latency.step.decompress_values, values, 1.0);
  EXPECT_NEAR(k.latency.step.t_decompress, values / r.huffman, 1e-12);
  EXPECT_EQ(k.latency.step.attention_bound_by, "decompression");
  const auto f = plan(scenario("llama-3-8b", "h100-sxm", "fp16", 8192, 16)).value();
  EXPECT_GT(k.tpot_s, f.tpot_s);  // compression that costs throughput
  // On another GPU the rate moves with FP32 throughput: an A100 (19.5 TFLOPS) gets 19.5 / 67.
  const auto a100 =
      decompression_rate(parse_scheme("fp8").value(), find_gpu("a100-80gb").value(), r);
  EXPECT_NEAR(a100.values_per_s, r.fp8 * 19.5 / 67, 1.0);
  // Roofline: fewer bytes for the same FLOPs raise the intensity. Decompression is not the
  // model's maths (issue 43: it was counted as FLOPs, putting fp8 at ten times fp16's TFLOP/s):
  // both do the same FLOPs, so their achieved FLOP/s differ only by their step times.
  const auto fp8 = plan(scenario("llama-3-8b", "h100-sxm", "fp8", 8192, 16)).value();
  const auto& s8 = fp8.latency.step;
  const auto& s16 = f.latency.step;
  EXPECT_GT(s8.intensity(), s16.intensity());
  EXPECT_DOUBLE_EQ(s8.dense_flops + s8.attention_flops, s16.dense_flops + s16.attention_flops);
  EXPECT_NEAR(s8.achieved_flops() / s16.achieved_flops(), s16.seconds / s8.seconds, 1e-9);
}

TEST(Latency, HostOffloadStreamsTheOverflowOverTheLink) {
  // Llama-3-8B fp16 at 8K: 1 GiB per sequence; an H100 holds 62 of them (weights 16.06 GB).
  // With +offload, 100 sequences fit, and what is over the GPU's capacity crosses PCIe 5.0 x16
  // (64 GB/s × 0.8) every step.
  auto s = scenario("llama-3-8b", "h100-sxm", "fp16+offload", 8192, 100);
  const auto r = plan(s).value();
  EXPECT_TRUE(r.fits);
  EXPECT_GT(r.host_kv_bytes_per_gpu, 0u);
  EXPECT_EQ(r.host_kv_bytes_per_gpu, r.kv_bytes_batch_per_gpu - r.kv_capacity_bytes);
  EXPECT_NEAR(r.latency.step.t_host, r.host_kv_bytes_per_gpu / (64e9 * 0.8), 1e-9);
  EXPECT_EQ(r.latency.step.bound_by, "host link");
  s.scheme = parse_scheme("fp16").value();
  EXPECT_FALSE(plan(s)->fits);
}

TEST(Serving, FrontierAndServiceTargets) {
  auto s = scenario("llama-3-8b", "h100-sxm", "fp16", 8192, 1);
  const auto f = frontier(s);
  ASSERT_GE(f.size(), 3u);
  for (std::size_t i = 1; i < f.size(); ++i) {
    EXPECT_GT(f[i].batch, f[i - 1].batch);
    EXPECT_LT(f[i].tokens_per_s_per_user, f[i - 1].tokens_per_s_per_user);
    EXPECT_GT(f[i].tokens_per_s_per_gpu, f[i - 1].tokens_per_s_per_gpu);
  }
  EXPECT_EQ(f.back().batch, plan(s)->max_batch);
  const std::vector<Scheme> schemes = {parse_scheme("fp16").value(), parse_scheme("fp8").value()};
  // A loose TPOT target: the batch is limited by memory, and FP8 holds twice as many.
  auto c = best_under_slo(s, schemes, {0, 1000}).value();
  ASSERT_TRUE(c.found);
  EXPECT_EQ(c.scheme, 1);
  // A tight one: the largest batch within 10 ms per token.
  c = best_under_slo(s, schemes, {0, 10}).value();
  ASSERT_TRUE(c.found);
  EXPECT_LE(c.tpot_ms, 10);
  Scenario more = s;
  more.scheme = schemes[static_cast<std::size_t>(c.scheme)];
  more.batch = c.batch + 1;
  EXPECT_GT(plan(more)->tpot_s * 1e3, 10);
  // A TTFT target no prefill of 8K meets.
  c = best_under_slo(s, schemes, {10, 0}).value();
  EXPECT_FALSE(c.found);
  EXPECT_NE(c.reason.find("time to first token"), std::string::npos) << c.reason;
}

TEST(Serving, AdviceSaysWhenNotToCompressAndWhenTo) {
  AdviceSpec spec;
  spec.base = scenario("llama-3-70b", "h100-sxm", "fp16", 1, 1, 4);
  for (const char* id : {"fp16", "fp8", "kivi2", "kvcomp"}) {
    spec.schemes.push_back(parse_scheme(id).value());
  }
  spec.contexts = {2048, 8192};
  spec.concurrencies = {1, 128};
  const Advice a = advise(spec).value();
  ASSERT_EQ(a.cells.size(), 4u);
  // 2K tokens, 1 user: the KV is 0.2% of what a step reads (640 MiB for 4 GPUs... 160 MiB per GPU
  // against 35.3 GB of weights), so no scheme gains 10%: don't compress; KVComp's decompression
  // makes it lose.
  const AdviceCell& few = a.cells[0];
  EXPECT_EQ(few.verdict, "don't compress");
  EXPECT_EQ(few.recommended, 0);
  EXPECT_LT(few.outcomes[3].gain, 0);
  EXPECT_NE(few.reason.find("kvcomp loses"), std::string::npos) << few.reason;
  // 8K tokens, 128 users: fp16 holds 60 of them (1.25 GiB each per GPU... 320 MiB × 4), FP8 120
  // and KIVI-2 all: compress.
  const AdviceCell& many = a.cells[3];
  EXPECT_EQ(many.outcomes[0].served, 60);
  EXPECT_EQ(many.outcomes[1].served, 120);
  EXPECT_GT(many.memory_pressure, 2.0);
  EXPECT_EQ(many.verdict.rfind("compress: ", 0), 0u) << many.verdict;
  EXPECT_GT(many.outcomes[static_cast<std::size_t>(many.recommended)].gain, 0.1);
  const auto j = advice_to_json(a);
  EXPECT_EQ(j["cells"][0]["verdict"], "don't compress");
  EXPECT_TRUE(j["cells"][0].contains("memory_pressure_fp16_per_gpu"));
  // A quality limit: KIVI-2 measured +8% perplexity and KVComp was never measured, so with at
  // most +2% only FP8 (+1%) may be recommended.
  spec.perplexity_change = {0.0, 0.01, 0.08, std::nullopt};
  spec.max_perplexity_change = 0.02;
  const Advice limited = advise(spec).value();
  EXPECT_EQ(limited.allowed, (std::vector<bool>{true, true, false, false}));
  for (const auto& c : limited.cells) EXPECT_LE(c.recommended, 1) << c.reason;
  EXPECT_EQ(limited.cells[3].recommended, 1);
  EXPECT_EQ(limited.limit_within_noise, (std::vector<bool>(4, false))) << "no standard errors";
  // Issue 48: with standard errors, FP8's +1% ± 0.6 holds the +2% limit in its 95% interval
  // (1% + 1.96 × 0.6% = 2.18%), KIVI-2's +8% ± 0.5 does not (8% − 0.98% > 2%). FP8 is still
  // judged by its measured change, and the cells that recommend it say the limit cannot rank it.
  spec.perplexity_change_se = {std::nullopt, 0.006, 0.005, std::nullopt};
  const Advice noisy = advise(spec).value();
  EXPECT_EQ(noisy.allowed, limited.allowed);
  EXPECT_EQ(noisy.limit_within_noise, (std::vector<bool>{false, true, false, false}));
  ASSERT_EQ(noisy.cells[3].recommended, 1);
  EXPECT_NE(noisy.cells[3].reason.find("Within noise of the quality limit"), std::string::npos)
      << noisy.cells[3].reason;
  EXPECT_NE(noisy.cells[3].reason.find(": fp8."), std::string::npos) << noisy.cells[3].reason;
  EXPECT_EQ(noisy.cells[0].reason.find("Within noise"), std::string::npos)
      << "fp16 is recommended there: no scheme near the limit decides it";
  EXPECT_EQ(advice_to_json(noisy)["within_noise_of_the_quality_limit"],
            nlohmann::json::array({"fp8"}));
  spec.perplexity_change_se.clear();
  // The baseline must come first.
  spec.schemes.erase(spec.schemes.begin());
  EXPECT_FALSE(advise(spec).ok());
}

TEST(Catalogue, HuggingFaceNamesAliasesAndSuggestions) {
  EXPECT_EQ(find_model("meta-llama/Llama-3.1-70B")->id, "llama-3.1-70b");
  EXPECT_EQ(find_model("Llama-3.1-70B-Instruct")->id, "llama-3.1-70b");
  EXPECT_EQ(find_model("llama3.1:70b")->id, "llama-3.1-70b");
  EXPECT_EQ(find_gpu("H100")->id, "h100-sxm");
  auto bad = find_model("llama-3.1-7b");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("did you mean"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("llama-3.1-70b"), std::string::npos) << bad.message();
  for (const char* id :
       {"llama-3.2-1b", "llama-4-scout", "llama-4-maverick", "qwen3-0.6b", "qwen3-32b",
        "qwen3-30b-a3b", "qwen3-235b-a22b", "qwen3-next-80b-a3b", "gpt-oss-20b", "gemma-3-1b",
        "mistral-small-3", "phi-4", "deepseek-r1", "kimi-k2"}) {
    EXPECT_TRUE(find_model(id).ok()) << id;
  }
  for (const char* id :
       {"h20", "h100-pcie", "h100-nvl", "h200", "b200", "b300", "gb200", "a100-40gb", "l4", "l40s",
        "a10g", "rtx-4090", "rtx-5090", "rtx-pro-6000", "mi300x", "mi325x", "mi355x"}) {
    auto g = find_gpu(id);
    ASSERT_TRUE(g.ok()) << id;
    EXPECT_GT(g->tflops.bf16, 0) << id;
    EXPECT_GT(g->host_link_gbs, 0) << id;
    EXPECT_FALSE(g->compute_source.empty()) << id;
  }
}

}  // namespace
}  // namespace kvlab::planners
