// Greedy generation, the one loop `kvlab generate`, `kvlab capture` and the app's Generate tab
// run: the prompt through the model (at once, in chunks or one token at a time), then the most
// likely token picked and run through the model until EOS, the asked count or the model's last
// position. The state decides how the cache is held (its float cache, or a KvStore: kv_store.h),
// so the same loop times the fp16 cache and every stored method.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/llama_model.h"

namespace kvlab {

// The greedy pick: the index of the largest logit (the first, on a tie).
inline int greedy_token(std::span<const float> logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

struct GreedyConfig {
  int tokens = 32;  // tokens to pick; the last one picked is not run through the model
  // How the prompt goes through the model: 0 all at once, 1 one token at a time (the decode
  // path), N in chunks of N tokens.
  int prefill_chunk = 0;
  int eos = -1;  // stop after picking this token (-1: never)
  // Hand the prompt's transient buffers back to the system after the prefill (malloc_trim), so
  // that a peak measured during decode holds the model, the cache and one step.
  bool trim_after_prefill = false;
};

struct GreedyHooks {
  // After each prefill forward: the prompt tokens done so far and the logits of the last of
  // them. Returning false cancels (the error is kCancelledMessage).
  std::function<bool(int done, const std::vector<float>& logits)> on_prefill;
  // After each token is picked: its index among the generated tokens (0-based) and its id.
  // Returning false cancels.
  std::function<bool(int step, int id)> on_token;
};

struct GreedyRun {
  std::vector<int> generated;  // the picked tokens, EOS included when it came
  double prefill_s = 0, decode_s = 0;
  int steps = 0;  // decode forwards: every picked token but the last went through the model
  double prefill_tokens_per_s(std::size_t prompt) const;
  double decode_tokens_per_s() const;
};

// Runs `prompt` (non-empty) through `state` (fresh: state.pos 0) and continues greedily. Errors:
// a prompt longer than the model's positions, the model's own errors, and kCancelledMessage.
Result<GreedyRun> generate_greedy(const LlamaModel& model, LlamaModel::State& state,
                                  std::span<const int> prompt, const GreedyConfig& config,
                                  const GreedyHooks& hooks = {});

// How many of two greedy runs' tokens agree before the first that differs (all of the shorter
// run's when none does): where a compressed cache's text departs from fp16's.
int tokens_agreeing(const std::vector<int>& a, const std::vector<int>& b);

// The text each generated token adds, for text that streams. A SentencePiece tokenizer drops a
// word's leading space when a token is decoded alone, and a character may span tokens, so a
// token's text is what it adds to the text of a few tokens before it: constant work per token.
class TokenTextStream {
 public:
  using Decode = std::function<std::string(const std::vector<int>&)>;
  // `last_prompt_token`: the token before the first generated one (its text is not emitted).
  TokenTextStream(Decode decode, int last_prompt_token);
  // The text `id` adds (empty while it ends in the middle of a character).
  std::string push(int id);

 private:
  static constexpr std::size_t kMaxPending = 8;  // tokens a character may take to complete
  Decode m_decode;
  std::vector<int> m_tokens;  // from the last emitted token's predecessor on
  std::size_t m_prefix = 0;   // m_tokens[m_prefix, m_read): context whose text was emitted
  std::size_t m_read = 1;     // m_tokens[m_read, end): not emitted yet
};

}  // namespace kvlab
