// kvlab generate with the runner's cache stored compressed (--method kvcomp, issue 47) on the
// stories260K weights: --method none is the plain runner token for token; a KVComp run holds
// fewer bytes than fp16 and, with --compare, reports the fp16 run of the same prompt, whose
// tokens are checked against a plain run made here; bad options are one-line errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"

namespace {

using kvlab::cli_test::Output;
using kvlab::cli_test::run_kvlab;

const std::string kDir = std::string(KVLAB_MODELS_DIR) + "/stories260K";
const std::string kRun = "generate --model " + kDir + "/stories260K.bin --tokenizer " + kDir +
                         "/tok512.bin --prompt 'Once upon a time' ";

#define REQUIRE_STORIES()                                    \
  if (!std::filesystem::exists(kDir + "/stories260K.bin")) { \
    GTEST_SKIP() << "stories260K not found in " << kDir;     \
  }

nlohmann::json json_of(const std::string& args) {
  const Output o = run_kvlab(args + " --json");
  EXPECT_EQ(o.code, 0) << args << "\n" << o.out;
  return o.code == 0 ? nlohmann::json::parse(o.out) : nlohmann::json::object();
}

TEST(CliGenerate, MethodNoneIsThePlainRunner) {
  REQUIRE_STORIES();
  const nlohmann::json plain = json_of(kRun + "--tokens 60");
  const nlohmann::json none = json_of(kRun + "--tokens 60 --method none");
  EXPECT_EQ(none["generated_ids"], plain["generated_ids"]);
  EXPECT_EQ(none["cache"]["method"], "float32");
  EXPECT_EQ(none["cache"]["bytes"].get<std::uint64_t>(),
            2 * none["cache"]["fp16_bytes"].get<std::uint64_t>());
  // The fp16 store holds the fp16 bytes exactly; its tokens may differ from the float cache's
  // only by fp16 rounding, which this story does not feel in its first tokens.
  const nlohmann::json fp16 = json_of(kRun + "--tokens 60 --method fp16");
  EXPECT_EQ(fp16["cache"]["method"], "fp16");
  EXPECT_EQ(fp16["cache"]["bytes"], fp16["cache"]["fp16_bytes"]);
  EXPECT_EQ(fp16["generated_ids"][0], plain["generated_ids"][0]);
  EXPECT_FALSE(none.contains("fp16"));
}

TEST(CliGenerate, KvCompHoldsLessAndComparesWithFp16InTheSameProcess) {
  REQUIRE_STORIES();
  // 5 prompt tokens and 250 more through a 64-token buffer: blocks flush as decoding goes.
  const std::string args = kRun + "--tokens 250 --method kvcomp --buffer 64";
  const nlohmann::json j = json_of(args + " --compare");
  ASSERT_TRUE(j.contains("fp16")) << j.dump();
  EXPECT_EQ(j["cache"]["method"], "kvcomp B=64 rel=0.05 + huffman");
  const auto bytes = j["cache"]["bytes"].get<std::uint64_t>();
  const auto fp16_bytes = j["cache"]["fp16_bytes"].get<std::uint64_t>();
  // 2 (K, V) x 2 bytes x 5 layers x 4 KV heads x 8 channels for each of the 254 stored tokens
  // (the last generated token is never run).
  EXPECT_EQ(fp16_bytes, 2ull * 2 * 5 * 4 * 8 * 254);
  EXPECT_GT(bytes, 0u);
  EXPECT_LT(bytes, fp16_bytes);
  EXPECT_EQ(j["fp16"]["cache_bytes"].get<std::uint64_t>(), fp16_bytes);
  // The fp16 half of --compare is --method fp16 run alone.
  const nlohmann::json plain = json_of(kRun + "--tokens 250 --method fp16");
  EXPECT_EQ(j["fp16"]["generated_ids"], plain["generated_ids"]);
  // The prompt reads its exact keys and values, so the first token always agrees.
  const int agree = j["greedy_tokens_agreeing"].get<int>();
  EXPECT_GE(agree, 1);
  EXPECT_LE(agree, static_cast<int>(j["generated_ids"].size()));
  EXPECT_EQ(j["generated_ids"][0], plain["generated_ids"][0]);
  EXPECT_GT(j["decode_speed_vs_fp16"].get<double>(), 0.0);

  const Output text = run_kvlab(args + " --compare --codec bitpack --rel-scale 0.0667");
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("cache    kvcomp B=64 rel=0.0667 + bitpack: "), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("generated tokens agree with fp16's"), std::string::npos) << text.out;
}

// rANS codes the same codes as Huffman (the same quantizer and books, another entropy coder), so
// the text and every logit are the same; only the bytes held differ.
TEST(CliGenerate, RansHoldsTheSameCodesAsHuffman) {
  REQUIRE_STORIES();
  const std::string args = kRun + "--tokens 200 --method kvcomp --rel-scale 0.2 --json ";
  const nlohmann::json huff = json_of(args + "--codec huffman");
  const nlohmann::json rans = json_of(args + "--codec rans");
  EXPECT_EQ(rans["generated_ids"], huff["generated_ids"]);
  EXPECT_EQ(rans["cache"]["method"], "kvcomp B=64 rel=0.2 + rans");
  EXPECT_NE(rans["cache"]["bytes"], huff["cache"]["bytes"]);
}

// --save keeps the run (kind "generate") with the numbers --json printed; `runs show` reads them
// back and the planner takes its bits per value (the store's own bytes) as --scheme run:ID.
TEST(CliGenerate, SaveKeepsTheRunForTheRunsListAndThePlanner) {
  REQUIRE_STORIES();
  const std::string dir = std::string(KVLAB_TEST_TMPDIR) + "/generate-save";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string env = "KVLAB_DB='" + dir + "/runs.sqlite'";
  // 200 tokens: KIVI has quantized the keys' first groups and the values behind its window.
  const Output o = run_kvlab(kRun +
                                 "--tokens 200 --method kivi --bits 4 --compare --save "
                                 "--label mine --json",
                             env);
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  const long long id = j.at("run_id").get<long long>();
  const Output list = run_kvlab("runs list --json", env);
  ASSERT_EQ(list.code, 0) << list.out;
  const auto runs = nlohmann::json::parse(list.out);
  ASSERT_EQ(runs.size(), 1u) << list.out;
  const auto& r = runs[0];
  EXPECT_EQ(r.at("kind"), "generate");
  EXPECT_EQ(r.at("label"), "mine");
  EXPECT_EQ(r.at("method"), j["cache"]["method"]);
  EXPECT_EQ(r.at("context").get<int>(), 5 + j["decode_steps"].get<int>());
  const Output show_json = run_kvlab("runs show " + std::to_string(id) + " --json", env);
  ASSERT_EQ(show_json.code, 0) << show_json.out;
  const auto m = nlohmann::json::parse(show_json.out).at("metrics");
  EXPECT_EQ(m.at("cache_bytes"), j["cache"]["bytes"]);
  EXPECT_EQ(m.at("fp16_bytes"), j["cache"]["fp16_bytes"]);
  EXPECT_EQ(m.at("decode_tokens_per_second"), j["decode_tokens_per_second"]);
  EXPECT_EQ(m.at("fp16_decode_tokens_per_second"), j["fp16"]["decode_tokens_per_second"]);
  EXPECT_EQ(m.at("greedy_tokens_agreeing"), j["greedy_tokens_agreeing"]);
  EXPECT_EQ(m.at("peak_resident_bytes"), j["peak_resident_bytes"]);
  // The tokens held: the 5 prompt tokens and every generated one but the last.
  EXPECT_EQ(m.at("tokens").get<int>(), 5 + j["decode_steps"].get<int>());
  const double bits =
      16.0 * j["cache"]["bytes"].get<double>() / j["cache"]["fp16_bytes"].get<double>();
  EXPECT_NEAR(m.at("memory_bits_per_value").get<double>(), bits, 1e-9);
  EXPECT_LT(bits, 16.0);
  const Output show = run_kvlab("runs show " + std::to_string(id), env);
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("decode speed vs fp16"), std::string::npos) << show.out;
  // llama-3-8b's fp16 cache is 131,072 bytes a token: the scheme stores the run's bits of it.
  const Output plan = run_kvlab(
      "plan --model llama-3-8b --gpu l40s --context 8192 --batch 1 "
      "--scheme run:" +
          std::to_string(id) + " --json",
      env);
  ASSERT_EQ(plan.code, 0) << plan.out;
  const auto p = nlohmann::json::parse(plan.out);
  EXPECT_NEAR(p["schemes"][0]["kv_bytes_per_token_model"].get<double>(), 131072.0 / 16 * bits,
              1e-6);
  // A bad database fails before the model runs.
  const Output bad = run_kvlab(kRun + "--tokens 4 --save --db /proc/nope/runs.sqlite");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("/proc/nope/runs.sqlite"), std::string::npos) << bad.out;
}

// --batch N runs the prompt N tokens a forward (llama.cpp's micro-batches): with the fp16 cache
// the text is the one-batch run's (the same rows, read back tile by tile), every stored cache
// takes its later chunks, and --logits-out still holds the prompt's last logits only.
TEST(CliGenerate, BatchRunsThePromptInChunks) {
  REQUIRE_STORIES();
  const std::string prompt =
      "--prompt 'Once upon a time, there was a little girl named Lily. She "
      "loved to play outside in the park with her friends.' ";
  const std::string base = "generate --model " + kDir + "/stories260K.bin --tokenizer " + kDir +
                           "/tok512.bin " + prompt + "--tokens 40 ";
  const nlohmann::json whole = json_of(base + "--method fp16");
  const nlohmann::json chunked = json_of(base + "--method fp16 --batch 7");
  EXPECT_EQ(chunked["generated_ids"], whole["generated_ids"]);
  EXPECT_EQ(chunked["cache"]["bytes"], whole["cache"]["bytes"]);
  EXPECT_EQ(chunked["prefill_batch"], 7);
  EXPECT_EQ(whole["prefill_batch"], 0);
  std::filesystem::create_directories(KVLAB_TEST_TMPDIR);
  const std::string logits = std::string(KVLAB_TEST_TMPDIR) + "/batch-logits.bin";
  for (const std::string method : {"kvcomp --buffer 64", "kivi --residual 64", "int8", "fp16"}) {
    const Output o = run_kvlab(base + "--batch 7 --method " + method + " --logits-out " + logits);
    ASSERT_EQ(o.code, 0) << method << "\n" << o.out;
    EXPECT_NE(o.out.find(", 7 at a time)"), std::string::npos) << o.out;
    EXPECT_EQ(std::filesystem::file_size(logits), 512u * 4u) << method << ": one [vocab] row";
  }
}

TEST(CliGenerate, OptionsItCannotHonourAreOneLineErrors) {
  REQUIRE_STORIES();
  for (const auto& [extra, says] : std::vector<std::pair<std::string, std::string>>{
           {"--method turboquant", "--method turboquant: the runner does not store turboquant"},
           {"--method nvfp4", "head_dim 8 of the key tensor is not a multiple"},
           {"--method kivi --residual 48", "R must be a positive multiple of G"},
           {"--method kivi --bits 3", "kivi: --bits must be 2 or 4"},
           {"--method kvcomp --codec varwidth", "--codec varwidth: huffman, rans or bitpack"},
           {"--compare", "--compare needs a --method other than none"},
           {"--method fp16 --compare", "--compare needs a --method other than none and fp16"},
           {"--method kvcomp --buffer 100", "buffer size 100 is not a positive multiple"},
           {"--stepwise --batch 4",
            "--stepwise runs the prompt one token at a time: not with "
            "--batch 4"}}) {
    const Output o = run_kvlab(kRun + "--tokens 4 " + extra);
    EXPECT_NE(o.code, 0) << extra << "\n" << o.out;
    EXPECT_NE(o.out.find(says), std::string::npos) << extra << "\n" << o.out;
  }
}

TEST(CliGenerate, EveryStoredMethodRunsAndHoldsItsBytes) {
  REQUIRE_STORIES();
  // 5 prompt tokens and 150 more; KIVI with R = 64 seals key groups twice while decoding.
  for (const std::string method :
       {"kivi --residual 64 --group-size 32", "kivi --bits 4", "int8", "int4", "fp8-e4m3",
        "fp8-e5m2 --per-head-scale", "fp8-e4m3 --calib-tokens 4"}) {
    const nlohmann::json j = json_of(kRun + "--tokens 150 --compare --method " + method);
    ASSERT_TRUE(j.contains("fp16")) << method;
    const auto bytes = j["cache"]["bytes"].get<std::uint64_t>();
    const auto fp16_bytes = j["cache"]["fp16_bytes"].get<std::uint64_t>();
    EXPECT_EQ(fp16_bytes, 2ull * 2 * 5 * 4 * 8 * 154) << method;
    EXPECT_LT(bytes, fp16_bytes) << method;
    EXPECT_EQ(j["generated_ids"].size(), 150u) << method;
    EXPECT_GE(j["greedy_tokens_agreeing"].get<int>(), 0) << method;
  }
  // INT8 per tensor: one byte a value and one fp32 scale per layer and role.
  const nlohmann::json int8 = json_of(kRun + "--tokens 150 --method int8");
  EXPECT_EQ(int8["cache"]["method"], "int8 per-tensor");
  EXPECT_EQ(int8["cache"]["bytes"].get<std::uint64_t>(), 2ull * 5 * (4 * 8 * 154 + 4));
}

}  // namespace

// --backend: where decode steps attend. stories260K's heads of 8 channels are no shape the GPU's
// decode kernel serves, so `cuda` refuses it (naming the head size where a GPU is usable, the
// missing GPU elsewhere) and `auto` attends on the CPU on every machine; a backend that is no
// backend, or the runner's own float cache, is an error.
TEST(CliGenerate, BackendChoosesWhereDecodeStepsAttend) {
  REQUIRE_STORIES();
  const nlohmann::json cpu = json_of(kRun + "--tokens 6 --method fp16");
  EXPECT_EQ(cpu["decode_attention"], "cpu");
  EXPECT_FALSE(cpu["cache"].contains("decode_copy_bytes"));
  const nlohmann::json autos = json_of(kRun + "--tokens 6 --method fp16 --backend auto");
  EXPECT_EQ(autos["decode_attention"], "cpu");
  EXPECT_EQ(autos["generated_ids"], cpu["generated_ids"]);
  for (const auto& [extra, says] : std::vector<std::pair<std::string, std::string>>{
           {"--method fp16 --backend cuda", "--backend cuda: "},
           {"--method fp16 --backend tpu", "--backend tpu: cpu, cuda or auto"},
           {"--backend cuda", "the runner's own float32 cache attends on the CPU"}}) {
    const Output o = run_kvlab(kRun + "--tokens 4 " + extra);
    EXPECT_NE(o.code, 0) << extra << "\n" << o.out;
    EXPECT_NE(o.out.find(says), std::string::npos) << extra << "\n" << o.out;
    EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
  }
  const Output cuda = run_kvlab(kRun + "--tokens 4 --method fp16 --backend cuda");
  EXPECT_TRUE(cuda.out.find("head_dim 8") != std::string::npos ||
              cuda.out.find("--backend cuda: CUDA") != std::string::npos)
      << cuda.out;
}
