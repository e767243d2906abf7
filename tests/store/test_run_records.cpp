// Run records (issue 18, part 2): what each kind of run stores, and the numbers every view reads
// back from it, written the way the app writes them. Expected values are worked out by hand here.
#include "kvlab/store/run_records.h"

#include <gtest/gtest.h>

#include <string>

#include "kvlab/store/run_report.h"
#include "sample_runs.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

RunSummary summary_of(const NewRun& run, std::int64_t id = 1) {
  RunSummary s;
  s.id = id;
  s.kind = run.kind;
  s.source = run.source;
  s.method = run.method;
  s.label = run.label;
  s.metrics = run.metrics;
  return s;
}

const RunMetric* find(const std::vector<RunMetric>& metrics, const std::string& key) {
  for (const RunMetric& m : metrics) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

TEST(RunRecords, KindIdsRoundTrip) {
  for (RunKind k : {RunKind::Compression, RunKind::Eviction, RunKind::Quality, RunKind::Plan,
                    RunKind::Stream, RunKind::Bench, RunKind::Needle}) {
    EXPECT_EQ(run_kind_from_id(run_kind_id(k)), k);
  }
  EXPECT_FALSE(run_kind_from_id("compresion").has_value());
}

TEST(RunRecords, FormatsAsTheAppWritesThem) {
  EXPECT_EQ(format_metric_value(4.937, MetricFormat::Ratio), "4.94×");
  EXPECT_EQ(format_metric_value(3.2384, MetricFormat::Bits), "3.24");
  EXPECT_EQ(format_metric_value(7.207, MetricFormat::SignedPercent), "+721 %");
  EXPECT_EQ(format_metric_value(-0.0123, MetricFormat::SignedPercent), "-1.23 %");
  EXPECT_EQ(format_metric_value(0.4321, MetricFormat::Percent), "43.2 %");
  EXPECT_EQ(format_metric_value(0.0125, MetricFormat::Nats), "0.0125 nats");
  EXPECT_EQ(format_metric_value(0.84, MetricFormat::Seconds), "840 ms");
  EXPECT_EQ(format_metric_value(12.5, MetricFormat::Seconds), "12.50 s");
  EXPECT_EQ(format_metric_value(8192, MetricFormat::Count), "8192");
  EXPECT_EQ(format_metric_value(0, MetricFormat::Number), "0");
  EXPECT_EQ(format_metric_value(1.2e-5, MetricFormat::Number), "1.2e-05");
}

TEST(RunRecords, QualityRunWithEvictionStoresWhatTheCacheHeld) {
  QualityConfig config;
  config.eviction = EvictionConfig{};
  const NewRun run = quality_run(test::kivi2_with_h2o_at_20_percent(), config,
                                 {"smollm2.gguf", "file:text.txt", 1024, "mine"});
  EXPECT_EQ(run.kind, "quality");
  EXPECT_EQ(run.source, "model:smollm2.gguf");
  EXPECT_EQ(run.method, "h2o budget 20% + kivi-2 G=32 R=128");
  EXPECT_EQ(run.label, "mine");
  EXPECT_EQ(run.params["window"], 1024);
  EXPECT_FALSE(run.params["eviction"].contains("steps"));  // simulation-only options left out
  // 16 / 3.5 / 0.2 = 22.857x; 3.5 x 0.2 = 0.7 bits per value.
  EXPECT_NEAR(run.metrics["memory_ratio"].get<double>(), 22.857142857, 1e-6);
  EXPECT_NEAR(run.metrics["memory_bits_per_value"].get<double>(), 0.7, 1e-12);

  const RunRow row = run_row(summary_of(run));
  ASSERT_TRUE(row.ratio && row.bits_per_value);
  EXPECT_NEAR(*row.ratio, 22.857142857, 1e-6);
  EXPECT_NEAR(*row.bits_per_value, 0.7, 1e-12);
  EXPECT_FALSE(row.error.has_value()) << "a quality run measures no attention error";
  ASSERT_TRUE(row.perplexity_change && row.kl && row.context);
  EXPECT_DOUBLE_EQ(*row.perplexity_change, 7.207);
  EXPECT_DOUBLE_EQ(*row.kl, 0.0125);
  EXPECT_DOUBLE_EQ(*row.context, 1024);  // 2046 predicted tokens in 2 windows of 1024
  // A report that gives its window (every measure_quality() report does) is read for it:
  // overlapping windows predict more tokens than tokens / windows + 1 would say.
  NewRun strided = run;
  strided.metrics["window"] = 512;
  strided.metrics["stride"] = 128;
  EXPECT_DOUBLE_EQ(run_row(summary_of(strided)).context.value_or(0), 512);

  const auto metrics = run_metrics(summary_of(run));
  for (const char* key : {"memory_ratio", "perplexity_exact", "perplexity", "perplexity_change",
                          "next_token_agreement", "kl_mean", "kept_fraction"}) {
    EXPECT_NE(find(metrics, key), nullptr) << key;
  }
  EXPECT_EQ(find(metrics, "perplexity_change")->text(), "+721 %");
  EXPECT_EQ(find(metrics, "next_token_agreement")->text(), "43.2 %");
  EXPECT_EQ(find(metrics, "memory_ratio")->text(), "22.86×");
}

TEST(RunRecords, QualityRunsSavedBeforeTheMemoryRatioAreReadFromTheKeptFraction) {
  RunSummary old;
  old.kind = "quality";
  old.metrics = {{"ratio", 4.0}, {"bits_per_value", 4.0}, {"kept_fraction", 0.5}};
  const RunRow row = run_row(old);
  EXPECT_DOUBLE_EQ(*row.ratio, 8.0);
  EXPECT_DOUBLE_EQ(*row.bits_per_value, 2.0);
}

TEST(RunRecords, EvictionAndCompressionRows) {
  RunSummary evict;
  evict.kind = "eviction";
  evict.metrics = {{"tokens", 4096},
                   {"memory_ratio", 4.0},
                   {"attn_output_rel_error", 0.03},
                   {"needle_retained", 0.75}};
  const RunRow e = run_row(evict);
  EXPECT_DOUBLE_EQ(*e.context, 4096);
  EXPECT_DOUBLE_EQ(*e.bits_per_value, 4.0);  // 16 / 4
  EXPECT_DOUBLE_EQ(*e.needle_kept, 0.75);
  EXPECT_FALSE(e.perplexity_change.has_value());

  RunSummary compress;
  compress.kind = "compression";
  compress.metrics = {{"tokens", 8192},
                      {"ratio", 5.25},
                      {"bits_per_value", 3.05},
                      {"error", {{"attn_output_rel_error", 0.012}}}};
  const RunRow c = run_row(compress);
  EXPECT_DOUBLE_EQ(*c.context, 8192);
  EXPECT_DOUBLE_EQ(*c.ratio, 5.25);
  EXPECT_DOUBLE_EQ(*c.error, 0.012);

  RunSummary plan;
  plan.kind = "plan";
  plan.metrics = {{"context", 32768}};
  const RunRow p = run_row(plan);
  EXPECT_DOUBLE_EQ(*p.context, 32768);
  EXPECT_FALSE(p.ratio.has_value());
}

TEST(RunRecords, RunsAsPlannerSchemes) {
  RunRecord evict;
  evict.id = 9;
  evict.kind = "eviction";
  evict.method = "h2o";
  evict.metrics = {{"memory_ratio", 4.0}};
  auto scheme = run_scheme(evict, "run:9");
  ASSERT_TRUE(scheme.ok()) << scheme.message();
  EXPECT_EQ(scheme->id, "run:9");

  RunRecord plan;
  plan.id = 3;
  plan.kind = "plan";
  auto refused = run_scheme(plan, "run:3");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("run 3"), std::string::npos) << refused.message();
}

TEST(RunRecords, ReportWritesPercentagesAsTheAppDoesAndRefusesARunTwice) {
  QualityConfig config;
  config.eviction = EvictionConfig{};
  const NewRun run =
      quality_run(test::kivi2_with_h2o_at_20_percent(), config, {"m.gguf", "file:t.txt", 1024, ""});
  RunRecord record;
  static_cast<RunSummary&>(record) = summary_of(run, 4);
  record.params = run.params;
  auto html = runs_html_report({record});
  ASSERT_TRUE(html.ok()) << html.message();
  EXPECT_NE(html->find("+721 %"), std::string::npos);
  EXPECT_EQ(html->find("7.207"), std::string::npos) << "the raw fraction leaked into the report";

  auto twice = runs_html_report({record, record});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.message().find("run 4 is given twice"), std::string::npos) << twice.message();
}

TEST(RunRecords, TagsAreStoredAndListed) {
  auto store = RunsStore::open(store_test::fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(store.ok()) << store.message();
  auto id = store->save_run(store_test::sample_run("tagged"));
  ASSERT_TRUE(id.ok()) << id.message();
  ASSERT_TRUE(store->set_tags(*id, "baseline, long context").ok());
  ASSERT_TRUE(store->set_notes(*id, "the one to beat").ok());
  auto runs = store->list_runs();
  ASSERT_TRUE(runs.ok()) << runs.message();
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().tags, "baseline, long context");
  EXPECT_EQ(runs->front().notes, "the one to beat");
  EXPECT_FALSE(store->set_tags(*id + 100, "x").ok());
}

}  // namespace
}  // namespace kvlab
