// Several processes on one database file, and processes killed in the middle of writing: the
// store's WAL + BEGIN IMMEDIATE + busy timeout must lose nothing that was reported saved.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <set>
#include <thread>

#include "kvlab/store/runs_store.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

using store_test::fresh_dir;
using store_test::sample_run;

// Children never return into GoogleTest: they report through their exit status.
[[noreturn]] void child_exit(int code) {
  std::fflush(stderr);
  _exit(code);
}

bool write_all(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

// Whole records or nothing: false at end of file.
bool read_all(int fd, void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
  return true;
}

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "status " + std::to_string(status);
}

TEST(StoreProcesses, TwoProcessesSaving50RunsEachAtOnce) {
  const auto path = fresh_dir() / "runs.sqlite";  // not created yet: both race to migrate it
  constexpr int kProcesses = 2;
  constexpr int kRunsEach = 50;

  int gate[2];
  ASSERT_EQ(pipe(gate), 0);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(gate[1]);
      char byte;
      (void)read(gate[0], &byte, 1);  // returns 0 when the parent opens the gate
      auto store = RunsStore::open(path);
      if (!store) {
        std::fprintf(stderr, "process %d: %s\n", p, store.message().c_str());
        child_exit(2);
      }
      for (int i = 0; i < kRunsEach; ++i) {
        auto id = store->save_run(sample_run("p" + std::to_string(p) + "-" + std::to_string(i)));
        if (!id) {
          std::fprintf(stderr, "process %d run %d: %s\n", p, i, id.message().c_str());
          child_exit(3);
        }
      }
      child_exit(0);
    }
    children.push_back(pid);
  }
  close(gate[0]);
  close(gate[1]);  // both start now

  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << describe_exit(status);
  }

  auto store = RunsStore::open(path);
  ASSERT_TRUE(store.ok()) << store.message();
  auto runs = store->list_runs(-1);
  ASSERT_TRUE(runs.ok()) << runs.message();
  EXPECT_EQ(runs->size(), static_cast<std::size_t>(kProcesses * kRunsEach));
  std::set<std::string> labels;
  for (const auto& run : *runs) labels.insert(run.label);
  EXPECT_EQ(labels.size(), static_cast<std::size_t>(kProcesses * kRunsEach));
  EXPECT_EQ(*store->integrity_check(), "ok");
}

// What a crash-test child saves as its run number `index`: large enough that one transaction
// spans many pages of the WAL, and different for every run.
NewRun crash_run(std::int32_t index) {
  NewRun run = sample_run("crash-" + std::to_string(index));
  nlohmann::json codes = nlohmann::json::array();
  nlohmann::json lengths = nlohmann::json::array();
  for (int k = 0; k < 20000; ++k) {
    codes.push_back((index * 7 + k * 13) % 251);
    if (k % 4 == 0) lengths.push_back(1.0 / (1 + index + k));
  }
  run.artifacts = {{"codes", std::move(codes)}, {"code_lengths", std::move(lengths)}};
  return run;
}

// SIGKILLs and reaps a child when asked, or when a failed assertion leaves the scope early.
class ChildKiller {
 public:
  explicit ChildKiller(pid_t pid) : m_pid(pid) {}
  ChildKiller(const ChildKiller&) = delete;
  ChildKiller& operator=(const ChildKiller&) = delete;
  ~ChildKiller() {
    if (m_pid > 0) kill_now();
  }
  // The child's wait status.
  int kill_now() {
    kill(m_pid, SIGKILL);
    int status = 0;
    while (waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
    }
    m_pid = 0;
    return status;
  }

 private:
  pid_t m_pid;
};

struct Committed {
  std::int32_t index;
  std::int64_t id;
};

// Where the crash child was when it died, in memory shared with the parent.
struct ChildProbe {
  std::atomic<int> in_transaction;
};
ChildProbe* g_probe = nullptr;

// The child's JSON work outside SQLite would otherwise take most of its time, and most kills
// would land between transactions. Pausing at every few VM steps inside a write transaction
// makes the parent's SIGKILL land inside one (between statements, or with pages already
// spilled to the WAL thanks to the tiny page cache) most of the time.
int pause_inside_transactions(void* db) {
  if (sqlite3_get_autocommit(static_cast<sqlite3*>(db)) == 0) {
    g_probe->in_transaction.store(1);
    usleep(100);
  }
  return 0;
}

int instrument_connection(sqlite3* db, char**, const sqlite3_api_routines*) {
  sqlite3_progress_handler(db, 4, pause_inside_transactions, db);
  return sqlite3_exec(db, "PRAGMA cache_size = 4", nullptr, nullptr, nullptr);
}

// Saves crash_run(0), crash_run(1), ... and reports each one's id once save_run returned.
[[noreturn]] void crash_child(const std::filesystem::path& path, int report_fd) {
  // Every connection this process opens from now on, the store's included.
  sqlite3_auto_extension(reinterpret_cast<void (*)()>(&instrument_connection));
  auto store = RunsStore::open(path);
  if (!store) {
    std::fprintf(stderr, "crash child: %s\n", store.message().c_str());
    child_exit(2);
  }
  for (std::int32_t index = 0; index < 100000; ++index) {
    auto id = store->save_run(crash_run(index));
    g_probe->in_transaction.store(0);
    if (!id) {
      std::fprintf(stderr, "crash child run %d: %s\n", index, id.message().c_str());
      child_exit(3);
    }
    const Committed record{index, *id};
    if (!write_all(report_fd, &record, sizeof record)) child_exit(4);
  }
  child_exit(0);
}

TEST(StoreProcesses, KilledWriterLosesNothingCommitted) {
  const auto dir = fresh_dir();
  const auto path = dir / "runs.sqlite";
  // Kill after different numbers of committed runs, at different moments of the next save:
  // anywhere (the child is then mostly serialising JSON), or a while after it entered its
  // write transaction (between statements, pages spilled to the WAL, committing).
  struct Moment {
    int after_runs;
    bool inside_transaction;
    int delay_us;
  };
  const Moment moments[] = {{1, false, 0},    {2, true, 0},    {3, true, 700},
                            {5, false, 2500}, {8, true, 1500}, {4, true, 3000}};

  std::set<std::int64_t> committed;  // ids reported in every round so far
  void* shared =
      mmap(nullptr, sizeof(ChildProbe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(shared, MAP_FAILED);
  g_probe = new (shared) ChildProbe{};
  int killed_inside_transaction = 0;
  for (int round = 0; round < static_cast<int>(std::size(moments)); ++round) {
    const Moment& moment = moments[round];
    SCOPED_TRACE("round " + std::to_string(round));
    g_probe->in_transaction.store(0);
    int report[2];
    ASSERT_EQ(pipe(report), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(report[0]);
      crash_child(path, report[1]);
    }
    close(report[1]);
    ChildKiller child(pid);

    std::vector<Committed> reported;
    Committed record{};
    while (static_cast<int>(reported.size()) < moment.after_runs &&
           read_all(report[0], &record, sizeof record)) {
      reported.push_back(record);
    }
    if (moment.inside_transaction) {
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (g_probe->in_transaction.load() == 0 && std::chrono::steady_clock::now() < give_up) {
        std::this_thread::yield();
      }
    }
    std::this_thread::sleep_for(std::chrono::microseconds(moment.delay_us));
    const int status = child.kill_now();
    killed_inside_transaction += g_probe->in_transaction.load();
    // Whatever the child reported before dying was committed too.
    while (read_all(report[0], &record, sizeof record)) reported.push_back(record);
    close(report[0]);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << describe_exit(status);
    ASSERT_GE(static_cast<int>(reported.size()), moment.after_runs);

    auto store = RunsStore::open(path);
    ASSERT_TRUE(store.ok()) << store.message();
    auto integrity = store->integrity_check();
    ASSERT_TRUE(integrity.ok()) << integrity.message();
    EXPECT_EQ(*integrity, "ok");

    for (const auto& [index, id] : reported) {
      auto run = store->load_run(id);
      ASSERT_TRUE(run.ok()) << run.message();
      const NewRun expected = crash_run(index);
      EXPECT_EQ(run->label, expected.label);
      ASSERT_EQ(run->artifacts.size(), 2u) << "run " << id;
      for (const auto& [name, data] : expected.artifacts) {
        EXPECT_EQ(run->artifacts.at(name), data) << "run " << id << " artifact " << name;
      }
      committed.insert(id);
    }
    // Earlier rounds' runs are all still there, and no run was half saved: every run row
    // has both of its artifacts.
    auto runs = store->list_runs(-1);
    ASSERT_TRUE(runs.ok()) << runs.message();
    std::set<std::int64_t> present;
    for (const auto& summary : *runs) present.insert(summary.id);
    for (std::int64_t id : committed) EXPECT_TRUE(present.count(id)) << "run " << id << " lost";
    store_test::RawDb raw(path);
    EXPECT_EQ(raw.text("SELECT count(*) FROM runs WHERE "
                       "(SELECT count(*) FROM artifacts WHERE run_id = runs.id) != 2"),
              "0");
  }
  munmap(shared, sizeof(ChildProbe));
  g_probe = nullptr;
  // The point of the test: at least some kills interrupted a transaction.
  EXPECT_GT(killed_inside_transaction, 0);
}

}  // namespace
}  // namespace kvlab
