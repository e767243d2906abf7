// ggml dequantization and dot products: every block type's rows from ggml_block_builders.h,
// read from memory that ends at an inaccessible page, decode to the values of the block format's
// formula; two hand-packed blocks (Q4_K, Q6_K) check the bit positions independently of the
// packer; an unaligned source decodes the same; ggml_dot agrees with dequantize then a dot in
// double on every type.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ggml_block_builders.h"
#include "kvlab/engine/model/ggml_types.h"

namespace kvlab::ggml_test {
namespace {

std::string type_name(GgmlType t) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(t));
  return info ? std::string(info->name) : "?";
}

// Bytes placed so that they end where an inaccessible page begins: reading one byte past them
// faults.
class GuardedBytes {
 public:
  explicit GuardedBytes(std::span<const std::uint8_t> data) {
    const auto page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    m_len = (data.size() + page - 1) / page * page + page;
    void* p = mmap(nullptr, m_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap");
    m_base = static_cast<std::uint8_t*>(p);
    if (mprotect(m_base + m_len - page, page, PROT_NONE) != 0) throw std::runtime_error("mprotect");
    m_data = m_base + m_len - page - data.size();
    if (!data.empty()) std::memcpy(m_data, data.data(), data.size());
  }
  ~GuardedBytes() { munmap(m_base, m_len); }
  GuardedBytes(const GuardedBytes&) = delete;
  GuardedBytes& operator=(const GuardedBytes&) = delete;
  const std::uint8_t* data() const { return m_data; }

 private:
  std::uint8_t* m_base = nullptr;
  std::uint8_t* m_data = nullptr;
  std::size_t m_len = 0;
};

// Dequantizes `c` from guarded memory and checks every value against the formula.
void expect_decodes_to_formula(const Built& c) {
  SCOPED_TRACE(type_name(c.type));
  const auto n = static_cast<std::int64_t>(c.want.size());
  ASSERT_EQ(ggml_row_bytes(c.type, n), std::optional<std::uint64_t>(c.bytes.size()));
  const GuardedBytes src(c.bytes);
  std::vector<float> got(n);
  ggml_dequantize(c.type, src.data(), got.data(), n);
  int failures = 0;
  for (std::int64_t i = 0; i < n && failures < 8; ++i) {
    const double tol = 1e-6 * c.mag[i];  // a few float roundings of the terms
    if (!(std::abs(static_cast<double>(got[i]) - c.want[i]) <= tol)) {
      ADD_FAILURE() << "value " << i << ": got " << got[i] << ", want " << c.want[i];
      ++failures;
    }
  }
}

// ----------------------------------------------------------------------------- tests

TEST(GgmlDequantize, Q4_0) {
  Rng rng(1);
  expect_decodes_to_formula(build_q4_0(rng, 8));
}
TEST(GgmlDequantize, Q4_1) {
  Rng rng(2);
  expect_decodes_to_formula(build_q4_1(rng, 8));
}
TEST(GgmlDequantize, Q5_0HighBits) {
  Rng rng(3);
  expect_decodes_to_formula(build_q5_0(rng, 8));
}
TEST(GgmlDequantize, Q5_1HighBits) {
  Rng rng(4);
  expect_decodes_to_formula(build_q5_1(rng, 8));
}
TEST(GgmlDequantize, Q8_0) {
  Rng rng(5);
  expect_decodes_to_formula(build_q8_0(rng, 8));
}
TEST(GgmlDequantize, Q2_K) {
  Rng rng(6);
  expect_decodes_to_formula(build_q2_k(rng, 3));
}
TEST(GgmlDequantize, Q3_KScalePackingAndHighMask) {
  Rng rng(7);
  expect_decodes_to_formula(build_q3_k(rng, 3));
}
TEST(GgmlDequantize, Q4_KScaleMinPacking) {
  Rng rng(8);
  expect_decodes_to_formula(build_q4_k(rng, 3));
}
TEST(GgmlDequantize, Q5_KScaleMinPackingAndHighBits) {
  Rng rng(9);
  expect_decodes_to_formula(build_q5_k(rng, 3));
}
TEST(GgmlDequantize, Q6_KLowHighSplit) {
  Rng rng(10);
  expect_decodes_to_formula(build_q6_k(rng, 3));
}
TEST(GgmlDequantize, Q8_K) {
  Rng rng(11);
  expect_decodes_to_formula(build_q8_k(rng, 3));
}
TEST(GgmlDequantize, IQ4_NL) {
  Rng rng(12);
  expect_decodes_to_formula(build_iq4_nl(rng, 8));
}
TEST(GgmlDequantize, IQ4_XS) {
  Rng rng(13);
  expect_decodes_to_formula(build_iq4_xs(rng, 3));
}
TEST(GgmlDequantize, TQ1_0Trits) {
  Rng rng(14);
  expect_decodes_to_formula(build_tq1_0(rng, 3));
}
TEST(GgmlDequantize, TQ2_0) {
  Rng rng(15);
  expect_decodes_to_formula(build_tq2_0(rng, 3));
}
TEST(GgmlDequantize, MXFP4IncludingSubnormalScales) {
  Rng rng(16);
  expect_decodes_to_formula(build_mxfp4(rng, 8));
}
TEST(GgmlDequantize, NVFP4IncludingZeroAndNanScales) {
  Rng rng(17);
  expect_decodes_to_formula(build_nvfp4(rng, 6));
}
TEST(GgmlDequantize, Q1_0) {
  Rng rng(18);
  expect_decodes_to_formula(build_q1_0(rng, 3));
}
TEST(GgmlDequantize, Q2_0) {
  Rng rng(19);
  expect_decodes_to_formula(build_q2_0(rng, 3));
}
TEST(GgmlDequantize, ElementTypesAnyCount) {
  Rng rng(20);
  for (int count : {1, 3, 255, 256, 257, 1000}) {
    SCOPED_TRACE(count);
    expect_decodes_to_formula(build_f32(rng, count));
    expect_decodes_to_formula(build_f16(rng, count));
    expect_decodes_to_formula(build_bf16(rng, count));
  }
}

// A hand-written Q4_K block, independent of the packer above: d = 0.5, dmin = 0.25, sub-block
// 5's scale 37 = 0b100101 (low nibble 5 in byte 9, top bits 0b10 in bits 6-7 of byte 1) and
// min 50 = 0b110010 (low nibble 2 in the high half of byte 9, top bits 0b11 in byte 5); its
// value 3 (sub-block 5 is the high nibbles of bytes 64..95 of qs) is quant 9.
TEST(GgmlDequantize, Q4_KHandPackedSubBlock) {
  std::vector<std::uint8_t> b(144, 0);
  b[0] = 0x00, b[1] = 0x38;  // 0.5 in fp16
  b[2] = 0x00, b[3] = 0x34;  // 0.25
  const std::size_t scales = 4;
  b[scales + 9] = 0x25;       // scale 5 low nibble 5, min 5 low nibble 2
  b[scales + 1] = 0b10 << 6;  // scale 5 top bits
  b[scales + 5] = 0b11 << 6;  // min 5 top bits
  b[16 + 64 + 3] = 0x90;      // sub-block 5 value 3 (high nibble), sub-block 4 value 3: 0
  std::vector<float> y(256);
  ggml_dequantize(GgmlType::Q4_K, b.data(), y.data(), 256);
  EXPECT_EQ(y[5 * 32 + 3], 0.5f * 37 * 9 - 0.25f * 50);
  EXPECT_EQ(y[5 * 32 + 4], -0.25f * 50);
  // Sub-block 1: scale = byte 1 & 63 = 0, min = byte 5 & 63 = 0, despite the top bits set.
  EXPECT_EQ(y[32 + 3], 0.0f);
  // Sub-block 4 reads byte 8 and the top bits of bytes 0 and 4: all zero.
  EXPECT_EQ(y[4 * 32 + 3], 0.0f);
}

// A hand-written Q6_K block: value 200 = half 1, l = 8, quarter 2 (values 64..95 of the half):
// low nibble in the high half of ql[64 + 8], top 2 bits at bits 4-5 of qh[32 + 8], scale
// sc[8 + 0 + 4] = sc[12].
TEST(GgmlDequantize, Q6_KHandPackedValue) {
  std::vector<std::uint8_t> b(210, 0);
  const int q = 0b101101;  // 45, value 45 - 32 = 13
  b[64 + 8] = static_cast<std::uint8_t>((q & 15) << 4);
  b[128 + 32 + 8] = static_cast<std::uint8_t>((q >> 4) << 4);
  b[192 + 12] = static_cast<std::uint8_t>(-3);
  b[208] = 0x00, b[209] = 0x40;  // d = 2
  std::vector<float> y(256);
  ggml_dequantize(GgmlType::Q6_K, b.data(), y.data(), 256);
  EXPECT_EQ(y[200], 2.0f * -3 * 13);
  // Every other value of sub-block 12 (values 192..207) is quant 0, i.e. -32.
  EXPECT_EQ(y[199], 2.0f * -3 * -32);
  EXPECT_EQ(y[208], 0.0f);  // sub-block 13, scale 0
}

TEST(GgmlDequantize, UnalignedSourceGivesTheSameValues) {
  Rng rng(21);
  for (const Built& c : build_all(rng, 8, 2, 300)) {
    SCOPED_TRACE(type_name(c.type));
    const auto n = static_cast<std::int64_t>(c.want.size());
    std::vector<float> aligned(n), shifted(n);
    std::vector<std::uint8_t> copy(c.bytes.size() + 1);
    std::memcpy(copy.data() + 1, c.bytes.data(), c.bytes.size());
    ggml_dequantize(c.type, c.bytes.data(), aligned.data(), n);
    ggml_dequantize(c.type, copy.data() + 1, shifted.data(), n);
    EXPECT_EQ(std::memcmp(aligned.data(), shifted.data(), n * sizeof(float)), 0);
    EXPECT_EQ(ggml_dot(c.type, c.bytes.data(), aligned.data(), n),
              ggml_dot(c.type, copy.data() + 1, aligned.data(), n));
  }
}

// ggml_dot against dequantize + a double dot, on random blocks of every type (from guarded
// memory, so a read past the row faults). The tolerance is relative to sum |w_i x_i|, the scale
// of the float rounding whatever cancellation the sum has.
TEST(GgmlDot, AgreesWithDequantizeThenDot) {
  Rng rng(22);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (int round = 0; round < 3; ++round) {
    // Odd block counts too: the dot loops take blocks two at a time.
    for (const Built& c :
         build_all(rng, round == 0 ? 32 : 31 + 2 * round, 4, round == 0 ? 1024 : 777 + round)) {
      SCOPED_TRACE(type_name(c.type));
      const auto n = static_cast<std::int64_t>(c.want.size());
      std::vector<float> x(n), w(n);
      for (float& v : x) v = dist(rng);
      const GuardedBytes row(c.bytes);
      ggml_dequantize(c.type, row.data(), w.data(), n);
      double want = 0, scale = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        want += static_cast<double>(w[i]) * x[i];
        scale += std::abs(static_cast<double>(w[i]) * x[i]);
      }
      const float got = ggml_dot(c.type, row.data(), x.data(), n);
      EXPECT_NEAR(got, want, 1e-5 * scale) << "n = " << n;
    }
  }
}

TEST(GgmlDot, EmptyRowIsZero) {
  EXPECT_EQ(ggml_dot(GgmlType::Q4_K, nullptr, nullptr, 0), 0.0f);
  ggml_dequantize(GgmlType::Q4_K, nullptr, nullptr, 0);  // nothing read or written
}

}  // namespace
}  // namespace kvlab::ggml_test
