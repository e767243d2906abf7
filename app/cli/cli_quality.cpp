// kvlab quality: perplexity, next-token agreement and KL of a real model whose attention reads
// a quantized KV cache, an evicted one, or both, against the exact run.
#include <algorithm>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/model/model_needle.h"
#include "kvlab/engine/model/model_quality.h"

namespace kvlab::cli {
namespace {

struct QualityOptions {
  std::string model, tokenizer, text_file, method = "kivi", label;
  int sample = 1024, window = 0, stride = 0, max_tokens = 0;  // the GUI's defaults too
  double target_se = 0;                                       // percentage points; 0: every window
  std::uint64_t seed = 1;
  MethodOptions method_options;
  EvictionOptions eviction;  // --policy none: no eviction
  bool json = false, save = false, stored = false;
  DbOption db;
  bool needle = false;
  std::vector<int> lengths = {1024, 2048};
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int trials = 1;
  int prompt = 0;
  bool press_before_question = false;
};

void print_needle(const QualityOptions& o, const NeedleReport& report) {
  const NeedleReport* r = &report;
  fmt::print("model     {}\nmethod    {}\neviction  {}{}\n\n", o.model, r->method_label,
             r->policy_label, r->press_before_question ? " (pressed before the question)" : "");
  fmt::print("{:>8} {:>7} {:>7}  {}\n", "tokens", "depth", "found", "last answer");
  for (const auto& c : r->cells) {
    std::string answer = c.answer.substr(0, 48);
    std::replace(answer.begin(), answer.end(), '\n', ' ');
    fmt::print("{:>8} {:>6.0f}% {:>3}/{:<3}  {}\n", c.length, 100 * c.depth, c.found, c.trials,
               answer);
  }
  fmt::print(
      "\nretrieved {:.0f}% of the pass keys ({} of {}; 95% interval {:.0f}–{:.0f}%) in {:.1f} "
      "s\n",
      100 * r->accuracy, r->found, r->trials, 100 * r->accuracy_low, 100 * r->accuracy_high,
      r->seconds);
}

// --needle: passkey retrieval across lengths and depths, exact or with the method / policy.
int run_needle(const QualityOptions& o, const QualityConfig& qc) {
  auto store = o.db.open_if(o.save);
  if (!store) return fail(store.message());
  auto loaded = load_model(o.model, o.tokenizer);
  if (!loaded) return fail(loaded.message());
  NeedleConfig nc;
  nc.method = qc.method;
  nc.eviction = qc.eviction;
  nc.lengths = o.lengths;
  nc.depths = o.depths;
  nc.trials = o.trials;
  nc.seed = o.seed;
  nc.press_before_question = o.press_before_question;
  auto r = measure_needle(*loaded, nc, terminal_progress(o.json));
  if (!r) return fail(fmt::format("{}: {}", o.model, r.message()));
  const NewRun run = needle_run(*r, nc, o.model, o.label);
  nlohmann::json j = run.metrics;
  return save_and_print(store->get(), run, j, o.json, [&] { print_needle(o, *r); });
}

int run_quality(const QualityOptions& o) {
  QualityConfig qc;
  qc.method.reset();
  if (o.method != "none") {
    auto mc = o.method_options.resolve(o.method, "--method");
    if (!mc) return fail(mc.message());
    qc.method = *mc;
  }
  if (o.eviction.policy != "none") {
    auto ec = o.eviction.resolve();
    if (!ec) return fail(ec.message());
    qc.eviction = *ec;
  }
  if (o.needle && o.stored) {
    return fail("--stored applies to perplexity runs, not to --needle");
  }
  if (o.needle) return run_needle(o, qc);
  if (!qc.method && !qc.eviction) {
    return fail(
        "--method none without --policy: nothing to measure (give a method, a policy or both)");
  }
  auto store = o.db.open_if(o.save);
  if (!store) return fail(store.message());
  auto loaded = load_model(o.model, o.tokenizer);
  if (!loaded) return fail(loaded.message());
  const LlamaModel& model = loaded->model;
  qc.window = o.window;
  qc.stride = o.stride;
  qc.target_se = o.target_se / 100;  // given in percentage points
  qc.prompt = o.prompt;
  qc.stored = o.stored;
  qc.bos = loaded->bos;
  auto text = quality_text(*loaded, "--text-file", o.text_file, o.max_tokens, o.sample, o.seed, qc);
  if (!text) return fail(text.message());
  const std::vector<int>& tokens = text->tokens;
  const std::string& text_source = text->source;
  auto r = measure_quality(model, tokens, qc, terminal_progress(o.json));
  if (!r) return fail(r.message());
  const NewRun run = quality_run(*r, qc, {o.model, text_source, o.window, o.label});
  nlohmann::json j = run.metrics;
  return save_and_print(store->get(), run, j, o.json, [&] {
    fmt::print("model       {}\ntext        {} ({} tokens predicted in {} {} of {} positions{})\n",
               o.model, text_source, r->tokens, r->windows, r->windows == 1 ? "window" : "windows",
               r->window,
               r->stride < r->window - 1 ? fmt::format(", one every {} tokens", r->stride) : "");
    if (qc.method) {
      fmt::print("method      {} ({:.3f} bits/value, {:.2f}x vs fp16)\n", r->method_label,
                 r->bits_per_value, r->ratio);
    }
    if (qc.eviction) {
      fmt::print("eviction    {} (kept {:.2f}% of the tokens so far, mean over steps and heads)\n",
                 r->policy_label, 100 * r->kept_fraction);
    }
    // Every number with its uncertainty over the r->tokens scored tokens (model_quality.h).
    fmt::print(
        "perplexity  {:.4f} exact → {:.4f} ({:+.3f}% ± {:.3f}%, standard error over {} "
        "tokens)\n",
        r->perplexity_exact, r->perplexity, 100 * r->perplexity_change,
        100 * r->perplexity_change_se, r->tokens);
    if (r->reached_target_se) {
      fmt::print(
          "            (stopped after {} windows: the standard error reached the target "
          "of {:.3g} points)\n",
          r->windows, o.target_se);
    }
    fmt::print(
        "next token  same greedy choice {:.2f}% of the time (95% interval {:.2f}–{:.2f}%); "
        "mean KL {:.3g} ± {:.2g} nats\n",
        100 * r->next_token_agreement, 100 * r->next_token_agreement_low,
        100 * r->next_token_agreement_high, r->kl_mean, r->kl_mean_se);
    fmt::print("time        {:.1f} s\n", r->seconds);
  });
}

}  // namespace

Result<QualityText> quality_text(const LoadedModel& loaded, const std::string& option,
                                 const std::string& text_file, int max_tokens, int sample,
                                 std::uint64_t seed, const QualityConfig& config) {
  QualityText out;
  if (text_file.empty()) {
    if (max_tokens > 0) sample = std::min(sample, max_tokens);  // no more than will be scored
    // Sampling takes a forward step per token: a window the text cannot fill fails first.
    auto plan = plan_quality(loaded.model.config(), config, static_cast<std::size_t>(sample));
    if (!plan) return plan.error();
    auto sampled = sample_text(loaded.model, sample, seed, loaded.bos, loaded.eos);
    if (!sampled) return sampled.error();
    out.tokens = std::move(*sampled);
    out.source = fmt::format("sampled:{} tokens, seed {}", sample, seed);
    return out;
  }
  auto read = read_text_file(option, text_file);
  if (!read) return read.error();
  const std::string& text = *read;
  KVLAB_TRY(check_utf8(text, fmt::format("{} {}", option, text_file)));
  auto ids = loaded.encode(text);
  if (!ids) return ids.error();
  // Windows add their own BOS.
  const bool has_bos = !ids->empty() && ids->front() == loaded.bos;
  out.tokens.assign(ids->begin() + (has_bos ? 1 : 0), ids->end());
  if (max_tokens > 0 && static_cast<int>(out.tokens.size()) > max_tokens) {
    out.tokens.resize(static_cast<std::size_t>(max_tokens));
  }
  out.source = "file:" + text_file;
  return out;
}

void add_quality_command(CLI::App& app) {
  auto o = std::make_shared<QualityOptions>();
  auto* cmd = app.add_subcommand(
      "quality",
      "Run a real model (GGUF, llama2.c or Hugging Face) over a text twice, exactly and with "
      "attention "
      "reading a quantized or evicted KV cache (or both), and compare: perplexity, greedy "
      "next-token agreement, KL");
  cmd->add_option("--model", o->model,
                  "a .gguf file (llama, qwen2), a llama2.c checkpoint (.bin) or a Hugging Face "
                  "folder (config.json, safetensors)")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "llama2.c tokenizer for --text-file (default: the tok*.bin next to the model; "
                  "a GGUF file has its own)");
  cmd->add_option("--text-file", o->text_file,
                  "the UTF-8 text to score (default: the model's own sampled text)");
  cmd->add_option("--sample", o->sample, "without --text-file: tokens of sampled text")
      ->capture_default_str()
      ->check(CLI::Range(2, kMaxSampledTokens));
  cmd->add_option("--max-tokens", o->max_tokens,
                  "score only the first N tokens of the text (0: all of it); a sampled text is "
                  "sampled no longer")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", o->seed, "seed of the sampled text")->capture_default_str();
  cmd->add_option("--target-se", o->target_se,
                  "score windows in text order, eight at a time, only until the standard error "
                  "of the perplexity change is at most this many percentage points (0: every "
                  "window of the text)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--window", o->window,
                  "positions per window, BOS included (0: the model's context, or the whole "
                  "text in one window where that is shorter)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--stride", o->stride,
                  "text tokens from one window's start to the next (0: window − 1, side by "
                  "side); smaller, windows overlap and each scores only its last STRIDE tokens, "
                  "so every scored token past the first window has window − 1 − STRIDE tokens "
                  "before it (Hugging Face's strided perplexity)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--method", o->method, "quantization method: " + join_ids(method_ids(), "none"))
      ->capture_default_str();
  o->method_options.add_to(*cmd);
  o->eviction.policy = "none";
  o->eviction.budget = "0.5";
  o->eviction.add_to(*cmd, "eviction in the loop: " + join_ids(eviction_policy_ids(), "none"));
  cmd->add_flag("--stored", o->stored,
                "hold the compressed run's cache as the method's reference engine stores one it "
                "appends to (what `kvlab generate --method` runs: scales fixed from the prompt, "
                "KIVI's groups sealed as they fill) instead of quantizing the whole prefix again "
                "after every token; each window's unscored tokens go in as its prompt");
  cmd->add_flag("--needle", o->needle,
                "passkey retrieval instead (a needle in a haystack): a 5-digit key hidden at "
                "each depth of a filler text of each length, asked for through the model's chat "
                "template; exact with --method none and no policy");
  cmd->add_option("--lengths", o->lengths, "--needle: prompt tokens, e.g. 1024,2048")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--depths", o->depths, "--needle: where the key sits, 0 (start) to 1 (end)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--trials", o->trials, "--needle: keys per length and depth")
      ->capture_default_str();
  cmd->add_option("--prompt", o->prompt,
                  "tokens of each window that are its prompt (BOS included): kept whole while "
                  "they run and not scored; a prefill policy compresses them when they end, a "
                  "decode policy starts evicting after them (0: none, or half the window for a "
                  "prefill policy)")
      ->capture_default_str();
  cmd->add_flag("--press-before-question", o->press_before_question,
                "--needle: a prefill policy compresses the prompt after the haystack, before the "
                "question (question-agnostic); default: after the whole prompt");
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->add_flag("--save", o->save, "save the run to the runs database");
  cmd->add_option("--label", o->label, "a label for the saved run");
  o->db.add_to(*cmd);
  cmd->callback([o] { exit_code() = run_quality(*o); });
}

}  // namespace kvlab::cli
