// SmolLM2-135M (head_dim 64) generating with its cache stored as llama.cpp's block types, NVFP4,
// MXFP4, INT8 / INT4 and FP8 store it (the row decoders' 16-wide loops need head_dim 64)
// (kv_store.h, make_method_store; issue 47). For each method:
//  - the prompt's keys and values of layer 0 (whose inputs no cache touches) come back from the
//    store exactly as the method's quantizer reconstructs the whole prompt tensor (the quantizer
//    whose bytes the gguf-py, libggml and NumPy reference tests check);
//  - the prompt and every decode step give the logits of the plain runner whose attention reads
//    the store reconstructed in full (an attention reader), to float rounding;
//  - the bytes held are the method's bytes per token, plus its per-tensor scale where it has one.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/model/model_capture.h"
#include "model_test_support.h"

namespace kvlab {
namespace {

int argmax(const std::vector<float>& x) {
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

// How many of the first `count` values of `have` (a store's reconstruction of layer 0) differ
// from what the method's quantizer makes of the whole prompt tensor `x` and reconstructs.
std::size_t differ_from_quantizer(const MethodConfig& m, TensorRole role,
                                  const std::vector<float>& x, int kv_heads, int hd,
                                  const std::vector<float>& have, std::size_t count) {
  auto quantizer = make_quantizer(m);
  if (!quantizer) {
    ADD_FAILURE() << quantizer.message();
    return count;
  }
  auto q = (*quantizer)->quantize(TensorView::of_floats(x, kv_heads, hd), role);
  if (!q) {
    ADD_FAILURE() << q.message();
    return count;
  }
  std::vector<float> want(x.size());
  (*quantizer)->dequantize(*q, want);
  std::size_t differ = 0;
  for (std::size_t i = 0; i < count; ++i) differ += have[i] != want[i];
  return differ;
}

const LoadedModel& smollm2() {
  static auto loaded = load_model(test::smollm2());
  if (!loaded) ADD_FAILURE() << loaded.message();
  return *loaded;
}

// The worst relative difference of the logits, over the prompt and `steps` greedy decode steps,
// between a runner whose cache is `store` and the reference: the plain runner whose attention
// reads the store reconstructed in full (an attention reader). `exact_prompt`: the method's
// prompt attention reads the exact prompt (KIVI), and so does the reference's. Infinite after an
// error.
double worst_against_reconstruction(const LlamaModel& model, const std::shared_ptr<KvStore>& store,
                                    const std::vector<int>& prompt, int steps,
                                    bool exact_prompt = false) {
  const std::size_t kv = static_cast<std::size_t>(model.config().kv_dim());
  auto stored = model.new_state();
  stored.kv_store = store;
  auto plain = model.new_state();
  const auto reader = [&](int layer, const AlignedFloats& k, const AlignedFloats& v,
                          AlignedFloats& k_read, AlignedFloats& v_read) -> Status {
    k_read.resize(k.size());
    v_read.resize(v.size());
    if (static_cast<std::size_t>(store->tokens(layer)) * kv != k.size()) {
      return make_error("the store and the reference hold different token counts");
    }
    return store->dequantize_layer(layer, k_read, v_read);
  };
  if (!exact_prompt) plain.attention_reader = reader;
  double worst = 0;
  auto got = model.forward(stored, prompt);
  auto want = model.forward(plain, prompt);
  plain.attention_reader = reader;
  for (int step = 0;; ++step) {
    if (!got || !want) {
      ADD_FAILURE() << (got ? want.message() : got.message());
      return std::numeric_limits<double>::infinity();
    }
    for (std::size_t i = 0; i < got->size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs((*got)[i] - (*want)[i])) /
                                  std::max(1.0f, std::abs((*want)[i])));
    }
    if (step == steps) return worst;
    const int token = argmax(*got);
    got = model.forward(stored, {token});
    want = model.forward(plain, {token});
  }
}

// Bytes a token's keys (or values) take, [kv_dim] values: ggml's block sizes per 32 values.
std::uint64_t row_bytes(MethodKind kind, int kv_dim) {
  const auto per32 = [&](int block) { return static_cast<std::uint64_t>(kv_dim / 32 * block); };
  switch (kind) {
    case MethodKind::Q8_0:
      return per32(34);
    case MethodKind::Q4_0:
      return per32(18);
    case MethodKind::Q4_1:
      return per32(20);
    case MethodKind::Q5_0:
      return per32(22);
    case MethodKind::Q5_1:
      return per32(24);
    case MethodKind::IQ4_NL:
      return per32(18);
    case MethodKind::Mxfp4:
      return per32(17);
    case MethodKind::Nvfp4:
      return static_cast<std::uint64_t>(kv_dim / 2 + kv_dim / 16);
    case MethodKind::Int8:
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      return static_cast<std::uint64_t>(kv_dim);
    case MethodKind::Int4:
      return static_cast<std::uint64_t>(kv_dim / 2);
    default:
      return 0;
  }
}

TEST(SmolLm2Stores, BlockFormatsDecodeFromTheStoredCache) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const LoadedModel& loaded = smollm2();
  const LlamaModel& model = loaded.model;
  auto encoded = loaded.encode(
      "The lighthouse keeper wrote in his log every evening: the wind, the colour of the sea, "
      "the ships that passed, and whether the lamp had needed new oil that day.");
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  const std::vector<int> prompt = *encoded;
  const int n = static_cast<int>(prompt.size());
  const int kv = model.config().kv_dim(), hd = model.config().head_dim();
  const int kv_heads = model.config().kv_heads, layers = model.config().layers;
  auto plain_prompt = model.new_state();
  ASSERT_TRUE(model.forward(plain_prompt, prompt).ok());
  constexpr int kSteps = 12;

  std::vector<MethodConfig> configs;
  for (const MethodKind kind :
       {MethodKind::Q8_0, MethodKind::Q4_0, MethodKind::Q4_1, MethodKind::Q5_0, MethodKind::Q5_1,
        MethodKind::IQ4_NL, MethodKind::Nvfp4, MethodKind::Mxfp4, MethodKind::Int8,
        MethodKind::Int4, MethodKind::Fp8E4M3, MethodKind::Fp8E5M2}) {
    configs.emplace_back().kind = kind;
  }
  // --rotation on top of llama.cpp's own rotation (q4_0: keys and values turned twice, the
  // query and the output back in the reverse order), and on NVFP4's blocks.
  MethodConfig q4_0_hadamard;
  q4_0_hadamard.kind = MethodKind::Q4_0;
  q4_0_hadamard.rotation = RotationKind::Hadamard;
  q4_0_hadamard.rotate_values = true;
  MethodConfig nvfp4_orthogonal;
  nvfp4_orthogonal.kind = MethodKind::Nvfp4;
  nvfp4_orthogonal.rotation = RotationKind::Orthogonal;
  configs.push_back(q4_0_hadamard);
  configs.push_back(nvfp4_orthogonal);

  for (const MethodConfig& m : configs) {
    const MethodKind kind = m.kind;
    SCOPED_TRACE(method_label(m));
    auto made = make_method_store(model.config(), m, n + kSteps);
    ASSERT_TRUE(made.ok()) << made.message();
    std::shared_ptr<KvStore> store = std::move(*made);
    // The prompt and every step against the plain runner reading the store's reconstruction:
    // tiles of dot products (or codes read in place) against the reader's matrix products,
    // float rounding only.
    EXPECT_LT(worst_against_reconstruction(model, store, prompt, kSteps), 1e-3);

    // Layer 0's prompt against the quantizer on the whole prompt tensor (the rotated ones: the
    // stories260K test compares those codes, to float rounding of the rotation back). Later
    // tokens leave the prompt's codes as they were.
    std::vector<float> keys(static_cast<std::size_t>(n + kSteps) * kv), values(keys.size());
    ASSERT_TRUE(store->dequantize_layer(0, keys, values).ok());
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      if (m.rotation != RotationKind::None) break;
      const AlignedFloats& src =
          role == TensorRole::Key ? plain_prompt.keys[0] : plain_prompt.values[0];
      const std::vector<float> x(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(n) * kv);
      EXPECT_EQ(differ_from_quantizer(m, role, x, kv_heads, hd,
                                      role == TensorRole::Key ? keys : values, x.size()),
                0u)
          << role_name(role);
    }
    const std::uint64_t tokens = static_cast<std::uint64_t>(n + kSteps);
    // An fp32 scale per tensor (NVFP4's global one); llama.cpp's blocks hold theirs inside.
    const bool per_tensor = kind == MethodKind::Nvfp4 || kind == MethodKind::Int8 ||
                            kind == MethodKind::Int4 || kind == MethodKind::Fp8E4M3 ||
                            kind == MethodKind::Fp8E5M2;
    const std::uint64_t scale = per_tensor ? 4 : 0;
    EXPECT_EQ(store->bytes(), 2 * layers * (tokens * row_bytes(kind, kv) + scale));
    EXPECT_EQ(store->fp16_bytes(), 2 * layers * tokens * kv * 2);
  }
}

// The fused readers over a cache of several hundred tokens (INT8 / INT4: codes read in place, the
// scale folded into the query and the weights; llama.cpp's block types, MXFP4, NVFP4, FP8, KIVI-2
// and -4: each lane group decoded in registers, attention/format_rows.h): many 64-token tiles, a
// last one cut short, and the tokens shared among the engine's threads where the machine has two or
// more cores. Each decode step's logits against the plain runner whose attention reads the store
// reconstructed in full.
TEST(SmolLm2Stores, FusedReadersOverALongCache) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const LoadedModel& loaded = smollm2();
  const LlamaModel& model = loaded.model;
  std::string text;
  for (int i = 0; i < 24; ++i) {
    text += fmt::format(
        "Entry {}: the wind from the {}, the sea {}, {} ships passed and the lamp {} new oil. ", i,
        i % 2 ? "west" : "north", i % 3 ? "grey" : "green", i + 2, i % 4 ? "needed" : "had");
  }
  auto encoded = loaded.encode(text);
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  const std::vector<int> prompt = *encoded;
  const int n = static_cast<int>(prompt.size());
  ASSERT_GT(n, 8 * 64 + 8) << "two threads' worth of tiles and a short last one";
  ASSERT_NE(n % 64, 0);
  constexpr int kSteps = 3;
  std::vector<MethodConfig> configs;
  // One of each kind of reader (the short test above takes every block type): bytes and nibbles
  // with a folded scale, llama.cpp's blocks (rotated, with a minimum and fifth bits, a table),
  // NVFP4, FP8 with a scale per head, KIVI.
  for (const MethodKind kind : {MethodKind::Int8, MethodKind::Int4, MethodKind::Q4_0,
                                MethodKind::Q5_1, MethodKind::Mxfp4, MethodKind::Nvfp4}) {
    configs.emplace_back().kind = kind;
  }
  MethodConfig& fp8_heads = configs.emplace_back();  // a scale per KV head
  fp8_heads.kind = MethodKind::Fp8E5M2;
  fp8_heads.per_head_scale = true;
  MethodConfig int4_hadamard;
  int4_hadamard.kind = MethodKind::Int4;
  int4_hadamard.rotation = RotationKind::Hadamard;
  int4_hadamard.rotate_values = true;
  configs.push_back(int4_hadamard);
  // KIVI: keys sealed R = 128 at a time in groups of G = 32 tokens, values behind a window of R.
  for (const int bits : {2, 4}) {
    MethodConfig& kivi = configs.emplace_back();
    kivi.kind = MethodKind::Kivi;
    kivi.bits = bits;
  }
  for (const MethodConfig& m : configs) {
    SCOPED_TRACE(method_label(m));
    auto made = make_method_store(model.config(), m, n + kSteps);
    ASSERT_TRUE(made.ok()) << made.message();
    std::shared_ptr<KvStore> store = std::move(*made);
    // Sums of codes scaled once against sums of reconstructed values: float rounding only. A
    // tile read from the wrong token or head, or a lost bias, moves logits by far more.
    EXPECT_LT(
        worst_against_reconstruction(model, store, prompt, kSteps, m.kind == MethodKind::Kivi),
        1e-3);
  }
}

// KIVI-2 and KIVI-4 (G = 32, R = 32) on SmolLM2's head_dim 64, where a value group spans 32
// channels: the tokens the store has sealed come back as KIVI's whole-tensor quantizer
// reconstructs the fp16 prompt (the stories260K test's groups are 8 channels wide).
TEST(SmolLm2Stores, KiviGroupsDecodeAsTheQuantizerReconstructsThem) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  const LoadedModel& loaded = smollm2();
  const LlamaModel& model = loaded.model;
  auto encoded = loaded.encode(
      "The lighthouse keeper wrote in his log every evening: the wind, the colour of the sea, "
      "the ships that passed, and whether the lamp had needed new oil that day. In winter the "
      "log grew short, for few ships passed and the wind said the same thing every night; in "
      "summer it filled a page a day with sails, and with the names of the boats that came in. "
      "When he left the lighthouse at last, the new keeper found forty years of weather in the "
      "cupboard under the stairs, and read them all before the first storm came.");
  ASSERT_TRUE(encoded.ok()) << encoded.message();
  const std::vector<int> prompt = *encoded;
  const int n = static_cast<int>(prompt.size());
  ASSERT_GE(n, 64 + 32) << "two groups of keys and a window of R";
  const int kv = model.config().kv_dim(), hd = model.config().head_dim();
  const int kv_heads = model.config().kv_heads;
  auto plain = model.new_state();
  ASSERT_TRUE(model.forward(plain, prompt).ok());
  for (const int bits : {2, 4}) {
    MethodConfig m;
    m.kind = MethodKind::Kivi;
    m.bits = bits, m.group_size = 32, m.residual = 32;
    SCOPED_TRACE(method_label(m));
    auto made = make_method_store(model.config(), m, n);
    ASSERT_TRUE(made.ok()) << made.message();
    std::shared_ptr<KvStore> store = std::move(*made);
    auto stored = model.new_state();
    stored.kv_store = store;
    ASSERT_TRUE(model.forward(stored, prompt).ok());
    std::vector<float> keys(static_cast<std::size_t>(n) * kv), values(keys.size());
    ASSERT_TRUE(store->dequantize_layer(0, keys, values).ok());
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const AlignedFloats& src = role == TensorRole::Key ? plain.keys[0] : plain.values[0];
      std::vector<float> x(src.begin(), src.begin() + static_cast<std::ptrdiff_t>(keys.size()));
      for (float& f : x) f = fp16_to_float(float_to_fp16(f));  // KIVI quantizes fp16
      // Both seal the first 64 tokens: the quantizer (n - R) / G whole groups of keys and all
      // values but the newest R, the store floor(n / R) * R keys and n - R values.
      EXPECT_EQ(
          differ_from_quantizer(m, role, x, kv_heads, hd, role == TensorRole::Key ? keys : values,
                                static_cast<std::size_t>(64) * kv),
          0u)
          << role_name(role);
    }
  }
}

}  // namespace
}  // namespace kvlab
