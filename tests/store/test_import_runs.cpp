// Issue 20, part 8: runs carry a uid across databases; import_runs merges databases without
// duplicates, in one transaction, and refuses what it cannot read with nothing written.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <fmt/format.h>

#include "kvlab/store/runs_store.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::fresh_dir;
using store_test::RawDb;
using store_test::sample_run;

RunsStore open_store(const std::filesystem::path& path) {
  auto store = RunsStore::open(path);
  EXPECT_TRUE(store.ok()) << store.message();
  return std::move(*store);
}

TEST(RunUids, NewRunsGetDistinctRandomUidsAndAGivenUidIsKeptAndUnique) {
  const auto dir = fresh_dir();
  RunsStore store = open_store(dir / "runs.sqlite");
  std::set<std::string> uids;
  for (int i = 0; i < 20; ++i) {
    auto id = store.save_run(sample_run("r"));
    ASSERT_TRUE(id.ok()) << id.message();
    const std::string uid = store.load_run(*id)->uid;
    EXPECT_EQ(uid.size(), 32u) << uid;
    uids.insert(uid);
  }
  EXPECT_EQ(uids.size(), 20u);

  NewRun keyed = sample_run("keyed");
  keyed.uid = "sweep-00112233445566778899aabbccddeeff";
  auto id = store.save_run(keyed);
  ASSERT_TRUE(id.ok()) << id.message();
  EXPECT_EQ(store.load_run(*id)->uid, keyed.uid);
  auto found = store.find_run(keyed.uid);
  ASSERT_TRUE(found.ok()) << found.message();
  EXPECT_EQ(*found, std::optional<std::int64_t>(*id));
  EXPECT_FALSE(store.find_run("no-such-uid")->has_value());

  // The same uid again is refused, naming the uid and the run that has it; nothing is added.
  auto again = store.save_run(keyed);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find(keyed.uid), std::string::npos) << again.message();
  EXPECT_NE(again.message().find(fmt::format("run {}", *id)), std::string::npos) << again.message();
  EXPECT_EQ(store.list_runs(-1)->size(), 21u);
}

TEST(ImportRuns, MergesShardsKeepingEveryFieldAndSkipsWhatIsThereAlready) {
  const auto dir = fresh_dir();
  RunsStore a = open_store(dir / "a.sqlite");
  RunsStore b = open_store(dir / "b.sqlite");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(a.save_run(sample_run(fmt::format("a{}", i))).ok());
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(b.save_run(sample_run(fmt::format("b{}", i))).ok());
  const std::int64_t tagged = a.list_runs(-1)->front().id;
  ASSERT_TRUE(a.set_notes(tagged, "a note").ok());
  ASSERT_TRUE(a.set_tags(tagged, "x, y").ok());

  RunsStore merged = open_store(dir / "merged.sqlite");
  auto ra = merged.import_runs(dir / "a.sqlite");
  ASSERT_TRUE(ra.ok()) << ra.message();
  EXPECT_EQ(ra->imported, 3);
  EXPECT_EQ(ra->skipped, 0);
  auto rb = merged.import_runs(dir / "b.sqlite");
  ASSERT_TRUE(rb.ok()) << rb.message();
  EXPECT_EQ(rb->imported, 2);

  // Again, both: nothing new.
  for (const char* name : {"a.sqlite", "b.sqlite"}) {
    auto again = merged.import_runs(dir / name);
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_EQ(again->imported, 0) << name;
    EXPECT_GT(again->skipped, 0) << name;
  }

  // Every run of a and b is in the merge once, with the same fields and artifacts.
  auto runs = merged.list_runs(-1);
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 5u);
  for (RunsStore* from : {&a, &b}) {
    auto listed = from->list_runs(-1);
    ASSERT_TRUE(listed.ok()) << listed.message();
    for (const auto& s : *listed) {
      auto loaded = from->load_run(s.id);
      ASSERT_TRUE(loaded.ok()) << loaded.message();
      const RunRecord& original = *loaded;
      auto id = merged.find_run(original.uid);
      ASSERT_TRUE(id.ok() && id->has_value()) << original.uid;
      auto copied = merged.load_run(**id);
      ASSERT_TRUE(copied.ok()) << copied.message();
      const RunRecord& copy = *copied;
      EXPECT_EQ(copy.created_at, original.created_at);
      EXPECT_EQ(copy.label, original.label);
      EXPECT_EQ(copy.notes, original.notes);
      EXPECT_EQ(copy.tags, original.tags);
      EXPECT_EQ(copy.params, original.params);
      EXPECT_EQ(copy.metrics, original.metrics);
      EXPECT_EQ(copy.artifacts, original.artifacts);
    }
  }
  EXPECT_EQ(*merged.integrity_check(), "ok");
}

TEST(ImportRuns, AnOlderSchemaIsMigratedAndItsRunsGetUids) {
  const auto dir = fresh_dir();
  const auto old_path = dir / "v4.sqlite";
  {
    RawDb raw(old_path);
    raw.exec(R"sql(
CREATE TABLE runs (id INTEGER PRIMARY KEY, created_at TEXT NOT NULL, kind TEXT NOT NULL,
  source TEXT NOT NULL, method TEXT NOT NULL, label TEXT NOT NULL DEFAULT '',
  params_json TEXT NOT NULL, metrics_json TEXT NOT NULL, notes TEXT NOT NULL DEFAULT '',
  tags TEXT NOT NULL DEFAULT '');
CREATE TABLE artifacts (run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name TEXT NOT NULL, data_json TEXT NOT NULL, PRIMARY KEY (run_id, name));
CREATE TABLE catalog (kind TEXT NOT NULL, id TEXT NOT NULL, entry_json TEXT NOT NULL,
  PRIMARY KEY (kind, id));
CREATE INDEX runs_by_created_at ON runs(created_at);
INSERT INTO runs (id, created_at, kind, source, method, params_json, metrics_json)
VALUES (1, '2025-01-01T00:00:00.000Z', 'quality', 'model:m.gguf', 'int8', '{}', '{"kl_mean":0.1}'),
       (2, '2025-01-02T00:00:00.000Z', 'quality', 'model:m.gguf', 'int4', '{}', '{"kl_mean":0.9}');
INSERT INTO artifacts VALUES (2, 'x', '[7]');
PRAGMA user_version = 4;
)sql");
  }
  RunsStore merged = open_store(dir / "merged.sqlite");
  auto r = merged.import_runs(old_path);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->imported, 2);
  auto runs = merged.list_runs(-1);
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ(runs->front().method, "int4");  // newest first, as in the old database
  EXPECT_EQ(merged.load_run(runs->front().id)->artifacts.at("x"), nlohmann::json({7}));
  EXPECT_NE(runs->front().uid, runs->back().uid);
  // The source was migrated in place, and importing it again adds nothing.
  EXPECT_EQ(RawDb(old_path).text("PRAGMA user_version"), "5");
  EXPECT_EQ(merged.import_runs(old_path)->imported, 0);
}

TEST(ImportRuns, ItselfAMissingFileAndGarbageAreRefusedWithNothingWritten) {
  const auto dir = fresh_dir();
  RunsStore store = open_store(dir / "runs.sqlite");
  ASSERT_TRUE(store.save_run(sample_run("mine")).ok());

  auto self = store.import_runs(dir / "runs.sqlite");
  ASSERT_FALSE(self.ok());
  EXPECT_NE(self.message().find("itself"), std::string::npos) << self.message();

  auto missing = store.import_runs(dir / "nope.sqlite");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("nope.sqlite"), std::string::npos) << missing.message();
  EXPECT_FALSE(std::filesystem::exists(dir / "nope.sqlite"));

  {
    std::ofstream garbage(dir / "garbage.sqlite", std::ios::binary);
    garbage << "this is not a database, only some text long enough to have a header of sorts";
  }
  auto bad = store.import_runs(dir / "garbage.sqlite");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("garbage.sqlite"), std::string::npos) << bad.message();
  EXPECT_EQ(store.list_runs(-1)->size(), 1u);

  // A database whose second run cannot be read: the first, read already, is not kept either.
  const auto broken = dir / "broken.sqlite";
  {
    RunsStore b = open_store(broken);
    ASSERT_TRUE(b.save_run(sample_run("good")).ok());
    ASSERT_TRUE(b.save_run(sample_run("bad params")).ok());
  }
  RawDb(broken).exec("UPDATE runs SET params_json = '{not json' WHERE label = 'bad params'");
  auto partial = store.import_runs(broken);
  ASSERT_FALSE(partial.ok());
  EXPECT_NE(partial.message().find("params"), std::string::npos) << partial.message();
  EXPECT_EQ(store.list_runs(-1)->size(), 1u);
}

}  // namespace
}  // namespace kvlab
