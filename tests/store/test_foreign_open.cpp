// Issue 18, part 1: a run saved by the app must survive another process using the same database
// while code in the app's own process opens and closes the database file.
//
// POSIX advisory locks belong to the process: any close() of any descriptor of the database file
// (or of its -wal or -shm) drops every lock the process holds on it, SQLite's included
// (sqlite.org/howtocorrupt.html, section 2.2). In the app a file dialog sniffing the files of
// the folder for icons and MIME types does exactly that. Another process then believes it is
// alone, checkpoints and deletes the WAL on close, and the app's next save goes into a deleted
// file: lost when the app quits, and its id handed out again by the other process.
//
// The test plays the app (this process: one RunsStore kept for the whole session, plain
// open/read/close of the database files between its saves) and the command line (another
// program with its own RunsStore that lists and saves), 100 times in a row on one file.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "kvlab/store/runs_store.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::fresh_dir;
using store_test::sample_run;

// What a file dialog, QFileInfo or a MIME sniffer does to every file of a folder it shows.
void sniff_like_a_file_dialog(const std::filesystem::path& db) {
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string name = db.string() + suffix;
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;  // the WAL and shm files exist only while a connection is open
    char header[64];
    (void)::read(fd, header, sizeof header);
    ::close(fd);
  }
}

// The second process (a program of its own, not a fork: a fork would share SQLite's per-process
// lock bookkeeping with this one): lists the runs, saves one labelled `label` and returns the id
// it was told, or an error with what it printed.
Result<std::int64_t> command_line_saves(const std::filesystem::path& db, const std::string& label) {
  const std::string command =
      std::string("'") + KVLAB_STORE_TEST_CLIENT + "' '" + db.string() + "' '" + label + "' 2>&1";
  FILE* out = ::popen(command.c_str(), "r");
  if (out == nullptr) return make_error("cannot start " + command);
  std::string printed;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, out) != nullptr) printed += buffer;
  const int status = ::pclose(out);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return make_error("the second process failed: " + printed);
  }
  return std::stoll(printed);
}

TEST(StoreForeignOpen, NoRunLostWhenTheProcessOpensTheDatabaseFileBesideAnotherProcess) {
  const auto db = fresh_dir() / "runs.sqlite";
  std::map<std::int64_t, std::string> saved;  // id -> label, as each process was told

  auto app = RunsStore::open(db);
  ASSERT_TRUE(app.ok()) << app.message();
  constexpr int kRounds = 100;
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::string app_label = "app-" + std::to_string(round);
    auto first = app->save_run(sample_run(app_label + "a"));
    ASSERT_TRUE(first.ok()) << first.message();
    ASSERT_TRUE(saved.emplace(*first, app_label + "a").second) << "id " << *first << " twice";

    sniff_like_a_file_dialog(db);

    const std::string cli_label = "cli-" + std::to_string(round);
    auto cli_id = command_line_saves(db, cli_label);
    ASSERT_TRUE(cli_id.ok()) << cli_id.message();
    ASSERT_TRUE(saved.emplace(*cli_id, cli_label).second) << "id " << *cli_id << " given twice";

    auto second = app->save_run(sample_run(app_label + "b"));
    ASSERT_TRUE(second.ok()) << second.message();
    ASSERT_TRUE(saved.emplace(*second, app_label + "b").second) << "id " << *second << " twice";

    // The app sees the command line's run, and its own.
    auto listed = app->list_runs(-1);
    ASSERT_TRUE(listed.ok()) << listed.message();
    ASSERT_EQ(listed->size(), saved.size());
  }

  // The app quits; a fresh process opens the file: every run is there under the id its process
  // was told, and the file is sound.
  app = make_error("closed");
  auto reopened = RunsStore::open(db);
  ASSERT_TRUE(reopened.ok()) << reopened.message();
  auto runs = reopened->list_runs(-1);
  ASSERT_TRUE(runs.ok()) << runs.message();
  std::map<std::int64_t, std::string> present;
  for (const auto& run : *runs) present.emplace(run.id, run.label);
  EXPECT_EQ(present, saved);
  EXPECT_EQ(present.size(), static_cast<std::size_t>(3 * kRounds));
  EXPECT_EQ(*reopened->integrity_check(), "ok");
}

}  // namespace
}  // namespace kvlab
