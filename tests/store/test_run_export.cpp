// CSV and JSON exports of a run.
#include <gtest/gtest.h>

#include "kvlab/store/run_export.h"

namespace kvlab {
namespace {

RunRecord sample_record() {
  RunRecord run;
  run.id = 3;
  run.created_at = "2024-05-01T12:34:56.789Z";
  run.kind = "compression";
  run.source = "synthetic:tiny";
  run.method = "kivi";
  run.label = R"(kivi, "fast")";
  run.notes = "line one\nline two";
  run.tags = "baseline, kivi";
  run.uid = "0123456789abcdef0123456789abcdef";
  run.params = {{"bits", 2}, {"keys", {{"group", 32}}}, {"name", "k,v"}};
  run.metrics = {{"error", {{"mse", 0.5}}},
                 {"per_layer", {{{"ratio", 4.0}}, {{"ratio", 4.5}}}},
                 {"none", nullptr},
                 {"empty", nlohmann::json::array()}};
  run.artifacts["histograms"] = {1, 2, 3};
  return run;
}

TEST(RunExport, CsvFlattensWithDottedKeysAndQuotesPerRfc4180) {
  const std::string csv = run_to_csv(sample_record());
  const std::string expected =
      "key,value\r\n"
      "id,3\r\n"
      "created_at,2024-05-01T12:34:56.789Z\r\n"
      "kind,compression\r\n"
      "source,synthetic:tiny\r\n"
      "method,kivi\r\n"
      "label,\"kivi, \"\"fast\"\"\"\r\n"
      "notes,\"line one\nline two\"\r\n"
      "tags,\"baseline, kivi\"\r\n"
      "uid,0123456789abcdef0123456789abcdef\r\n"
      "params.bits,2\r\n"
      "params.keys.group,32\r\n"
      "params.name,\"k,v\"\r\n"
      "metrics.empty,[]\r\n"
      "metrics.error.mse,0.5\r\n"
      "metrics.none,\r\n"
      "metrics.per_layer.0.ratio,4.0\r\n"
      "metrics.per_layer.1.ratio,4.5\r\n";
  EXPECT_EQ(csv, expected);
}

TEST(RunExport, JsonHasEveryField) {
  const RunRecord run = sample_record();
  const nlohmann::json j = run_to_json(run);
  EXPECT_EQ(j["id"], 3);
  EXPECT_EQ(j["label"], run.label);
  EXPECT_EQ(j["notes"], run.notes);
  EXPECT_EQ(j["tags"], run.tags);
  EXPECT_EQ(j["uid"], run.uid);
  EXPECT_EQ(j["params"], run.params);
  EXPECT_EQ(j["metrics"], run.metrics);
  EXPECT_EQ(j["artifacts"]["histograms"], nlohmann::json({1, 2, 3}));
  EXPECT_EQ(j["created_at"], run.created_at);
}

}  // namespace
}  // namespace kvlab
