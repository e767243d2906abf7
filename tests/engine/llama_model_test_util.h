// Shared by the tests on the stories260K checkpoint (test_llama_model.cpp, test_model_quality.cpp):
// where the model and its tokenizer live, the skip when they are absent, and logits compared to
// float rounding.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace kvlab::llama_test {

inline const std::string kDir = std::string(KVLAB_MODELS_DIR) + "/stories260K";
inline const std::string kModel = kDir + "/stories260K.bin";
inline const std::string kTokenizer = kDir + "/tok512.bin";

#define REQUIRE_MODEL()                                      \
  if (!std::filesystem::exists(::kvlab::llama_test::kModel)) \
  GTEST_SKIP() << ::kvlab::llama_test::kModel << " is absent: skipped"

// Equal to float rounding: with hooks the attention probabilities are normalised before they
// weight the values, without them the sums divide the outputs, and the two round differently in
// the last bits.
inline void expect_same_logits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-5f * std::max(1.0f, std::abs(a[i]))) << "logit " << i;
  }
}

}  // namespace kvlab::llama_test
