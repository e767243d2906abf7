// The Quality page model alone, with no widget: a job measured on the real stories260K weights
// (../shared/models; skipped when absent) and saved as quality runs; a second model over the same
// SQLite store takes the newest run's model and text by itself; a stored run opens among its
// model's runs; incomplete jobs are refused with the reason.
#include <gtest/gtest.h>

#include <filesystem>

#include <QSignalSpy>

#include "common/run_controller.h"
#include "gui_test_support.h"
#include "quality/quality_configs.h"
#include "quality/quality_model.h"

namespace kvlab::gui {
namespace {

namespace fs = std::filesystem;

const std::string kModelDir = std::string(KVLAB_MODELS_DIR) + "/stories260K";
const std::string kModel = kModelDir + "/stories260K.bin";

QualityJob job_of(const QStringList& ids) {
  QualityJob job;
  job.model = fs::absolute(kModel).lexically_normal().string();
  job.text.tokens = 255;
  job.text.seed = 3;
  for (const QString& id : ids) {
    if (const QualityChoice* c = find_quality_choice(id)) job.choices.push_back(*c);
  }
  return job;
}

TEST(QualityModel, RefusesAnIncompleteJobWithTheReason) {
  QualityModel model(nullptr);
  QSignalSpy errors(&model, &QualityModel::error);
  EXPECT_FALSE(model.run(job_of({})));
  EXPECT_EQ(model.last_error(), "no configuration is checked: check at least one to measure");
  QualityJob no_file = job_of({"int8"});
  no_file.text.kind = QualityText::Kind::File;
  EXPECT_FALSE(model.run(no_file));
  EXPECT_EQ(model.last_error(), "no text file: choose one, or score the model's own sampled text");
  EXPECT_EQ(errors.count(), 2);
  EXPECT_FALSE(model.run_controller()->running());
}

TEST(QualityModel, MeasuresSavesAndAnotherModelFindsTheRuns) {
  if (!fs::exists(kModel)) GTEST_SKIP() << kModel << " is absent";
  const auto db = gui_test::fresh_dir() / "runs.sqlite";
  auto store = std::make_shared<RunsStore>(RunsStore::open(db).value());
  {
    QualityModel model(store);
    QSignalSpy keys(&model, &QualityModel::key_changed);
    ASSERT_TRUE(model.run_controller()->run_and_wait(
        [&] {
          return model.run(job_of({"int8", "kivi-2"}));
        },
        120'000))
        << model.last_error().toStdString();
    ASSERT_EQ(model.last_saved_run_ids().size(), 2u);
    ASSERT_EQ(model.points().size(), 2u);
    EXPECT_EQ(keys.count(), 1) << "the first measured run names the key once";
    // Sorted by memory ratio: INT8 (2×) before KIVI-2 (more).
    EXPECT_LT(model.points()[0].memory_ratio(), model.points()[1].memory_ratio());
    EXPECT_EQ(model.table()->rowCount(), 2);
    EXPECT_TRUE(model.heading().startsWith("2 configurations; 255 tokens predicted in 1 window;"))
        << model.heading().toStdString();
    EXPECT_EQ(model.chart_data().points.size(), 2u);
  }
  QualityModel again(store);
  QSignalSpy keys(&again, &QualityModel::key_changed);
  again.reload();
  ASSERT_EQ(keys.count(), 1);
  EXPECT_EQ(again.key()->model, fs::absolute(kModel).lexically_normal().string());
  EXPECT_EQ(again.key()->text, "sampled:255 tokens, seed 3");
  EXPECT_EQ(again.points().size(), 2u);
  // Another key shows nothing; the stored run brings its model and text back.
  again.set_key({"/elsewhere/model.bin", "sampled:10 tokens, seed 1"});
  EXPECT_TRUE(again.points().empty());
  EXPECT_EQ(again.empty_message(), "No quality runs of this model and text yet: Run measures them");
  auto listed = store->list_runs(-1);
  ASSERT_TRUE(listed.ok());
  ASSERT_TRUE(again.show_stored_run(listed->front().id));
  EXPECT_EQ(again.points().size(), 2u);
  EXPECT_GE(again.table()->row_of_run(listed->front().id), 0);
  EXPECT_FALSE(again.show_stored_run(999)) << "no such run";
}

}  // namespace
}  // namespace kvlab::gui
