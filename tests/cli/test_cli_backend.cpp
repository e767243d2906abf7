// `--backend auto|cpu|cuda` and `kvlab bench gpu` through the real kvlab binary. On a machine
// without a usable GPU (or a build without CUDA) "cuda" and "bench gpu" fail with one line naming
// CUDA; where a GPU works they must succeed and say so, so the tests hold on either.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"

namespace {

using kvlab::cli_test::Output;
using kvlab::cli_test::run_kvlab;

const std::string kCompress =
    "compress --source synthetic:tiny --context 100 --method kvcomp --codec huffman";

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == s.size() - 1;
}

TEST(CliBackend, CpuRunsAndTheJsonNamesIt) {
  const Output o = run_kvlab(kCompress + " --backend cpu --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_TRUE(j.contains("backend")) << o.out;
  EXPECT_EQ(j["backend"]["id"], "cpu");
  EXPECT_FALSE(j["backend"]["device"].get<std::string>().empty());

  const Output text = run_kvlab(kCompress + " --backend cpu");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("backend  cpu ("), std::string::npos) << text.out;
}

TEST(CliBackend, AutoIsTheDefaultAndAlwaysRuns) {
  for (const std::string extra : {"", " --backend auto"}) {
    const Output o = run_kvlab(kCompress + extra + " --json");
    ASSERT_EQ(o.code, 0) << o.out;
    const std::string id = nlohmann::json::parse(o.out)["backend"]["id"];
    EXPECT_TRUE(id == "cpu" || id == "cuda") << id;
  }
}

TEST(CliBackend, CudaWithoutAGpuIsOneLineAndNonZero) {
  const Output o = run_kvlab(kCompress + " --backend cuda --json");
  if (o.code == 0) {  // a machine with a usable GPU and kvlab built with CUDA
    EXPECT_EQ(nlohmann::json::parse(o.out)["backend"]["id"], "cuda");
    return;
  }
  EXPECT_TRUE(one_line(o.out)) << o.out;
  EXPECT_NE(o.out.find("--backend cuda: CUDA"), std::string::npos) << o.out;
}

TEST(CliBackend, UnknownBackendNamesTheValidOnes) {
  const Output o = run_kvlab(kCompress + " --backend tpu");
  EXPECT_NE(o.code, 0);
  EXPECT_TRUE(one_line(o.out)) << o.out;
  for (const char* want : {"--backend tpu", "auto", "cpu", "cuda"}) {
    EXPECT_NE(o.out.find(want), std::string::npos) << want << ": " << o.out;
  }
}

TEST(CliBackend, BenchGpuFailsCleanlyWithoutAGpu) {
  const Output help = run_kvlab("bench gpu --help");
  EXPECT_EQ(help.code, 0) << help.out;
  for (const char* opt : {"--contexts", "--repeats", "--json"}) {
    EXPECT_NE(help.out.find(opt), std::string::npos) << opt;
  }
  const Output o = run_kvlab("bench gpu --contexts 256 --repeats 1 --json");
  if (o.code == 0) {  // a usable GPU: the measurements are there
    const auto j = nlohmann::json::parse(o.out);
    EXPECT_FALSE(j["device"].get<std::string>().empty());
    EXPECT_FALSE(j["rows"].empty());
    return;
  }
  EXPECT_TRUE(one_line(o.out)) << o.out;
  EXPECT_NE(o.out.find("bench gpu: CUDA"), std::string::npos) << o.out;
  EXPECT_NE(run_kvlab("bench gpu --repeats 0").code, 0);
}

}  // namespace
