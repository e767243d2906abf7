// The runner with its cache stored compressed (kv_store.h, issue 47) on the stories260K weights:
// the prompt's logits are the exact runner's (the prompt reads its own exact keys and values),
// and every decode step's logits equal those of the plain runner whose attention reads the same
// stored cache dequantized in full (an attention reader over the store's reconstruction) — the
// independent reference the issue names. Prompt 100 tokens: one KVComp block compressed at
// prefill, 36 buffered; 150 decode steps: the fp16 buffer flushes blocks twice.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/model/llama_model.h"
#include "llama_model_test_util.h"

namespace kvlab {
namespace {

using llama_test::kModel;

int argmax(const std::vector<float>& x) {
  return static_cast<int>(std::max_element(x.begin(), x.end()) - x.begin());
}

// A greedy story from BOS with the plain runner: real text for the prompt.
std::vector<int> story(const LlamaModel& model, int tokens) {
  auto state = model.new_state();
  std::vector<int> ids{LlamaTokenizer::kBos};
  while (static_cast<int>(ids.size()) < tokens) {
    ids.push_back(argmax(model.forward(state, {ids.back()}).value()));
  }
  return ids;
}

// Decodes 150 steps after a 100-token prompt with `store` and with the plain runner whose
// attention reads the store reconstructed in full; `exact_prompt`: the prompt's attention reads
// the exact prompt (KVComp, KIVI), so its logits are the plain runner's.
void decode_against_the_dequantized_store(const LlamaModel& model_ref,
                                          std::shared_ptr<KvStore> store, bool exact_prompt) {
  const LlamaModel* model = &model_ref;
  const std::vector<int> prompt = story(*model, 100);
  auto stored = model->new_state();
  stored.kv_store = store;
  auto plain = model->new_state();
  auto a = model->forward(stored, prompt);
  auto p = model->forward(plain, prompt);
  ASSERT_TRUE(a.ok()) << a.message();
  ASSERT_TRUE(p.ok()) << p.message();
  if (exact_prompt) llama_test::expect_same_logits(*a, *p);
  EXPECT_TRUE(stored.keys[0].empty()) << "a stored cache keeps no float copy";
  if (!exact_prompt) {
    // The prompt read its own stored form: so does the reference's prompt.
    plain = model->new_state();
  }

  // The reference: the plain runner whose attention reads the store, reconstructed in full.
  plain.attention_reader = [&](int layer, const AlignedFloats& keys, const AlignedFloats& values,
                               AlignedFloats& keys_read, AlignedFloats& values_read) -> Status {
    keys_read.resize(keys.size());
    values_read.resize(values.size());
    if (store->tokens(layer) * model->config().kv_dim() != static_cast<int>(keys.size())) {
      return make_error("the store and the reference hold different token counts");
    }
    return store->dequantize_layer(layer, keys_read, values_read);
  };
  if (!exact_prompt) {
    // The reference's prompt, reading the store's reconstruction of it: layer by layer its keys
    // are the stored run's (each layer's input came through the same stored attention).
    auto ref = model->forward(plain, prompt);
    ASSERT_TRUE(ref.ok()) << ref.message();
    for (std::size_t i = 0; i < a->size(); ++i) {
      EXPECT_NEAR((*a)[i], (*ref)[i], 1e-3f * std::max(1.0f, std::abs((*ref)[i]))) << i;
    }
  }
  int token = argmax(*a);
  double worst = 0;
  for (int step = 0; step < 150; ++step) {
    auto got = model->forward(stored, {token});
    ASSERT_TRUE(got.ok()) << got.message();
    auto want = model->forward(plain, {token});
    ASSERT_TRUE(want.ok()) << want.message();
    for (std::size_t i = 0; i < got->size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs((*got)[i] - (*want)[i])) /
                                  std::max(1.0f, std::abs((*want)[i])));
    }
    token = argmax(*got);
  }
  // Fused decoding sums in another order than the reconstruction's matrix products: float
  // rounding only. A wrong block, step or buffer row moves logits by far more than 1e-3.
  EXPECT_LT(worst, 1e-3) << store->label();
  EXPECT_EQ(store->tokens(0), 250);
  EXPECT_EQ(stored.pos, 250);
  // Held bytes: the streams, metadata, codebooks, parameters and the fp16 buffer, under the fp16
  // cache's. Not by much on this model: head_dim 8 makes the per-token value parameters and the
  // codebooks weigh, and up to 128 of the 250 tokens wait in the fp16 buffer (about 1.3x here).
  EXPECT_GT(store->bytes(), 0u);
  if (store->label() != "fp16") {
    EXPECT_LT(store->bytes(), store->fp16_bytes()) << store->label();
  }
  EXPECT_EQ(store->fp16_bytes(), 2ull * 2 * 250 * model->config().kv_dim() *
                                     static_cast<std::uint64_t>(model->config().layers));
}

void kvcomp_decode(CodecKind codec, double rel_scale) {
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  CompressedCacheConfig config;
  config.codec = codec;
  config.rel_scale = rel_scale;
  auto made = make_kvcomp_store(model->config(), config);
  ASSERT_TRUE(made.ok()) << made.message();
  decode_against_the_dequantized_store(*model, std::move(*made), true);
}

TEST(KvStore, KvCompHuffmanDecodeStepsReadTheStoredCache) {
  REQUIRE_MODEL();
  kvcomp_decode(CodecKind::Huffman, 0.05);
}

TEST(KvStore, KvCompBitPackDecodeStepsReadTheStoredCache) {
  REQUIRE_MODEL();
  kvcomp_decode(CodecKind::BitPack, 1.0 / 15);
}

MethodConfig method(MethodKind kind) {
  MethodConfig m;
  m.kind = kind;
  return m;
}

// Every method this model's head_dim (8) allows: KIVI (keys sealed R = 64 at a time, values
// one at a time behind a 64-token window), INT8 / INT4 and FP8 with scales fixed from the prompt.
TEST(KvStore, MethodStoresDecodeStepsReadTheStoredCache) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  MethodConfig kivi2 = method(MethodKind::Kivi);
  kivi2.residual = 64;
  MethodConfig kivi4 = kivi2;
  kivi4.bits = 4, kivi4.group_size = 16;
  MethodConfig fp8_head = method(MethodKind::Fp8E5M2);
  fp8_head.per_head_scale = true;
  MethodConfig fp8_calib = method(MethodKind::Fp8E4M3);
  fp8_calib.calib_tokens = 16;
  // --rotation: keys (and values) stored rotated, the query and the output turned instead.
  MethodConfig int4_hadamard = method(MethodKind::Int4);
  int4_hadamard.rotation = RotationKind::Hadamard;
  MethodConfig int8_orthogonal = method(MethodKind::Int8);
  int8_orthogonal.rotation = RotationKind::Orthogonal;
  int8_orthogonal.rotate_values = true;
  int8_orthogonal.rotation_seed = 7;
  MethodConfig kivi2_hadamard = kivi2;
  kivi2_hadamard.rotation = RotationKind::Hadamard;
  kivi2_hadamard.rotate_values = true;
  for (const MethodConfig& m : {kivi2, kivi4, method(MethodKind::Int8), method(MethodKind::Int4),
                                method(MethodKind::Fp8E4M3), fp8_head, fp8_calib, int4_hadamard,
                                int8_orthogonal, kivi2_hadamard}) {
    SCOPED_TRACE(method_label(m));
    auto made = make_method_store(model->config(), m, 250);
    ASSERT_TRUE(made.ok()) << made.message();
    decode_against_the_dequantized_store(*model, std::move(*made), m.kind == MethodKind::Kivi);
  }
}

// A prompt in chunks (llama.cpp's micro-batches, generate --batch): each later chunk's attention
// reads the store a tile at a time (detail::tiled_causal_attention, an online softmax). The
// reference is the plain runner, whose whole-cache matrix-product attention reads the store's
// reconstruction for the tokens it holds and the runner's own exact rows for the rest. For the
// caches whose prompt reads its own exact rows (KVComp, KIVI) the reference runs each chunk
// first, when the store holds the tokens before it; for the others the store runs first and
// holds the chunk too. 300 tokens in chunks of 111: chunk ends inside KVComp's and KIVI's blocks,
// and the last chunk reads two tiles of 256 tokens (the second rescales the first's sums). Then
// 20 decode steps.
void chunks_against_the_dequantized_store(const LlamaModel& model, std::shared_ptr<KvStore> store,
                                          bool exact_prompt) {
  const std::vector<int> prompt = story(model, 300);
  const int kv = model.config().kv_dim();
  auto stored = model.new_state();
  stored.kv_store = store;
  auto plain = model.new_state();
  plain.attention_reader = [&](int layer, const AlignedFloats& keys, const AlignedFloats& values,
                               AlignedFloats& keys_read, AlignedFloats& values_read) -> Status {
    const std::size_t held = static_cast<std::size_t>(store->tokens(layer)) * kv;
    if (held > keys.size()) return make_error("the store holds more than the runner");
    keys_read.assign(keys.begin(), keys.end());
    values_read.assign(values.begin(), values.end());
    return store->dequantize_layer(layer, {keys_read.data(), held}, {values_read.data(), held});
  };
  double worst = 0;
  const auto compare = [&](const std::vector<float>& got, const std::vector<float>& want) {
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])) /
                                  std::max(1.0f, std::abs(want[i])));
    }
  };
  std::vector<float> last;
  for (int at = 0; at < 300; at += 111) {
    const std::vector<int> chunk(prompt.begin() + at, prompt.begin() + std::min(300, at + 111));
    Result<std::vector<float>> want = std::vector<float>{}, got = std::vector<float>{};
    if (exact_prompt) want = model.forward(plain, chunk);
    got = model.forward(stored, chunk);
    if (!exact_prompt) want = model.forward(plain, chunk);
    ASSERT_TRUE(got.ok()) << got.message();
    ASSERT_TRUE(want.ok()) << want.message();
    compare(*got, *want);
    last = *got;
  }
  EXPECT_EQ(store->tokens(0), 300);
  int token = argmax(last);
  for (int step = 0; step < 20; ++step) {
    auto got = model.forward(stored, {token});
    ASSERT_TRUE(got.ok()) << got.message();
    auto want = model.forward(plain, {token});
    ASSERT_TRUE(want.ok()) << want.message();
    compare(*got, *want);
    token = argmax(*got);
  }
  // Float rounding only (another summation order); a wrong mask, tile or row is far over 1e-3.
  EXPECT_LT(worst, 1e-3) << store->label();
}

TEST(KvStore, APromptInChunksReadsTheStoreBeforeIt) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  for (const CodecKind codec : {CodecKind::Huffman, CodecKind::BitPack}) {
    CompressedCacheConfig config;
    config.codec = codec;
    auto made = make_kvcomp_store(model->config(), config);
    ASSERT_TRUE(made.ok()) << made.message();
    chunks_against_the_dequantized_store(*model, std::move(*made), true);
  }
  auto fp16 = make_fp16_store(model->config());
  ASSERT_TRUE(fp16.ok()) << fp16.message();
  chunks_against_the_dequantized_store(*model, std::move(*fp16), false);
  MethodConfig kivi2 = method(MethodKind::Kivi);
  kivi2.residual = 64;
  MethodConfig kivi2_hadamard = kivi2;
  kivi2_hadamard.rotation = RotationKind::Hadamard;
  kivi2_hadamard.rotate_values = true;
  MethodConfig int4_hadamard = method(MethodKind::Int4);
  int4_hadamard.rotation = RotationKind::Hadamard;
  for (const MethodConfig& m : {kivi2, kivi2_hadamard, method(MethodKind::Int8), int4_hadamard,
                                method(MethodKind::Fp8E4M3)}) {
    SCOPED_TRACE(method_label(m));
    auto made = make_method_store(model->config(), m);
    ASSERT_TRUE(made.ok()) << made.message();
    chunks_against_the_dequantized_store(*model, std::move(*made), m.kind == MethodKind::Kivi);
  }
}

// The fp16 baseline: the same store code holding fp16 rows. It reads its own reconstruction as
// the methods do, and that reconstruction is each key and value rounded to fp16.
TEST(KvStore, Fp16StoreHoldsFp16RowsAndReadsThem) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  auto made = make_fp16_store(model->config(), 250);
  ASSERT_TRUE(made.ok()) << made.message();
  std::shared_ptr<KvStore> store = std::move(*made);
  EXPECT_EQ(store->label(), "fp16");
  decode_against_the_dequantized_store(*model, store, false);
  EXPECT_EQ(store->bytes(), store->fp16_bytes());

  auto again = make_fp16_store(model->config());
  ASSERT_TRUE(again.ok());
  std::shared_ptr<KvStore> fresh = std::move(*again);
  const std::vector<int> prompt = story(*model, 40);
  auto plain = model->new_state();
  auto stored = model->new_state();
  stored.kv_store = fresh;
  ASSERT_TRUE(model->forward(plain, prompt).ok());
  ASSERT_TRUE(model->forward(stored, prompt).ok());
  const int kv = model->config().kv_dim();
  std::vector<float> keys(40 * kv), values(40 * kv);
  ASSERT_TRUE(fresh->dequantize_layer(0, keys, values).ok());
  for (int i = 0; i < 40 * kv; ++i) {
    ASSERT_EQ(keys[i], fp16_to_float(float_to_fp16(plain.keys[0][i]))) << i;
    ASSERT_EQ(values[i], fp16_to_float(float_to_fp16(plain.values[0][i]))) << i;
  }
}

// What the store holds for a prompt is what the method's quantizer makes of it: the same
// reconstruction of layer 0's keys and values (whose inputs do not depend on the cache), from
// the quantizer run on the whole prompt tensor. KIVI quantizes fp16 values, as the reference's
// fp16 model gives them, and the keys of the first R-multiple of tokens.
TEST(KvStore, APromptIsStoredAsTheMethodsQuantizerCodesIt) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  const std::vector<int> prompt = story(*model, 100);
  auto plain = model->new_state();
  ASSERT_TRUE(model->forward(plain, prompt).ok());
  const int kv = model->config().kv_dim(), hd = model->config().head_dim();
  const int heads = model->config().kv_heads;
  MethodConfig kivi = method(MethodKind::Kivi);
  kivi.residual = 32;
  MethodConfig kivi4 = kivi;
  kivi4.bits = 4, kivi4.group_size = 16;
  MethodConfig fp8_calib = method(MethodKind::Fp8E4M3);
  fp8_calib.calib_tokens = 40;
  MethodConfig fp8_head = method(MethodKind::Fp8E5M2);
  fp8_head.per_head_scale = true;
  MethodConfig int4_hadamard = method(MethodKind::Int4);
  int4_hadamard.rotation = RotationKind::Hadamard;
  MethodConfig int8_orthogonal = method(MethodKind::Int8);
  int8_orthogonal.rotation = RotationKind::Orthogonal;
  int8_orthogonal.rotate_values = true;
  for (const MethodConfig& m : {method(MethodKind::Int8), method(MethodKind::Int4), fp8_calib,
                                fp8_head, kivi, kivi4, int4_hadamard, int8_orthogonal}) {
    SCOPED_TRACE(method_label(m));
    auto made = make_method_store(model->config(), m);
    ASSERT_TRUE(made.ok()) << made.message();
    std::shared_ptr<KvStore> store = std::move(*made);
    auto state = model->new_state();
    state.kv_store = store;
    ASSERT_TRUE(model->forward(state, prompt).ok());
    std::vector<float> keys(100 * kv), values(100 * kv);
    ASSERT_TRUE(store->dequantize_layer(0, keys, values).ok());
    auto quantizer = make_quantizer(m);
    ASSERT_TRUE(quantizer.ok()) << quantizer.message();
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      std::vector<float> x(plain.keys[0].begin(), plain.keys[0].begin() + 100 * kv);
      if (role == TensorRole::Value) {
        x.assign(plain.values[0].begin(), plain.values[0].begin() + 100 * kv);
      }
      if (m.kind == MethodKind::Kivi) {
        for (float& f : x) f = fp16_to_float(float_to_fp16(f));
      }
      auto q = (*quantizer)->quantize(TensorView::of_floats(x, heads, hd), role);
      ASSERT_TRUE(q.ok()) << q.message();
      std::vector<float> want(x.size());
      (*quantizer)->dequantize(*q, want);
      const std::vector<float>& got = role == TensorRole::Key ? keys : values;
      // KIVI: the whole-tensor quantizer seals (100 - R) / G groups; the streaming cache the
      // keys of floor(100 / R) * R = 96 tokens and the values of 100 - R = 68; compare the
      // tokens both quantize (64), and the rest is the fp16 prompt.
      const int quantized = m.kind == MethodKind::Kivi ? 64 : 100;
      // With --rotation the quantizer (rotated_quantizer.cpp) rotates the whole tensor back at
      // once and the store a vector at a time: the same codes and the same matrices, the sums
      // in another order, so equal to float rounding (a wrong code is off by a whole step).
      const bool rotated = m.rotation != RotationKind::None;
      for (int i = 0; i < quantized * kv; ++i) {
        if (rotated) {
          ASSERT_NEAR(got[i], want[i], 1e-5f * (1.f + std::abs(want[i])))
              << role_name(role) << " value " << i;
        } else {
          ASSERT_EQ(got[i], want[i]) << role_name(role) << " value " << i;
        }
      }
      if (m.kind == MethodKind::Kivi) {
        for (int i = (role == TensorRole::Key ? 96 : 68) * kv; i < 100 * kv; ++i) {
          ASSERT_EQ(got[i], x[i]) << role_name(role) << " fp16 value " << i;
        }
      }
    }
    // Bytes: the sealed tokens, the fp16 tail and the per-tensor scales, nothing else.
    std::uint64_t per_layer = 0;
    switch (m.kind) {
      case MethodKind::Int8:
        per_layer = 2 * (100 * kv + 4);
        break;
      case MethodKind::Int4:
        per_layer = 2 * (100 * kv / 2 + 4);
        break;
      case MethodKind::Fp8E4M3:
        per_layer = 2 * (100 * kv + 4);
        break;
      case MethodKind::Fp8E5M2:  // a scale per head
        per_layer = 2 * (100 * kv + 4 * heads);
        break;
      default: {  // KIVI, R = 32: keys 96 sealed (96 / G groups of G tokens) + 4 fp16; values
                  // 68 sealed per token (one group a head: head_dim 8 <= G) + 32 fp16; an fp16
                  // step and minimum per group
        const int groups = 96 / m.group_size;
        per_layer = (96 * kv * m.bits / 8 + groups * kv * 4 + 4 * kv * 2) +
                    (68 * kv * m.bits / 8 + 68 * heads * 4 + 32 * kv * 2);
      }
    }
    EXPECT_EQ(store->bytes(), per_layer * model->config().layers);
  }
}

// append() stores what append_and_attend() stores, without the attention: a context filled
// with it (the prompt and 20 later tokens) and then read by decode steps gives every step the
// bits of a store filled with append_and_attend() all along, for every kind of store (fp16, a
// rotation of keys and values, KIVI's exact prompt, the KVComp stream).
TEST(KvStore, AppendStoresWhatAppendAndAttendStores) {
  LlamaConfig c;
  c.layers = 1, c.dim = 64, c.heads = 8, c.kv_heads = 4, c.hidden_dim = 128, c.vocab = 32;
  const int kv = c.kv_dim(), qd = c.dim, prompt = 100, filled = 120, total = 140;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> keys(static_cast<std::size_t>(total) * kv), values(keys.size()),
      queries(static_cast<std::size_t>(total) * qd);
  for (auto* x : {&keys, &values, &queries}) {
    for (float& f : *x) f = nd(rng);
  }
  MethodConfig kivi2 = method(MethodKind::Kivi);
  kivi2.residual = 64;
  MethodConfig int8_rotated = method(MethodKind::Int8);
  int8_rotated.rotation = RotationKind::Orthogonal;
  int8_rotated.rotate_values = true;
  MethodConfig kvcomp = method(MethodKind::KvComp);
  kvcomp.codec = CodecKind::Huffman;
  for (const std::optional<MethodConfig>& m : std::vector<std::optional<MethodConfig>>{
           std::nullopt, kivi2, int8_rotated, method(MethodKind::Fp8E4M3), kvcomp}) {
    SCOPED_TRACE(m ? method_label(*m) : "fp16");
    const auto make = [&]() -> std::unique_ptr<KvStore> {
      auto made = m ? make_method_store(c, *m, total) : make_fp16_store(c, total);
      EXPECT_TRUE(made.ok()) << made.message();
      return made.ok() ? std::move(*made) : nullptr;
    };
    auto attended = make(), appended = make();
    ASSERT_TRUE(attended && appended);
    // Copies: a store may write over the rows it is given.
    const auto rows = [](const std::vector<float>& x, int first, int n, int width) {
      return std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(first) * width,
                                x.begin() + static_cast<std::ptrdiff_t>(first + n) * width);
    };
    std::vector<float> out(static_cast<std::size_t>(prompt) * qd), ignored = out;
    auto k = rows(keys, 0, prompt, kv), v = rows(values, 0, prompt, kv);
    ASSERT_TRUE(
        attended->append_and_attend(0, 0, prompt, queries.data(), k.data(), v.data(), out.data()));
    k = rows(keys, 0, prompt, kv), v = rows(values, 0, prompt, kv);
    ASSERT_TRUE(appended->append(0, 0, prompt, k.data(), v.data()));
    for (int t = prompt; t < filled; ++t) {
      k = rows(keys, t, 1, kv), v = rows(values, t, 1, kv);
      ASSERT_TRUE(attended->append_and_attend(0, t, 1, queries.data() + t * qd, k.data(), v.data(),
                                              ignored.data()));
    }
    k = rows(keys, prompt, filled - prompt, kv), v = rows(values, prompt, filled - prompt, kv);
    ASSERT_TRUE(appended->append(0, prompt, filled - prompt, k.data(), v.data()));
    for (int t = filled; t < total; ++t) {
      std::vector<float> a(qd), b(qd);
      k = rows(keys, t, 1, kv), v = rows(values, t, 1, kv);
      ASSERT_TRUE(attended->append_and_attend(0, t, 1, queries.data() + t * qd, k.data(), v.data(),
                                              a.data()));
      k = rows(keys, t, 1, kv), v = rows(values, t, 1, kv);
      ASSERT_TRUE(appended->append_and_attend(0, t, 1, queries.data() + t * qd, k.data(), v.data(),
                                              b.data()));
      ASSERT_EQ(a, b) << "step at position " << t;
    }
    EXPECT_EQ(attended->bytes(), appended->bytes());
    EXPECT_EQ(appended->tokens(0), total);
    // The rules append_and_attend keeps: positions in order.
    EXPECT_FALSE(appended->append(0, 5, 1, k.data(), v.data()));
  }
}

TEST(KvStore, MethodsItCannotStoreAreErrorsNamingThem) {
  LlamaConfig c;
  c.layers = 2, c.dim = 64, c.heads = 8, c.kv_heads = 4, c.hidden_dim = 128, c.vocab = 32;
  for (const auto& [m, says] : std::vector<std::pair<MethodConfig, std::string>>{
           {method(MethodKind::TurboQuant), "does not store turboquant"},
           {method(MethodKind::Tiered), "does not store tiered"},
           {method(MethodKind::Q4_0), "not a multiple of"},  // head_dim 8
           {method(MethodKind::Nvfp4), "not a multiple of"}}) {
    auto made = make_method_store(c, m);
    ASSERT_FALSE(made.ok()) << method_label(m);
    EXPECT_NE(made.message().find(says), std::string::npos) << made.message();
  }
  MethodConfig kivi = method(MethodKind::Kivi);
  kivi.residual = 40;
  auto made = make_method_store(c, kivi);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.message().find("R must be a positive multiple of G"), std::string::npos)
      << made.message();
}

TEST(KvStore, RefusesHooksItCannotHonourAndPositionsOutOfOrder) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  auto made = make_kvcomp_store(model->config(), CompressedCacheConfig{});
  ASSERT_TRUE(made.ok()) << made.message();
  std::shared_ptr<KvStore> store = std::move(*made);
  auto state = model->new_state(/*keep_queries=*/true);
  state.kv_store = store;
  auto r = model->forward(state, {LlamaTokenizer::kBos});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("does not combine"), std::string::npos) << r.message();

  // A second state on the same store starts at position 0 where the store already holds tokens.
  auto first = model->new_state();
  first.kv_store = store;
  ASSERT_TRUE(model->forward(first, {LlamaTokenizer::kBos, 403, 407}).ok());
  auto second = model->new_state();
  second.kv_store = store;
  r = model->forward(second, {LlamaTokenizer::kBos});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("position 0 after 3 stored"), std::string::npos) << r.message();
}

TEST(KvStore, ABadConfigurationIsAnError) {
  LlamaConfig c;
  c.layers = 2, c.dim = 64, c.heads = 8, c.kv_heads = 4, c.hidden_dim = 128, c.vocab = 32;
  CompressedCacheConfig bad;
  bad.buffer_size = 10;  // not a multiple of the block size
  auto made = make_kvcomp_store(c, bad);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.message().find("KVComp cache"), std::string::npos) << made.message();
}

}  // namespace
}  // namespace kvlab
