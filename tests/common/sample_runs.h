// A quality report shared by the store and GUI tests of run records: KIVI-2 with H2O keeping a
// fifth of the tokens, as the Quality page measured it on stories260K. The method alone is
// 16 / 3.5 = 4.57x at 3.5 bits; with eviction the cache holds a fifth of that: 22.86x, 0.7 bits.
#pragma once

#include "kvlab/engine/model/model_quality.h"

namespace kvlab::test {

inline QualityReport kivi2_with_h2o_at_20_percent() {
  QualityReport r;
  r.method = "kivi";
  r.method_label = "kivi-2 G=32 R=128";
  r.policy = "h2o";
  r.policy_label = "h2o budget 20%";
  r.kept_fraction = 0.2;
  r.tokens = 2046;  // two windows of 1024
  r.windows = 2;
  r.perplexity_exact = 4.0;
  r.perplexity = 32.828;
  r.perplexity_change = 7.207;
  r.next_token_agreement = 0.4321;
  r.kl_mean = 0.0125;
  r.bits_per_value = 3.5;
  r.ratio = 16.0 / 3.5;
  r.seconds = 12.5;
  return r;
}

}  // namespace kvlab::test
