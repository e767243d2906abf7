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
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/llama_model.h"
#include "kvlab/engine/method.h"
#include "kvlab/engine/progress.h"

namespace kvlab {

struct QualityConfig {
  MethodConfig method;
  int window = 0;                  // tokens per window; 0: the model's seq_len
  int bos = LlamaTokenizer::kBos;  // the token each window starts from
};

struct QualityReport {
  std::string method;        // method id
  std::string method_label;  // "kivi-2 G=32 R=128"
  int tokens = 0;            // tokens predicted (windows × (window − 1))
  int windows = 0;
  double perplexity_exact = 0, perplexity = 0;
  double perplexity_change = 0;  // perplexity / perplexity_exact − 1
  double next_token_agreement = 0;
  double kl_mean = 0;
  double bits_per_value = 0, ratio = 0;  // of the method on the exact run's cache
  double seconds = 0;
};

// `tokens` is the text (without BOS; windows add it). An error names what is wrong.
Result<QualityReport> measure_quality(const LlamaModel& model, const std::vector<int>& tokens,
                                      const QualityConfig& config, const ProgressFn& progress = {});

// `count` tokens of the model's own text: stories sampled from BOS at temperature 1 with a
// seeded generator, one after another (BOS and EOS left out).
Result<std::vector<int>> sample_text(const LlamaModel& model, int count, std::uint64_t seed,
                                     int bos = LlamaTokenizer::kBos,
                                     int eos = LlamaTokenizer::kEos);

nlohmann::json quality_report_to_json(const QualityReport& r);

}  // namespace kvlab
