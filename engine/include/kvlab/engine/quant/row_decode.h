// Eight channels of a stored K or V row as floats, for the formats the GPU's fused decode
// attention reads in place (kernels/src/decode_attention.cu): one definition of each format's
// arithmetic for the CUDA kernel and for the CPU test that holds it to the engine's own
// dequantizers (tests/engine/test_row_decode.cpp). Every function is __host__ __device__ under
// nvcc and plain C++ otherwise; no CUDA header is needed.
//
// A row is one token's one KV head, `dim` channels, as the engine's quantizer stores it:
//  - FP8 E4M3 with a scale per KV head (the benchmark's and serving engines' per-head FP8): one
//    byte a channel; x = e4m3(code) * scale;
//  - llama.cpp's Q8_0 and Q4_0 (ggml/src/ggml-common.h; dequantize_row_q8_0 / _q4_0 in
//    ggml-quants.c; model/ggml_blocks.h): blocks of 32 channels back to back, each an fp16 d and
//    its codes; x = code * d (Q8_0, signed bytes) or (nibble - 8) * d (Q4_0, value j in the low
//    nibble of qs[j], value j + 16 in its high nibble);
//  - NVFP4 (quant/fp4_quantizer.h): the row's dim / 2 nibble bytes (channel 2i the low nibble of
//    byte i), then its dim / 16 E4M3 block scales; x = e2m1(code) * (e4m3(scale) / global), as
//    nvfp4_dequantize_row computes it;
//  - KVComp's bit-packed 4-bit codes (docs/FORMAT.md, "BitPack"; a vector's codes LSB-first,
//    channel 2i in the low nibble of byte i): the codes themselves; their steps and minimums live
//    beside the stream (per block and channel for keys, per token for values), and
//    x = min + code * step;
//  - KIVI's 2- and 4-bit group codes (quant/group_quant.h, packed LSB-first as codec/bitpack.h:
//    code i at bit i * bits), likewise bare codes here; their steps and minimums are per channel
//    over groups of tokens for keys and per groups of channels of a token for values.
// Chunk `sub` is channels 8 sub .. 8 sub + 7.
#pragma once

#include <cstdint>

#include "kvlab/engine/core/host_device.h"
#include "kvlab/engine/model/ggml_blocks.h"

namespace kvlab::row_decode {

enum class Format : std::uint8_t {
  Fp16 = 0,
  Fp8E4M3 = 1,
  Q8_0 = 2,
  Q4_0 = 3,
  Nvfp4 = 4,
  Packed4 = 5,
  Kivi2 = 6,
  Kivi4 = 7
};

// "fp16", "fp8-e4m3", "q8_0", "q4_0", "nvfp4".
constexpr const char* format_name(Format f) {
  switch (f) {
    case Format::Fp16:
      return "fp16";
    case Format::Fp8E4M3:
      return "fp8-e4m3";
    case Format::Q8_0:
      return "q8_0";
    case Format::Q4_0:
      return "q4_0";
    case Format::Nvfp4:
      return "nvfp4";
    case Format::Packed4:
      return "packed4";
    case Format::Kivi2:
      return "kivi2";
    case Format::Kivi4:
      return "kivi4";
  }
  return "?";
}

// Bytes of one stored row of `dim` channels (dim a multiple of 32; NVFP4 codes and scales).
KVLAB_HOST_DEVICE inline constexpr int row_bytes(Format f, int dim) {
  switch (f) {
    case Format::Fp16:
      return 2 * dim;
    case Format::Fp8E4M3:
      return dim;
    case Format::Q8_0:
      return dim / ggml_block::kValues * static_cast<int>(sizeof(ggml_block::Q8_0));
    case Format::Q4_0:
      return dim / ggml_block::kValues * static_cast<int>(sizeof(ggml_block::Q4_0));
    case Format::Nvfp4:
      return dim / 2 + dim / 16;
    case Format::Packed4:
    case Format::Kivi4:
      return dim / 2;
    case Format::Kivi2:
      return dim / 4;
  }
  return 0;
}

KVLAB_HOST_DEVICE inline std::uint32_t load_u16(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) | static_cast<std::uint32_t>(p[1]) << 8;
}

// IEEE fp16 bits to float, exactly (subnormals included; infinities and NaN kept).
KVLAB_HOST_DEVICE inline float half_to_float(std::uint32_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
  if (e == 31u) return float_from_bits(sign | 0x7f800000u | (m << 13));
  if (e == 0u) {
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;  // m * 2^-24
    return sign ? -v : v;
  }
  return float_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

// OCP E4M3 (bias 7, no infinities, S.1111.111 NaN) to float, exactly.
KVLAB_HOST_DEVICE inline float e4m3_to_float(std::uint32_t c) {
  const std::uint32_t sign = (c & 0x80u) << 24, e = (c >> 3) & 15u, m = c & 7u;
  if (e == 15u && m == 7u) return float_from_bits(sign | 0x7fc00000u);
  if (e == 0u) {
    const float v = static_cast<float>(m) * 0.001953125f;  // m * 2^-9
    return sign ? -v : v;
  }
  return float_from_bits(sign | ((e + 120u) << 23) | (m << 20));
}

// E2M1: sign << 3 | magnitude index into {0, 0.5, 1, 1.5, 2, 3, 4, 6}.
KVLAB_HOST_DEVICE inline float e2m1_to_float(std::uint32_t c) {
  const std::uint32_t e = (c >> 1) & 3u, m = c & 1u;
  const float mag = e == 0u ? 0.5f * static_cast<float>(m)
                            : static_cast<float>(2u + m) * static_cast<float>(1u << e) * 0.25f;
  return (c & 8u) ? -mag : mag;
}

KVLAB_HOST_DEVICE inline void fp8_e4m3(const std::uint8_t* row, int sub, float scale,
                                       float (&f)[8]) {
  const std::uint8_t* p = row + 8 * sub;
  for (int i = 0; i < 8; ++i) f[i] = e4m3_to_float(p[i]) * scale;
}

KVLAB_HOST_DEVICE inline void q8_0(const std::uint8_t* row, int sub, float (&f)[8]) {
  constexpr int kBytes = static_cast<int>(sizeof(ggml_block::Q8_0));
  const std::uint8_t* b = row + (sub / 4) * kBytes;
  const float d = half_to_float(load_u16(b + offsetof(ggml_block::Q8_0, d)));
  const std::uint8_t* q = b + offsetof(ggml_block::Q8_0, qs) + 8 * (sub % 4);
  for (int i = 0; i < 8; ++i) f[i] = static_cast<float>(static_cast<std::int8_t>(q[i])) * d;
}

KVLAB_HOST_DEVICE inline void q4_0(const std::uint8_t* row, int sub, float (&f)[8]) {
  constexpr int kBytes = static_cast<int>(sizeof(ggml_block::Q4_0));
  const std::uint8_t* b = row + (sub / 4) * kBytes;
  const float d = half_to_float(load_u16(b + offsetof(ggml_block::Q4_0, d)));
  // Channels 8 part .. 8 part + 7 of the block: qs[0..7] or qs[8..15], low nibbles for the
  // block's first 16 channels, high for the last 16.
  const int part = sub % 4;
  const std::uint8_t* q = b + offsetof(ggml_block::Q4_0, qs) + 8 * (part % 2);
  const int shift = part < 2 ? 0 : 4;
  for (int i = 0; i < 8; ++i)
    f[i] = static_cast<float>(static_cast<int>((q[i] >> shift) & 15u) - 8) * d;
}

KVLAB_HOST_DEVICE inline void nvfp4(const std::uint8_t* row, int dim, int sub, float global,
                                    float (&f)[8]) {
  const float s = e4m3_to_float(row[dim / 2 + sub / 2]) / global;
  const std::uint8_t* q = row + 4 * sub;
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = e2m1_to_float(q[i] & 15u) * s;
    f[2 * i + 1] = e2m1_to_float(q[i] >> 4) * s;
  }
}

// KVComp's packed 4-bit codes of channels 8 sub .. 8 sub + 7, as floats.
KVLAB_HOST_DEVICE inline void packed4(const std::uint8_t* row, int sub, float (&f)[8]) {
  const std::uint8_t* q = row + 4 * sub;
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = static_cast<float>(q[i] & 15u);
    f[2 * i + 1] = static_cast<float>(q[i] >> 4);
  }
}

// KIVI's 2-bit codes of channels 8 sub .. 8 sub + 7 (two bytes, low bits first), as floats.
KVLAB_HOST_DEVICE inline void codes2(const std::uint8_t* row, int sub, float (&f)[8]) {
  const std::uint32_t v = load_u16(row + 2 * sub);
  for (int i = 0; i < 8; ++i) f[i] = static_cast<float>((v >> (2 * i)) & 3u);
}

}  // namespace kvlab::row_decode
