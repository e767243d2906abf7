// restore_run (undo of delete_run) on a real database file: the run comes back exactly as it was
// loaded before the delete, artifacts included, and a taken id is refused without changes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kvlab/store/runs_store.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::fresh_dir;
using store_test::RawDb;
using store_test::sample_run;

void expect_same_record(const RunRecord& a, const RunRecord& b) {
  EXPECT_EQ(a.id, b.id);
  EXPECT_EQ(a.created_at, b.created_at);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.source, b.source);
  EXPECT_EQ(a.method, b.method);
  EXPECT_EQ(a.label, b.label);
  EXPECT_EQ(a.notes, b.notes);
  EXPECT_EQ(a.tags, b.tags);
  EXPECT_EQ(a.uid, b.uid);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.metrics, b.metrics);
  EXPECT_EQ(a.artifacts, b.artifacts);
}

std::vector<std::int64_t> listed_ids(const RunsStore& store) {
  auto runs = store.list_runs(-1);
  EXPECT_TRUE(runs.ok()) << runs.message();
  std::vector<std::int64_t> ids;
  if (runs.ok()) {
    for (const auto& r : *runs) ids.push_back(r.id);
  }
  return ids;
}

// Three runs with the middle one annotated: the one deleted and restored in most tests.
struct Fixture {
  std::filesystem::path path;
  RunsStore store;
  std::vector<std::int64_t> ids;
};

Fixture three_runs() {
  const auto path = fresh_dir() / "runs.sqlite";
  auto store = RunsStore::open(path);
  EXPECT_TRUE(store.ok()) << store.message();
  Fixture f{path, std::move(*store), {}};
  for (const char* label : {"first", "middle", "last"}) {
    NewRun run = sample_run(label);
    run.metrics["ratio"] = 1.0 / 3.0;  // a double that must survive the JSON round trip exactly
    auto id = f.store.save_run(run);
    EXPECT_TRUE(id.ok()) << id.message();
    f.ids.push_back(*id);
  }
  EXPECT_TRUE(f.store.set_notes(f.ids[1], "keep: the best kivi run, «ünïcode» notes").ok());
  EXPECT_TRUE(f.store.set_tags(f.ids[1], "best, kivi").ok());
  return f;
}

TEST(RestoreRun, DeleteThenRestoreGivesBackTheSameRecordArtifactsIncluded) {
  Fixture f = three_runs();
  const auto before_ids = listed_ids(f.store);
  auto original = f.store.load_run(f.ids[1]);
  ASSERT_TRUE(original.ok()) << original.message();
  ASSERT_EQ(original->artifacts.size(), 2u);

  ASSERT_TRUE(f.store.delete_run(f.ids[1]).ok());
  ASSERT_FALSE(f.store.load_run(f.ids[1]).ok());
  RawDb raw(f.path);
  const std::string count_artifacts =
      "SELECT count(*) FROM artifacts WHERE run_id = " + std::to_string(f.ids[1]);
  ASSERT_EQ(raw.text(count_artifacts), "0");  // the cascade really removed them

  auto restored = f.store.restore_run(*original);
  ASSERT_TRUE(restored.ok()) << restored.message();
  auto back = f.store.load_run(f.ids[1]);
  ASSERT_TRUE(back.ok()) << back.message();
  expect_same_record(*back, *original);
  EXPECT_EQ(raw.text(count_artifacts), "2");
  EXPECT_EQ(listed_ids(f.store), before_ids);  // same place in the newest-first list
  auto integrity = f.store.integrity_check();
  ASSERT_TRUE(integrity.ok()) << integrity.message();
  EXPECT_EQ(*integrity, "ok");
}

TEST(RestoreRun, RestoredRunSurvivesReopeningTheFile) {
  Fixture f = three_runs();
  auto original = f.store.load_run(f.ids[0]);
  ASSERT_TRUE(original.ok()) << original.message();
  ASSERT_TRUE(f.store.delete_run(f.ids[0]).ok());
  ASSERT_TRUE(f.store.restore_run(*original).ok());
  f.store = RunsStore::open(f.path.parent_path() / "other.sqlite").value();  // closes the file
  auto reopened = RunsStore::open(f.path);
  ASSERT_TRUE(reopened.ok()) << reopened.message();
  auto back = reopened->load_run(f.ids[0]);
  ASSERT_TRUE(back.ok()) << back.message();
  expect_same_record(*back, *original);
}

TEST(RestoreRun, RestoringTwiceIsAnErrorNamingTheIdAndChangesNothing) {
  Fixture f = three_runs();
  auto original = f.store.load_run(f.ids[1]);
  ASSERT_TRUE(original.ok()) << original.message();
  ASSERT_TRUE(f.store.delete_run(f.ids[1]).ok());
  ASSERT_TRUE(f.store.restore_run(*original).ok());

  RunRecord changed = *original;
  changed.label = "a different label";
  changed.artifacts["extra"] = {1, 2, 3};
  auto again = f.store.restore_run(changed);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("run " + std::to_string(f.ids[1])), std::string::npos)
      << again.message();
  EXPECT_NE(again.message().find("exists already"), std::string::npos) << again.message();
  EXPECT_NE(again.message().find(f.path.string()), std::string::npos) << again.message();
  auto back = f.store.load_run(f.ids[1]);
  ASSERT_TRUE(back.ok()) << back.message();
  expect_same_record(*back, *original);  // neither the label nor the extra artifact got in
}

TEST(RestoreRun, IdGivenToANewerRunIsRefusedAndTheNewerRunKept) {
  Fixture f = three_runs();
  auto newest = f.store.load_run(f.ids[2]);
  ASSERT_TRUE(newest.ok()) << newest.message();
  ASSERT_TRUE(f.store.delete_run(f.ids[2]).ok());
  // Without AUTOINCREMENT SQLite hands the largest id out again.
  auto reused = f.store.save_run(sample_run("newer"));
  ASSERT_TRUE(reused.ok()) << reused.message();
  ASSERT_EQ(*reused, f.ids[2]);

  auto restored = f.store.restore_run(*newest);
  ASSERT_FALSE(restored.ok());
  EXPECT_NE(restored.message().find("run " + std::to_string(f.ids[2])), std::string::npos)
      << restored.message();
  auto kept = f.store.load_run(*reused);
  ASSERT_TRUE(kept.ok()) << kept.message();
  EXPECT_EQ(kept->label, "newer");
}

TEST(RestoreRun, BadRecordsAreRefusedWithNothingWritten) {
  Fixture f = three_runs();
  auto original = f.store.load_run(f.ids[1]);
  ASSERT_TRUE(original.ok()) << original.message();
  ASSERT_TRUE(f.store.delete_run(f.ids[1]).ok());

  RunRecord no_id = *original;
  no_id.id = 0;
  auto refused = f.store.restore_run(no_id);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("positive"), std::string::npos) << refused.message();


  // Another run's uid (a record changed by hand, or imported since) is refused too.
  RunRecord taken_uid = *original;
  taken_uid.uid = f.store.load_run(f.ids[0])->uid;
  auto duplicate = f.store.restore_run(taken_uid);
  ASSERT_FALSE(duplicate.ok());
  EXPECT_NE(duplicate.message().find(taken_uid.uid), std::string::npos) << duplicate.message();

  EXPECT_FALSE(f.store.load_run(f.ids[1]).ok());  // neither attempt left a row behind
  EXPECT_EQ(listed_ids(f.store).size(), 2u);
  ASSERT_TRUE(f.store.restore_run(*original).ok());  // the good record still goes back
}

}  // namespace
}  // namespace kvlab
