// The planner's quality cost per scheme, read from quality runs in a real SQLite file: the newest
// run of the same model (matched by file name) and the same method wins; other models, eviction
// runs and methods that are not the scheme are left out.
#include <gtest/gtest.h>

#include "kvlab/store/plan_quality.h"
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
  EXPECT_NE(q[3].text.find("+3 %"), std::string::npos) << q[3].text;
  EXPECT_TRUE(q[4].text.empty()) << q[4].text;
  EXPECT_FALSE(q[4].perplexity_change);  // only an eviction run and another model's
  EXPECT_TRUE(q[5].text.empty()) << q[5].text;
  EXPECT_TRUE(quality_run_is_model("/x/SmolLM2-135M-Instruct-f16.gguf", model));
  EXPECT_FALSE(quality_run_is_model("/x/SmolLM2-360M.gguf", model));
}

}  // namespace
}  // namespace kvlab
