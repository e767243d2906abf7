// The fused decode kernel over caches stored in compressed row formats (decode_attention.cuh:
// FP8 E4M3 with a scale per KV head, llama.cpp's Q8_0 and Q4_0, NVFP4, KVComp's packed 4-bit
// streams, KIVI-2/4 with its fp16 window), against softmax(q.K^T / sqrt(d)) V in double over the
// engine's own dequantization of the same bytes (ggml_dequantize, nvfp4_dequantize_row,
// fp8_to_float * scale, the compressed cache's dequantize_all, the KIVI quantizer's dequantize).
// Without a usable GPU every test reports SKIPPED.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "gpu_test_support.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/row_decode.h"
#include "kvlab/kernels/gpu_baselines.h"
#include "kvlab/kernels/gpu_kv.h"
#include "quant/fp4_quantizer.h"
#include "quant/quantizers.h"

namespace kvlab {
namespace {

using Format = row_decode::Format;

struct Case {
  Format format;
  int tokens, kv_heads, group, dim, batch;
};

// K or V of `batch` sequences [batch][tokens][kv_heads][dim] stored in `format`, and its
// dequantization by the engine.
struct Stored {
  std::vector<std::uint8_t> data, scales;
  std::vector<float> head_scales;
  float global = 1.f;
  std::vector<double> values;
};

Stored store(const Case& c, const std::vector<float>& x) {
  Stored s;
  const std::size_t n = x.size();
  std::vector<float> back(n);
  switch (c.format) {
    case Format::Q8_0:
    case Format::Q4_0: {
      const GgmlType t = c.format == Format::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q4_0;
      s.data.resize(n / 32 * static_cast<std::size_t>(row_decode::row_bytes(c.format, 32)));
      EXPECT_TRUE(ggml_quantize(t, x.data(), static_cast<std::int64_t>(n), s.data.data()));
      ggml_dequantize(t, s.data.data(), back.data(), static_cast<std::int64_t>(n));
      break;
    }
    case Format::Nvfp4: {
      float amax = 0.f;
      for (float v : x) amax = std::max(amax, std::abs(v));
      s.global = detail::nvfp4_global_scale(amax);
      s.data.resize(n / 2);
      s.scales.resize(n / 16);
      detail::nvfp4_quantize_row(x.data(), static_cast<int>(n), s.global, s.data.data(),
                                 s.scales.data());
      detail::nvfp4_dequantize_row(s.data.data(), s.scales.data(), static_cast<int>(n), s.global,
                                   back.data());
      break;
    }
    case Format::Fp8E4M3: {
      // One scale per KV head over every sequence and token.
      s.head_scales.assign(static_cast<std::size_t>(c.kv_heads), 0.f);
      for (std::size_t i = 0; i < n; ++i) {
        float& h = s.head_scales[(i / c.dim) % c.kv_heads];
        h = std::max(h, std::abs(x[i]));
      }
      for (float& h : s.head_scales) h = h > 0.f ? h / fp8_max(Fp8Format::E4M3) : 1.f;
      s.data.resize(n);
      for (std::size_t i = 0; i < n; ++i) {
        const float sc = s.head_scales[(i / c.dim) % c.kv_heads];
        s.data[i] = float_to_fp8(x[i] / sc, Fp8Format::E4M3);
        back[i] = fp8_to_float(s.data[i], Fp8Format::E4M3) * sc;
      }
      break;
    }
    case Format::Fp16:
    case Format::Packed4:
    case Format::Kivi2:
    case Format::Kivi4:
      ADD_FAILURE() << row_decode::format_name(c.format) << " has its own test";
      break;
  }
  s.values.assign(back.begin(), back.end());
  return s;
}

// softmax(q.K^T / sqrt(d)) V in double for every sequence and query head.
std::vector<double> reference(const Case& c, const std::vector<double>& k,
                              const std::vector<double>& v, const std::vector<float>& q) {
  const int qh_n = c.kv_heads * c.group;
  std::vector<double> out(static_cast<std::size_t>(c.batch) * qh_n * c.dim, 0.0);
  std::vector<double> w(static_cast<std::size_t>(c.tokens));
  for (int b = 0; b < c.batch; ++b) {
    for (int qh = 0; qh < qh_n; ++qh) {
      const int h = qh / c.group;
      const float* qv = q.data() + (static_cast<std::size_t>(b) * qh_n + qh) * c.dim;
      double mx = -INFINITY;
      for (int t = 0; t < c.tokens; ++t) {
        const std::size_t row = (static_cast<std::size_t>(b) * c.tokens + t) * c.kv_heads + h;
        double dot = 0;
        for (int i = 0; i < c.dim; ++i) dot += qv[i] * k[row * c.dim + i];
        w[t] = dot / std::sqrt(static_cast<double>(c.dim));
        mx = std::max(mx, w[t]);
      }
      double sum = 0;
      for (double& x : w) sum += x = std::exp(x - mx);
      double* o = out.data() + (static_cast<std::size_t>(b) * qh_n + qh) * c.dim;
      for (int t = 0; t < c.tokens; ++t) {
        const std::size_t row = (static_cast<std::size_t>(b) * c.tokens + t) * c.kv_heads + h;
        for (int i = 0; i < c.dim; ++i) o[i] += w[t] / sum * v[row * c.dim + i];
      }
    }
  }
  return out;
}

using test::rel_error;

// Every format at head_dim 64, 128 and 256 (its cp.async pieces of 4, 8 and 16 bytes), groups 1
// to 8, one token to thousands (one chunk, many merged), and batches of sequences. fp32
// accumulation and exp2f over values the test dequantizes itself: errors near 1e-6; 1e-4 still
// catches a wrong row, block, scale or nibble (each moves the output by 1e-2 or more here).
TEST(GpuDecodeFormats, FusedDecodeMatchesTheDequantizedReference) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Case> cases;
  for (Format f : {Format::Fp8E4M3, Format::Q8_0, Format::Q4_0, Format::Nvfp4}) {
    cases.push_back({f, 1, 1, 1, 64, 1});
    cases.push_back({f, 77, 2, 4, 128, 1});
    cases.push_back({f, 300, 1, 8, 256, 1});
    cases.push_back({f, 5000, 2, 2, 64, 1});  // many chunks
    cases.push_back({f, 129, 8, 4, 128, 3});  // a batch
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << row_decode::format_name(c.format) << ": " << c.tokens
                                      << " tokens, " << c.kv_heads << " KV heads, group " << c.group
                                      << ", dim " << c.dim << ", batch " << c.batch);
    const std::size_t n = static_cast<std::size_t>(c.batch) * c.tokens * c.kv_heads * c.dim;
    std::vector<float> k(n), v(n);
    for (std::size_t i = 0; i < n; ++i) {
      k[i] = normal(rng) + ((i % c.dim) % 13 == 0 ? 5.f : 0.f);
      v[i] = normal(rng);
    }
    std::vector<float> q(static_cast<std::size_t>(c.batch) * c.kv_heads * c.group * c.dim);
    for (float& x : q) x = normal(rng);
    const Stored ks = store(c, k), vs = store(c, v);
    const std::vector<double> ref = reference(c, ks.values, vs.values, q);
    const cuda::StoredKvView kv{.format = c.format,
                                .tokens = c.tokens,
                                .kv_heads = c.kv_heads,
                                .head_dim = c.dim,
                                .keys = ks.data,
                                .values = vs.data,
                                .key_scales = ks.scales,
                                .value_scales = vs.scales,
                                .key_head_scales = ks.head_scales,
                                .value_head_scales = vs.head_scales,
                                .key_global = ks.global,
                                .value_global = vs.global};
    std::vector<float> out(ref.size(), NAN);
    const Status st = cuda::decode_attention(kv, c.batch, q, c.kv_heads * c.group, out);
    if (!st) {  // the next case still runs: one GPU session sees every format's result
      ADD_FAILURE() << st.message();
      continue;
    }
    EXPECT_LT(rel_error(out, ref), 1e-4);
  }
}

// KVComp's bit-packed 4-bit caches (Packed4): the CPU cache's own streams and parameters, the
// reference over its dequantize_all() of the compressed tokens; blocks of 64 (a tile's worth),
// 16 (several blocks a tile: the query refolded inside a tile) and 100 (tiles across blocks),
// head_dim 64 to 256, groups 1 to 8, and two sequences back to back. The cache codes whole blocks
// only (its tail stays fp16), so a short last block comes from the GPU's own coder
// (cuda::compress_layer codes every token; `whole`), the reference from its codes and parameters.
TEST(GpuDecodeFormats, Packed4MatchesTheCachesReconstruction) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(29);
  std::normal_distribution<float> normal(0.f, 1.f);
  struct PackedCase {
    int tokens, kv_heads, group, dim, block, batch;
    bool whole = false;
  };
  const PackedCase cases[] = {{64, 1, 1, 64, 64, 1},         {700, 2, 4, 128, 64, 1},
                              {333, 1, 8, 256, 16, 1},       {1000, 2, 2, 128, 100, 1},
                              {5000, 2, 1, 64, 64, 1},       {260, 8, 4, 128, 64, 2},
                              {1000, 2, 4, 128, 64, 1, true}};
  for (const PackedCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << c.tokens << " tokens, " << c.kv_heads << " KV heads, group " << c.group
                 << ", dim " << c.dim << ", block " << c.block << ", batch " << c.batch
                 << (c.whole ? ", every token coded" : ""));
    Case shape{Format::Packed4, 0, c.kv_heads, c.group, c.dim, c.batch};
    std::vector<std::uint8_t> keys, values;
    std::vector<float> kst, kmn, vst, vmn;
    std::vector<double> kref, vref;
    for (int b = 0; b < c.batch; ++b) {
      const std::size_t n = static_cast<std::size_t>(c.tokens) * c.kv_heads * c.dim;
      std::vector<float> x(n), y(n);
      for (std::size_t i = 0; i < n; ++i) {
        x[i] = normal(rng) + ((i % c.dim) % 11 == 0 ? 4.f : 0.f);
        y[i] = normal(rng);
      }
      std::vector<std::uint16_t> xh(n), yh(n);
      float_to_fp16(x, xh);
      float_to_fp16(y, yh);
      if (c.whole) {
        cuda::GpuCompressOptions opt;
        opt.block_size = c.block;
        opt.rel_scale = 1.0 / 15.0;
        opt.codec = CodecKind::BitPack;
        opt.bitpack_width = 4;
        auto gl = cuda::compress_layer(xh, yh, c.tokens, c.kv_heads, c.dim, opt);
        ASSERT_TRUE(gl) << gl.message();
        auto host = cuda::download_layer(*gl);
        ASSERT_TRUE(host) << host.message();
        ASSERT_EQ(host->keys.bitpack_width, 4);
        shape.tokens = c.tokens;
        keys.insert(keys.end(), host->keys.payload.begin(), host->keys.payload.end());
        values.insert(values.end(), host->values.payload.begin(), host->values.payload.end());
        kst.insert(kst.end(), host->key_steps.begin(), host->key_steps.end());
        kmn.insert(kmn.end(), host->key_mins.begin(), host->key_mins.end());
        vst.insert(vst.end(), host->value_steps.begin(), host->value_steps.end());
        vmn.insert(vmn.end(), host->value_mins.begin(), host->value_mins.end());
        std::vector<std::uint8_t> kc(n), vc(n);
        ASSERT_TRUE(decode_codes(host->keys, nullptr, kc));
        ASSERT_TRUE(decode_codes(host->values, nullptr, vc));
        const std::size_t hd = static_cast<std::size_t>(c.kv_heads) * c.dim;
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t ku = (i / hd / c.block) * hd + i % hd, vu = i / c.dim;
          kref.push_back(host->key_mins[ku] + kc[i] * host->key_steps[ku]);
          vref.push_back(host->value_mins[vu] + vc[i] * host->value_steps[vu]);
        }
        continue;
      }
      const auto view = [&](const std::vector<std::uint16_t>& h) {
        return TensorView(reinterpret_cast<const std::byte*>(h.data()), DType::F16, c.tokens,
                          c.kv_heads, c.dim, static_cast<std::ptrdiff_t>(c.kv_heads) * c.dim,
                          c.dim);
      };
      CompressedCacheConfig config;
      config.block_size = c.block;
      config.buffer_size = c.block;
      config.rel_scale = 1.0 / 15.0;
      config.codec = CodecKind::BitPack;
      config.bitpack_width = 4;
      auto cache = CompressedKvCache::create(config, c.kv_heads, c.dim);
      ASSERT_TRUE(cache) << cache.message();
      ASSERT_TRUE(cache->prefill(view(xh), view(yh)));
      const CompressedKvView v = cache->view();
      ASSERT_EQ(v.keys->bitpack_width, 4);
      shape.tokens = v.compressed_tokens;  // the fp16 tail is not part of the stream
      keys.insert(keys.end(), v.keys->payload.begin(), v.keys->payload.end());
      values.insert(values.end(), v.values->payload.begin(), v.values->payload.end());
      const std::size_t key_units =
          static_cast<std::size_t>(v.keys->token_blocks()) * c.kv_heads * c.dim;
      const std::size_t value_units = static_cast<std::size_t>(v.compressed_tokens) * c.kv_heads;
      kst.insert(kst.end(), v.key_steps.begin(), v.key_steps.begin() + key_units);
      kmn.insert(kmn.end(), v.key_mins.begin(), v.key_mins.begin() + key_units);
      vst.insert(vst.end(), v.value_steps.begin(), v.value_steps.begin() + value_units);
      vmn.insert(vmn.end(), v.value_mins.begin(), v.value_mins.begin() + value_units);
      std::vector<float> kd(n), vd(n);
      ASSERT_TRUE(cache->dequantize_all(kd, vd));
      const std::size_t kept = static_cast<std::size_t>(v.compressed_tokens) * c.kv_heads * c.dim;
      kref.insert(kref.end(), kd.begin(), kd.begin() + kept);
      vref.insert(vref.end(), vd.begin(), vd.begin() + kept);
    }
    std::vector<float> q(static_cast<std::size_t>(c.batch) * c.kv_heads * c.group * c.dim);
    for (float& x : q) x = normal(rng);
    const std::vector<double> ref = reference(shape, kref, vref, q);
    const cuda::StoredKvView kv{.format = Format::Packed4,
                                .tokens = shape.tokens,
                                .kv_heads = c.kv_heads,
                                .head_dim = c.dim,
                                .keys = keys,
                                .values = values,
                                .key_steps = kst,
                                .key_mins = kmn,
                                .value_steps = vst,
                                .value_mins = vmn,
                                .block_size = c.block};
    std::vector<float> out(ref.size(), NAN);
    const Status st = cuda::decode_attention(kv, c.batch, q, c.kv_heads * c.group, out);
    if (!st) {  // the next case still runs: one GPU session sees every format's result
      ADD_FAILURE() << st.message();
      continue;
    }
    EXPECT_LT(rel_error(out, ref), 1e-4);
  }
}

// KIVI-2 and KIVI-4 as the engine's KIVI quantizer stores them (group 32, residual 128, fp16
// parameters): the quantized tokens' codes and parameters and the fp16 window of the newest,
// run as two launches merged into one softmax; the reference over the quantizer's own
// dequantize(). Cases with no quantized token (window only), with a window of exactly the
// residual, many chunks, and two sequences.
TEST(GpuDecodeFormats, KiviMatchesTheQuantizersReconstruction) {
  KVLAB_REQUIRE_GPU();
  std::mt19937 rng(31);
  std::normal_distribution<float> normal(0.f, 1.f);
  struct KiviCase {
    int bits, tokens, kv_heads, group, dim, batch;
  };
  const int G = 32, R = 128;
  const KiviCase cases[] = {{2, 300, 2, 4, 128, 1},  {4, 1000, 1, 8, 64, 1}, {2, 100, 2, 2, 128, 1},
                            {2, 5000, 2, 1, 256, 1}, {4, 256, 8, 4, 128, 2}, {2, 160, 1, 1, 64, 1}};
  for (const KiviCase& c : cases) {
    SCOPED_TRACE(::testing::Message()
                 << "kivi-" << c.bits << ": " << c.tokens << " tokens, " << c.kv_heads
                 << " KV heads, group " << c.group << ", dim " << c.dim << ", batch " << c.batch);
    const int quantized = std::max(0, c.tokens - R) / G * G;
    const auto quantizer = detail::make_kivi_quantizer("kivi", c.bits, G, R, DType::F16);
    std::vector<std::uint8_t> keys, values;
    std::vector<float> kst, kmn, vst, vmn;
    std::vector<std::uint16_t> kwin, vwin;
    std::vector<double> kref, vref;
    for (int b = 0; b < c.batch; ++b) {
      const std::size_t n = static_cast<std::size_t>(c.tokens) * c.kv_heads * c.dim;
      for (int r = 0; r < 2; ++r) {
        std::vector<float> x(n);
        for (std::size_t i = 0; i < n; ++i) {
          x[i] = normal(rng) + (r == 0 && (i % c.dim) % 11 == 0 ? 4.f : 0.f);
        }
        std::vector<std::uint16_t> xh(n);
        float_to_fp16(x, xh);
        const TensorView view(reinterpret_cast<const std::byte*>(xh.data()), DType::F16, c.tokens,
                              c.kv_heads, c.dim, static_cast<std::ptrdiff_t>(c.kv_heads) * c.dim,
                              c.dim);
        auto q = quantizer->quantize(view, r == 0 ? TensorRole::Key : TensorRole::Value);
        ASSERT_TRUE(q) << q.message();
        const std::size_t units = q->params.size() / 2;
        (r == 0 ? keys : values)
            .insert((r == 0 ? keys : values).end(), q->codes.begin(), q->codes.end());
        auto& st = r == 0 ? kst : vst;
        auto& mn = r == 0 ? kmn : vmn;
        st.insert(st.end(), q->params.begin(), q->params.begin() + units);
        mn.insert(mn.end(), q->params.begin() + units, q->params.end());
        auto& win = r == 0 ? kwin : vwin;
        ASSERT_EQ(q->residual.size(),
                  static_cast<std::size_t>(c.tokens - quantized) * c.kv_heads * c.dim);
        win.insert(win.end(), q->residual.begin(), q->residual.end());
        std::vector<float> back(n);
        quantizer->dequantize(*q, back);
        (r == 0 ? kref : vref).insert((r == 0 ? kref : vref).end(), back.begin(), back.end());
      }
    }
    std::vector<float> q(static_cast<std::size_t>(c.batch) * c.kv_heads * c.group * c.dim);
    for (float& x : q) x = normal(rng);
    const Case shape{Format::Q4_0, c.tokens, c.kv_heads, c.group, c.dim, c.batch};
    const std::vector<double> ref = reference(shape, kref, vref, q);
    const cuda::StoredKvView kv{.format = c.bits == 2 ? Format::Kivi2 : Format::Kivi4,
                                .tokens = quantized,
                                .kv_heads = c.kv_heads,
                                .head_dim = c.dim,
                                .keys = keys,
                                .values = values,
                                .key_steps = kst,
                                .key_mins = kmn,
                                .value_steps = vst,
                                .value_mins = vmn,
                                .block_size = G,
                                .value_group_channels = G,
                                .window_tokens = c.tokens - quantized,
                                .window_keys = kwin,
                                .window_values = vwin};
    std::vector<float> out(ref.size(), NAN);
    int splits = 0;
    const Status st = cuda::decode_attention(kv, c.batch, q, c.kv_heads * c.group, out, &splits);
    if (!st) {  // the next case still runs: one GPU session sees every format's result
      ADD_FAILURE() << st.message();
      continue;
    }
    EXPECT_LT(rel_error(out, ref), 1e-4);
    EXPECT_GE(splits, (quantized > 0) + 1);
  }
}

TEST(GpuDecodeFormats, BadInputIsAnError) {
  KVLAB_REQUIRE_GPU();
  const int tokens = 10, heads = 2, dim = 64;
  const std::size_t rows = static_cast<std::size_t>(tokens) * heads;
  std::vector<std::uint8_t> q4(rows *
                               static_cast<std::size_t>(row_decode::row_bytes(Format::Q4_0, dim)));
  const cuda::StoredKvView kv{.format = Format::Q4_0,
                              .tokens = tokens,
                              .kv_heads = heads,
                              .head_dim = dim,
                              .keys = q4,
                              .values = q4};
  std::vector<float> q(2 * dim), out(2 * dim);
  ASSERT_TRUE(cuda::decode_attention(kv, 1, q, 2, out));
  // Three query heads per KV head: the compressed formats are built for 1, 2, 4 and 8.
  std::vector<float> q6(6 * dim), o6(6 * dim);
  Status st = cuda::decode_attention(kv, 1, q6, 6, o6);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("q4_0"), std::string::npos) << st.message();
  // A row short; NVFP4 without its scales; FP8 without its head scales.
  const std::vector<std::uint8_t> short_rows(q4.begin(), q4.end() - 1);
  cuda::StoredKvView bad = kv;
  bad.keys = short_rows;
  EXPECT_FALSE(cuda::decode_attention(bad, 1, q, 2, out));
  std::vector<std::uint8_t> nib(rows * dim / 2);
  bad = kv;
  bad.format = Format::Nvfp4;
  bad.keys = nib;
  bad.values = nib;
  EXPECT_FALSE(cuda::decode_attention(bad, 1, q, 2, out));
  std::vector<std::uint8_t> codes(rows * dim);
  bad = kv;
  bad.format = Format::Fp8E4M3;
  bad.keys = codes;
  bad.values = codes;
  EXPECT_FALSE(cuda::decode_attention(bad, 1, q, 2, out));
  // head_dim 96: no kernel.
  std::vector<std::uint8_t> q96(rows *
                                static_cast<std::size_t>(row_decode::row_bytes(Format::Q4_0, 96)));
  bad = kv;
  bad.head_dim = 96;
  bad.keys = q96;
  bad.values = q96;
  std::vector<float> qd(2 * 96), od(2 * 96);
  EXPECT_FALSE(cuda::decode_attention(bad, 1, qd, 2, od));
}

}  // namespace
}  // namespace kvlab
