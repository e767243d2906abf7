// Passkey retrieval on a real model (see model_needle.h).
#include "kvlab/engine/model/model_needle.h"

#include "kvlab/engine/model/model_quality.h"

#include "kvlab/engine/core/threads.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "core/random.h"
#include "kvlab/engine/model/generate.h"
#include "kvlab/engine/quant/quantizer.h"
#include "model/loop_hooks.h"

namespace kvlab {
namespace {

constexpr std::size_t kNeedlePrefillChunk = 128;

struct Prompt {
  std::vector<int> ids;
  std::string key;
  int question = 0;  // where the question starts: ids before it are the instruction and haystack
};

// The user turn: an instruction, `reps` filler sentences with the needle after round(depth ×
// reps) of them, and the question.
Result<Prompt> build_prompt(const LoadedModel& m, int reps, double depth, int key) {
  Prompt p;
  p.key = fmt::format("{:05d}", key);
  const int at = static_cast<int>(std::lround(depth * reps));
  std::string text =
      "There is an important pass key hidden inside a lot of irrelevant text. Find it and "
      "remember it.\n\n";
  for (int i = 0; i <= reps; ++i) {
    if (i == at)
      text += fmt::format("The pass key is {0}. Remember it. {0} is the pass key. ", p.key);
    if (i < reps) text += kNeedleFiller;
  }
  // The question's first token: where the prompt without it stops agreeing with the prompt.
  auto bare = chat_prompt(m, text);
  if (!bare) return bare.error();
  auto bare_ids = m.encode(*bare);
  if (!bare_ids) return bare_ids.error();
  text += "\n\nWhat is the pass key?";
  auto chat = chat_prompt(m, text);
  if (!chat) return chat.error();
  auto ids = m.encode(*chat);
  if (!ids) return ids.error();
  p.ids = std::move(*ids);
  p.question = static_cast<int>(
      std::mismatch(p.ids.begin(), p.ids.end(), bare_ids->begin(), bare_ids->end()).first -
      p.ids.begin());
  return p;
}

}  // namespace

Result<NeedleReport> measure_needle(const LoadedModel& m, const NeedleConfig& c,
                                    const ProgressFn& progress) {
  const auto start = std::chrono::steady_clock::now();
  const LlamaModel& model = m.model;
  const LlamaConfig& mc = model.config();
  if (c.trials < 1) return make_error(fmt::format("--trials {}: must be at least 1", c.trials));
  if (c.answer_tokens < 1 || c.answer_tokens > 256) {
    return make_error(fmt::format("answer tokens {}: must be 1 to 256", c.answer_tokens));
  }
  for (const double d : c.depths) {
    if (!(d >= 0 && d <= 1)) return make_error(fmt::format("--depths: {} is outside 0..1", d));
  }
  for (const int len : c.lengths) {
    if (len < 64 || len + c.answer_tokens > mc.seq_len) {
      return make_error(
          fmt::format("--lengths: {} tokens must be 64 or more and leave room for "
                      "the answer in the model's {} positions",
                      len, mc.seq_len));
    }
  }
  if (c.lengths.empty() || c.depths.empty()) return make_error("no lengths or no depths given");
  std::unique_ptr<Quantizer> quantizer;
  NeedleReport r;
  if (c.method) {
    MethodConfig method = *c.method;  // it sees post-RoPE keys at positions 0, 1, ...
    method.key_rope = model_rope_spec(mc);
    auto q = make_quantizer(method);
    if (!q) return q.error();
    quantizer = std::move(*q);
    r.method_label = method_label(method);
  }
  if (c.eviction) {
    KVLAB_TRY(detail::check_eviction(*c.eviction, mc.layers));
    r.policy_label = eviction_label(*c.eviction);
    r.press_before_question = c.press_before_question;
  }
  const RopeSpec rope = model_rope_spec(mc);
  // Tokens per filler sentence group and for the rest of the prompt, to size the haystack.
  auto bare = build_prompt(m, 0, 0, 0);
  if (!bare) return bare.error();
  auto one = build_prompt(m, 8, 0, 0);
  if (!one) return one.error();
  const double per_rep = (static_cast<double>(one->ids.size()) - bare->ids.size()) / 8;

  // Every trial's pass key is drawn first, in the order of the cells, so the trials can run
  // side by side on every core (the runner's row tiles share the cores too) and the report is
  // the same on any number of threads.
  struct Trial {
    int reps = 0, key = 0, cell = 0;
    double depth = 0;
    int length = 0;  // the prompt's tokens
    std::string answer;
    bool hit = false;
  };
  detail::Rng rng(c.seed);
  std::vector<Trial> trials;
  for (const int length : c.lengths) {
    const int reps =
        std::max(1, static_cast<int>((length - static_cast<double>(bare->ids.size())) / per_rep));
    for (const double depth : c.depths) {
      const int cell = static_cast<int>(r.cells.size());
      r.cells.push_back({});
      r.cells.back().depth = depth;
      for (int t = 0; t < c.trials; ++t) {
        Trial& trial = trials.emplace_back();
        trial.reps = reps;
        trial.key = 10000 + static_cast<int>(rng.uniform() * 89999);
        trial.cell = cell;
        trial.depth = depth;
      }
    }
  }
  const auto run_trial = [&](int index, ItemProgress& progress) -> Status {
    Trial& trial = trials[static_cast<std::size_t>(index)];
    auto prompt = build_prompt(m, trial.reps, trial.depth, trial.key);
    if (!prompt) return prompt.error();
    const std::vector<int>& ids = prompt->ids;
    if (static_cast<int>(ids.size()) + c.answer_tokens > mc.seq_len) {
      return make_error(
          fmt::format("a prompt of {} tokens leaves no room for the answer", ids.size()));
    }
    trial.length = static_cast<int>(ids.size());
    const int positions = static_cast<int>(ids.size()) + c.answer_tokens;
    // A prefill policy compresses the prompt once, after all of it (the question in its
    // observation window) or, with press_before_question, after the haystack.
    const bool press =
        c.eviction && eviction_schedule(c.eviction->policy) == EvictionSchedule::Prefill;
    const int press_at =
        press ? (c.press_before_question ? prompt->question : static_cast<int>(ids.size())) : 0;
    std::optional<detail::LoopEviction> eviction;
    if (c.eviction) eviction.emplace(*c.eviction, mc, positions, press_at);
    auto state = model.new_state(eviction && eviction->needs_queries());
    if (quantizer) {
      state.attention_reader = detail::quantizing_reader(*quantizer, mc.kv_heads, mc.head_dim());
    }
    if (eviction) eviction->attach(state);
    // One step through the model: the prompt in chunks, or one token at a time when a
    // policy must see every step.
    const auto step = [&](const std::vector<int>& tokens) -> Result<std::vector<float>> {
      if (!eviction) return model.forward(state, tokens);
      if (press) {  // the prefill runs whole; after the press, new tokens are only admitted
        if (state.pos >= press_at) {
          for (std::size_t i = 0; i < tokens.size(); ++i) {
            eviction->admit(state.pos + static_cast<int>(i));
          }
        }
        return model.forward(state, tokens);
      }
      Result<std::vector<float>> logits = std::vector<float>{};
      for (const int tok : tokens) {
        const int pos = state.pos;
        eviction->admit(pos);
        logits = model.forward(state, {tok});
        if (!logits) return logits;
        eviction->evict(pos, state);
      }
      return logits;
    };
    Result<std::vector<float>> logits = std::vector<float>{};
    const std::size_t stop = static_cast<std::size_t>(press_at);
    for (std::size_t at = 0; at < ids.size();) {
      KVLAB_TRY(progress.keep_going(static_cast<double>(at) / positions));
      if (press && at == stop) {
        if (auto s = eviction->press(state, rope); !s) return s.error();
      }
      std::size_t end = std::min(ids.size(), at + kNeedlePrefillChunk);
      if (press && at < stop) end = std::min(end, stop);  // the press falls between chunks
      logits = step(std::vector<int>(ids.begin() + static_cast<std::ptrdiff_t>(at),
                                     ids.begin() + static_cast<std::ptrdiff_t>(end)));
      if (!logits) return logits.error();
      at = end;
    }
    if (press && stop == ids.size()) {
      if (auto s = eviction->press(state, rope); !s) return s.error();
    }
    std::vector<int> answer;
    for (int i = 0; i < c.answer_tokens; ++i) {
      const int next = greedy_token(*logits);
      if (next == m.eos) break;
      answer.push_back(next);
      if (i + 1 == c.answer_tokens) break;
      logits = step({next});
      if (!logits) return logits.error();
    }
    trial.answer = m.decode(answer);
    trial.hit = trial.answer.find(prompt->key) != std::string::npos;
    return Ok{};
  };
  KVLAB_TRY(for_each_item(static_cast<int>(trials.size()), progress, "trial", run_trial));
  int found = 0;
  for (const Trial& t : trials) {  // a cell shows its last trial's prompt length and answer
    NeedleCell& cell = r.cells[static_cast<std::size_t>(t.cell)];
    cell.length = t.length;
    cell.answer = t.answer;
    cell.found += t.hit;
    ++cell.trials;
    found += t.hit;
  }
  report_progress(progress, 1.0, "done");
  r.accuracy = static_cast<double>(found) / static_cast<double>(trials.size());
  r.found = found;
  r.trials = static_cast<int>(trials.size());
  std::tie(r.accuracy_low, r.accuracy_high) = wilson_interval(found, r.trials);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace kvlab
