// The Compression and Eviction page models alone, with no widget: a job run through the model's
// runner and run controller, its report against the engine's own computed here, the run saved in
// a real SQLite store, a stored report shown without the fresh run's stream and cache, and the
// stale state.
#include <gtest/gtest.h>

#include <QSignalSpy>

#include "common/run_controller.h"
#include "compression/compression_model.h"
#include "eviction/eviction_model.h"
#include "gui_test_support.h"

namespace kvlab::gui {
namespace {

constexpr int kTimeoutMs = 120'000;

SourceSpec tiny_spec() {
  SourceSpec spec;
  spec.synthetic = gui_test::tiny_source();
  return spec;
}

TEST(CompressionModel, RunsSavesAndShowsAStoredReportBack) {
  auto store =
      std::make_shared<RunsStore>(RunsStore::open(gui_test::fresh_dir() / "runs.sqlite").value());
  CompressionModel model(store);
  QSignalSpy shown(&model, &CompressionModel::report_shown);
  QSignalSpy saved(&model, &CompressionModel::run_saved);
  const CompressionJob job{tiny_spec(), gui_test::tiered_method(), "cpu"};
  ASSERT_TRUE(model.run_controller()->run_and_wait([&] { return model.run(job); }, kTimeoutMs))
      << model.last_error().toStdString();
  const CompressionReport want =
      gui_test::engine_report(gui_test::tiny_source(), gui_test::tiered_method());
  ASSERT_TRUE(model.report().has_value());
  EXPECT_EQ(model.report()->bytes.total(), want.bytes.total());
  EXPECT_DOUBLE_EQ(model.report()->ratio, want.ratio);
  EXPECT_DOUBLE_EQ(model.report()->error.mse, want.error.mse);
  ASSERT_EQ(shown.count(), 1);
  EXPECT_TRUE(shown.at(0).at(0).toString().startsWith("computed in"));
  ASSERT_EQ(saved.count(), 1);
  EXPECT_EQ(saved.at(0).at(0).toLongLong(), model.last_saved_run_id());
  auto stored = store->load_run(model.last_saved_run_id());
  ASSERT_TRUE(stored.ok()) << stored.message();
  EXPECT_EQ(stored->method, want.method);
  ASSERT_NE(model.compressed_cache(), nullptr);
  EXPECT_EQ(model.compressed_cache()->tokens(), 96);
  EXPECT_FALSE(model.last_run_reused_cache());
  EXPECT_EQ(model.cache_note(job.source), "The cache in memory will be reused.");

  // Only the method changes: the cache in memory is reused.
  CompressionJob int8 = job;
  int8.method = MethodConfig{};
  int8.method.kind = MethodKind::Int8;
  ASSERT_TRUE(model.run_controller()->run_and_wait([&] { return model.run(int8); }, kTimeoutMs))
      << model.last_error().toStdString();
  EXPECT_TRUE(model.last_run_reused_cache());
  EXPECT_EQ(model.cache_note_after_run(), "Reused the cache in memory (only the method changed).");

  // A stored report: shown, with no stream or cache of a fresh run; inputs changing make it
  // stale.
  model.run_controller()->input_changed();
  EXPECT_TRUE(model.run_controller()->stale());
  model.show_report(want, "stored run #1");
  EXPECT_FALSE(model.run_controller()->stale());
  EXPECT_EQ(model.compressed_cache(), nullptr);
  EXPECT_FALSE(model.stream().has_value());
  EXPECT_EQ(shown.last().at(0).toString(), "stored run #1");
}

TEST(CompressionModel, ABadSourceFailsWithItsNameAndNothingIsSaved) {
  CompressionModel model(nullptr);
  QSignalSpy errors(&model, &CompressionModel::error);
  SourceSpec missing;
  missing.kind = SourceSpec::Kind::File;
  missing.file = "/nonexistent/kvlab/cache.safetensors";
  const CompressionJob job{missing, gui_test::tiered_method(), "cpu"};
  EXPECT_FALSE(model.run_controller()->run_and_wait([&] { return model.run(job); }, kTimeoutMs));
  EXPECT_TRUE(model.last_error().contains("/nonexistent/kvlab/cache.safetensors"))
      << model.last_error().toStdString();
  ASSERT_EQ(errors.count(), 1);
  EXPECT_TRUE(errors.at(0).at(0).toString().startsWith("The run failed: "));
  EXPECT_FALSE(model.report().has_value());
  EXPECT_EQ(model.last_saved_run_id(), 0);
}

TEST(EvictionModel, RunsAPolicyAndSavesIt) {
  auto store =
      std::make_shared<RunsStore>(RunsStore::open(gui_test::fresh_dir() / "runs.sqlite").value());
  EvictionModel model(store);
  EvictionConfig h2o;
  h2o.policy = EvictionPolicy::H2O;
  h2o.budget = Budget{0.5, true};
  h2o.steps = 16;
  const EvictionJob job = make_eviction_job(tiny_spec(), h2o, std::nullopt);
  QSignalSpy shown(&model, &EvictionModel::reports_shown);
  ASSERT_TRUE(model.run_controller()->run_and_wait([&] { return model.run(job); }, kTimeoutMs))
      << model.last_error().toStdString();
  ASSERT_EQ(shown.count(), 1);
  ASSERT_TRUE(model.report().has_value());
  EXPECT_TRUE(model.fresh());
  EXPECT_FALSE(model.compare().has_value());
  // The engine's own simulation of the same job.
  auto cache = generate_synthetic(job.source.synthetic);
  ASSERT_TRUE(cache.ok()) << cache.message();
  auto want = simulate_eviction(*cache, job.policy);
  ASSERT_TRUE(want.ok()) << want.message();
  EXPECT_DOUBLE_EQ(model.report()->kept_tokens, want->kept_tokens);
  EXPECT_DOUBLE_EQ(model.report()->attention_mass_retained, want->attention_mass_retained);
  EXPECT_GT(model.last_saved_run_id(), 0);
  EXPECT_TRUE(store->load_run(model.last_saved_run_id()).ok());
  model.show_reports(*want, std::nullopt, "stored");
  EXPECT_FALSE(model.fresh());
  EXPECT_EQ(model.origin(), "stored");
}

}  // namespace
}  // namespace kvlab::gui
