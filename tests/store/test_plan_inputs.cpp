// The planner's quality cost per scheme, read from quality runs in a real SQLite file: the newest
// run of the same model (matched by file name) and the same method wins; other models, eviction
// runs and methods that are not the scheme are left out.
#include <gtest/gtest.h>

#include "kvlab/store/plan_inputs.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::fresh_dir;

NewRun quality(const std::string& model, nlohmann::json params, double ppl_change) {
  NewRun r;
  r.kind = "quality";
  r.source = "model:" + model;
  r.method = params.value("method", "");
  r.params = std::move(params);
  r.metrics = {
      {"model", model}, {"perplexity_change", ppl_change}, {"kl_mean", 0.0123}, {"tokens", 512}};
  return r;
}

TEST(PlanQuality, NewestRunOfTheSameModelAndMethod) {
  const auto dir = fresh_dir();
  auto store = RunsStore::open(dir / "runs.sqlite").value();
  const std::string smol = "/cache/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  ASSERT_TRUE(store.save_run(quality(smol, {{"method", "int8"}}, 0.05)).ok());
  const auto newer = store.save_run(quality(smol, {{"method", "int8"}}, 0.002)).value();
  const auto fp8 = store.save_run(quality(smol, {{"method", "fp8-e4m3"}}, 0.01)).value();
  ASSERT_TRUE(store.save_run(quality(smol, {{"method", "kivi"}, {"bits", 4}}, 0.03)).ok());
  // Not this model; eviction in the loop; KIVI with other bits.
  ASSERT_TRUE(
      store.save_run(quality("/m/stories260K.bin", {{"method", "kivi"}, {"bits", 2}}, 0.2)).ok());
  ASSERT_TRUE(
      store.save_run(quality(smol, {{"method", "kivi"}, {"bits", 2}, {"eviction", {}}}, 0.9)).ok());
  const auto model = planners::find_model("smollm2-135m").value();
  std::vector<planners::Scheme> schemes;
  for (const char* id : {"fp16", "int8", "fp8", "kivi4", "kivi2", "kvcomp"}) {
    schemes.push_back(planners::parse_scheme(id).value());
  }
  const auto q = scheme_quality(store, model, schemes).value();
  ASSERT_EQ(q.size(), 6u);
  EXPECT_EQ(q[0].text, "exact (the baseline)");
  EXPECT_DOUBLE_EQ(*q[1].perplexity_change, 0.002);
  EXPECT_EQ(q[1].text,
            "perplexity +0.2 %, KL 0.0123 (run " + std::to_string(newer) + ", 512 tokens)");
  EXPECT_NE(q[2].text.find("run " + std::to_string(fp8)), std::string::npos) << q[2].text;
  // A run with its standard error (issue 48) gives the cost with it.
  NewRun with_se = quality(smol, {{"method", "int8"}}, 0.004);
  with_se.metrics["perplexity_change_se"] = 0.0031;
  const auto se_run = store.save_run(with_se).value();
  const auto again = scheme_quality(store, model, schemes).value();
  EXPECT_EQ(again[1].text, "perplexity +0.4 % ± 0.31 (within noise of exact), KL 0.0123 (run " +
                               std::to_string(se_run) + ", 512 tokens)");
  EXPECT_DOUBLE_EQ(*again[1].perplexity_change_se, 0.0031);  // for the advice's limit
  EXPECT_FALSE(q[1].perplexity_change_se) << "the older run stored none";
  // Beyond two standard errors it is a cost.
  NewRun clear = quality(smol, {{"method", "int8"}}, 0.04);
  clear.metrics["perplexity_change_se"] = 0.005;
  const auto clear_run = store.save_run(clear).value();
  EXPECT_EQ(
      scheme_quality(store, model, schemes).value()[1].text,
      "perplexity +4 % ± 0.50, KL 0.0123 (run " + std::to_string(clear_run) + ", 512 tokens)");
  EXPECT_NE(q[3].text.find("+3 %"), std::string::npos) << q[3].text;
  EXPECT_TRUE(q[4].text.empty()) << q[4].text;
  EXPECT_FALSE(q[4].perplexity_change);  // only an eviction run and another model's
  EXPECT_TRUE(q[5].text.empty()) << q[5].text;
  EXPECT_TRUE(quality_run_is_model("/x/SmolLM2-135M-Instruct-f16.gguf", model));
  EXPECT_FALSE(quality_run_is_model("/x/SmolLM2-360M.gguf", model));
}

TEST(PlanInputs, StoredGpuBenchmarkRatesForTheirGpuOnly) {
  const auto dir = fresh_dir();
  auto store = RunsStore::open(dir / "runs.sqlite").value();
  const auto h100 = planners::find_gpu("h100-sxm").value();
  EXPECT_FALSE(stored_kernel_rates(store, h100).value().has_value());
  // One Huffman pair at 32K: 2 × 33,554,432 values in 100 + 100 µs.
  const auto row = [](const char* kernel, double us) {
    return nlohmann::json{
        {"kernel", kernel}, {"context", 32768}, {"microseconds", us}, {"fp16_bytes", 67108864.0}};
  };
  NewRun bench;
  bench.kind = "bench";
  bench.params = {{"gpu_id", "h100-sxm"}};
  bench.metrics = {{"device", 7},  // not a string: read as "?", never a throw
                   {"rows", {row("huffman_qk", 100), row("huffman_sv", 100)}}};
  const auto id = store.save_run(bench).value();
  auto other = bench;
  other.params = {{"gpu_id", "l40s"}};
  other.metrics["rows"] = {row("huffman_qk", 1), row("huffman_sv", 1)};
  ASSERT_TRUE(store.save_run(other).ok());
  const auto rates = stored_kernel_rates(store, h100).value();
  ASSERT_TRUE(rates.has_value());
  EXPECT_TRUE(rates->measured);
  EXPECT_NEAR(rates->huffman, 2 * 33554432.0 / 200e-6, 1.0);
  EXPECT_NE(rates->source.find("run " + std::to_string(id)), std::string::npos) << rates->source;
  // A newer run of the same GPU that cannot give rates is an error naming it.
  bench.metrics["rows"] = {row("huffman_qk", -1), row("huffman_sv", 1)};
  const auto bad = store.save_run(bench).value();
  auto e = stored_kernel_rates(store, h100);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("run " + std::to_string(bad)), std::string::npos) << e.message();
}

}  // namespace
}  // namespace kvlab
