// A needle in a haystack on a real model: passkey retrieval (Mohtashami & Jaggi 2023, "Landmark
// Attention", the test long-context papers and KV-cache compression papers report). A five-digit
// pass key is hidden at a depth of a long filler text, the model is asked for it through its
// chat template, and its greedy answer must contain the key. Run with the exact cache, with a
// quantized one (attention reads the whole cache quantized and dequantized after every chunk
// of the prompt and every generated token) or with eviction in the loop (the prompt then runs
// one token at a time, so that the policy sees every step, as in measure_quality).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/model/model_capture.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {

struct NeedleConfig {
  std::optional<MethodConfig> method;       // none: exact K and V
  std::optional<EvictionConfig> eviction;   // none: every token kept
  std::vector<int> lengths = {1024, 2048};  // prompt tokens, about (the filler is whole sentences)
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};  // where the needle sits, 0 = start
  int trials = 1;                                            // pass keys per cell
  std::uint64_t seed = 1;
  int answer_tokens = 16;  // greedy tokens generated for the answer
  // A prefill policy compresses the prompt after the haystack, before the question is read
  // (question-agnostic, as kvpress's benchmarks compress a context); false: after the whole
  // prompt, the question in its observation window.
  bool press_before_question = false;
};

struct NeedleCell {
  int length = 0;  // the prompt's tokens, as run
  double depth = 0;
  int trials = 0, found = 0;
  std::string answer;  // the last trial's answer text
};

struct NeedleReport {
  std::string method_label = "none", policy_label = "none";
  bool press_before_question = false;  // as configured, for prefill policies
  std::vector<NeedleCell> cells;       // lengths × depths
  double accuracy = 0;                 // found / trials over every cell
  int found = 0, trials = 0;           // the k of n accuracy rests on
  // Wilson's 95% interval of the accuracy (model_quality.h wilson_interval).
  double accuracy_low = 0, accuracy_high = 1;
  double seconds = 0;
};

// The filler and the needle: the classic passkey prompt's sentences.
inline constexpr const char* kNeedleFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ";

// Errors: a model without a chat template, a length past the model's positions, a depth outside
// [0, 1], trials < 1, a bad method or policy.
Result<NeedleReport> measure_needle(const LoadedModel& model, const NeedleConfig& config,
                                    const ProgressFn& progress = {});

}  // namespace kvlab
