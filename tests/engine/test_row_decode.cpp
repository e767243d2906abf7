// row_decode.h, the per-format decoding the GPU's fused decode attention compiles, held here to
// the engine's own decoders: every fp16, E4M3 and E2M1 code, and random rows of Q8_0 and Q4_0
// (ggml_quantize / ggml_dequantize), NVFP4 (nvfp4_quantize_row / nvfp4_dequantize_row) and
// per-head FP8, eight channels at a time. Bit-for-bit: the kernel must see the values the
// engine's reconstruction holds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "codec/bitpack.h"
#include "core/random.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/row_decode.h"
#include "quant/fp4_quantizer.h"

namespace kvlab {
namespace {

namespace rd = row_decode;

// Equal bits, or both NaN.
void expect_same(float got, float want, const char* what, int i) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << " " << i;
    return;
  }
  std::uint32_t a, b;
  std::memcpy(&a, &got, 4);
  std::memcpy(&b, &want, 4);
  EXPECT_EQ(a, b) << what << " " << i << ": " << got << " vs " << want;
}

TEST(RowDecode, EveryCodeOfTheScalarFormats) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    expect_same(rd::half_to_float(h), fp16_to_float(static_cast<std::uint16_t>(h)), "fp16",
                static_cast<int>(h));
  }
  for (int c = 0; c < 256; ++c) {
    expect_same(rd::e4m3_to_float(static_cast<std::uint32_t>(c)),
                fp8_to_float(static_cast<std::uint8_t>(c), Fp8Format::E4M3), "e4m3", c);
    expect_same(rd::e4m3_to_float(static_cast<std::uint32_t>(c)),
                detail::e4m3_table()[static_cast<std::size_t>(c)], "e4m3 table", c);
  }
  for (int c = 0; c < 16; ++c) {
    expect_same(rd::e2m1_to_float(static_cast<std::uint32_t>(c)),
                detail::e2m1_to_float(static_cast<std::uint8_t>(c)), "e2m1", c);
  }
}

// A row of `dim` values: normal with a few outliers, as keys have.
std::vector<float> random_row(int dim, detail::Rng& rng) {
  std::vector<float> x(static_cast<std::size_t>(dim));
  for (int i = 0; i < dim; ++i) {
    x[static_cast<std::size_t>(i)] = static_cast<float>(rng.normal() * (i % 29 == 3 ? 9.0 : 1.0));
  }
  return x;
}

TEST(RowDecode, RowsDecodeAsTheEnginesDequantizers) {
  detail::Rng rng(5);
  for (int dim : {64, 128, 256}) {
    for (int trial = 0; trial < 20; ++trial) {
      SCOPED_TRACE(testing::Message() << "dim " << dim << " trial " << trial);
      const std::vector<float> x = random_row(dim, rng);
      std::vector<float> want(static_cast<std::size_t>(dim));
      float got[8];
      // llama.cpp's blocks.
      for (const auto& [type, format] : {std::pair{GgmlType::Q8_0, rd::Format::Q8_0},
                                         std::pair{GgmlType::Q4_0, rd::Format::Q4_0}}) {
        std::vector<std::uint8_t> row(static_cast<std::size_t>(rd::row_bytes(format, dim)));
        ASSERT_EQ(ggml_row_bytes(type, dim).value_or(0), row.size());
        ASSERT_TRUE(ggml_quantize(type, x.data(), dim, row.data()));
        ggml_dequantize(type, row.data(), want.data(), dim);
        for (int sub = 0; sub < dim / 8; ++sub) {
          if (format == rd::Format::Q8_0) {
            rd::q8_0(row.data(), sub, got);
          } else {
            rd::q4_0(row.data(), sub, got);
          }
          for (int i = 0; i < 8; ++i) {
            expect_same(got[i], want[static_cast<std::size_t>(8 * sub + i)],
                        format == rd::Format::Q8_0 ? "q8_0" : "q4_0", 8 * sub + i);
          }
        }
      }
      // NVFP4: the row's nibbles, then its block scales.
      float amax = 0.f;
      for (float v : x) amax = std::max(amax, std::abs(v));
      const float global = detail::nvfp4_global_scale(amax);
      std::vector<std::uint8_t> row(
          static_cast<std::size_t>(rd::row_bytes(rd::Format::Nvfp4, dim)));
      detail::nvfp4_quantize_row(x.data(), dim, global, row.data(), row.data() + dim / 2);
      detail::nvfp4_dequantize_row(row.data(), row.data() + dim / 2, dim, global, want.data());
      for (int sub = 0; sub < dim / 8; ++sub) {
        rd::nvfp4(row.data(), dim, sub, global, got);
        for (int i = 0; i < 8; ++i) {
          expect_same(got[i], want[static_cast<std::size_t>(8 * sub + i)], "nvfp4", 8 * sub + i);
        }
      }
      // FP8 E4M3 with a scale per head: code * scale.
      const float scale = amax / fp8_max(Fp8Format::E4M3);
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(dim));
      for (int i = 0; i < dim; ++i) {
        codes[static_cast<std::size_t>(i)] =
            float_to_fp8(x[static_cast<std::size_t>(i)] / scale, Fp8Format::E4M3);
      }
      for (int sub = 0; sub < dim / 8; ++sub) {
        rd::fp8_e4m3(codes.data(), sub, scale, got);
        for (int i = 0; i < 8; ++i) {
          const std::uint8_t c = codes[static_cast<std::size_t>(8 * sub + i)];
          expect_same(got[i], fp8_to_float(c, Fp8Format::E4M3) * scale, "fp8", 8 * sub + i);
        }
      }
    }
  }
}

// KVComp's packed 4-bit codes and KIVI's 2- and 4-bit codes read as the bit packer writes them
// (codec/bitpack.h).
TEST(RowDecode, PackedCodesAreTheBitPackersOrder) {
  detail::Rng rng(6);
  for (const rd::Format f : {rd::Format::Packed4, rd::Format::Kivi4, rd::Format::Kivi2}) {
    const int bits = f == rd::Format::Kivi2 ? 2 : 4;
    for (int dim : {64, 128, 256}) {
      std::vector<std::uint8_t> codes(static_cast<std::size_t>(dim));
      for (auto& c : codes) c = static_cast<std::uint8_t>(rng.below(1u << bits));
      std::vector<std::uint8_t> row(static_cast<std::size_t>(rd::row_bytes(f, dim)));
      ASSERT_EQ(row.size(), static_cast<std::size_t>(dim * bits / 8));
      detail::pack_codes(codes.data(), codes.size(), bits, row.data(), 0);
      float got[8];
      for (int sub = 0; sub < dim / 8; ++sub) {
        if (bits == 2) {
          rd::codes2(row.data(), sub, got);
        } else {
          rd::packed4(row.data(), sub, got);
        }
        for (int i = 0; i < 8; ++i) {
          EXPECT_EQ(got[i], static_cast<float>(codes[static_cast<std::size_t>(8 * sub + i)]))
              << rd::format_name(f) << " " << dim << " " << 8 * sub + i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvlab
