// The Llama runner on real trained weights (../shared/models/stories260K): greedy text, logits
// against a deliberately simple double-precision forward written here from the llama2.c format
// (its own file reader, plain loops, no Eigen), batched and chunked prefill against one token at a
// time, the attention hooks (kept-token masks, attention weights, a forward inside another's
// hook), the tokenizer, and bad files. Skipped with a message when the models folder is absent; the
// quality measurements on the same model are in test_model_quality.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "kvlab/engine/model/llama_model.h"
#include "llama_model_test_util.h"
#include "scratch_dir.h"

namespace kvlab {
namespace {

using llama_test::expect_same_logits;
using llama_test::kModel;
using llama_test::kTokenizer;

// ---- The reference: llama2.c's forward in double, one token at a time --------------------------

struct Reference {
  int dim, hidden, layers, heads, kv_heads, vocab, seq_len;
  bool shared;
  std::vector<double> w;  // every float of the file after the header
  std::size_t emb, att_norm, wq, wk, wv, wo, ffn_norm, w1, w2, w3, final_norm, cls;
  std::vector<std::vector<double>> kc, vc;  // per layer [pos][kv_dim]

  explicit Reference(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::int32_t h[7];
    in.read(reinterpret_cast<char*>(h), sizeof h);
    dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4];
    shared = h[5] > 0, vocab = std::abs(h[5]), seq_len = h[6];
    std::vector<float> f;
    float x;
    while (in.read(reinterpret_cast<char*>(&x), 4)) f.push_back(x);
    w.assign(f.begin(), f.end());
    const std::size_t D = dim, KV = kv_dim(), F = hidden, L = layers;
    std::size_t at = 0;
    emb = at, at += vocab * D;
    att_norm = at, at += L * D;
    wq = at, at += L * D * D;
    wk = at, at += L * KV * D;
    wv = at, at += L * KV * D;
    wo = at, at += L * D * D;
    ffn_norm = at, at += L * D;
    w1 = at, at += L * F * D;
    w2 = at, at += L * D * F;
    w3 = at, at += L * F * D;
    final_norm = at, at += D;
    at += seq_len * (D / heads);  // the two RoPE tables
    cls = shared ? emb : at;
    kc.resize(L), vc.resize(L);
  }
  std::size_t kv_dim() const { return static_cast<std::size_t>(kv_heads) * (dim / heads); }

  // out[i] = sum_j W[i][j] x[j], W at `off` with `n` rows of `m`.
  std::vector<double> matvec(std::size_t off, const std::vector<double>& x, int n) const {
    std::vector<double> out(n, 0.0);
    for (int i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < x.size(); ++j) out[i] += w[off + i * x.size() + j] * x[j];
    }
    return out;
  }
  std::vector<double> norm(const std::vector<double>& x, std::size_t off) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / x.size() + 1e-5);
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * s * w[off + i];
    return out;
  }

  std::vector<double> step(int token, int pos) {
    const int hd = dim / heads, KV = static_cast<int>(kv_dim());
    std::vector<double> x(w.begin() + emb + token * dim, w.begin() + emb + (token + 1) * dim);
    for (int l = 0; l < layers; ++l) {
      auto xn = norm(x, att_norm + l * dim);
      auto q = matvec(wq + l * dim * dim, xn, dim);
      auto k = matvec(wk + l * KV * dim, xn, KV);
      auto v = matvec(wv + l * KV * dim, xn, KV);
      // llama2.c: rotate adjacent pairs, frequency from the index within the head.
      for (int i = 0; i < dim; i += 2) {
        const double f = 1.0 / std::pow(10000.0, static_cast<double>(i % hd) / hd);
        const double c = std::cos(pos * f), s = std::sin(pos * f);
        for (auto* vec : {&q, &k}) {
          if (vec == &k && i >= KV) continue;
          const double a = (*vec)[i], b = (*vec)[i + 1];
          (*vec)[i] = a * c - b * s;
          (*vec)[i + 1] = a * s + b * c;
        }
      }
      kc[l].insert(kc[l].end(), k.begin(), k.end());
      vc[l].insert(vc[l].end(), v.begin(), v.end());
      std::vector<double> att(dim, 0.0);
      for (int h = 0; h < heads; ++h) {
        const int kvh = h / (heads / kv_heads);
        std::vector<double> sc(pos + 1);
        double m = -1e300;
        for (int t = 0; t <= pos; ++t) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[h * hd + i] * kc[l][t * KV + kvh * hd + i];
          sc[t] = d / std::sqrt(static_cast<double>(hd));
          m = std::max(m, sc[t]);
        }
        double sum = 0;
        for (double& s : sc) sum += (s = std::exp(s - m));
        for (int t = 0; t <= pos; ++t) {
          for (int i = 0; i < hd; ++i)
            att[h * hd + i] += sc[t] / sum * vc[l][t * KV + kvh * hd + i];
        }
      }
      auto o = matvec(wo + l * dim * dim, att, dim);
      for (int i = 0; i < dim; ++i) x[i] += o[i];
      xn = norm(x, ffn_norm + l * dim);
      auto g = matvec(w1 + l * hidden * dim, xn, hidden);
      auto u = matvec(w3 + l * hidden * dim, xn, hidden);
      for (int i = 0; i < hidden; ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      auto d = matvec(w2 + l * dim * hidden, g, dim);
      for (int i = 0; i < dim; ++i) x[i] += d[i];
    }
    return matvec(cls, norm(x, final_norm), vocab);
  }
};
int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(LlamaModel, GreedyStoryFromBos) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  auto tok = LlamaTokenizer::load_llama2c(kTokenizer, model->config().vocab);
  ASSERT_TRUE(tok.ok()) << tok.message();
  auto state = model->new_state();
  int token = LlamaTokenizer::kBos;
  std::string text;
  for (int i = 0; i < 40; ++i) {
    auto logits = model->forward(state, {token});
    ASSERT_TRUE(logits.ok()) << logits.message();
    const int next = argmax(*logits);
    text += tok->decode(token, next);
    token = next;
  }
  EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily", 0), 0u) << text;
}

TEST(LlamaModel, LogitsMatchADoublePrecisionReference) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel);
  ASSERT_TRUE(model.ok()) << model.message();
  Reference ref(kModel);
  auto state = model->new_state();
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 283, 2, 500, 14, 77, 300, 301};
  for (std::size_t p = 0; p < tokens.size(); ++p) {
    auto got = model->forward(state, {tokens[p]}).value();
    const auto want = ref.step(tokens[p], static_cast<int>(p));
    double worst = 0;
    for (std::size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - want[i]));
    EXPECT_LT(worst, 1e-4) << "position " << p;
  }
}

TEST(LlamaModel, BatchedPrefillEqualsOneTokenAtATime) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  const std::vector<int> tokens = {1, 403, 407, 261, 378, 283, 500, 14, 77};
  auto batched = model.new_state(true, true);
  const auto a = model.forward(batched, tokens).value();
  auto single = model.new_state(true, true);
  std::vector<float> b;
  for (int t : tokens) b = model.forward(single, {t}).value();
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4);
  EXPECT_EQ(batched.pos, 9);
  for (int l = 0; l < model.config().layers; ++l) {
    ASSERT_EQ(batched.keys[l].size(), single.keys[l].size());
    for (std::size_t i = 0; i < batched.keys[l].size(); ++i) {
      EXPECT_NEAR(batched.keys[l][i], single.keys[l][i],
                  1e-5 * std::max(1.0f, std::abs(single.keys[l][i])));
    }
  }
  // As a KvCache every part of kvlab reads.
  const KvCache cache = state_to_cache(model, batched, false);
  ASSERT_TRUE(cache.validate().ok()) << cache.validate().message();
  EXPECT_EQ(cache.tokens(), 9);
  EXPECT_TRUE(cache.has_queries());
  EXPECT_EQ(cache.shape.kv_heads, 4);
  EXPECT_EQ(cache.shape.head_dim, 8);
  // Position 0 is not rotated, so pre- and post-RoPE keys agree there and differ later.
  const KvCache pre = state_to_cache(model, batched, true);
  EXPECT_FLOAT_EQ(pre.layers[0].key.at(0, 1, 3), cache.layers[0].key.at(0, 1, 3));
  EXPECT_NE(pre.layers[0].key.at(5, 1, 3), cache.layers[0].key.at(5, 1, 3));
}

// A long prompt in chunks that cross the attention's causal blocks (and start past position 0)
// against the double-precision reference, with hooks on the same chunks (a mask keeping
// everything, an observer, the exact cache from a reader) changing nothing beyond rounding.
TEST(LlamaModel, LongChunkedPrefillMatchesTheReference) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  const LlamaConfig& c = model.config();
  std::vector<int> tokens(300);
  for (int i = 0; i < 300; ++i) tokens[i] = i == 0 ? 1 : 3 + (i * 37) % 500;
  Reference ref(kModel);
  std::vector<std::vector<double>> want;
  for (int p = 0; p < 300; ++p) want.push_back(ref.step(tokens[p], p));
  auto plain = model.new_state();
  auto hooked = model.new_state();
  const std::vector<char> all(300, 1);
  int observed = 0;
  hooked.kept_tokens = [&](int, int) { return &all; };
  hooked.observe_attention = [&](int, int, std::span<const float>) { ++observed; };
  hooked.attention_reader = [](int, const AlignedFloats& k, const AlignedFloats& v,
                               AlignedFloats& k_out, AlignedFloats& v_out) -> Status {
    k_out = k, v_out = v;
    return Ok{};
  };
  int at = 0;
  for (const int n : {1, 70, 229}) {
    const std::vector<int> chunk(tokens.begin() + at, tokens.begin() + at + n);
    const auto got = model.forward(plain, chunk).value();
    double worst = 0;
    for (int i = 0; i < c.vocab; ++i)
      worst = std::max(worst, std::abs(got[i] - want[at + n - 1][i]));
    EXPECT_LT(worst, 1e-4) << "chunk ending at " << at + n - 1;
    expect_same_logits(got, model.forward(hooked, chunk).value());
    at += n;
  }
  EXPECT_EQ(observed, 300 * c.layers * c.heads);
}

// A forward started from a hook of another on the same thread gets its own scratch buffers.
TEST(LlamaModel, ForwardInsideAHookOfAnother) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  const std::vector<int> tokens = {1, 403, 407, 261, 378};
  auto outer = model.new_state();
  auto inner = model.new_state();
  std::vector<float> inner_logits;
  outer.observe_attention = [&](int layer, int head, std::span<const float>) {
    if (layer == 2 && head == 0 && inner.pos == 0)
      inner_logits = model.forward(inner, tokens).value();
  };
  const auto got = model.forward(outer, tokens).value();
  auto plain = model.new_state();
  expect_same_logits(got, model.forward(plain, tokens).value());
  expect_same_logits(inner_logits, got);
}

// The products forward_matmul_shapes() lists for a benchmark: the weights' FLOPs, and attention
// products covering every new token's causal context exactly once per layer and KV head.
TEST(LlamaModel, MatmulShapesCoverTheForward) {
  LlamaConfig c;
  c.dim = 64, c.hidden_dim = 172, c.layers = 5, c.heads = 8, c.kv_heads = 4, c.vocab = 512;
  c.seq_len = 512;
  for (const auto& [pos, n] : {std::pair{0, 256}, {0, 1}, {255, 1}, {100, 37}, {0, 2500}}) {
    const auto shapes = forward_matmul_shapes(c, pos, n);
    // q and o, k and v, then gate and up and down per feed-forward pass of 1024 rows at most.
    const std::size_t weight_shapes = 2 + 2 * static_cast<std::size_t>((n + 1023) / 1024);
    double weights = 0;
    for (std::size_t i = 0; i < weight_shapes; ++i) weights += shapes[i].flops();
    weights += shapes.back().flops();
    EXPECT_DOUBLE_EQ(weights, 2.0 * n * c.layers * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64) +
                                  2.0 * c.vocab * c.dim);
    int rows = 0;
    for (std::size_t i = weight_shapes; i + 1 < shapes.size(); i += 2) {
      const MatmulShape& scores = shapes[i];
      EXPECT_EQ(scores.depth, c.head_dim());
      EXPECT_EQ(scores.count, c.layers * c.kv_heads);
      EXPECT_EQ(shapes[i + 1].depth, scores.cols);  // probabilities · values over the same keys
      rows += scores.rows;
      EXPECT_EQ(scores.cols, pos + rows / 2);  // the block's last token sees exactly this far
    }
    EXPECT_EQ(rows, n * c.heads / c.kv_heads);
  }
}

TEST(LlamaModel, TokenizerRoundTrip) {
  REQUIRE_MODEL();
  auto tok = LlamaTokenizer::load_llama2c(kTokenizer, 512).value();
  const std::string text = "Once upon a time, there was a little girl named Lily. She liked cats!";
  const auto ids = tok.encode(text, true, false);
  ASSERT_GT(ids.size(), 5u);
  EXPECT_EQ(ids[0], LlamaTokenizer::kBos);
  EXPECT_LT(ids.size(), text.size());  // merges happened
  std::string back;
  for (std::size_t i = 1; i < ids.size(); ++i) back += tok.decode(ids[i - 1], ids[i]);
  EXPECT_EQ(back, text);
}

TEST(LlamaModel, BadFilesAndInputsAreErrors) {
  const auto dir = test::fresh_test_dir(KVLAB_TEST_TMPDIR);
  const std::string tiny = (dir / "short.bin").string();
  std::ofstream(tiny) << "abc";
  auto r = LlamaModel::load_llama2c(tiny);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("too short"), std::string::npos) << r.message();
  EXPECT_FALSE(LlamaModel::load_llama2c((dir / "missing.bin").string()).ok());
  REQUIRE_MODEL();
  // A truncated copy of the real checkpoint.
  std::ifstream in(kModel, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut = (dir / "cut.bin").string();
  std::ofstream(cut, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size() - 100));
  r = LlamaModel::load_llama2c(cut);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("cut.bin"), std::string::npos) << r.message();
  auto model = LlamaModel::load_llama2c(kModel).value();
  auto state = model.new_state();
  EXPECT_FALSE(model.forward(state, {512}).ok());
  EXPECT_FALSE(model.forward(state, {}).ok());
  std::vector<int> too_many(513, 5);
  EXPECT_FALSE(model.forward(state, too_many).ok());
}

// The kept-token mask: keeping everything changes nothing (to float rounding); a hand-made mask
// gives each query head a softmax over the kept positions only, computed here in double from the
// state's own queries and keys.
TEST(LlamaModel, KeptMaskRestrictsAttentionToTheKeptTokens) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  const LlamaConfig& c = model.config();
  const std::vector<int> text = {1, 403, 407, 261, 378, 300, 259, 410};
  const int n = static_cast<int>(text.size());
  std::vector<char> all(static_cast<std::size_t>(n), 1);
  auto plain = model.new_state();
  auto masked = model.new_state();
  masked.kept_tokens = [&](int, int) { return &all; };
  int observed = 0;
  masked.observe_attention = [&](int, int, std::span<const float> probs) {
    ++observed;
    double sum = 0;
    for (const float p : probs) sum += p;
    EXPECT_NEAR(sum, 1.0, 1e-5);
  };
  for (int t : text)
    expect_same_logits(model.forward(plain, {t}).value(), model.forward(masked, {t}).value());
  EXPECT_EQ(observed, n * c.layers * c.heads);

  // KV head h keeps a different subset in each layer: each token is kept while it is the newest
  // (as a policy admits it), then dropped or not by a fixed pattern.
  std::vector<std::vector<std::vector<char>>> masks(
      c.layers, std::vector<std::vector<char>>(c.kv_heads, std::vector<char>(n, 0)));
  auto state = model.new_state(/*keep_queries=*/true);
  std::vector<std::vector<std::vector<float>>> last_probs(c.layers,
                                                          std::vector<std::vector<float>>(c.heads));
  state.kept_tokens = [&](int l, int h) { return &masks[l][h]; };
  state.observe_attention = [&](int l, int q_head, std::span<const float> probs) {
    last_probs[l][q_head].assign(probs.begin(), probs.end());
  };
  for (int i = 0; i < n; ++i) {
    for (auto& layer : masks) {
      for (auto& m : layer) m[i] = 1;
    }
    ASSERT_TRUE(model.forward(state, {text[i]}).ok());
    if (i == n - 1) break;
    for (int l = 0; l < c.layers; ++l) {
      for (int h = 0; h < c.kv_heads; ++h) masks[l][h][i] = (i * 7 + l * 3 + h) % 3 != 0;
    }
  }
  const int hd = c.head_dim(), KV = c.kv_dim(), group = c.heads / c.kv_heads;
  for (int l = 0; l < c.layers; ++l) {
    for (int head = 0; head < c.heads; ++head) {
      const int kvh = head / group;
      const float* q =
          state.queries[l].data() + static_cast<std::size_t>(n - 1) * c.dim + head * hd;
      std::vector<double> logit(n, 0.0);
      double m = -INFINITY, sum = 0;
      for (int t = 0; t < n; ++t) {
        if (!masks[l][kvh][t]) continue;
        const float* k = state.keys[l].data() + static_cast<std::size_t>(t) * KV + kvh * hd;
        for (int d = 0; d < hd; ++d) logit[t] += static_cast<double>(q[d]) * k[d];
        logit[t] /= std::sqrt(static_cast<double>(hd));
        m = std::max(m, logit[t]);
      }
      for (int t = 0; t < n; ++t) sum += masks[l][kvh][t] ? std::exp(logit[t] - m) : 0.0;
      ASSERT_EQ(last_probs[l][head].size(), static_cast<std::size_t>(n));
      for (int t = 0; t < n; ++t) {
        const double want = masks[l][kvh][t] ? std::exp(logit[t] - m) / sum : 0.0;
        EXPECT_NEAR(last_probs[l][head][t], want, 1e-5)
            << "layer " << l << " head " << head << " position " << t;
      }
    }
  }

  // A mask too short for the positions, or one that keeps nothing, is an error.
  std::vector<char> short_mask(2, 1), none(static_cast<std::size_t>(n + 1), 0);
  auto s2 = model.new_state();
  ASSERT_TRUE(model.forward(s2, {1, 403, 407}).ok());
  s2.kept_tokens = [&](int, int) { return &short_mask; };
  auto e = model.forward(s2, {5});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("covers 2 positions of 4"), std::string::npos) << e.message();
  auto s3 = model.new_state();
  s3.kept_tokens = [&](int, int) { return &none; };
  e = model.forward(s3, {1});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("leaves nothing to attend"), std::string::npos) << e.message();
}

// attention_weights replaces the softmax: it receives the scaled scores (checked against q·k /
// sqrt(head_dim) from the kept queries and keys), a plain softmax in it gives the plain logits,
// and all weight on position 0 gives what a mask keeping only position 0 gives.
TEST(LlamaModel, AttentionWeightsReplaceTheSoftmax) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  const LlamaConfig& c = model.config();
  const std::vector<int> text = {1, 403, 407, 261, 378, 300};
  const int n = static_cast<int>(text.size());
  auto plain = model.new_state();
  auto weighed = model.new_state(/*keep_queries=*/true);
  std::vector<std::vector<float>> scores(c.heads);  // layer 0, the latest token
  weighed.attention_weights = [&](int l, int q_head, std::span<float> scores_span) {
    float* p = scores_span.data();
    const int tokens = static_cast<int>(scores_span.size());
    if (l == 0) scores[q_head].assign(p, p + tokens);
    double max = -INFINITY, sum = 0;
    for (int t = 0; t < tokens; ++t) max = std::max(max, double(p[t]));
    std::vector<double> e(tokens);
    for (int t = 0; t < tokens; ++t) sum += (e[t] = std::exp(p[t] - max));
    for (int t = 0; t < tokens; ++t) p[t] = static_cast<float>(e[t] / sum);
  };
  for (int t : text)
    expect_same_logits(model.forward(plain, {t}).value(), model.forward(weighed, {t}).value());
  const int hd = c.head_dim(), group = c.heads / c.kv_heads;
  for (int head = 0; head < c.heads; ++head) {
    ASSERT_EQ(scores[head].size(), static_cast<std::size_t>(n));
    const float* q =
        weighed.queries[0].data() + static_cast<std::size_t>(n - 1) * c.dim + head * hd;
    for (int t = 0; t < n; ++t) {
      const float* k =
          weighed.keys[0].data() + static_cast<std::size_t>(t) * c.kv_dim() + (head / group) * hd;
      double dot = 0;
      for (int d = 0; d < hd; ++d) dot += double(q[d]) * k[d];
      EXPECT_NEAR(scores[head][t], dot / std::sqrt(double(hd)), 1e-5) << head << " " << t;
    }
  }

  auto first_only = model.new_state();
  first_only.attention_weights = [](int, int, std::span<float> p) {
    std::fill(p.begin(), p.end(), 0.0f);
    p[0] = 1.0f;
  };
  std::vector<char> only0(static_cast<std::size_t>(n), 0);
  only0[0] = 1;
  auto masked = model.new_state();
  masked.kept_tokens = [&](int, int) { return &only0; };
  for (int i = 0; i < n; ++i) {
    const auto a = model.forward(first_only, {text[i]}).value();
    const auto b = model.forward(masked, {text[i]}).value();
    expect_same_logits(a, b);
  }
}

}  // namespace
}  // namespace kvlab
