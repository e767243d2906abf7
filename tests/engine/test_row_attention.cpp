// A store's decode steps run by a RowAttention (row_attention.h; issue 47's "CUDA when a GPU is
// present"): the CPU reference RowAttention, which reads the handed-over rows with row_decode.h's
// arithmetic (the GPU kernel's) and double sums, must give each step's output that the store's own
// attention gives over the same stored cache. That checks what a store hands over (format,
// parameters, NVFP4's split, the rows' rotation) on machines without a GPU; the CUDA RowAttention
// is held to the reference in tests/kernels/test_gpu_row_attention.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/model/row_attention.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {
namespace {

MethodConfig method(MethodKind kind) {
  MethodConfig m;
  m.kind = kind;
  return m;
}

// heads 6 over 2 KV heads (GQA 3), head_dim 64.
LlamaConfig small_model(int layers) {
  LlamaConfig c;
  c.layers = layers, c.dim = 384, c.heads = 6, c.kv_heads = 2, c.hidden_dim = 128, c.vocab = 32;
  return c;
}

TEST(RowAttention, DecodeStepsOnTheReferenceAreTheStoresOwn) {
  const LlamaConfig c = small_model(2);
  const int kv = c.kv_dim(), qd = c.dim, prompt = 70, chunk = 30, total = 130;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd;
  std::vector<float> keys(static_cast<std::size_t>(total) * kv), values(keys.size()),
      queries(static_cast<std::size_t>(total) * qd);
  for (auto* x : {&keys, &values, &queries}) {
    for (float& f : *x) f = nd(rng);
  }
  // A few outlier channels, as real keys have, so that scales matter.
  for (int t = 0; t < total; ++t) keys[static_cast<std::size_t>(t) * kv + 3] *= 12.f;
  MethodConfig fp8_head = method(MethodKind::Fp8E4M3);
  fp8_head.per_head_scale = true;
  MethodConfig q4_hadamard = method(MethodKind::Q4_0);
  q4_hadamard.rotation = RotationKind::Hadamard;
  q4_hadamard.rotate_values = true;
  MethodConfig q8_plain = method(MethodKind::Q8_0);
  q8_plain.llama_rotation = false;
  for (const std::optional<MethodConfig>& m : std::vector<std::optional<MethodConfig>>{
           std::nullopt, method(MethodKind::Q8_0), q8_plain, method(MethodKind::Q4_0), q4_hadamard,
           method(MethodKind::Fp8E4M3), fp8_head, method(MethodKind::Nvfp4)}) {
    SCOPED_TRACE(m ? method_label(*m) : "fp16");
    const auto make = [&](bool with_reference) -> std::unique_ptr<KvStore> {
      std::unique_ptr<RowAttention> decode;
      if (with_reference) {
        auto made = make_reference_row_attention(row_attention_shape(c, total));
        EXPECT_TRUE(made.ok()) << made.message();
        if (!made) return nullptr;
        decode = std::move(*made);
      }
      auto made = m ? make_method_store(c, *m, total, {}, std::move(decode))
                    : make_fp16_store(c, total, std::move(decode));
      EXPECT_TRUE(made.ok()) << made.message();
      return made.ok() ? std::move(*made) : nullptr;
    };
    auto own = make(false), handed = make(true);
    ASSERT_TRUE(own && handed);
    EXPECT_EQ(own->decode_attention(), "cpu");
    EXPECT_EQ(handed->decode_attention(), "cpu reference");
    const auto rows = [](const std::vector<float>& x, int first, int n, int width) {
      return std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(first) * width,
                                x.begin() + static_cast<std::ptrdiff_t>(first + n) * width);
    };
    double worst = 0, largest = 0;
    for (int layer = 0; layer < c.layers; ++layer) {
      // The prompt in two chunks (the second attends on the CPU over the stored first), then
      // decode steps, each handed its new row before its attention.
      for (KvStore* s : {own.get(), handed.get()}) {
        for (const auto& [pos, n] : {std::pair{0, prompt}, std::pair{prompt, chunk}}) {
          std::vector<float> out(static_cast<std::size_t>(n) * qd);
          auto k = rows(keys, pos, n, kv), v = rows(values, pos, n, kv);
          ASSERT_TRUE(s->append_and_attend(layer, pos, n, queries.data() + pos * qd, k.data(),
                                           v.data(), out.data()));
        }
      }
      for (int t = prompt + chunk; t < total; ++t) {
        std::vector<float> a(qd), b(qd);
        auto k = rows(keys, t, 1, kv), v = rows(values, t, 1, kv);
        ASSERT_TRUE(own->append_and_attend(layer, t, 1, queries.data() + t * qd, k.data(), v.data(),
                                           a.data()));
        k = rows(keys, t, 1, kv), v = rows(values, t, 1, kv);
        ASSERT_TRUE(handed->append_and_attend(layer, t, 1, queries.data() + t * qd, k.data(),
                                              v.data(), b.data()));
        for (int i = 0; i < qd; ++i) {
          worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
          largest = std::max(largest, static_cast<double>(std::abs(a[i])));
        }
      }
    }
    // Both read the same stored rows; they differ only in float against double sums and, where
    // rows are stored rotated, in the store's turning of the query and output around them.
    EXPECT_LE(worst, 2e-5 * largest) << "largest output " << largest;
    EXPECT_GT(largest, 0.1);
    EXPECT_EQ(handed->bytes(), own->bytes());
    // The reference's copy is the store's rows (NVFP4's nibbles and scales apart) with FP8's
    // scale per KV head; the store keeps FP8's scales as its quantizer gives them (one, or one a
    // KV head) and NVFP4's global scale, a float a role and layer.
    const std::uint64_t per_role = 2ull * c.layers * sizeof(float);
    std::uint64_t store_params = 0, copy_params = 0;
    if (m && m->kind == MethodKind::Fp8E4M3) {
      store_params = per_role * (m->per_head_scale ? c.kv_heads : 1);
      copy_params = per_role * c.kv_heads;
    }
    if (m && m->kind == MethodKind::Nvfp4) store_params = per_role;
    EXPECT_EQ(handed->decode_copy_bytes(), own->bytes() - store_params + copy_params);
    EXPECT_EQ(own->decode_copy_bytes(), 0u);
  }
}

TEST(RowAttention, StoresNoRowKernelReadsAreErrorsSayingSo) {
  const LlamaConfig c = small_model(1);
  MethodConfig kivi = method(MethodKind::Kivi);
  kivi.residual = 64;
  for (const MethodConfig& m :
       {method(MethodKind::KvComp), kivi, method(MethodKind::Int8), method(MethodKind::Fp8E5M2),
        method(MethodKind::Q4_1), method(MethodKind::Mxfp4)}) {
    SCOPED_TRACE(method_label(m));
    auto decode = make_reference_row_attention(row_attention_shape(c, 100));
    ASSERT_TRUE(decode.ok()) << decode.message();
    auto made = make_method_store(c, m, 100, {}, std::move(*decode));
    ASSERT_FALSE(made.ok());
    EXPECT_NE(made.message().find("no row-reading decode kernel"), std::string::npos)
        << made.message();
    // Without one the same method stores on the CPU.
    EXPECT_TRUE(make_method_store(c, m, 100).ok());
  }
}

TEST(RowAttention, ReferenceRefusesWhatItCannotServe) {
  EXPECT_FALSE(make_reference_row_attention({1, 6, 4, 64, 0}).ok());  // 6 over 4 heads
  EXPECT_FALSE(make_reference_row_attention({1, 4, 4, 48, 0}).ok());  // head_dim 48
  EXPECT_FALSE(make_reference_row_attention({0, 4, 4, 64, 0}).ok());
  auto r = make_reference_row_attention({2, 4, 2, 64, 0});
  ASSERT_TRUE(r.ok()) << r.message();
  RowAttention& a = **r;
  std::vector<float> q(4 * 64, 1.f), out(q.size(), 7.f);
  EXPECT_FALSE(a.append(0, StoredRows{}).ok()) << "rows before begin_layer";
  ASSERT_TRUE(a.begin_layer(0, RowParams{}));
  EXPECT_FALSE(a.begin_layer(0, RowParams{}).ok()) << "a layer begun twice";
  ASSERT_TRUE(a.attend(0, q, out));
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == 0.f; }))
      << "an empty layer attends to nothing";
  std::vector<std::uint8_t> short_rows(2 * 2 * 64 * 2 - 1);
  EXPECT_FALSE(a.append(0, StoredRows{2, short_rows, short_rows, {}, {}}).ok());
  RowParams fp8;
  fp8.format = row_decode::Format::Fp8E4M3;
  fp8.key_head_scales = {1.f};  // one scale for two KV heads
  fp8.value_head_scales = {1.f, 1.f};
  EXPECT_FALSE(a.begin_layer(1, fp8).ok());
  EXPECT_FALSE(a.attend(5, q, out).ok());
  RowParams packed;
  packed.format = row_decode::Format::Packed4;
  EXPECT_FALSE(a.begin_layer(1, packed).ok());
}

}  // namespace
}  // namespace kvlab
