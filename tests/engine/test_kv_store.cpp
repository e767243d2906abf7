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
#include <string>
#include <vector>

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

void decode_against_the_dequantized_store(CodecKind codec, double rel_scale) {
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  const std::vector<int> prompt = story(*model, 100);

  CompressedCacheConfig config;
  config.codec = codec;
  config.rel_scale = rel_scale;
  auto made = make_kvcomp_store(model->config(), config);
  ASSERT_TRUE(made.ok()) << made.message();
  std::shared_ptr<KvStore> store = std::move(*made);

  auto stored = model->new_state();
  stored.kv_store = store;
  auto plain = model->new_state();
  auto a = model->forward(stored, prompt);
  auto p = model->forward(plain, prompt);
  ASSERT_TRUE(a.ok()) << a.message();
  ASSERT_TRUE(p.ok()) << p.message();
  llama_test::expect_same_logits(*a, *p);  // the prompt reads exact keys and values
  EXPECT_TRUE(stored.keys[0].empty()) << "a stored cache keeps no float copy";

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
  EXPECT_LT(worst, 1e-3);
  EXPECT_EQ(store->tokens(0), 250);
  EXPECT_EQ(stored.pos, 250);
  // Held bytes: the streams, metadata, codebooks, parameters and the fp16 buffer, under the fp16
  // cache's. Not by much on this model: head_dim 8 makes the per-token value parameters and the
  // codebooks weigh, and up to 128 of the 250 tokens wait in the fp16 buffer (about 1.3x here).
  EXPECT_GT(store->bytes(), 0u);
  EXPECT_LT(store->bytes(), store->fp16_bytes()) << store->label();
  EXPECT_EQ(store->fp16_bytes(), 2ull * 2 * 250 * model->config().kv_dim() *
                                     static_cast<std::uint64_t>(model->config().layers));
}

TEST(KvStore, KvCompHuffmanDecodeStepsReadTheStoredCache) {
  REQUIRE_MODEL();
  decode_against_the_dequantized_store(CodecKind::Huffman, 0.05);
}

TEST(KvStore, KvCompBitPackDecodeStepsReadTheStoredCache) {
  REQUIRE_MODEL();
  decode_against_the_dequantized_store(CodecKind::BitPack, 1.0 / 15);
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
