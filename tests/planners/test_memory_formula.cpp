// The memory formula against values worked out by hand.
#include <gtest/gtest.h>

#include "kvlab/planners/memory_formula.h"

namespace kvlab::planners {
namespace {

TEST(MemoryFormula, GoldenValues) {
  // Llama-3-70B: 2 x 80 layers x 8 kv_heads x 128 x 2 bytes = 327,680 bytes per token.
  const ModelShape llama3_70b{"llama3-70b", 80, 64, 8, 128};
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(llama3_70b, 16), 327680.0);
  // Llama-2-7B at 4,096 tokens in fp16: 2 x 32 x 32 x 128 x 4096 x 2 = 2 GiB.
  const ModelShape llama2_7b{"llama2-7b", 32, 32, 32, 128};
  EXPECT_DOUBLE_EQ(kv_bytes(llama2_7b, 4096, 16), 2.0 * (1ull << 30));
  // 4.375 bits per value (KIVI-2 with its metadata) is 4.375 / 16 of fp16.
  EXPECT_DOUBLE_EQ(kv_bytes(llama2_7b, 4096, 4.375), 2.0 * (1ull << 30) * 4.375 / 16);
}

TEST(MemoryFormula, ExplanationShowsTheUsersNumbers) {
  const ModelShape s{"llama3-8b", 32, 32, 8, 128};
  EXPECT_EQ(explain_kv_bytes(s, 8192, 16),
            "2 × 32 layers × 8 kv_heads × 128 head_dim × 8192 tokens × 2 bytes = 1.0 GiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(100), "100 B");
}

}  // namespace
}  // namespace kvlab::planners
