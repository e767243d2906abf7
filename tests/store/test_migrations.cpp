// Schema versions: a new database reaches the latest version, a version-1 fixture migrates
// with its data intact, a newer or non-SQLite file is refused and left byte-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "kvlab/store/runs_store.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::file_bytes;
using store_test::fresh_dir;
using store_test::RawDb;

// The schema as kvlab shipped it at version 1, frozen here on purpose: it is what databases in
// the field look like, whatever the migration list becomes.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
  id           INTEGER PRIMARY KEY,
  created_at   TEXT NOT NULL,
  kind         TEXT NOT NULL,
  source       TEXT NOT NULL,
  method       TEXT NOT NULL,
  label        TEXT NOT NULL DEFAULT '',
  params_json  TEXT NOT NULL,
  metrics_json TEXT NOT NULL
);
CREATE TABLE artifacts (
  run_id    INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  name      TEXT NOT NULL,
  data_json TEXT NOT NULL,
  PRIMARY KEY (run_id, name)
);
PRAGMA user_version = 1;
)sql";

TEST(StoreMigrations, EmptyDatabaseReachesLatestVersion) {
  const auto path = fresh_dir() / "nested" / "folder" / "runs.sqlite";
  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(RunsStore::latest_schema_version(), 5);
  EXPECT_EQ(store->schema_version(), RunsStore::latest_schema_version());
  EXPECT_EQ(store->path(), path);

  RawDb raw(path);
  EXPECT_EQ(raw.text("PRAGMA user_version"), "5");
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "wal");
  const auto columns = raw.texts("SELECT name FROM pragma_table_info('runs')");
  EXPECT_NE(std::find(columns.begin(), columns.end(), "notes"), columns.end());
  EXPECT_EQ(raw.text("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND "
                     "tbl_name = 'runs' AND sql LIKE '%created_at%'"),
            "1");
}

TEST(StoreMigrations, ReopeningKeepsVersionAndRuns) {
  const auto path = fresh_dir() / "runs.sqlite";
  std::int64_t id = 0;
  {
    auto store = RunsStore::open(path);
    ASSERT_TRUE(store.ok()) << store.message();
    auto saved = store->save_run(store_test::sample_run("first"));
    ASSERT_TRUE(saved.ok()) << saved.message();
    id = *saved;
  }
  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(store->schema_version(), 5);
  auto run = store->load_run(id);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->label, "first");
}

TEST(StoreMigrations, VersionOneFixtureMigratesWithRunIntact) {
  const auto path = fresh_dir() / "runs.sqlite";
  {
    RawDb raw(path);
    raw.exec(kSchemaV1);
    raw.exec(R"sql(
INSERT INTO runs (id, created_at, kind, source, method, label, params_json, metrics_json)
VALUES (7, '2024-01-02T03:04:05.006Z', 'compression', 'file:kv.safetensors', 'int8',
        'old, "quoted"', '{"bits":8}', '{"ratio":2.0,"error":{"mse":0.5}}');
INSERT INTO artifacts (run_id, name, data_json) VALUES (7, 'histograms', '[1,2,3]');
)sql");
    ASSERT_EQ(raw.text("PRAGMA user_version"), "1");
  }

  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();
  EXPECT_EQ(store->schema_version(), 5);

  auto run = store->load_run(7);
  ASSERT_TRUE(run.ok()) << run.message();
  EXPECT_EQ(run->created_at, "2024-01-02T03:04:05.006Z");
  EXPECT_EQ(run->kind, "compression");
  EXPECT_EQ(run->source, "file:kv.safetensors");
  EXPECT_EQ(run->method, "int8");
  EXPECT_EQ(run->label, "old, \"quoted\"");
  EXPECT_EQ(run->notes, "");  // the v2 column, defaulted
  // The v5 column: a random uid of 32 hex digits.
  ASSERT_EQ(run->uid.size(), 32u) << run->uid;
  EXPECT_EQ(run->uid.find_first_not_of("0123456789abcdef"), std::string::npos) << run->uid;
  EXPECT_EQ(run->params, nlohmann::json({{"bits", 8}}));
  EXPECT_EQ(run->metrics["error"]["mse"], 0.5);
  ASSERT_EQ(run->artifacts.size(), 1u);
  EXPECT_EQ(run->artifacts.at("histograms"), nlohmann::json({1, 2, 3}));

  // The new column works, and new runs go in beside the old one.
  ASSERT_TRUE(store->set_notes(7, "kept from v1").ok());
  auto saved = store->save_run(store_test::sample_run("new"));
  ASSERT_TRUE(saved.ok()) << saved.message();
  auto runs = store->list_runs();
  ASSERT_TRUE(runs.ok()) << runs.message();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ(runs->front().label, "new");  // newest first
  EXPECT_EQ(store->load_run(7)->notes, "kept from v1");
  EXPECT_EQ(*store->integrity_check(), "ok");
}

TEST(StoreMigrations, FutureVersionIsRefusedAndUntouched) {
  const auto path = fresh_dir() / "runs.sqlite";
  {
    RawDb raw(path);
    raw.exec(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, shape_of_the_future BLOB);"
        "INSERT INTO runs VALUES (1, x'00ff');"
        "PRAGMA user_version = 99;");
  }
  const std::string before = file_bytes(path);
  ASSERT_FALSE(before.empty());

  auto store = RunsStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.message().find(path.string()), std::string::npos) << store.message();
  EXPECT_NE(store.message().find("schema version 99"), std::string::npos) << store.message();
  EXPECT_NE(store.message().find("newer"), std::string::npos) << store.message();

  EXPECT_EQ(file_bytes(path), before);
  EXPECT_FALSE(std::filesystem::exists(path.string() + "-wal"));
  RawDb raw(path);
  EXPECT_EQ(raw.text("PRAGMA user_version"), "99");
  EXPECT_EQ(raw.text("PRAGMA journal_mode"), "delete");
}

TEST(StoreMigrations, GarbageFileIsRefusedAndUntouched) {
  const auto path = fresh_dir() / "runs.sqlite";
  std::string garbage(8192, '\0');
  std::mt19937 rng(1234);
  for (char& c : garbage) c = static_cast<char>(rng() & 0xff);
  {
    std::ofstream out(path, std::ios::binary);
    out << garbage;
  }

  auto store = RunsStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.message().find(path.string()), std::string::npos) << store.message();
  EXPECT_NE(store.message().find("not a database"), std::string::npos) << store.message();
  EXPECT_EQ(file_bytes(path), garbage);
  EXPECT_FALSE(std::filesystem::exists(path.string() + "-wal"));
}

TEST(StoreMigrations, OtherProgramsDatabaseIsRefusedAndUntouched) {
  const auto path = fresh_dir() / "runs.sqlite";
  {
    RawDb raw(path);
    raw.exec(
        "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO photos VALUES (1, 'cat.jpg');");
  }
  const std::string before = file_bytes(path);
  auto store = RunsStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.message().find("not a kvlab runs database"), std::string::npos)
      << store.message();
  EXPECT_EQ(file_bytes(path), before);
}

TEST(StoreMigrations, UnopenablePathNamesTheFile) {
  const auto dir = fresh_dir();
  const auto blocker = dir / "not_a_folder";
  { std::ofstream(blocker) << "x"; }
  const auto path = blocker / "runs.sqlite";
  auto store = RunsStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.message().find(path.string()), std::string::npos) << store.message();
}

}  // namespace
}  // namespace kvlab
