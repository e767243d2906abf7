// Greedy generation (generate.h), the loop `kvlab generate`, `kvlab capture` and the Generate
// tab share: on the stories260K weights its tokens are those of a plain argmax loop written here
// over LlamaModel::forward, its prompt may go through whole, in chunks or token by token with
// the same result, it stops at EOS, at the asked count and at the model's last position, and a
// hook cancels it. TokenTextStream's pieces add up to the decoded text, with a multi-byte
// character held back until its last byte comes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/model/generate.h"
#include "kvlab/engine/model/model_capture.h"
#include "llama_model_test_util.h"

namespace kvlab {
namespace {

using llama_test::kModel;

int argmax(const std::vector<float>& x) {
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

// The reference: the prompt at once, then argmax and forward, `tokens` picks.
std::vector<int> plain_greedy(const LlamaModel& model, const std::vector<int>& prompt, int tokens) {
  auto state = model.new_state();
  auto logits = model.forward(state, prompt).value();
  std::vector<int> out;
  for (int i = 0; i < tokens; ++i) {
    out.push_back(argmax(logits));
    if (i + 1 < tokens) logits = model.forward(state, {out.back()}).value();
  }
  return out;
}

TEST(Generate, PicksThePlainLoopsTokensWhicheverWayThePromptGoesIn) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  const std::vector<int> prompt{LlamaTokenizer::kBos, 403, 407, 261, 378, 425, 261, 385};
  const std::vector<int> expected = plain_greedy(*model, prompt, 40);
  for (const int chunk : {0, 1, 3}) {
    SCOPED_TRACE(chunk);
    auto state = model->new_state();
    GreedyConfig config;
    config.tokens = 40;
    config.prefill_chunk = chunk;
    int prefill_calls = 0, last_done = 0;
    std::vector<int> seen;
    GreedyHooks hooks;
    hooks.on_prefill = [&](int done, const std::vector<float>& logits) {
      ++prefill_calls;
      last_done = done;
      EXPECT_EQ(static_cast<int>(logits.size()), model->config().vocab);
      return true;
    };
    hooks.on_token = [&](int step, int id) {
      EXPECT_EQ(step, static_cast<int>(seen.size()));
      seen.push_back(id);
      return true;
    };
    auto run = generate_greedy(*model, state, prompt, config, hooks);
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(run->generated, expected);
    EXPECT_EQ(seen, expected);
    EXPECT_EQ(run->steps, 39) << "the last pick is not run through the model";
    EXPECT_EQ(state.pos, static_cast<int>(prompt.size()) + 39);
    EXPECT_EQ(last_done, static_cast<int>(prompt.size()));
    EXPECT_EQ(prefill_calls,
              chunk == 0 ? 1 : (static_cast<int>(prompt.size()) + chunk - 1) / chunk);
    EXPECT_GT(run->decode_tokens_per_s(), 0);
  }
}

TEST(Generate, StopsAtEosAtTheLastPositionAndWhenAHookCancels) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  const std::vector<int> prompt{LlamaTokenizer::kBos, 403, 407};
  const std::vector<int> expected = plain_greedy(*model, prompt, 30);
  {  // EOS: the tenth pick stands for it
    auto state = model->new_state();
    GreedyConfig config;
    config.tokens = 30;
    config.eos = expected[9];
    auto run = generate_greedy(*model, state, prompt, config);
    ASSERT_TRUE(run.ok()) << run.message();
    const auto first = std::find(expected.begin(), expected.end(), expected[9]);
    EXPECT_EQ(run->generated, std::vector<int>(expected.begin(), first + 1));
  }
  {  // the model's positions run out: the last pick is not run
    const int limit = model->config().seq_len;
    auto state = model->new_state();
    GreedyConfig config;
    config.tokens = limit;
    auto run = generate_greedy(*model, state, prompt, config);
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(state.pos, limit);
    EXPECT_EQ(static_cast<int>(run->generated.size()), limit - static_cast<int>(prompt.size()) + 1);
  }
  {  // cancelled on the fifth token
    auto state = model->new_state();
    GreedyConfig config;
    config.tokens = 30;
    GreedyHooks hooks;
    hooks.on_token = [](int step, int) { return step < 4; };
    auto run = generate_greedy(*model, state, prompt, config, hooks);
    ASSERT_FALSE(run.ok());
    EXPECT_EQ(run.message(), kCancelledMessage);
  }
  {  // bad input names itself
    auto state = model->new_state();
    EXPECT_FALSE(generate_greedy(*model, state, std::vector<int>{}, {}).ok());
    GreedyConfig config;
    config.tokens = -1;
    auto run = generate_greedy(*model, state, prompt, config);
    ASSERT_FALSE(run.ok());
    EXPECT_NE(run.message().find("-1"), std::string::npos) << run.message();
    const std::vector<int> too_long(static_cast<std::size_t>(model->config().seq_len) + 1, 5);
    EXPECT_FALSE(generate_greedy(*model, state, too_long, {}).ok());
  }
}

TEST(Generate, TokenTextStreamPiecesAddUpToTheDecodedText) {
  REQUIRE_MODEL();
  auto loaded = load_model(kModel);
  ASSERT_TRUE(loaded.ok()) << loaded.message();
  auto prompt = loaded->encode("Once upon a time");
  ASSERT_TRUE(prompt.ok()) << prompt.message();
  const std::vector<int> generated = plain_greedy(loaded->model, *prompt, 60);
  TokenTextStream stream(loaded->decode, prompt->back());
  std::string streamed;
  for (const int id : generated) streamed += stream.push(id);
  // The whole continuation decoded after the prompt's last token, that token's text removed.
  std::vector<int> tail{prompt->back()};
  tail.insert(tail.end(), generated.begin(), generated.end());
  const std::string head = loaded->decode({prompt->back()}), all = loaded->decode(tail);
  ASSERT_EQ(all.rfind(head, 0), 0u);
  EXPECT_EQ(streamed, all.substr(head.size()));
  EXPECT_NE(streamed.find(' '), std::string::npos) << "words keep their spaces: " << streamed;
}

TEST(Generate, TokensAgreeingCountsTheCommonStart) {
  EXPECT_EQ(tokens_agreeing({1, 2, 3, 4}, {1, 2, 9, 4}), 2);
  EXPECT_EQ(tokens_agreeing({1, 2}, {1, 2, 3}), 2);  // the shorter run never departs
  EXPECT_EQ(tokens_agreeing({1, 2, 3}, {1, 2}), 2);
  EXPECT_EQ(tokens_agreeing({5}, {6}), 0);
  EXPECT_EQ(tokens_agreeing({}, {1}), 0);
}

TEST(Generate, TokenTextStreamHoldsACharacterBackUntilItsLastByte) {
  // A byte-level vocabulary: token t is the byte t, and "é" (C3 A9) and "€" (E2 82 AC) come a
  // byte at a time.
  const auto decode = [](const std::vector<int>& ids) {
    std::string s;
    for (const int id : ids) s.push_back(static_cast<char>(id));
    return s;
  };
  TokenTextStream stream(decode, 'x');
  EXPECT_EQ(stream.push('a'), "a");
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(stream.push(0xE2), "");
  EXPECT_EQ(stream.push(0x82), "");
  EXPECT_EQ(stream.push(0xAC), "\xE2\x82\xAC");
  EXPECT_EQ(stream.push(' '), " ");
  // A stray lead byte never completes: it is let out after a few tokens rather than held forever.
  std::string rest = stream.push(0xE2);
  for (int i = 0; i < 10; ++i) rest += stream.push('b');
  EXPECT_EQ(rest, "\xE2" + std::string(10, 'b'));
}

}  // namespace
}  // namespace kvlab
