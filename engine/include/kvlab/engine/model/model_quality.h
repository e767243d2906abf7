// Quality where it counts: a real model runs over a text while its attention reads the KV cache
// through a quantizer, and its next-token distributions are compared with the exact run.
//
// The text is split into windows of the model's context (each starting from BOS); every window
// is run one token at a time, twice: exactly, and with attention reading the cache as the
// method would hold it after each token (the whole prefix quantized and dequantized again, so
// per-tensor scales and KIVI's fp16 window follow the prefix as it grows). Reported: perplexity
// of both runs and its relative change, how often the greedy next token agrees, the mean
// KL(exact || compressed) of the next-token distributions, and the method's bits per value
// measured on the exact run's cache.
//
// Eviction in the loop: with `eviction` set, every (layer, KV head) keeps its own tokens through
// the same policy code the eviction simulation runs (eviction_policy.h). At each decode step the
// new token is admitted, attention reads only the kept tokens (softmax renormalised over them),
// each query head's probabilities are summed into its group's policy, and the policy evicts down
// to the budget at the tokens so far. With a method as well, attention reads the kept tokens
// quantized. Merging runs in the loop as in the simulation: a merged entry's logit is its
// members' weighted logit + log(count), and its attention probability is shared among its tokens
// by their weights, so attention reads the weighted averages of their keys and values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvlab/engine/core/interval.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {

struct QualityConfig {
  std::optional<MethodConfig> method = MethodConfig{};  // none: attention reads exact K and V
  std::optional<EvictionConfig> eviction;               // none: every token is kept
  // At least one of the two must be set. EvictionConfig's steps, needle, top_k and quant belong
  // to the simulation and are not used here.
  int window = 0;  // positions per window, BOS included; 0: the model's seq_len, or the whole
                   // text in one window where that is shorter
  // Tokens of each window that are its prompt (BOS included): every cache keeps them whole while
  // they run, and only the tokens after them are scored; a prefill eviction policy compresses
  // them once when they are done, a decode policy starts evicting after them. 0: no prompt
  // (every token is scored), except that a prefill policy then takes half the window.
  int prompt = 0;
  // Text tokens from one window's start to the next's; 0: window − 1, windows side by side. A
  // smaller stride makes windows overlap, and each scores only the tokens the windows before it
  // did not (its last `stride`), so every scored token but the first window's has at least
  // window − 1 − stride tokens of the window before it: Hugging Face's strided perplexity
  // ("Perplexity of fixed-length models"), with the context that llama.cpp's perplexity gets by
  // scoring only the second half of each window.
  int stride = 0;
  int bos = LlamaTokenizer::kBos;  // the token each window starts from
  // Above 0: score windows in text order, eight at a time, only until the standard error of the
  // perplexity change (a fraction: 0.005 is half a point) is at most this, or the text ends.
  double target_se = 0;
  // The compressed run holds its cache as the method's reference engine stores one it appends to
  // (make_method_store, kv_store.h: what `kvlab generate --method` runs) instead of quantizing
  // the whole prefix again after every token: per-tensor scales fixed from the window's prompt,
  // KIVI's groups sealed as they fill, llama.cpp's rows quantized as they are written, KVComp's
  // fp16 buffer flushed a block at a time. Each window's tokens before its first scored one go
  // through that run as one prompt. Needs a method the runner stores, and no eviction.
  bool stored = false;
};

struct QualityReport {
  std::string method;              // method id; "none" without quantization
  std::string method_label;        // "kivi-2 G=32 R=128"; "none"
  std::string policy;              // eviction policy id; "none" without eviction
  std::string policy_label;        // "h2o budget 50% recent 50%"; "none"
  bool stored = false;             // QualityConfig::stored: the cache was held in stored form
  double kept_fraction = 1;        // kept tokens / tokens so far after each step, mean over steps,
                                   // windows, layers and KV heads
  int tokens = 0;                  // tokens scored (the interval's n)
  int prompt = 0;                  // the prompt's tokens per window
  int windows = 0;                 // windows scored (fewer than the text holds when the
                                   // target standard error was reached first)
  bool reached_target_se = false;  // target_se stopped the scoring before the text ended
  int window = 0;                  // positions per window, BOS included
  int stride = 0;                  // text tokens between window starts
  double perplexity_exact = 0, perplexity = 0;
  double perplexity_change = 0;  // perplexity / perplexity_exact − 1
  double next_token_agreement = 0;
  double kl_mean = 0;
  // Uncertainty, from the per-token values (as llama.cpp's perplexity prints ±): the standard
  // error of perplexity_change (paired log-likelihood differences, delta method) and of kl_mean,
  // and Wilson's 95% interval of next_token_agreement. Tokens are taken as independent, which
  // they are not quite: the errors are lower bounds. NaN with fewer than two tokens, and in a
  // report not made by measure_quality() (JSON: null).
  double perplexity_change_se = std::numeric_limits<double>::quiet_NaN();
  double kl_mean_se = std::numeric_limits<double>::quiet_NaN();
  double next_token_agreement_low = std::numeric_limits<double>::quiet_NaN();
  double next_token_agreement_high = std::numeric_limits<double>::quiet_NaN();
  // Per scored token, in text order: log p_exact − log p_compressed of the next token, and
  // KL(exact ‖ compressed) of the next-token distributions. Not written to JSON.
  std::vector<double> token_nll_delta, token_kl;
  // Of the method on the exact run's cache; stored: of the first window's store at its end (its
  // fp16 windows and buffers counted).
  double bits_per_value = 16, ratio = 1;
  double seconds = 0;
};

// How a text of `text_tokens` tokens is cut for `config` on a model of `mc`: every check
// measure_quality() makes before any work. Call it before sampling or reading a text, so that a
// run that cannot work fails at once rather than after minutes of sampling.
struct QualityPlan {
  int window = 0;      // positions per window, BOS included
  int per_window = 0;  // text tokens per window (window − 1)
  int stride = 0;      // text tokens between window starts (per_window: side by side)
  int windows = 0;     // whole windows in the text; a remainder is not scored
  int prompt = 0;      // prompt tokens per window
  // The first token of window `w` that is scored: the prompt's end in the first window, and in
  // the others also past what the window before scored.
  int first_scored(int w) const { return w == 0 ? prompt : std::max(prompt, per_window - stride); }
};
Result<QualityPlan> plan_quality(const LlamaConfig& mc, const QualityConfig& config,
                                 std::size_t text_tokens);

// `tokens` is the text (without BOS; windows add it). An error names what is wrong.
Result<QualityReport> measure_quality(const LlamaModel& model, const std::vector<int>& tokens,
                                      const QualityConfig& config, const ProgressFn& progress = {});

// Wilson's score interval for k successes in n trials (z = 1.96: 95%), clamped to [0, 1].
std::pair<double, double> wilson_interval(std::int64_t k, std::int64_t n, double z = kZ95);

// The most tokens sample_text() makes: each is a forward step of the model, and 2^20 of them
// already take hours on a CPU.
inline constexpr int kMaxSampledTokens = 1 << 20;

// `count` tokens (1 to kMaxSampledTokens) of the model's own text: stories sampled from BOS at
// temperature 1 with a seeded generator, one after another (BOS and EOS left out).
Result<std::vector<int>> sample_text(const LlamaModel& model, int count, std::uint64_t seed,
                                     int bos = LlamaTokenizer::kBos,
                                     int eos = LlamaTokenizer::kEos);

}  // namespace kvlab
