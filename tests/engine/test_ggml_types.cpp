// ggml's type table (ggml_types.h against ggml.h and ggml-common.h): every type id's name,
// block size, type size and whether kvlab dequantizes it, ids ggml leaves undefined, and the
// bytes of a row of n values, with rows that are not whole blocks, negative or past 64 bits.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/ggml_types.h"

namespace kvlab {
namespace {

TEST(GgmlTypes, NamesAndSizesMatchGgml) {
  struct Expected {
    std::uint32_t id;
    const char* name;
    int block, size;
    bool dequantizable;
  };
  // Block sizes from ggml-common.h (QK4_0 = 32 … QK_K = 256) and type sizes from its structs.
  const Expected table[] = {
      {0, "F32", 1, 4, true},          {1, "F16", 1, 2, true},
      {2, "Q4_0", 32, 18, true},       {3, "Q4_1", 32, 20, true},
      {6, "Q5_0", 32, 22, true},       {7, "Q5_1", 32, 24, true},
      {8, "Q8_0", 32, 34, true},       {9, "Q8_1", 32, 36, false},
      {10, "Q2_K", 256, 84, true},     {11, "Q3_K", 256, 110, true},
      {12, "Q4_K", 256, 144, true},    {13, "Q5_K", 256, 176, true},
      {14, "Q6_K", 256, 210, true},    {15, "Q8_K", 256, 292, true},
      {16, "IQ2_XXS", 256, 66, false}, {17, "IQ2_XS", 256, 74, false},
      {18, "IQ3_XXS", 256, 98, false}, {19, "IQ1_S", 256, 50, false},
      {20, "IQ4_NL", 32, 18, true},    {21, "IQ3_S", 256, 110, false},
      {22, "IQ2_S", 256, 82, false},   {23, "IQ4_XS", 256, 136, true},
      {24, "I8", 1, 1, false},         {25, "I16", 1, 2, false},
      {26, "I32", 1, 4, false},        {27, "I64", 1, 8, false},
      {28, "F64", 1, 8, false},        {29, "IQ1_M", 256, 56, false},
      {30, "BF16", 1, 2, true},        {34, "TQ1_0", 256, 54, true},
      {35, "TQ2_0", 256, 66, true},    {39, "MXFP4", 32, 17, true},
      {40, "NVFP4", 64, 36, true},     {41, "Q1_0", 128, 18, true},
      {42, "Q2_0", 64, 18, true},
  };
  std::vector<bool> defined(64, false);
  for (const Expected& e : table) {
    SCOPED_TRACE(e.name);
    defined[e.id] = true;
    const GgmlTypeInfo* info = ggml_type_info(e.id);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->name, e.name);
    EXPECT_EQ(info->block_size, e.block);
    EXPECT_EQ(info->type_size, e.size);
    EXPECT_EQ(info->dequantizable, e.dequantizable);
    EXPECT_EQ(ggml_type_info(static_cast<GgmlType>(e.id)), info);
  }
  for (std::uint32_t id = 0; id < defined.size(); ++id) {
    if (!defined[id]) {
      EXPECT_EQ(ggml_type_info(id), nullptr) << id;
    }
  }
  for (std::uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u, 1000u, 0xFFFFFFFFu}) {
    EXPECT_EQ(ggml_type_info(id), nullptr) << id;
  }
}

// The block structs the quantizers write through (ggml_blocks.h) have the sizes of the type table,
// which NamesAndSizesMatchGgml checks against llama.cpp's numbers.
TEST(GgmlTypes, BlockStructsMatchTheTypeTable) {
  EXPECT_EQ(sizeof(ggml_block::Q4_0), ggml_type_info(GgmlType::Q4_0)->type_size);
  EXPECT_EQ(sizeof(ggml_block::Q4_1), ggml_type_info(GgmlType::Q4_1)->type_size);
  EXPECT_EQ(sizeof(ggml_block::Q5_0), ggml_type_info(GgmlType::Q5_0)->type_size);
  EXPECT_EQ(sizeof(ggml_block::Q5_1), ggml_type_info(GgmlType::Q5_1)->type_size);
  EXPECT_EQ(sizeof(ggml_block::Q8_0), ggml_type_info(GgmlType::Q8_0)->type_size);
  EXPECT_EQ(sizeof(ggml_block::IQ4_NL), ggml_type_info(GgmlType::IQ4_NL)->type_size);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                     GgmlType::IQ4_NL}) {
    EXPECT_EQ(ggml_type_info(t)->block_size, ggml_block::kValues) << ggml_type_info(t)->name;
  }
}

TEST(GgmlTypes, RowBytes) {
  using U = std::optional<std::uint64_t>;
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 0), U(0));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 512), U(288));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q6_K, 4096), U(16 * 210));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_1, 64), U(40));
  EXPECT_EQ(ggml_row_bytes(GgmlType::F16, 3), U(6));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q1_0, 256), U(36));
  // Not a whole number of blocks, negative.
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 255), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_K, 257), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_0, 48), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, -1), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q8_0, -32), std::nullopt);
  // An undefined type.
  EXPECT_EQ(ggml_row_bytes(static_cast<GgmlType>(4), 32), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(static_cast<GgmlType>(99), 32), std::nullopt);
  // 64-bit overflow: 8 * (2^63 - 1) and 4 * 2^62 do not fit, 4 * 2^61 does; the largest Q8_K
  // row (2^55 - 1 blocks of 292 bytes) fits.
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  EXPECT_EQ(ggml_row_bytes(GgmlType::F64, max), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::I64, max), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, std::int64_t{1} << 62), std::nullopt);
  EXPECT_EQ(ggml_row_bytes(GgmlType::F32, std::int64_t{1} << 61), U(std::uint64_t{1} << 63));
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q8_K, max / 256 * 256), U((max / 256) * std::uint64_t{292}));
  EXPECT_EQ(ggml_row_bytes(GgmlType::I8, max), U(static_cast<std::uint64_t>(max)));
}

}  // namespace
}  // namespace kvlab
