// save / list / load / delete round trips on a real database file.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "kvlab/store/runs_store.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::fresh_dir;
using store_test::RawDb;
using store_test::sample_run;

// 2024-05-01T12:34:56.789Z
bool looks_like_utc_iso8601(const std::string& text) {
  const std::string shape = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (text.size() != shape.size()) return false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (shape[i] == 'd' ? !digit : text[i] != shape[i]) return false;
  }
  return true;
}

TEST(RunsStore, SaveLoadRoundTripWithArtifacts) {
  const auto path = fresh_dir() / "runs.sqlite";
  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();

  const NewRun in = sample_run("kivi 2-bit, g32");
  auto id = store->save_run(in);
  ASSERT_TRUE(id.ok()) << id.message();
  EXPECT_GT(*id, 0);

  auto out = store->load_run(*id);
  ASSERT_TRUE(out.ok()) << out.message();
  EXPECT_EQ(out->id, *id);
  EXPECT_EQ(out->kind, in.kind);
  EXPECT_EQ(out->source, in.source);
  EXPECT_EQ(out->method, in.method);
  EXPECT_EQ(out->label, in.label);
  EXPECT_EQ(out->notes, "");
  EXPECT_EQ(out->params, in.params);
  EXPECT_EQ(out->metrics, in.metrics);
  ASSERT_EQ(out->artifacts.size(), in.artifacts.size());
  for (const auto& [name, data] : in.artifacts) EXPECT_EQ(out->artifacts.at(name), data) << name;
  EXPECT_TRUE(looks_like_utc_iso8601(out->created_at)) << out->created_at;
}

TEST(RunsStore, ListIsNewestFirstAndLimited) {
  auto store = RunsStore::open(fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(store.ok()) << store.message();
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = store->save_run(sample_run("run " + std::to_string(i)));
    ASSERT_TRUE(id.ok()) << id.message();
    ids.push_back(*id);
  }
  auto all = store->list_runs();
  ASSERT_TRUE(all.ok()) << all.message();
  ASSERT_EQ(all->size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*all)[i].id, ids[4 - i]);
    EXPECT_EQ((*all)[i].label, "run " + std::to_string(4 - i));
    EXPECT_EQ((*all)[i].metrics["ratio"], 5.25);
  }
  auto two = store->list_runs(2);
  ASSERT_TRUE(two.ok()) << two.message();
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ(two->front().id, ids.back());
  EXPECT_EQ(store->list_runs(-1)->size(), 5u);
  EXPECT_EQ(store->list_runs(0)->size(), 0u);
}

TEST(RunsStore, DeleteCascadesToArtifacts) {
  const auto path = fresh_dir() / "runs.sqlite";
  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();
  auto keep = store->save_run(sample_run("keep"));
  auto gone = store->save_run(sample_run("gone"));
  ASSERT_TRUE(keep.ok() && gone.ok());

  RawDb raw(path);
  EXPECT_EQ(raw.text("SELECT count(*) FROM artifacts"), "4");

  auto deleted = store->delete_run(*gone);
  ASSERT_TRUE(deleted.ok()) << deleted.message();
  EXPECT_EQ(raw.text("SELECT count(*) FROM artifacts"), "2");
  EXPECT_EQ(raw.text("SELECT count(*) FROM artifacts WHERE run_id = " + std::to_string(*gone)),
            "0");
  EXPECT_FALSE(store->load_run(*gone).ok());
  EXPECT_TRUE(store->load_run(*keep).ok());
  EXPECT_EQ(store->list_runs()->size(), 1u);

  auto again = store->delete_run(*gone);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.message().find("run " + std::to_string(*gone) + " not found"), std::string::npos)
      << again.message();
  EXPECT_EQ(*store->integrity_check(), "ok");
}

TEST(RunsStore, MissingRunIsAnErrorNamingItAndTheFile) {
  const auto path = fresh_dir() / "runs.sqlite";
  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();
  auto run = store->load_run(42);
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.message().find("run 42 not found"), std::string::npos) << run.message();
  EXPECT_NE(run.message().find(path.string()), std::string::npos) << run.message();
  EXPECT_FALSE(store->set_notes(42, "x").ok());
}

TEST(RunsStore, NotesAreSaved) {
  auto store = RunsStore::open(fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(store.ok()) << store.message();
  auto id = store->save_run(sample_run("n"));
  ASSERT_TRUE(id.ok()) << id.message();
  ASSERT_TRUE(store->set_notes(*id, "multi\nline, \"notes\"").ok());
  EXPECT_EQ(store->load_run(*id)->notes, "multi\nline, \"notes\"");
}

TEST(RunsStore, DuplicateArtifactNameIsRefusedAndNothingSaved) {
  auto store = RunsStore::open(fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(store.ok()) << store.message();
  NewRun run = sample_run("dup");
  run.artifacts.emplace_back("histograms", nlohmann::json::array());
  auto id = store->save_run(run);
  ASSERT_FALSE(id.ok());
  EXPECT_NE(id.message().find("artifact 'histograms' appears twice"), std::string::npos)
      << id.message();
  EXPECT_EQ(store->list_runs()->size(), 0u);
}

TEST(RunsStore, BytesThatAreNotUtf8AreSavedAsTextNotThrown) {
  // Issue 42: text is text, whatever its bytes. Each byte that is not UTF-8 is stored as U+FFFD,
  // in the JSON columns and the plain ones alike, and the run reads back.
  auto store = RunsStore::open(fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(store.ok()) << store.message();
  NewRun run = sample_run("utf8");
  run.params["name"] = std::string("\xff\xfe");
  run.label = "x\xffy";
  auto id = store->save_run(run);
  ASSERT_TRUE(id.ok()) << id.message();
  auto back = store->load_run(*id);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->params["name"], "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(back->label, "x\xEF\xBF\xBDy");
}

TEST(RunsStore, MovedStoreKeepsWorkingAndMovedFromReportsErrors) {
  auto opened = RunsStore::open(fresh_dir() / "runs.sqlite");
  ASSERT_TRUE(opened.ok()) << opened.message();
  RunsStore store = std::move(*opened);
  RunsStore other = std::move(store);
  EXPECT_TRUE(other.save_run(sample_run("moved")).ok());
  EXPECT_FALSE(store.save_run(sample_run("x")).ok());  // NOLINT: use after move, on purpose
  EXPECT_EQ(store.schema_version(), 0);                // NOLINT
}

// Sets (or unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : m_name(name) {
    if (const char* old = std::getenv(name)) m_old = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (m_old) {
      setenv(m_name, m_old->c_str(), 1);
    } else {
      unsetenv(m_name);
    }
  }

 private:
  const char* m_name;
  std::optional<std::string> m_old;
};

TEST(RunsStore, DefaultDbPathFollowsEnvironment) {
  {
    ScopedEnv db("KVLAB_DB", "/tmp/x/my.sqlite");
    ScopedEnv xdg("XDG_DATA_HOME", "/data");
    EXPECT_EQ(default_db_path(), "/tmp/x/my.sqlite");
  }
  {
    ScopedEnv db("KVLAB_DB", nullptr);
    ScopedEnv xdg("XDG_DATA_HOME", "/data");
    EXPECT_EQ(default_db_path(), "/data/kvlab/runs.sqlite");
  }
  {
    ScopedEnv db("KVLAB_DB", "");
    ScopedEnv xdg("XDG_DATA_HOME", nullptr);
    ScopedEnv home("HOME", "/home/someone");
    EXPECT_EQ(default_db_path(), "/home/someone/.local/share/kvlab/runs.sqlite");
  }
}

}  // namespace
}  // namespace kvlab
