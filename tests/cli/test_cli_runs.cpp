// Issue 18: the runs database as the command line uses it. Reading commands never create a
// database; every stored metric of a run's kind is shown; ids in a report are distinct; unknown
// words get "did you mean".
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"

namespace {

using kvlab::cli_test::Output;
using kvlab::cli_test::run_kvlab;

// Runs a whole shell command line (not only kvlab's arguments): stdout and stderr together.
Output run_kvlab_via(const std::string& command) {
  Output o;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return o;
  char buffer[4096];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, p)) o.out.append(buffer, n);
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

std::filesystem::path fresh(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(KVLAB_TEST_TMPDIR) / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(CliRuns, ReadingCommandsRefuseAMissingDatabaseAndCreateNothing) {
  const auto dir = fresh("missing-db");
  const auto db = dir / "typo" / "x.sqlite";
  for (const std::string command : {"runs list", "runs show 1", "runs export 1", "runs report 1",
                                    "runs delete 1", "gpus remove my-gpu"}) {
    SCOPED_TRACE(command);
    const Output out = run_kvlab(command + " --db " + db.string());
    EXPECT_NE(out.code, 0) << out.out;
    EXPECT_NE(out.out.find(db.string()), std::string::npos) << out.out;
    EXPECT_NE(out.out.find("does not exist"), std::string::npos) << out.out;
    EXPECT_FALSE(std::filesystem::exists(dir / "typo")) << "the folder was created";
  }
  // The same through $KVLAB_DB.
  const Output env = run_kvlab("runs list", "KVLAB_DB='" + db.string() + "'");
  EXPECT_NE(env.code, 0) << env.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "typo"));
  // A command that computes without --save creates nothing either; with --save it creates both.
  EXPECT_EQ(
      run_kvlab("compress --source synthetic:tiny --context 64 --method int8 --db " + db.string())
          .code,
      0);
  EXPECT_FALSE(std::filesystem::exists(dir / "typo"));
  const Output saved = run_kvlab(
      "compress --source synthetic:tiny --context 64 --method int8 "
      "--save --db " +
      db.string());
  EXPECT_EQ(saved.code, 0) << saved.out;
  EXPECT_TRUE(std::filesystem::exists(db));
  EXPECT_EQ(run_kvlab("runs list --db " + db.string()).code, 0);
}

// Part 2: a quality run with eviction in the model loop (the real stories260K weights) is stored
// with what its cache held, and `runs show` and `runs list` print every number of its kind, as
// the app writes them.
TEST(CliRuns, QualityRunWithEvictionIsShownWithEveryMetric) {
  const std::string models = std::string(KVLAB_MODELS_DIR) + "/stories260K";
  if (!std::filesystem::exists(models + "/stories260K.bin")) {
    GTEST_SKIP() << models << " is absent: skipped";
  }
  const auto db = fresh("quality-show") / "runs.sqlite";
  const Output saved = run_kvlab("quality --model " + models +
                                 "/stories260K.bin --sample 254 --window 128 --method int8 "
                                 "--policy h2o --budget 0.5 --json --save --db " +
                                 db.string());
  ASSERT_EQ(saved.code, 0) << saved.out;
  const auto j = nlohmann::json::parse(saved.out);
  const double kept = j["kept_fraction"].get<double>();
  ASSERT_LT(kept, 0.9);
  // int8 is 8 bits plus its scale; with half the tokens evicted the cache holds about half.
  EXPECT_NEAR(j["memory_ratio"].get<double>(), j["ratio"].get<double>() / kept, 1e-9);
  EXPECT_NEAR(j["memory_bits_per_value"].get<double>(), j["bits_per_value"].get<double>() * kept,
              1e-9);
  const std::string id = std::to_string(j["run_id"].get<long long>());

  const Output shown = run_kvlab("runs show " + id + " --db " + db.string());
  ASSERT_EQ(shown.code, 0) << shown.out;
  for (const char* want :
       {"perplexity change", "next-token agreement", "mean KL", "perplexity, exact cache",
        "tokens kept", "memory vs fp16 (eviction counted)"}) {
    EXPECT_NE(shown.out.find(want), std::string::npos) << want << "\n" << shown.out;
  }
  char change[32];
  std::snprintf(change, sizeof change, "%+.3g %%", 100 * j["perplexity_change"].get<double>());
  EXPECT_NE(shown.out.find(change), std::string::npos) << change << "\n" << shown.out;

  const Output listed = run_kvlab("runs list --json --db " + db.string());
  ASSERT_EQ(listed.code, 0) << listed.out;
  const auto rows = nlohmann::json::parse(listed.out);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_NEAR(rows[0]["ratio"].get<double>(), j["memory_ratio"].get<double>(), 1e-9);
  EXPECT_TRUE(rows[0]["attn_output_rel_error"].is_null()) << "a quality run has no attention error";
  EXPECT_EQ(rows[0]["context"], 128);
  EXPECT_NEAR(rows[0]["perplexity_change"].get<double>(), j["perplexity_change"].get<double>(),
              1e-12);

  // The planner takes it as a scheme with the bits it really stored.
  const Output plan = run_kvlab("plan --scheme run:" + id + " --json --db " + db.string());
  ASSERT_EQ(plan.code, 0) << plan.out;
}

// Part 6: unknown words name the nearest valid ones; both spellings of ids are accepted; a report
// names each run once.
TEST(CliRuns, UnknownWordsSuggestTheNearestOnes) {
  const std::pair<std::string, std::string> cases[] = {
      {"compres --method int8", "did you mean 'compress'?"},
      {"runs lst", "did you mean 'list'?"},
      {"compress --source synthetic:tiny --context 64 --method kiwi", "did you mean 'kivi'?"},
      {"evict --source synthetic:tiny --policy h20", "did you mean 'h2o'?"},
      {"compress --source synthetic:lama3-8b --context 64", "did you mean 'llama3-8b'"},
      {"plan --model llama-3-8 --gpu h100-sxm", "did you mean 'llama-3-8b'"},
      {"plan --gpu h100sxn", "did you mean 'h100-sxm'"},
  };
  for (const auto& [args, want] : cases) {
    const Output out = run_kvlab(args);
    EXPECT_NE(out.code, 0) << args;
    EXPECT_NE(out.out.find(want), std::string::npos) << args << "\n" << out.out;
  }
}

TEST(CliRuns, PresetAndModelIdsAcceptBothSpellings) {
  // The presets are spelled llama3-8b, the model catalogue llama-3-8b: either works for both.
  const Output preset = run_kvlab(
      "compress --source synthetic:Llama-3-8B --layers 1 --context 64 --method int8 --json");
  ASSERT_EQ(preset.code, 0) << preset.out;
  EXPECT_EQ(nlohmann::json::parse(preset.out)["shape"]["name"], "llama3-8b");
  const Output plan = run_kvlab("plan --model llama3-8b --gpu H100-SXM --json");
  ASSERT_EQ(plan.code, 0) << plan.out;
  EXPECT_EQ(nlohmann::json::parse(plan.out)["model"], "llama-3-8b");
}

// Part 6: a progress bar on a terminal (script(1) gives the command one), none in a pipe and
// none with --json.
TEST(CliRuns, ProgressBarOnlyOnATerminalAndNotWithJson) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1)";
  const std::string compress = std::string(KVLAB_CLI_PATH) +
                               " compress --source synthetic:tiny --layers 4 --context 2048 "
                               "--method kivi";
  const Output tty = run_kvlab_via("script -qec \"" + compress + "\" /dev/null");
  ASSERT_EQ(tty.code, 0) << tty.out;
  EXPECT_NE(tty.out.find("\r  ["), std::string::npos) << tty.out;
  const Output json = run_kvlab_via("script -qec \"" + compress + " --json\" /dev/null");
  ASSERT_EQ(json.code, 0) << json.out;
  EXPECT_EQ(json.out.find("\r  ["), std::string::npos) << json.out;
  const Output piped = run_kvlab("compress --source synthetic:tiny --layers 4 --context 2048");
  ASSERT_EQ(piped.code, 0) << piped.out;
  EXPECT_EQ(piped.out.find("\r  ["), std::string::npos) << piped.out;
}

TEST(CliRuns, ReportRefusesTheSameRunTwice) {
  const auto db = fresh("report-twice") / "runs.sqlite";
  const Output saved =
      run_kvlab("compress --source synthetic:tiny --context 64 --method int8 --save --json --db " +
                db.string());
  ASSERT_EQ(saved.code, 0) << saved.out;
  const std::string id =
      std::to_string(nlohmann::json::parse(saved.out)["run_id"].get<long long>());
  const Output twice = run_kvlab("runs report " + id + " " + id + " --db " + db.string());
  EXPECT_NE(twice.code, 0);
  EXPECT_NE(twice.out.find("run " + id + " is given twice"), std::string::npos) << twice.out;
}

}  // namespace
