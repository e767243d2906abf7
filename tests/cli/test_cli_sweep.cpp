// Issue 20, part 8: `kvlab sweep FILE --shard I/N` makes its part of a sweep into its own
// database, a shard run again resumes, and `kvlab runs import` merges the shards into one
// without duplicates. The numbers of a sweep's run are those of the same run made by `kvlab
// quality` or `kvlab compress`. On the real stories260K weights.
// Issue 48, part 3: `kvlab sweep FILE --slurm DIR` writes the Slurm array job of the parts (run
// here without Slurm, task by task, as Slurm would), `--submit` hands it to sbatch, and `kvlab
// runs import --sweep FILE --parts N` names the parts a merge still lacks. tests/slurm runs it on
// a real Slurm.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"

namespace {

namespace fs = std::filesystem;
using kvlab::cli_test::Output;
using kvlab::cli_test::run_kvlab;

const std::string kModel = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";

std::string fresh(const std::string& name) {
  const fs::path dir = fs::path(KVLAB_TEST_TMPDIR) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

nlohmann::json parse_json(const Output& o) {
  auto j = nlohmann::json::parse(o.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << o.out;
  return j;
}

// The runs of a database as `runs list --json` prints them.
nlohmann::json runs_in(const std::string& db) {
  const Output o = run_kvlab("runs list --json --db " + db);
  EXPECT_EQ(o.code, 0) << o.out;
  return parse_json(o);
}

TEST(CliSweep, ShardsMadeApartMergeIntoTheWholeSweepOnceWithTheCommandsNumbers) {
  if (!fs::exists(kModel)) GTEST_SKIP() << kModel << " is absent: skipped";
  const std::string dir = fresh("sweep-quality");
  const std::string sweep = write(dir + "/sweep.json", R"({
    "kind": "quality",
    "models": [")" + kModel + R"("],
    "texts": ["sampled:96"],
    "window": 48,
    "methods": [
      {"method": "int8"},
      {"method": "kivi", "bits": 2, "residual": 16},
      {"eviction": {"policy": "h2o", "budget": "50%"}}
    ]})");

  // Shard 1 of 2 takes items 0 and 2, shard 2 item 1.
  Output a = run_kvlab("sweep " + sweep + " --shard 1/2 --json --db " + dir + "/a.sqlite");
  ASSERT_EQ(a.code, 0) << a.out;
  auto ja = parse_json(a);
  EXPECT_EQ(ja["items_in_sweep"], 3);
  EXPECT_EQ(ja["made"], 2);
  EXPECT_EQ(ja["items"][0]["item"], 0);
  EXPECT_EQ(ja["items"][1]["item"], 2);
  Output b = run_kvlab("sweep " + sweep + " --shard 2/2 --json --db " + dir + "/b.sqlite");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(parse_json(b)["made"], 1);

  // Run again, shard 1 makes nothing: its items are in its database (a preempted job resumes).
  Output again = run_kvlab("sweep " + sweep + " --shard 1/2 --json --db " + dir + "/a.sqlite");
  ASSERT_EQ(again.code, 0) << again.out;
  auto jagain = parse_json(again);
  EXPECT_EQ(jagain["made"], 0);
  EXPECT_EQ(jagain["present"], 2);
  EXPECT_EQ(runs_in(dir + "/a.sqlite").size(), 2u);

  // Merge; merging again (and a shard twice) adds nothing.
  const std::string all = dir + "/all.sqlite";
  Output merge = run_kvlab("runs import " + dir + "/a.sqlite " + dir + "/b.sqlite --db " + all);
  ASSERT_EQ(merge.code, 0) << merge.out;
  EXPECT_NE(merge.out.find("3 runs imported from 2 databases"), std::string::npos) << merge.out;
  Output remerge = run_kvlab("runs import " + dir + "/a.sqlite " + dir + "/a.sqlite " + dir +
                             "/b.sqlite --json --db " + all);
  ASSERT_EQ(remerge.code, 0) << remerge.out;
  EXPECT_EQ(parse_json(remerge)["imported"], 0);
  EXPECT_EQ(parse_json(remerge)["skipped"], 5);
  const auto merged = runs_in(all);
  ASSERT_EQ(merged.size(), 3u);

  // The whole sweep against the merged database: every item is there.
  Output dry = run_kvlab("sweep " + sweep + " --dry-run --json --db " + all);
  ASSERT_EQ(dry.code, 0) << dry.out;
  EXPECT_EQ(parse_json(dry)["present"], 3);

  // The int8 run of the sweep has the numbers `kvlab quality` computes for the same settings.
  Output direct =
      run_kvlab("quality --model " + kModel + " --sample 96 --window 48 --method int8 --json");
  ASSERT_EQ(direct.code, 0) << direct.out;
  const auto jd = parse_json(direct);
  bool found = false;
  for (const auto& r : merged) {
    if (r["method"] != "int8 per-tensor") continue;
    found = true;
    Output shown =
        run_kvlab("runs show " + std::to_string(r["id"].get<int>()) + " --json --db " + all);
    ASSERT_EQ(shown.code, 0) << shown.out;
    const auto m = parse_json(shown)["metrics"];
    EXPECT_DOUBLE_EQ(m["perplexity"].get<double>(), jd["perplexity"].get<double>());
    EXPECT_DOUBLE_EQ(m["kl_mean"].get<double>(), jd["kl_mean"].get<double>());
    EXPECT_EQ(m["text"], "sampled:96 tokens, seed 1");
  }
  EXPECT_TRUE(found) << merged.dump(2);
}

TEST(CliSweep, CompressionSweepGivesTheNumbersOfKvlabCompress) {
  const std::string dir = fresh("sweep-compression");
  const std::string sweep = write(dir + "/sweep.json", R"({
    "kind": "compression", "sources": ["synthetic:tiny"], "context": 64,
    "methods": [{"method": "int8"}, {"method": "kvcomp", "rel_scale": 0.1, "codec": "huffman"}]})");
  Output o = run_kvlab("sweep " + sweep + " --json --db " + dir + "/runs.sqlite");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_EQ(parse_json(o)["made"], 2);
  Output direct = run_kvlab(
      "compress --source synthetic:tiny --context 64 --method kvcomp --rel-scale 0.1 --codec "
      "huffman --json");
  ASSERT_EQ(direct.code, 0) << direct.out;
  const auto runs = runs_in(dir + "/runs.sqlite");
  ASSERT_EQ(runs.size(), 2u);
  const auto newest = runs[0];  // the kvcomp item, made last
  Output shown = run_kvlab("runs show " + std::to_string(newest["id"].get<int>()) +
                           " --json --db " + dir + "/runs.sqlite");
  ASSERT_EQ(shown.code, 0) << shown.out;
  const auto m = parse_json(shown)["metrics"];
  EXPECT_DOUBLE_EQ(m["ratio"].get<double>(), parse_json(direct)["ratio"].get<double>());
}

TEST(CliSweep, BadFilesAndShardsFailFastCreatingNothing) {
  const std::string dir = fresh("sweep-bad");
  const std::string db = dir + "/runs.sqlite";
  const std::string bad = write(dir + "/bad.json", R"({"kind": "quality", "models": ["m"],
      "texts": ["t"], "methods": [{"method": "kivi", "bits": 3}]})");
  Output o = run_kvlab("sweep " + bad + " --db " + db);
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.out.find(bad), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("methods[0]"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(db));

  const std::string good = write(dir + "/good.json", R"({"kind": "compression",
      "sources": ["synthetic:tiny"], "context": 32, "methods": [{"method": "int8"}]})");
  o = run_kvlab("sweep " + good + " --shard 3/2 --db " + db);
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.out.find("--shard 3/2"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(db));

  // --dry-run creates no database, and refuses a file that is not one.
  o = run_kvlab("sweep " + good + " --dry-run --db " + db);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("to do"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(db));
  const std::string garbage = write(dir + "/garbage.sqlite", "not a database at all, only text");
  o = run_kvlab("sweep " + good + " --dry-run --db " + garbage);
  EXPECT_NE(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("garbage.sqlite"), std::string::npos) << o.out;

  o = run_kvlab("runs import " + dir + "/missing.sqlite --db " + db);
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.out.find("missing.sqlite"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(db));
}

TEST(CliSweep, AFailingItemIsReportedAndTheOthersAreStillMade) {
  const std::string dir = fresh("sweep-failing");
  const std::string sweep = write(dir + "/sweep.json", R"({
    "kind": "compression", "sources": ["file:)" + dir + R"(/absent.safetensors", "synthetic:tiny"],
    "context": 32, "methods": [{"method": "int8"}]})");
  Output o = run_kvlab("sweep " + sweep + " --db " + dir + "/runs.sqlite");
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("absent.safetensors"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("1 made"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("1 failed"), std::string::npos) << o.out;
  EXPECT_EQ(runs_in(dir + "/runs.sqlite").size(), 1u);
}

std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream text;
  text << f.rdbuf();
  return text.str();
}

const char* kThreeItems = R"({"kind": "compression", "sources": ["synthetic:tiny"], "context": 32,
    "methods": [{"method": "int8"}, {"method": "int4"}, {"method": "kivi", "bits": 2}]})";

TEST(CliSweep, SlurmArrayScriptMakesEachPartAndTheMergeNamesThePartsMissing) {
  const std::string dir = fresh("sweep-slurm");
  const std::string sweep = write(dir + "/sweep.json", kThreeItems);
  const std::string job = dir + "/job";
  Output o = run_kvlab("sweep " + sweep + " --slurm " + job + " --parts 3 --sbatch=--time=5");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("sbatch " + job + "/sweep.sbatch"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("runs import --sweep"), std::string::npos) << o.out;
  const std::string script = read(job + "/sweep.sbatch");
  const std::vector<std::string> lines{
      "#SBATCH --array=1-3\n",
      "#SBATCH --job-name=kvlab-sweep-sweep\n",
      "#SBATCH --output=" + job + "/logs/part-%a.log\n",
      "#SBATCH --time=5\n",
      fs::canonical(KVLAB_CLI_PATH).string() + "' sweep '" + sweep + "'",
      "--shard \"${SLURM_ARRAY_TASK_ID}/3\""};
  for (const std::string& line : lines) {
    EXPECT_NE(script.find(line), std::string::npos) << line << " is not in\n" << script;
  }
  EXPECT_TRUE(fs::is_directory(job + "/logs"));

  // Task 2 as Slurm would run it, from another folder.
  const auto task = [&](int k) {
    const std::string command = "cd / && SLURM_ARRAY_TASK_ID=" + std::to_string(k) + " bash " +
                                job + "/sweep.sbatch >/dev/null 2>&1";
    return std::system(command.c_str());
  };
  ASSERT_EQ(task(2), 0);
  EXPECT_EQ(runs_in(job + "/parts/part-2.sqlite").size(), 1u);

  // Parts 1 and 3 missing: merged what is there, named them, exit 1.
  const std::string all = dir + "/all.sqlite";
  const std::string merge =
      "runs import --sweep " + sweep + " --parts 3 " + job + "/parts/part-2.sqlite --db " + all;
  o = run_kvlab(merge);
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("2 of 3 items are not in"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("part 1 of 3 (item 0), part 3 of 3 (item 2)"), std::string::npos) << o.out;
  EXPECT_EQ(runs_in(all).size(), 1u);
  o = run_kvlab(merge + " --json");
  EXPECT_EQ(o.code, 1) << o.out;
  // The JSON on stdout, the message on stderr, in whichever order the pipe got them.
  const std::size_t open = o.out.find('{'), close = o.out.rfind('}');
  ASSERT_NE(open, std::string::npos) << o.out;
  const auto j = parse_json(Output{0, o.out.substr(open, close + 1 - open)});
  EXPECT_EQ(j["sweep"]["missing_parts"], nlohmann::json({1, 3}));
  EXPECT_EQ(j["sweep"]["present"], 1);
  // Without --parts the items are named.
  o = run_kvlab("runs import --sweep " + sweep + " " + job + "/parts/part-2.sqlite --db " + all);
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("item 0 (synthetic:tiny"), std::string::npos) << o.out;

  // The rest made, merged twice: every item once.
  ASSERT_EQ(task(1), 0);
  ASSERT_EQ(task(3), 0);
  for (int n = 0; n < 2; ++n) {
    o = run_kvlab("runs import --sweep " + sweep + " --parts 3 " + job + "/parts/part-1.sqlite " +
                  job + "/parts/part-2.sqlite " + job + "/parts/part-3.sqlite --db " + all);
    EXPECT_EQ(o.code, 0) << o.out;
    EXPECT_NE(o.out.find("all 3 items of the sweep"), std::string::npos) << o.out;
  }
  EXPECT_EQ(runs_in(all).size(), 3u);
}

TEST(CliSweep, SlurmSubmitHandsTheScriptToSbatchAndSaysWhyItCouldNot) {
  const std::string dir = fresh("sweep-slurm-submit");
  const std::string sweep = write(dir + "/sweep.json", kThreeItems);
  const std::string bin = dir + "/bin";
  fs::create_directories(bin);
  const auto fake_sbatch = [&](const std::string& body) {
    write(bin + "/sbatch", "#!/bin/sh\n" + body + "\n");
    chmod((bin + "/sbatch").c_str(), 0755);
  };
  const std::string path = "PATH=" + bin + ":/usr/bin:/bin";

  fake_sbatch("echo \"$@\" > " + dir + "/args; echo '4242;cluster'");
  Output o = run_kvlab("sweep " + sweep + " --slurm " + dir + "/job --submit", path);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("submitted job 4242"), std::string::npos) << o.out;
  EXPECT_EQ(read(dir + "/args"), "--parsable " + dir + "/job/sweep.sbatch\n");
  // --parts by default: one per item.
  EXPECT_NE(read(dir + "/job/sweep.sbatch").find("--array=1-3\n"), std::string::npos);

  fake_sbatch("echo 'sbatch: error: invalid partition specified: gpu' >&2; exit 1");
  o = run_kvlab("sweep " + sweep + " --slurm " + dir + "/job --submit", path);
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("'sbatch --parsable " + dir + "/job/sweep.sbatch' failed (exit status 1)"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("invalid partition specified: gpu"), std::string::npos) << o.out;

  o = run_kvlab("sweep " + sweep + " --slurm " + dir + "/job --submit", "PATH=" + dir + "/none");
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("sbatch: not found on PATH"), std::string::npos) << o.out;
  EXPECT_TRUE(fs::exists(dir + "/job/sweep.sbatch"));
}

TEST(CliSweep, SlurmAndMergeFlagsRefuseBadInputNamingIt) {
  const std::string dir = fresh("sweep-slurm-bad");
  const std::string sweep = write(dir + "/sweep.json", kThreeItems);
  const std::string job = dir + "/job";
  const auto refused = [&](const std::string& args, const std::string& says) {
    const Output o = run_kvlab(args);
    EXPECT_NE(o.code, 0) << args << ": " << o.out;
    EXPECT_NE(o.out.find(says), std::string::npos) << args << ": " << o.out;
  };
  refused("sweep " + sweep + " --slurm " + job + " --parts 0", "--parts 0: a sweep needs at least");
  refused("sweep " + sweep + " --slurm " + job + " --parts 4",
          "--parts 4: " + sweep + " has only 3 items");
  EXPECT_FALSE(fs::exists(job)) << "a refused --parts made the folder";
  const std::string file = write(dir + "/file", "");
  refused("sweep " + sweep + " --slurm " + file + "/job", "--slurm " + file + "/job: cannot make");
  refused("sweep " + sweep + " --slurm '" + dir + "/with space'", "spaces");
  refused("sweep " + sweep + " --slurm " + job + " --sbatch time=5", "--sbatch \"time=5\"");
  refused("sweep " + sweep + " --slurm " + job + " --shard 1/2", "--shard");
  refused("sweep " + sweep + " --slurm " + job + " --dry-run", "--dry-run");
  refused("sweep " + sweep + " --parts 2", "--slurm");
  refused("sweep " + sweep + " --submit", "--slurm");

  const std::string part = dir + "/part.sqlite";
  ASSERT_EQ(run_kvlab("sweep " + sweep + " --shard 1/3 --db " + part).code, 0);
  refused("runs import " + part + " --parts 3 --db " + dir + "/all.sqlite", "--sweep");
  refused("runs import --sweep " + sweep + " --parts 4 " + part + " --db " + dir + "/all.sqlite",
          "--parts 4: " + sweep + " has 3 items");
  refused("runs import --sweep " + dir + "/absent.json " + part + " --db " + dir + "/all.sqlite",
          "absent.json");
  EXPECT_FALSE(fs::exists(dir + "/all.sqlite")) << "a refused merge made the database";
}

}  // namespace
