// The SIMD loops of engine/src/fused_kernels.h against a double-precision reference, for each kind
// of rows (fp16, one byte per code, two 4-bit codes per byte, and the block formats that
// attention/format_rows.h decodes in registers: llama.cpp's 32-value blocks, NVFP4, FP8, KIVI's
// groups) and head tile. The block formats' values are their reference decoders' (ggml_dequantize,
// nvfp4_dequantize_row, the scalar fp8_decode, group_decode_row) on random blocks. Included by two
// test files: one built for this machine (AVX-512 where it has it), one built for AVX2 only, so the
// 8-lane value loop stays tested on machines whose builds take the 16-lane one. The including
// file defines KVLAB_KERNEL_SUITE, the test suite's name.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "attention/format_rows.h"
#include "attention/fused_kernels.h"
#include "core/random.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/model/ggml_blocks.h"
#include "kvlab/engine/model/ggml_types.h"
#include "quant/fp4_quantizer.h"
#include "quant/fp8_impl.h"
#include "quant/group_quant.h"

namespace kvlab {
namespace {

#if KVLAB_FUSED_SIMD

constexpr int kDim = 64;  // four lane groups
constexpr int kTokens = 37;

enum class RowKind {
  Fp16,
  Bytes,
  Nibbles,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  IQ4_NL,
  Mxfp4,
  Nvfp4,
  Packed2,
  KiviValues4,
  KiviValues8,
  Fp8E4M3,
  Fp8E5M2
};
constexpr RowKind kRowKinds[] = {
    RowKind::Fp16,        RowKind::Bytes,       RowKind::Nibbles, RowKind::Q4_0,
    RowKind::Q4_1,        RowKind::Q5_0,        RowKind::Q5_1,    RowKind::Q8_0,
    RowKind::IQ4_NL,      RowKind::Mxfp4,       RowKind::Nvfp4,   RowKind::Packed2,
    RowKind::KiviValues4, RowKind::KiviValues8, RowKind::Fp8E4M3, RowKind::Fp8E5M2};
// llama.cpp's block type of a kind, if it is one.
std::optional<GgmlType> ggml_of(RowKind kind) {
  switch (kind) {
    case RowKind::Q4_0:
      return GgmlType::Q4_0;
    case RowKind::Q4_1:
      return GgmlType::Q4_1;
    case RowKind::Q5_0:
      return GgmlType::Q5_0;
    case RowKind::Q5_1:
      return GgmlType::Q5_1;
    case RowKind::Q8_0:
      return GgmlType::Q8_0;
    case RowKind::IQ4_NL:
      return GgmlType::IQ4_NL;
    case RowKind::Mxfp4:
      return GgmlType::MXFP4;
    default:
      return std::nullopt;
  }
}
std::size_t ggml_row(RowKind kind) {
  return static_cast<std::size_t>(ggml_row_bytes(*ggml_of(kind), kDim).value());
}
constexpr float kFp8Scale = 0.37f;
// KIVI: keys plain packed codes (their parameters are folded into the query); values a step and
// minimum per row and group of 32 channels, fp16, after the row's codes.
constexpr int kKiviWidth = 32;
constexpr std::size_t kKiviGroups = kDim / kKiviWidth;
constexpr std::size_t kivi_value_row(int bits) {
  return kDim * static_cast<std::size_t>(bits) / 8 + 4 * kKiviGroups;
}
// Bytes of a row of kDim values in the block formats.
constexpr std::size_t kNvfp4Row = kDim / 2 + kDim / 16;
constexpr float kNvfp4Global = 37.5f;

// Rows of kDim values each (as floats), and the stored bytes the loops read.
struct TestRows {
  std::vector<float> values;  // [kTokens][kDim], channel order
  std::vector<std::uint16_t> halves;
  std::vector<std::uint8_t> bytes;
};

TestRows make_rows(RowKind kind, std::uint64_t seed) {
  detail::Rng rng(seed);
  TestRows r;
  r.values.resize(static_cast<std::size_t>(kTokens) * kDim);
  for (std::size_t i = 0; i < r.values.size(); ++i) {
    if (kind == RowKind::Fp16) {
      r.values[i] = fp16_to_float(float_to_fp16(static_cast<float>(rng.normal())));
      r.halves.push_back(float_to_fp16(r.values[i]));
    } else {
      r.values[i] = static_cast<float>(rng.below(kind == RowKind::Bytes ? 256 : 16));
    }
  }
  if (ggml_of(kind) || kind == RowKind::Nvfp4) {
    // Random bytes, block scales a normal fp16 d and m (ggml), an E8M0 exponent near 1 (MXFP4) or
    // a positive finite E4M3 (NVFP4), then each row's values as the format's reference decoder
    // gives them.
    const std::size_t row = kind == RowKind::Nvfp4 ? kNvfp4Row : ggml_row(kind);
    r.bytes.resize(row * kTokens);
    for (std::uint8_t& b : r.bytes) b = static_cast<std::uint8_t>(rng.below(256));
    for (int t = 0; t < kTokens; ++t) {
      std::uint8_t* at = r.bytes.data() + row * t;
      float* out = r.values.data() + static_cast<std::size_t>(t) * kDim;
      if (kind == RowKind::Nvfp4) {
        for (int b = 0; b < kDim / 16; ++b) {
          at[kDim / 2 + b] = static_cast<std::uint8_t>(rng.below(0x7f));
        }
        detail::nvfp4_dequantize_row(at, at + kDim / 2, kDim, kNvfp4Global, out);
        continue;
      }
      const GgmlType type = *ggml_of(kind);
      const std::size_t block = row / (kDim / ggml_block::kValues);
      for (int b = 0; b < kDim / ggml_block::kValues; ++b) {
        std::uint8_t* blk = at + b * block;
        if (type == GgmlType::MXFP4) {
          blk[offsetof(ggml_block::MXFP4, e)] = static_cast<std::uint8_t>(120 + rng.below(12));
          continue;
        }
        // d leads every block but MXFP4's (ggml_blocks.h); m follows it in Q4_1 and Q5_1.
        const std::uint16_t d = float_to_fp16(static_cast<float>(rng.normal()) * 0.1f);
        std::memcpy(blk + offsetof(ggml_block::Q4_0, d), &d, sizeof d);
        if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1) {
          static_assert(offsetof(ggml_block::Q4_1, m) == offsetof(ggml_block::Q5_1, m));
          const std::uint16_t m = float_to_fp16(static_cast<float>(rng.normal()));
          std::memcpy(blk + offsetof(ggml_block::Q4_1, m), &m, sizeof m);
        }
      }
      ggml_dequantize(type, at, out, kDim);
    }
  }
  if (kind == RowKind::Packed2 || kind == RowKind::KiviValues4 || kind == RowKind::KiviValues8) {
    // Random codes packed LSB-first and parameters, then each row as group_decode_row, KIVI's
    // own decoder, reconstructs it.
    const int bits = kind == RowKind::Packed2 ? 2 : kind == RowKind::KiviValues4 ? 4 : 8;
    const bool keys = kind == RowKind::Packed2;
    const std::size_t row = keys ? kDim * 2 / 8 : kivi_value_row(bits);
    r.bytes.resize(row * kTokens);
    for (std::uint8_t& b : r.bytes) b = static_cast<std::uint8_t>(rng.below(256));
    for (int t = 0; t < kTokens; ++t) {
      std::uint8_t* at = r.bytes.data() + row * t;
      float* out = r.values.data() + static_cast<std::size_t>(t) * kDim;
      if (keys) {  // plain codes, a step of 1 and a minimum of 0
        const std::vector<float> one(kDim, 1.f), zero(kDim, 0.f);
        detail::group_decode_row(at, 0, kDim, bits, zero.data(), one.data(), true, out);
        continue;
      }
      float step[kKiviGroups], min[kKiviGroups];
      for (std::size_t g = 0; g < kKiviGroups; ++g) {
        step[g] = fp16_to_float(float_to_fp16(static_cast<float>(rng.uniform()) * 0.1f));
        min[g] = fp16_to_float(float_to_fp16(static_cast<float>(rng.normal())));
        const std::uint16_t hs = float_to_fp16(step[g]), hm = float_to_fp16(min[g]);
        std::memcpy(at + kDim * bits / 8 + 2 * g, &hs, 2);
        std::memcpy(at + kDim * bits / 8 + 2 * (kKiviGroups + g), &hm, 2);
        detail::group_decode_row(at, g * kKiviWidth, kKiviWidth, bits, &min[g], &step[g], false,
                                 out + g * kKiviWidth);
      }
    }
  }
  if (kind == RowKind::Fp8E4M3 || kind == RowKind::Fp8E5M2) {
    // Every finite code (E4M3's NaN codes 0x7f / 0xff and E5M2's infinities and NaNs left out:
    // the quantizers saturate), decoded by the scalar fp8_decode.
    r.bytes.resize(static_cast<std::size_t>(kTokens) * kDim);
    const int top = kind == RowKind::Fp8E4M3 ? 0x7e : 0x7b;
    for (std::uint8_t& b : r.bytes) {
      b = static_cast<std::uint8_t>(rng.below(static_cast<std::uint64_t>(top) + 1) |
                                    (rng.below(2) << 7));
    }
    for (std::size_t i = 0; i < r.bytes.size(); ++i) {
      r.values[i] = (kind == RowKind::Fp8E4M3 ? detail::fp8_decode<detail::E4M3>(r.bytes[i])
                                              : detail::fp8_decode<detail::E5M2>(r.bytes[i])) *
                    kFp8Scale;
    }
    return r;
  }
  if (kind == RowKind::Bytes) r.bytes.assign(r.values.begin(), r.values.end());
  if (kind == RowKind::Nibbles) {
    r.bytes.resize(r.values.size() / 2);
    for (std::size_t i = 0; i < r.bytes.size(); ++i) {
      r.bytes[i] = static_cast<std::uint8_t>(static_cast<int>(r.values[2 * i]) |
                                             (static_cast<int>(r.values[2 * i + 1]) << 4));
    }
  }
  return r;
}

template <class F>
void with_rows(RowKind kind, const TestRows& r, F&& f) {
  switch (kind) {
    case RowKind::Fp16:
      return f(detail::Fp16Rows{r.halves.data(), kDim, kDim, kTokens});
    case RowKind::Bytes:
      return f(detail::ByteRows{r.bytes.data(), kDim});
    case RowKind::Nibbles:
      return f(detail::NibbleRows{r.bytes.data(), kDim / 2});
    case RowKind::Q4_0:
      return f(detail::GgmlRows<GgmlType::Q4_0>{r.bytes.data(), ggml_row(kind)});
    case RowKind::Q4_1:
      return f(detail::GgmlRows<GgmlType::Q4_1>{r.bytes.data(), ggml_row(kind)});
    case RowKind::Q5_0:
      return f(detail::GgmlRows<GgmlType::Q5_0>{r.bytes.data(), ggml_row(kind)});
    case RowKind::Q5_1:
      return f(detail::GgmlRows<GgmlType::Q5_1>{r.bytes.data(), ggml_row(kind)});
    case RowKind::Q8_0:
      return f(detail::GgmlRows<GgmlType::Q8_0>{r.bytes.data(), ggml_row(kind)});
    case RowKind::IQ4_NL:
      return f(detail::GgmlRows<GgmlType::IQ4_NL>{r.bytes.data(), ggml_row(kind)});
    case RowKind::Mxfp4:
      return f(detail::GgmlRows<GgmlType::MXFP4>{r.bytes.data(), ggml_row(kind)});
    case RowKind::Packed2:
      return f(detail::PackedRows<2>{r.bytes.data(), kDim * 2 / 8});
    case RowKind::KiviValues4:
      return f(detail::KiviValueRows<4>{r.bytes.data(), kivi_value_row(4), kDim * 4 / 8,
                                        2 * kKiviGroups, kKiviWidth});
    case RowKind::KiviValues8:
      return f(detail::KiviValueRows<8>{r.bytes.data(), kivi_value_row(8), kDim, 2 * kKiviGroups,
                                        kKiviWidth});
    case RowKind::Fp8E4M3:
      return f(detail::Fp8Rows<detail::E4M3>{r.bytes.data(), kDim, kFp8Scale});
    case RowKind::Fp8E5M2:
      return f(detail::Fp8Rows<detail::E5M2>{r.bytes.data(), kDim, kFp8Scale});
    case RowKind::Nvfp4: {
      static const std::array<float, 256> block_scales = detail::nvfp4_block_scales(kNvfp4Global);
      return f(detail::Nvfp4Rows{r.bytes.data(), kNvfp4Row, kDim / 2, block_scales.data()});
    }
  }
}

// out[g][c] += sum_t w[g][t] * row(t)[c], every head tile, starting from non-zero outputs.
TEST(KVLAB_KERNEL_SUITE, ValueSumsMatchDoubleReference) {
  for (RowKind kind : kRowKinds) {
    const TestRows r = make_rows(kind, 3 + static_cast<int>(kind));
    for (int gt = 1; gt <= detail::kHeadTile; ++gt) {
      SCOPED_TRACE(::testing::Message() << "rows " << static_cast<int>(kind) << ", heads " << gt);
      detail::Rng rng(40 + gt);
      std::vector<float> w(static_cast<std::size_t>(gt) * kTokens), out(gt * kDim);
      for (float& x : w) x = static_cast<float>(rng.uniform());
      for (float& x : out) x = static_cast<float>(rng.normal());
      std::vector<double> want(out.begin(), out.end()), magnitude(want.size());
      for (std::size_t i = 0; i < want.size(); ++i) magnitude[i] = std::abs(want[i]);
      for (int g = 0; g < gt; ++g) {
        for (int t = 0; t < kTokens; ++t) {
          for (int c = 0; c < kDim; ++c) {
            const double term = static_cast<double>(w[g * kTokens + t]) *
                                r.values[static_cast<std::size_t>(t) * kDim + c];
            want[g * kDim + c] += term;
            magnitude[g * kDim + c] += std::abs(term);
          }
        }
      }
      with_rows(kind, r, [&](const auto& rows) {
        detail::value_tile(rows, 0, kTokens, gt, kDim / detail::kLaneGroup, w.data(), kTokens,
                           out.data(), kDim);
      });
      for (int i = 0; i < gt * kDim; ++i) {
        ASSERT_NEAR(out[i], want[i], 1e-6 * magnitude[i] + 1e-6) << "element " << i;
      }
    }
  }
}

// logits[g][t] = qf[g] . row(t) + bias[g], with qf in the rows' lane order (nibble rows: the
// even channels of each 16, then the odd ones).
TEST(KVLAB_KERNEL_SUITE, KeyDotsMatchDoubleReference) {
  for (RowKind kind : kRowKinds) {
    const TestRows r = make_rows(kind, 7 + static_cast<int>(kind));
    for (int gt = 1; gt <= detail::kHeadTile; ++gt) {
      SCOPED_TRACE(::testing::Message() << "rows " << static_cast<int>(kind) << ", heads " << gt);
      detail::Rng rng(50 + gt);
      std::vector<float> q(static_cast<std::size_t>(gt) * kDim), qf(q.size()), bias(gt);
      for (float& x : q) x = static_cast<float>(rng.normal());
      for (float& x : bias) x = static_cast<float>(rng.normal());
      for (int g = 0; g < gt; ++g) {
        for (int c = 0; c < kDim; ++c) {
          int lane = c;
          if (kind == RowKind::Nibbles) {
            const int in = c % detail::kLaneGroup;
            lane = c - in + (in % 2 == 0 ? in / 2 : 8 + in / 2);
          }
          qf[g * kDim + lane] = q[g * kDim + c];
        }
      }
      std::vector<float> out(static_cast<std::size_t>(gt) * kTokens, 0.f);
      with_rows(kind, r, [&](const auto& rows) {
        detail::key_tile(rows, 0, kTokens, gt, kDim / detail::kLaneGroup, qf.data(), kDim,
                         bias.data(), out.data(), kTokens);
      });
      for (int g = 0; g < gt; ++g) {
        for (int t = 0; t < kTokens; ++t) {
          double want = bias[g], magnitude = std::abs(bias[g]);
          for (int c = 0; c < kDim; ++c) {
            const double term = static_cast<double>(q[g * kDim + c]) *
                                r.values[static_cast<std::size_t>(t) * kDim + c];
            want += term;
            magnitude += std::abs(term);
          }
          // Float sums of kDim terms: within a few roundings of the terms' magnitude.
          ASSERT_NEAR(out[g * kTokens + t], want, 1e-6 * magnitude + 1e-6)
              << "head " << g << " token " << t;
        }
      }
    }
  }
}

#else

TEST(KVLAB_KERNEL_SUITE, NeedsAvx2) {
  GTEST_SKIP() << "built without AVX2/FMA/F16C: the callers take their scalar loops";
}

#endif

}  // namespace
}  // namespace kvlab
