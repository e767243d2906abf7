// load_model() and capture_kv_cache() on the real stories260K weights (../shared/models): the
// greedy story, the token count and ids, pre-RoPE keys, cancelling, and the tokenizer search.
// Skipped with a message when the models folder is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "file_test_util.h"
#include "kvlab/engine/model/model_capture.h"

namespace kvlab {
namespace {

namespace fs = std::filesystem;

const std::string kDir = std::string(KVLAB_MODELS_DIR) + "/stories260K";
const std::string kModel = kDir + "/stories260K.bin";

#define REQUIRE_MODEL() \
  if (!fs::exists(kModel)) GTEST_SKIP() << kModel << " is absent: skipped"

TEST(ModelCapture, GreedyStoryFromAPrompt) {
  REQUIRE_MODEL();
  auto model = load_model(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  double last = -1;
  int calls = 0;
  auto c = capture_kv_cache(*model, "Once upon a time", {40, false},
                            [&](double fraction, std::string_view) {
                              EXPECT_GE(fraction, last);
                              last = fraction;
                              ++calls;
                              return true;
                            });
  ASSERT_TRUE(c.ok()) << c.message();
  EXPECT_EQ(c->prompt_tokens, 5);  // BOS + 4
  EXPECT_EQ(c->cache.tokens(), 45);
  EXPECT_EQ(c->generated.rfind(", there was a little girl named Lily", 0), 0u) << c->generated;
  ASSERT_EQ(c->cache.token_ids.size(), 45u);
  EXPECT_EQ(c->cache.token_ids[0], LlamaTokenizer::kBos);
  EXPECT_EQ(c->cache.shape.layers, 5);
  EXPECT_EQ(c->cache.shape.kv_heads, 4);
  EXPECT_EQ(c->cache.shape.head_dim, 8);
  EXPECT_TRUE(c->cache.has_queries());
  EXPECT_TRUE(c->cache.validate().ok());
  EXPECT_DOUBLE_EQ(last, 1.0);
  EXPECT_GT(calls, 40);

  // Pre-RoPE keys: the same at position 0 (RoPE rotates by 0 there), different later; values
  // and token ids unchanged.
  auto pre = capture_kv_cache(*model, "Once upon a time", {40, true});
  ASSERT_TRUE(pre.ok()) << pre.message();
  EXPECT_EQ(pre->cache.token_ids, c->cache.token_ids);
  const auto post_k = c->cache.layers[2].key.view().to_float();
  const auto pre_k = pre->cache.layers[2].key.view().to_float();
  const std::size_t row = 4 * 8;
  EXPECT_EQ(std::vector<float>(post_k.begin(), post_k.begin() + row),
            std::vector<float>(pre_k.begin(), pre_k.begin() + row));
  EXPECT_NE(post_k, pre_k);
  EXPECT_EQ(pre->cache.layers[2].value.view().to_float(),
            c->cache.layers[2].value.view().to_float());

  // No continuation: only the prompt went through the model.
  auto none = capture_kv_cache(*model, "Once upon a time", {0, false});
  ASSERT_TRUE(none.ok()) << none.message();
  EXPECT_EQ(none->cache.tokens(), 5);
}

TEST(ModelCapture, CancelAndBadInput) {
  REQUIRE_MODEL();
  auto model = load_model(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  int calls = 0;
  auto c = capture_kv_cache(*model, "Once upon a time", {100, false},
                            [&](double, std::string_view) { return ++calls < 10; });
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.message(), kCancelledMessage);
  c = capture_kv_cache(*model, "hi", {-1, false});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("-1"), std::string::npos);
  // Longer than the model's 512 positions.
  std::string long_prompt;
  for (int i = 0; i < 600; ++i) long_prompt += " Lily";
  c = capture_kv_cache(*model, long_prompt, {1, false});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.message().find("512 positions"), std::string::npos) << c.message();
}

TEST(ModelCapture, LoadModelErrorsAndTokenizerSearch) {
  auto m = load_model("/nonexistent/kvlab/model.bin");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.message(), "/nonexistent/kvlab/model.bin: no such file or folder");
  const fs::path dir = file_test::scratch_dir("model_capture");
  m = load_model(dir.string());  // a folder without config.json
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("config.json"), std::string::npos) << m.message();

  const std::string model = (dir / "model.bin").string();
  auto tok = find_llama2c_tokenizer(model);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.message().find("no llama2.c tokenizer"), std::string::npos) << tok.message();
  std::ofstream(dir / "tok512.bin") << "x";
  tok = find_llama2c_tokenizer(model);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(fs::path(*tok).filename(), "tok512.bin");
  std::ofstream(dir / "tok32000.bin") << "x";
  tok = find_llama2c_tokenizer(model);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.message().find("2 tokenizer files"), std::string::npos) << tok.message();
  std::ofstream(dir / "tokenizer.bin") << "x";
  tok = find_llama2c_tokenizer(model);
  ASSERT_TRUE(tok.ok()) << tok.message();
  EXPECT_EQ(fs::path(*tok).filename(), "tokenizer.bin");

  if (!fs::exists(kModel)) GTEST_SKIP() << kModel << " is absent: the rest is skipped";
  // The model's own folder: its one tokenizer is found; an explicit one is taken as given.
  EXPECT_TRUE(load_model(kModel).ok());
  m = load_model(kModel, (dir / "tok512.bin").string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.message().find("tok512.bin"), std::string::npos) << m.message();
}

}  // namespace
}  // namespace kvlab
