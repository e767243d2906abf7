// Greedy generation: one loop for the command line, the capture and the app.
#include "kvlab/engine/model/generate.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include <fmt/format.h>
#include <malloc.h>

#include "kvlab/engine/core/progress.h"

namespace kvlab {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Error cancelled() {
  return make_error(std::string(kCancelledMessage));
}

// Whether `s` ends inside a UTF-8 character (its last lead byte wants more bytes than follow) or
// with U+FFFD, what a decoder writes for bytes that do not make a character yet.
bool ends_mid_character(const std::string& s) {
  if (s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0) return true;
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(n, 4); ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const std::size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return want > back;
  }
  return false;
}

}  // namespace

double GreedyRun::prefill_tokens_per_s(std::size_t prompt) const {
  return static_cast<double>(prompt) / std::max(prefill_s, 1e-9);
}

double GreedyRun::decode_tokens_per_s() const {
  return steps / std::max(decode_s, 1e-9);
}

Result<GreedyRun> generate_greedy(const LlamaModel& model, LlamaModel::State& state,
                                  std::span<const int> prompt, const GreedyConfig& config,
                                  const GreedyHooks& hooks) {
  const int limit = model.config().seq_len;
  if (prompt.empty()) return make_error("the prompt has no tokens");
  if (static_cast<int>(prompt.size()) > limit - state.pos) {
    return make_error(fmt::format("the prompt is {} tokens, more than the model's {} positions",
                                  prompt.size(), limit));
  }
  if (config.tokens < 0) {
    return make_error(fmt::format("{} tokens to generate: must not be negative", config.tokens));
  }
  GreedyRun run;
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t chunk =
      config.prefill_chunk > 0 ? static_cast<std::size_t>(config.prefill_chunk) : prompt.size();
  Result<std::vector<float>> logits = std::vector<float>{};
  for (std::size_t at = 0; at < prompt.size(); at += chunk) {
    const std::size_t end = std::min(prompt.size(), at + chunk);
    logits =
        model.forward(state, std::vector<int>(prompt.begin() + static_cast<std::ptrdiff_t>(at),
                                              prompt.begin() + static_cast<std::ptrdiff_t>(end)));
    if (!logits) return logits.error();
    if (hooks.on_prefill && !hooks.on_prefill(static_cast<int>(end), *logits)) return cancelled();
  }
  run.prefill_s = seconds_since(t0);
  if (config.trim_after_prefill) malloc_trim(0);
  const auto t1 = std::chrono::steady_clock::now();
  for (int i = 0; i < config.tokens; ++i) {
    const int next = greedy_token(*logits);
    run.generated.push_back(next);
    if (hooks.on_token && !hooks.on_token(i, next)) return cancelled();
    if (next == config.eos || i + 1 == config.tokens || state.pos >= limit) break;
    logits = model.forward(state, {next});
    if (!logits) return logits.error();
    ++run.steps;
  }
  run.decode_s = seconds_since(t1);
  return run;
}

int tokens_agreeing(const std::vector<int>& a, const std::vector<int>& b) {
  const auto& [shorter, longer] = a.size() <= b.size() ? std::tie(a, b) : std::tie(b, a);
  return static_cast<int>(std::mismatch(shorter.begin(), shorter.end(), longer.begin()).first -
                          shorter.begin());
}

TokenTextStream::TokenTextStream(Decode decode, int last_prompt_token)
    : m_decode(std::move(decode)), m_tokens{last_prompt_token} {}

std::string TokenTextStream::push(int id) {
  // As vLLM's incremental detokenizer: the text of tokens [m_read, end) is what the text of
  // [m_prefix, end) adds to that of [m_prefix, m_read), once it ends on a whole character.
  m_tokens.push_back(id);
  const auto text_of = [&](std::size_t from, std::size_t to) {
    return m_decode(std::vector<int>(m_tokens.begin() + static_cast<std::ptrdiff_t>(from),
                                     m_tokens.begin() + static_cast<std::ptrdiff_t>(to)));
  };
  const std::string before = text_of(m_prefix, m_read);
  const std::string now = text_of(m_prefix, m_tokens.size());
  // A character still being spelt out waits for its next bytes (a few tokens at most).
  const bool pending = now.size() <= before.size() || ends_mid_character(now);
  if (pending && m_tokens.size() - m_read < kMaxPending) return {};
  std::string added = now.compare(0, before.size(), before) == 0 && now.size() >= before.size()
                          ? now.substr(before.size())
                          : text_of(m_read, m_tokens.size());
  m_prefix = m_read;
  m_read = m_tokens.size();
  // Only the tokens from m_prefix on are read again.
  m_tokens.erase(m_tokens.begin(), m_tokens.begin() + static_cast<std::ptrdiff_t>(m_prefix));
  m_read -= m_prefix;
  m_prefix = 0;
  return added;
}

}  // namespace kvlab
