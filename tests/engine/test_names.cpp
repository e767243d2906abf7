// Names users type: canonical ids and "did you mean" suggestions, against cases worked out by
// hand.
#include "kvlab/engine/core/names.h"

#include <gtest/gtest.h>

namespace kvlab {
namespace {

TEST(Names, CanonicalIdsIgnoreCaseAndSeparators) {
  EXPECT_EQ(canonical_id("Llama-3-8B"), "llama38b");
  EXPECT_EQ(canonical_id("llama3-8b"), canonical_id("llama_3.8b"));
  EXPECT_NE(canonical_id("llama-3-8b"), canonical_id("llama-3-70b"));
  EXPECT_EQ(canonical_id(""), "");
}

TEST(Names, NearestNamesByEditDistanceNearestFirst) {
  const std::vector<std::string> methods = {"int8", "int4", "kivi", "fp8-e4m3", "kvcomp"};
  EXPECT_EQ(nearest_names("kiwi", methods), std::vector<std::string>{"kivi"});
  // A swap of neighbours is one edit.
  EXPECT_EQ(nearest_names("ikvi", methods), std::vector<std::string>{"kivi"});
  // int8 and int4 are both one edit from int6: both, in the order given.
  EXPECT_EQ(nearest_names("int6", methods), (std::vector<std::string>{"int8", "int4"}));
  // A prefix is nearest.
  ASSERT_FALSE(nearest_names("kvc", methods).empty());
  EXPECT_EQ(nearest_names("kvc", methods).front(), "kvcomp");
  EXPECT_TRUE(nearest_names("zzzzzzzz", methods).empty());
  EXPECT_EQ(nearest_names("int", methods, 1).size(), 1u);
}

TEST(Names, MessageNamesTheWordAndTheKnownOnes) {
  EXPECT_EQ(unknown_name_message("policy", "h20", {"window", "h2o"}),
            "unknown policy 'h20'; did you mean 'h2o'? (known: window, h2o)");
  EXPECT_EQ(unknown_name_message("policy", "qqqqqq", {"window", "h2o"}),
            "unknown policy 'qqqqqq' (known: window, h2o)");
  EXPECT_EQ(unknown_name_message("x", "ab", {"aa", "ba", "bb"}),
            "unknown x 'ab'; did you mean 'aa', 'ba' or 'bb'? (known: aa, ba, bb)");
}

}  // namespace
}  // namespace kvlab
