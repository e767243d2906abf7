// The GPU entry points' argument checks (kernels/src/launch_plan.cuh, check::): they run before a
// GPU is asked for, so a bad call is the same clear error, naming the call and the problem, on a
// machine with a GPU or without one. These tests run everywhere.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/quant/row_decode.h"
#include "kvlab/kernels/gpu_baselines.h"

namespace kvlab {
namespace {

using row_decode::Format;

void expect_error(const Status& st, const std::string& says) {
  ASSERT_FALSE(st) << "expected an error saying: " << says;
  EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
}

constexpr int kTokens = 10, kHeads = 2, kDim = 64;
constexpr std::size_t kValues = static_cast<std::size_t>(kTokens) * kHeads * kDim;

TEST(GpuArguments, Fp8CallsNameTheProblem) {
  const std::vector<std::uint8_t> codes(kValues, 0x38);
  const std::vector<float> scales(kHeads, 1.f), one_scale(1, 1.f);
  const cuda::Fp8KvView kv{kTokens, kHeads, kDim, Fp8Format::E4M3, codes, codes, scales, scales};
  std::vector<float> q(2 * kDim), q_short(2 * kDim - 1), logits(2 * kTokens);
  expect_error(cuda::fp8_attention_logits(kv, q_short, 2, logits),
               "GPU fp8 attention logits: input holds 127 floats (needs 128), output 20 (needs "
               "20)");
  std::vector<float> q3(3 * kDim), l3(3 * kTokens);
  expect_error(cuda::fp8_attention_logits(kv, q3, 3, l3),
               "3 query heads are not a multiple of 2 KV heads");
  std::vector<float> q32(32 * kDim), l32(32 * kTokens);
  expect_error(cuda::fp8_attention_logits(kv, q32, 32, l32),
               "GQA groups of 16 query heads per KV head are not built for the GPU (1 to 8)");
  const cuda::Fp8KvView few{kTokens, kHeads, kDim,      Fp8Format::E4M3,
                            codes,   codes,  one_scale, scales};
  expect_error(cuda::fp8_attention_logits(few, q, 2, logits),
               "1 key scales (one per KV head) given, the shape needs 2");
  const std::vector<std::uint8_t> short_codes(kValues - 1, 0x38);
  const cuda::Fp8KvView short_values{kTokens, kHeads,      kDim,   Fp8Format::E4M3,
                                     codes,   short_codes, scales, scales};
  std::vector<float> p(2 * kTokens), out(2 * kDim);
  expect_error(cuda::fp8_attention_values(short_values, p, 2, out),
               "GPU fp8 attention values: 1279 value codes given, the shape needs 1280");
  const cuda::Fp8KvView empty{0, kHeads, kDim, Fp8Format::E4M3, {}, {}, scales, scales};
  expect_error(cuda::fp8_attention_values(empty, p, 2, out), "shape [0, 2, 64] is empty");
}

TEST(GpuArguments, Fp16CallsNameTheProblem) {
  const std::vector<std::uint16_t> h(kValues, 0), h_short(kValues - 1, 0);
  const Fp16KvView short_keys{kTokens, kHeads, kDim, h_short, h};
  std::vector<float> q(2 * kDim), logits(2 * kTokens), out(2 * kDim);
  expect_error(cuda::fp16_attention_logits(short_keys, q, 2, logits),
               "GPU fp16 attention logits: 1279 keys given, the shape needs 1280");
  const Fp16KvView f{kTokens, kHeads, kDim, h, h};
  std::vector<float> p_long(2 * kTokens + 1);
  expect_error(cuda::fp16_attention_values(f, p_long, 2, out), "input holds 21 floats (needs 20)");
  // The fused decode kernel: one sequence's K/V given for two, and a group that is no group.
  expect_error(cuda::fp16_decode_attention(f, 2, q, 2, out),
               "fp16 decode attention: 1280 keys given, the shape needs 2560");
  std::vector<float> q3(3 * kDim), o3(3 * kDim);
  expect_error(cuda::fp16_decode_attention(f, 1, q3, 3, o3),
               "fp16 decode attention: 3 query heads are not a multiple of 2 KV heads");
}

TEST(GpuArguments, StoredFormatCallsNameTheBuffer) {
  const std::size_t row = static_cast<std::size_t>(row_decode::row_bytes(Format::Q4_0, kDim));
  const std::size_t rows = static_cast<std::size_t>(kTokens) * kHeads;
  const std::vector<std::uint8_t> q4(rows * row), q4_short(rows * row - 1);
  std::vector<float> q(2 * kDim), out(2 * kDim);
  const cuda::StoredKvView short_keys{.format = Format::Q4_0,
                                      .tokens = kTokens,
                                      .kv_heads = kHeads,
                                      .head_dim = kDim,
                                      .keys = q4_short,
                                      .values = q4};
  expect_error(cuda::decode_attention(short_keys, 1, q, 2, out),
               "decode attention (q4_0): 719 key bytes given, the shape needs 720");
  const cuda::StoredKvView kv{.format = Format::Q4_0,
                              .tokens = kTokens,
                              .kv_heads = kHeads,
                              .head_dim = kDim,
                              .keys = q4,
                              .values = q4};
  std::vector<float> q6(6 * kDim), o6(6 * kDim);
  expect_error(cuda::decode_attention(kv, 1, q6, 6, o6),
               "decode attention (q4_0): GQA groups of 3 query heads per KV head are not built "
               "for the GPU (1, 2, 4, 8)");
  std::vector<float> o_short(2 * kDim - 1);
  expect_error(cuda::decode_attention(kv, 1, q, 2, o_short),
               "input holds 128 floats (needs 128), output 127 (needs 128)");
  // NVFP4 without its block scales; FP8 without its head scales.
  const std::vector<std::uint8_t> nibbles(rows * kDim / 2);
  cuda::StoredKvView nvfp4 = kv;
  nvfp4.format = Format::Nvfp4;
  nvfp4.keys = nibbles;
  nvfp4.values = nibbles;
  expect_error(cuda::decode_attention(nvfp4, 1, q, 2, out),
               "decode attention (nvfp4): 0 key block scales given, the shape needs 80");
  const std::vector<std::uint8_t> bytes(rows * kDim);
  cuda::StoredKvView fp8 = kv;
  fp8.format = Format::Fp8E4M3;
  fp8.keys = bytes;
  fp8.values = bytes;
  expect_error(cuda::decode_attention(fp8, 1, q, 2, out), "0 key head scales given");
}

}  // namespace
}  // namespace kvlab
