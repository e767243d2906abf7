// kvlab plan, plan sweep, models and gpus, run as a user would; the numbers are the hand-worked
// golden values of the planner tests, so the CLI passes them on unchanged.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"

namespace {

using kvlab::cli_test::Output;

// Every command gets its own database through KVLAB_DB, so the user's real one is never read.
Output run(const std::string& db, const std::string& args) {
  return kvlab::cli_test::run_kvlab(args, "KVLAB_DB='" + db + "'");
}

std::string fresh(const std::string& name) {
  const std::string dir = std::string(KVLAB_TEST_TMPDIR) + "/plan-" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(CliPlan, JsonHasTheDocumentedFieldsAndGoldenNumbers) {
  const std::string db = fresh("json") + "/runs.sqlite";
  const Output o = run(db,
                       "plan --model llama-2-7b --gpu a100-80gb --context 4096 --batch 29 "
                       "--scheme fp16,kivi2 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  // Every name says what it counts: the whole model, one GPU, or the whole deployment.
  for (const char* k : {"kv_bytes_per_token_model",
                        "kv_bytes_per_sequence_per_gpu",
                        "kv_bytes_batch_per_gpu",
                        "kv_bytes_batch_deployment",
                        "weights_bytes_per_gpu",
                        "kv_capacity_bytes_per_gpu",
                        "fits",
                        "max_batch",
                        "max_context",
                        "min_gpus",
                        "ttft_ms",
                        "tpot_ms",
                        "tokens_per_s_per_user",
                        "tokens_per_s_per_gpu",
                        "tokens_per_s_deployment",
                        "decode_step",
                        "prefill",
                        "decompression_source",
                        "formula",
                        "decompression_rates"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["kv_bytes_per_token_model"], 524288.0);
  EXPECT_EQ(j["kv_bytes_batch_per_gpu"], 29ull * 2147483648ull);
  EXPECT_EQ(j["weights_bytes_per_gpu"], 13480000000ull);
  // One sequence: (13.48e9 B of weights + 2 GiB of KV) / (2,039 GB/s × 0.8) per token.
  EXPECT_NEAR(j["schemes"][0]["decode_step"]["weights_read_ms"].get<double>(),
              13.48e9 / (2039e9 * 0.8) * 1e3, 1e-9);
  EXPECT_EQ(j["fits"], true);
  EXPECT_EQ(j["max_batch"], 29);
  ASSERT_EQ(j["schemes"].size(), 2u);
  EXPECT_GT(j["schemes"][1]["max_batch"].get<int>(), 29 * 3);  // KIVI-2: about 3.6x smaller
  EXPECT_FALSE(std::filesystem::exists(db));                   // nothing saved, nothing created
}

TEST(CliPlan, ExplainWritesTheFormulaOut) {
  const std::string db = fresh("explain") + "/runs.sqlite";
  const Output o = run(db,
                       "plan --model llama-3-70b --gpu h100-sxm --tp 16 --context 8192 "
                       "--batch 4 --explain");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("TP 16 is more than the 8 kv_heads"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("2 (K and V) × 80 layers × 1 kv_heads × 128 head_dim × 8,192 tokens × 2 "
                       "bytes = 320.0 MiB"),
            std::string::npos)
      << o.out;
}

TEST(CliPlan, SavedScenarioAndMeasuredScheme) {
  const std::string db = fresh("save") + "/runs.sqlite";
  Output c = run(db, "compress --source synthetic:tiny --context 256 --method kivi --save --json");
  ASSERT_EQ(c.code, 0) << c.out;
  const auto cj = nlohmann::json::parse(c.out);
  const std::string scheme = "run:" + std::to_string(cj["run_id"].get<long long>());
  const Output o = run(db,
                       "plan --model llama-3-8b --gpu l40s --context 8192 --batch 8 "
                       "--scheme fp16," +
                           scheme + " --save --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  // The measured scheme stores exactly the run's bits per value.
  EXPECT_NEAR(j["schemes"][1]["kv_bytes_per_token_model"].get<double>(),
              131072.0 / 16 * cj["bits_per_value"].get<double>(), 1e-6);
  const Output show = run(db, "runs show " + std::to_string(j["run_id"].get<long long>()));
  EXPECT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("plan"), std::string::npos) << show.out;
  const Output bad = run(db, "plan --scheme run:999");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("run 999 not found"), std::string::npos) << bad.out;
}

TEST(CliPlan, SweepCsvHasEveryCombination) {
  const std::string db = fresh("sweep") + "/runs.sqlite";
  const Output o = run(db,
                       "plan sweep --model qwen2.5-7b --gpus h100-sxm,rtx-4090 --schemes "
                       "fp16,fp8,int4 --contexts 1024,8192 --batches 1,16,64 --csv");
  ASSERT_EQ(o.code, 0) << o.out;
  int lines = 0;
  for (char ch : o.out) lines += ch == '\n';
  EXPECT_EQ(lines, 1 + 2 * 3 * 2 * 3);
  EXPECT_EQ(o.out.rfind("gpu,scheme,context,batch,fits", 0), 0u);
}

TEST(CliPlan, ModelsImportAndUserGpus) {
  const std::string dir = fresh("import");
  const std::string db = dir + "/runs.sqlite";
  std::filesystem::create_directories(dir + "/my-llama");
  std::ofstream(dir + "/my-llama/config.json")
      << R"({"model_type": "llama", "num_hidden_layers": 16, "num_attention_heads": 32,
             "num_key_value_heads": 8, "hidden_size": 2048, "intermediate_size": 8192,
             "vocab_size": 128256, "max_position_embeddings": 131072, "head_dim": 64})";
  Output o = run(db, "models import " + dir + "/my-llama/config.json --save");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("my-llama: 16 layers"), std::string::npos) << o.out;
  o = run(db, "models list");
  EXPECT_NE(o.out.find("my-llama"), std::string::npos) << o.out;
  o = run(db, "gpus add --id lab-gpu --memory-gib 40 --bandwidth 1200");
  ASSERT_EQ(o.code, 0) << o.out;
  o = run(db, "plan --model my-llama --gpu lab-gpu --context 65536 --batch 2 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  // 2 × 16 × 8 × 64 × 2 bytes per token.
  EXPECT_EQ(nlohmann::json::parse(o.out)["kv_bytes_per_token_model"], 32768.0);
  // A GPU given without compute figures plans on memory alone, and says so.
  EXPECT_EQ(nlohmann::json::parse(o.out)["prefill"]["compute_ms"], 0.0);
  o = run(db, "plan --model my-llama --gpu lab-gpu --context 65536 --batch 2");
  EXPECT_NE(o.out.find("compute is not charged"), std::string::npos) << o.out;
  o = run(db, "gpus add --id lab-gpu2 --memory-gib 40 --bandwidth 1200 --bf16-tflops 100");
  ASSERT_EQ(o.code, 0) << o.out;
  o = run(db, "plan --model my-llama --gpu lab-gpu2 --context 65536 --batch 2 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_GT(nlohmann::json::parse(o.out)["prefill"]["compute_ms"].get<double>(), 0);
  EXPECT_EQ(run(db, "gpus remove lab-gpu").code, 0);
  o = run(db, "plan --model my-llama --gpu lab-gpu");
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.out.find("unknown GPU 'lab-gpu'"), std::string::npos) << o.out;
}

TEST(CliPlan, AdviseSaysWhereCompressionLosesAndWhereItPays) {
  const std::string db = fresh("advise") + "/runs.sqlite";
  Output o = run(db, "plan advise --model llama-3-70b --gpu h100 --tp 4 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  // The model's 8K limit drops the longer default contexts.
  EXPECT_EQ(j["contexts"], nlohmann::json::array({2048, 8192}));
  EXPECT_EQ(j["contexts_beyond_the_model"], nlohmann::json::array({32768, 131072}));
  bool dont = false, compress = false, loss = false;
  for (const auto& c : j["cells"]) {
    dont = dont || c["verdict"] == "don't compress";
    compress = compress || c["verdict"].get<std::string>().rfind("compress: ", 0) == 0;
    for (const auto& s : c["schemes"]) {
      if (s["gain_vs_fp16"].is_number() && s["gain_vs_fp16"].get<double>() < 0 &&
          s["attention_bound_by"] == "decompression") {
        loss = true;
      }
    }
  }
  EXPECT_TRUE(dont && compress && loss) << o.out;
  o = run(db, "plan advise --model llama-3-70b --gpu h100 --tp 4");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("kvcomp loses"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("loses -"), std::string::npos) << "no double negative: " << o.out;
  EXPECT_NE(o.out.find("at a TPOT of"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("within 2% of the most"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("waits on decompression"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("no quality run of this model"), std::string::npos) << o.out;
}

// Issue 43, item 4: a batch that does not fit prints no decode speed as if it ran.
TEST(CliPlan, ABatchThatDoesNotFitHasNoTpot) {
  const std::string db = fresh("no-fit") + "/runs.sqlite";
  const Output o = run(db,
                       "plan --model llama-3-8b --gpu h100 --context 8192 --batch 64 "
                       "--scheme fp16,fp8");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("the batch does not fit: at most 55 sequences"), std::string::npos) << o.out;
  const auto fp8 = o.out.find("\nfp8 ", o.out.find("latency"));
  ASSERT_NE(fp8, std::string::npos) << o.out;
  EXPECT_NE(o.out.find("-bound)", fp8), std::string::npos) << "fp8 fits and decodes: " << o.out;
}

TEST(CliPlan, StoredGpuBenchmarkSetsTheDecompressionRates) {
  const std::string db = fresh("bench") + "/runs.sqlite";
  Output o = run(db, std::string("bench gpu --from-json ") + KVLAB_SOURCE_DIR +
                         "/bench/results/gpu_h100_2026-11-23.json --save --gpu-id h100-sxm --json");
  ASSERT_EQ(o.code, 0) << o.out;
  o = run(db, "plan --model llama-3-8b --gpu h100-sxm --scheme kvcomp --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["decompression_rates"]["measured"], true);
  // That run's Huffman pair at 32K: 2 × 33,554,432 values in 81.4 + 134.0 µs (rounded here).
  EXPECT_NEAR(j["decompression_rates"]["huffman_values_per_s"].get<double>(), 3.115e11, 0.01e11);
  EXPECT_NE(j["decompression_source"].get<std::string>().find("run 1"), std::string::npos)
      << j["decompression_source"];
  // Another GPU: scaled from this one.
  o = run(db, "plan --model llama-3-8b --gpu a100-80gb --scheme kvcomp --json");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(nlohmann::json::parse(o.out)["decompression_source"].get<std::string>().find(
                "default on h100-sxm"),
            std::string::npos)
      << o.out;
}

// A CPU entered as a device gets its own rates from `kvlab bench cpu --save`: the planner's
// packed rate is the INT4 cache's decode step, fp16 values of K and V over its time.
TEST(CliPlan, StoredCpuBenchmarkSetsThisMachinesRates) {
  const std::string db = fresh("cpu-bench") + "/runs.sqlite";
  Output o = run(db,
                 "gpus add --id this-cpu --name 'this machine' --memory-gib 24 --bandwidth 30 "
                 "--bf16-tflops 0.25 --fp32-tflops 0.25");
  ASSERT_EQ(o.code, 0) << o.out;
  o = run(db, "bench cpu --contexts 512 --steps 3 --json --save --gpu-id this-cpu");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto bench = nlohmann::json::parse(o.out.substr(o.out.find('{')));
  double packed_us = 0;
  int kernels = 0;
  for (const auto& r : bench["rows"]) {
    EXPECT_EQ(r["context"], 512);
    EXPECT_GT(r["microseconds"].get<double>(), 0);
    EXPECT_EQ(r["fp16_bytes"].get<double>(), 4.0 * 512 * 8 * 128);  // K and V, 8 heads of 128
    if (r["kernel"] == "packed4_attention") packed_us = r["microseconds"].get<double>();
    ++kernels;
  }
  EXPECT_EQ(kernels, 4);
  ASSERT_GT(packed_us, 0);
  o = run(db, "plan --model llama-3-8b --gpu this-cpu --context 4096 --scheme int4 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto plan = nlohmann::json::parse(o.out);
  EXPECT_EQ(plan["decompression_rates"]["measured"], true);
  EXPECT_NEAR(plan["decompression_rates"]["packed_values_per_s"].get<double>(),
              2.0 * 512 * 8 * 128 / (packed_us * 1e-6), 1e-6 * 2.0 * 512 * 8 * 128 / packed_us);
  EXPECT_NE(plan["decompression_source"].get<std::string>().find("measured on this device"),
            std::string::npos)
      << plan["decompression_source"];
}

TEST(CliPlan, BadInputNamesTheProblem) {
  const std::string db = fresh("bad") + "/runs.sqlite";
  const std::pair<const char*, const char*> cases[] = {
      {"plan --batch 0", "--batch 0"},
      {"plan --model llama-2-7b --context 9000", "limit of 4096"},
      {"plan --gpu h900", "unknown GPU 'h900'"},
      {"plan --model nope", "unknown model 'nope'"},
      {"plan --tp 3", "--tp 3"},
      {"plan --scheme fp12", "unknown scheme 'fp12'"},
      {"plan --util 2", "--util 2"},
      {"plan sweep --contexts 10,x", "--contexts"},
      {"models import /does/not/config.json", "/does/not/config.json"},
      {"gpus add --id h100-sxm --memory-gib 80 --bandwidth 1", "built-in"},
      {"plan --compute-efficiency 0", "--compute-efficiency 0"},
      {"plan --model meta-llama/Llama-3.1-7B", "did you mean"},
      {"plan --scheme fp16+offload+evict:0.5+evict:10", "one eviction budget"},
      {"plan advise --model llama-3-8b --contexts 100000", "beyond"},
      {"plan advise --schemes fp8,fp16", "first scheme must be the uncompressed"},
      {"bench gpu --from-json /does/not/exist.json", "/does/not/exist.json"},
      {"bench gpu --from-json /does/not/exist.json --save", "/does/not/exist.json"},
      {"bench cpu --from-json /does/not/exist.json", "/does/not/exist.json"},
      {"bench cpu --contexts 512 --steps 1 --save", "--gpu-id"},
      {"bench cpu --contexts 10", "--contexts"},
  };
  for (const auto& [args, want] : cases) {
    const Output o = run(db, args);
    EXPECT_NE(o.code, 0) << args;
    EXPECT_NE(o.out.find(want), std::string::npos) << args << "\n" << o.out;
  }
}

}  // namespace

namespace {

// kvlab capture on the real stories260K weights (skipped when ../shared/models is absent).
TEST(CliCapture, WritesACacheEveryCommandReads) {
  const std::string models = std::string(KVLAB_MODELS_DIR) + "/stories260K";
  if (!std::filesystem::exists(models + "/stories260K.bin")) {
    GTEST_SKIP() << models << " is absent: skipped";
  }
  const std::string dir = fresh("capture");
  const std::string out = dir + "/cap.safetensors";
  Output o = run(dir + "/runs.sqlite", "capture --model " + models +
                                           "/stories260K.bin --prompt 'Once upon a time' "
                                           "--max-tokens 40 --out " +
                                           out + " --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["tokens"], 45);  // BOS + 4 prompt tokens + 40 generated
  EXPECT_EQ(j["generated"].get<std::string>().rfind(", there was a little girl named Lily", 0), 0u)
      << j["generated"];
  o = run(dir + "/runs.sqlite", "sources info " + out);
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("5 layers, 8 q_heads, 4 kv_heads, head_dim 8"), std::string::npos) << o.out;
  // A prompt file is named, not echoed whole (issue 43).
  std::string story;
  for (int i = 0; i < 12; ++i) story += "The cat sat on the mat and looked at the sun. ";
  const std::string prompt = dir + "/prompt.txt";
  std::ofstream(prompt) << story;
  o = run(dir + "/runs.sqlite", "capture --model " + models + "/stories260K.bin --prompt-file " +
                                    prompt + " --max-tokens 4 --out " + dir + "/p.safetensors");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("[the prompt of " + prompt), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find(story.substr(0, 60)), std::string::npos) << o.out;
  o = run(dir + "/runs.sqlite", "evict --source file:" + out +
                                    " --policy h2o --budget 0.5 "
                                    "--steps 16 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_GT(nlohmann::json::parse(o.out)["attention_mass_retained"].get<double>(), 0.5);
  const std::pair<const char*, const char*> bad[] = {
      {"capture --model /nope.bin --prompt hi --out x.safetensors", "/nope.bin"},
      {"capture --model M --out x.safetensors", "--prompt"},
      {"capture --model M --prompt hi --out x.npy", ".safetensors"},
  };
  for (auto [args, want] : bad) {
    std::string a = args;
    if (const auto at = a.find(" M "); at != std::string::npos) {
      a.replace(at, 3, " " + models + "/stories260K.bin ");
    }
    o = run(dir + "/runs.sqlite", a);
    EXPECT_NE(o.code, 0) << a;
    EXPECT_NE(o.out.find(want), std::string::npos) << a << "\n" << o.out;
  }
}

// kvlab quality with an eviction policy in the loop on the real stories260K weights.
TEST(CliQuality, EvictionPolicyInTheModelLoop) {
  const std::string models = std::string(KVLAB_MODELS_DIR) + "/stories260K";
  if (!std::filesystem::exists(models + "/stories260K.bin")) {
    GTEST_SKIP() << models << " is absent: skipped";
  }
  const std::string dir = fresh("quality");
  const std::string base =
      "quality --model " + models + "/stories260K.bin --sample 254 --window 128 ";
  Output o = run(dir + "/runs.sqlite", base + "--method none --policy window --budget 0.5 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  auto j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["policy"], "window");
  EXPECT_EQ(j["method"], "none");
  EXPECT_EQ(j["tokens"], 254);
  EXPECT_NEAR(j["kept_fraction"].get<double>(), 0.5, 0.03);
  EXPECT_GT(j["kl_mean"].get<double>(), 0.01);
  o = run(dir + "/runs.sqlite", base + "--method none --policy streaming --sinks 4 --budget 0.2");
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("eviction    streaming budget 20% sinks 4"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("bits/value"), std::string::npos) << o.out;
  // Both: eviction, then the kept tokens read through the quantizer.
  o = run(dir + "/runs.sqlite", base + "--method int8 --policy h2o --budget 0.5 --json --save");
  ASSERT_EQ(o.code, 0) << o.out;
  j = nlohmann::json::parse(o.out);
  EXPECT_EQ(j["policy"], "h2o");
  EXPECT_EQ(j["method"], "int8");
  EXPECT_TRUE(j.contains("run_id"));
  const std::pair<const char*, const char*> bad[] = {
      {"--method none", "nothing to measure"},
      {"--method none --policy merge --merge-similarity 3", "--merge-similarity"},
      {"--method none --policy lru", "--policy"},
      {"--method none --policy h2o --budget x", "--budget"},
      {"--method none --policy h2o --recent-fraction 2", "--recent-fraction"},
  };
  for (auto [args, want] : bad) {
    o = run(dir + "/runs.sqlite", base + args);
    EXPECT_NE(o.code, 0) << args;
    EXPECT_NE(o.out.find(want), std::string::npos) << args << "\n" << o.out;
  }
}

}  // namespace
