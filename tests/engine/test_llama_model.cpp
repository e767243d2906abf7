// The Llama runner on real trained weights (../shared/models/stories260K): greedy text, logits
// against a deliberately simple double-precision forward written here from the llama2.c format
// (its own file reader, plain loops, no Eigen), batched prefill against one token at a time, the
// tokenizer, and bad files. Skipped with a message when the models folder is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/model/model_quality.h"
#include "kvlab/engine/model/model_quality_json.h"
#include "scratch_dir.h"

namespace kvlab {
namespace {

const std::string kDir = std::string(KVLAB_MODELS_DIR) + "/stories260K";
const std::string kModel = kDir + "/stories260K.bin";
const std::string kTokenizer = kDir + "/tok512.bin";

#define REQUIRE_MODEL() \
  if (!std::filesystem::exists(kModel)) GTEST_SKIP() << kModel << " is absent: skipped"

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

// Equal to float rounding: with hooks the attention probabilities are normalised before they
// weight the values, without them the sums divide the outputs, and the two round differently in
// the last bits.
void expect_same_logits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_NEAR(a[i], b[i], 1e-5f * std::max(1.0f, std::abs(a[i]))) << "logit " << i;
  }
}

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
  for (const auto& [pos, n] : {std::pair{0, 256}, {0, 1}, {255, 1}, {100, 37}}) {
    const auto shapes = forward_matmul_shapes(c, pos, n);
    double weights = 0;
    for (std::size_t i = 0; i < 4; ++i) weights += shapes[i].flops();
    weights += shapes.back().flops();
    EXPECT_DOUBLE_EQ(weights, 2.0 * n * c.layers * (2 * 64 * 64 + 2 * 32 * 64 + 3 * 172 * 64) +
                                  2.0 * c.vocab * c.dim);
    int rows = 0;
    for (std::size_t i = 4; i + 1 < shapes.size(); i += 2) {
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

}  // namespace
}  // namespace kvlab

namespace kvlab {
namespace {

TEST(ModelQuality, ReaderInTheLoopAndPerplexity) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  // A reader that hands back the exact cache changes nothing (up to the rounding of matrix
  // products over differently aligned copies).
  auto plain = model.new_state();
  auto hooked = model.new_state();
  int calls = 0;
  hooked.attention_reader = [&](int, const AlignedFloats& k, const AlignedFloats& v,
                                AlignedFloats& kr, AlignedFloats& vr) -> Status {
    ++calls;
    kr = k;
    vr = v;
    return Ok{};
  };
  for (int t : {1, 403, 407, 261}) {
    expect_same_logits(model.forward(plain, {t}).value(), model.forward(hooked, {t}).value());
  }
  EXPECT_EQ(calls, 4 * model.config().layers);
  // A reader's error stops the forward with the layer named.
  hooked.attention_reader = [](int, const auto&, const auto&, auto&, auto&) -> Status {
    return make_error("broken reader");
  };
  auto e = model.forward(hooked, {5});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("layer 0: broken reader"), std::string::npos);

  const auto text = sample_text(model, 254, 3).value();
  ASSERT_EQ(text.size(), 254u);
  // The exact perplexity, computed here from one token at a time.
  double nll = 0;
  {
    auto s = model.new_state();
    int prev = LlamaTokenizer::kBos;
    for (std::size_t i = 0; i < 127; ++i) {
      const auto logits = model.forward(s, {prev}).value();
      double m = *std::max_element(logits.begin(), logits.end()), sum = 0;
      for (float x : logits) sum += std::exp(x - m);
      nll -= logits[text[i]] - m - std::log(sum);
      prev = text[i];
    }
  }
  QualityConfig qc;
  qc.window = 128;
  qc.method->kind = MethodKind::Int8;
  auto int8 = measure_quality(model, text, qc).value();
  EXPECT_EQ(int8.windows, 2);
  EXPECT_EQ(int8.tokens, 254);
  // Window 1 alone would give exp(nll / 127); both windows are in the report, so check bounds
  // through a one-window run.
  auto one = measure_quality(model, {text.begin(), text.begin() + 127}, qc).value();
  EXPECT_NEAR(one.perplexity_exact, std::exp(nll / 127), 1e-6 * one.perplexity_exact);
  EXPECT_GT(int8.kl_mean, 0.0);
  EXPECT_LT(std::abs(int8.perplexity_change), 0.02);
  EXPECT_GT(int8.next_token_agreement, 0.9);
  qc.method->kind = MethodKind::Int4;
  auto int4 = measure_quality(model, text, qc).value();
  EXPECT_GT(int4.kl_mean, int8.kl_mean);
  EXPECT_NEAR(int4.bits_per_value, 4.0, 0.1);
  qc.window = 1000;
  EXPECT_FALSE(measure_quality(model, text, qc).ok());
  qc.window = 128;
  EXPECT_FALSE(measure_quality(model, {1, 2, 3}, qc).ok());
}

// Issue 48: every quality number comes with its uncertainty. The report's standard errors and
// agreement interval are checked against a plain one-pass computation here (sums of squares in
// long double), from the per-token values the report keeps, which add up to its perplexities.
TEST(ModelQuality, IntervalsAreThePlainStatisticsOfThePerTokenValues) {
  REQUIRE_MODEL();
  const auto model = LlamaModel::load_llama2c(kModel).value();
  const std::vector<int> text = sample_text(model, 300, 3).value();
  QualityConfig qc;
  qc.window = 128;
  qc.method->kind = MethodKind::Int4;
  const QualityReport r = measure_quality(model, text, qc).value();
  const std::size_t n = static_cast<std::size_t>(r.tokens);
  ASSERT_EQ(r.token_nll_delta.size(), n);
  ASSERT_EQ(r.token_kl.size(), n);
  long double sd = 0, sd2 = 0, sk = 0, sk2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    sd += r.token_nll_delta[i];
    sd2 += static_cast<long double>(r.token_nll_delta[i]) * r.token_nll_delta[i];
    sk += r.token_kl[i];
    sk2 += static_cast<long double>(r.token_kl[i]) * r.token_kl[i];
  }
  const long double N = n;
  const long double d_mean = sd / N, k_mean = sk / N;
  const long double d_var = (sd2 - N * d_mean * d_mean) / (N - 1);
  const long double k_var = (sk2 - N * k_mean * k_mean) / (N - 1);
  // The per-token differences are the run's: their mean is the log of the perplexity ratio.
  EXPECT_NEAR(static_cast<double>(std::exp(d_mean)) - 1, r.perplexity_change, 1e-9);
  EXPECT_NEAR(static_cast<double>(k_mean), r.kl_mean, 1e-12);
  const double se = static_cast<double>(std::exp(d_mean) * std::sqrt(d_var / N));
  EXPECT_NEAR(r.perplexity_change_se, se, 1e-9 * se);
  EXPECT_NEAR(r.kl_mean_se, static_cast<double>(std::sqrt(k_var / N)), 1e-9 * r.kl_mean_se);
  EXPECT_GT(r.perplexity_change_se, 0);
  // Wilson's interval, as the textbook writes it.
  const double k = std::round(r.next_token_agreement * n), p = k / n, z = 1.959964;
  const double centre = (p + z * z / (2.0 * n)) / (1 + z * z / n);
  const double half = z / (1 + z * z / n) * std::sqrt(p * (1 - p) / n + z * z / (4.0 * n * n));
  EXPECT_NEAR(r.next_token_agreement_low, centre - half, 1e-12);
  EXPECT_NEAR(r.next_token_agreement_high, std::min(1.0, centre + half), 1e-12);
  EXPECT_LE(r.next_token_agreement_low, r.next_token_agreement);
  EXPECT_GE(r.next_token_agreement_high, r.next_token_agreement);
  // And in the JSON a stored run keeps.
  const nlohmann::json j = quality_report_to_json(r);
  EXPECT_DOUBLE_EQ(j.at("perplexity_change_se").get<double>(), r.perplexity_change_se);
  EXPECT_DOUBLE_EQ(j.at("next_token_agreement_low").get<double>(), r.next_token_agreement_low);
  EXPECT_FALSE(j.contains("token_kl")) << "per-token values stay out of stored runs";
}

// Issue 48, part 2: with a target standard error, windows are scored in text order, eight at a
// time, until the error is small enough; the windows scored are exactly those of a run over the
// text they cover.
TEST(ModelQuality, ATargetStandardErrorStopsOnceReached) {
  REQUIRE_MODEL();
  const auto model = LlamaModel::load_llama2c(kModel).value();
  const std::vector<int> text = sample_text(model, 20 * 63, 5).value();
  QualityConfig qc;
  qc.window = 64;
  qc.method->kind = MethodKind::Int4;
  const QualityReport all = measure_quality(model, text, qc).value();
  EXPECT_EQ(all.windows, 20);
  EXPECT_FALSE(all.reached_target_se);
  qc.target_se = 10.0;  // reached by the first batch
  const QualityReport early = measure_quality(model, text, qc).value();
  EXPECT_TRUE(early.reached_target_se);
  EXPECT_EQ(early.windows, 8);
  EXPECT_LE(early.perplexity_change_se, 10.0);
  qc.target_se = 0;
  const QualityReport first8 =
      measure_quality(model, {text.begin(), text.begin() + 8 * 63}, qc).value();
  EXPECT_EQ(early.tokens, first8.tokens);
  EXPECT_DOUBLE_EQ(early.perplexity_change, first8.perplexity_change);
  EXPECT_DOUBLE_EQ(early.perplexity_change_se, first8.perplexity_change_se);
  qc.target_se = 1e-9;  // never reached: the whole text
  const QualityReport whole = measure_quality(model, text, qc).value();
  EXPECT_FALSE(whole.reached_target_se);
  EXPECT_EQ(whole.windows, 20);
  EXPECT_DOUBLE_EQ(whole.perplexity_change, all.perplexity_change);
  qc.target_se = -1;
  EXPECT_FALSE(plan_quality(model.config(), qc, 1000).ok());
}

// Window 0 fits the text: the model's context, or one window of the whole text where that is
// shorter; every check runs in plan_quality() before any work.
TEST(ModelQuality, WindowZeroFitsTheTextAndChecksComeFirst) {
  REQUIRE_MODEL();
  const auto model = LlamaModel::load_llama2c(kModel).value();
  const LlamaConfig& mc = model.config();
  ASSERT_EQ(mc.seq_len, 512);
  QualityConfig qc;
  qc.method->kind = MethodKind::Int8;
  auto shortp = plan_quality(mc, qc, 100).value();
  EXPECT_EQ(shortp.window, 101);
  EXPECT_EQ(shortp.windows, 1);
  auto longp = plan_quality(mc, qc, 1500).value();
  EXPECT_EQ(longp.window, 512);
  EXPECT_EQ(longp.windows, 2);  // 1500 / 511; the rest is not scored
  qc.window = 256;
  auto too_short = plan_quality(mc, qc, 100);
  ASSERT_FALSE(too_short.ok());
  EXPECT_NE(too_short.message().find("at least 255 are needed"), std::string::npos)
      << too_short.message();
  qc.window = 1000;
  EXPECT_NE(plan_quality(mc, qc, 5000).message().find("512 positions"), std::string::npos);
  qc.window = 0;
  qc.method->kind = MethodKind::Kivi;
  qc.method->bits = 3;
  EXPECT_FALSE(plan_quality(mc, qc, 100).ok()) << "a bad method fails in the plan";
  qc.method->kind = MethodKind::Int8;
  std::vector<int> text(60);
  for (int i = 0; i < 60; ++i) text[static_cast<std::size_t>(i)] = 100 + i;
  const QualityReport r = measure_quality(model, text, qc).value();
  EXPECT_EQ(r.window, 61);
  EXPECT_EQ(r.windows, 1);
  EXPECT_EQ(r.tokens, 60);
}

// The kept-token mask: keeping everything changes nothing (to float rounding); a hand-made mask
// gives each query head a softmax over the kept positions only, computed here in double from the
// state's own queries and keys.
// Windows run side by side: the report is the same, bit for bit, on one thread and on several
// (quantization and eviction in the loop, each window with its own policy state).
TEST(ModelQuality, WindowsOnAnyNumberOfThreadsGiveOneReport) {
  REQUIRE_MODEL();
  const LlamaModel model = LlamaModel::load_llama2c(kModel).value();
  auto text = sample_text(model, 4 * 96, 3).value();
  QualityConfig qc;
  qc.window = 96;
  qc.method->kind = MethodKind::Kivi;
  qc.method->residual = 16;
  EvictionConfig e;
  e.policy = EvictionPolicy::H2O;
  e.budget = Budget{0.5, true};
  qc.eviction = e;
  std::optional<QualityReport> one;
  {
    const auto limit = limit_threads(1);
    one = measure_quality(model, text, qc).value();
  }
  const QualityReport many = measure_quality(model, text, qc).value();
  EXPECT_GE(one->windows, 4);
  EXPECT_EQ(one->perplexity, many.perplexity);
  EXPECT_EQ(one->perplexity_exact, many.perplexity_exact);
  EXPECT_EQ(one->kl_mean, many.kl_mean);
  EXPECT_EQ(one->next_token_agreement, many.next_token_agreement);
  EXPECT_EQ(one->kept_fraction, many.kept_fraction);
  EXPECT_EQ(one->bits_per_value, many.bits_per_value);
}

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

// Eviction policies in the model loop: "full" is the exact run, a half-size window moves the
// next-token distributions and keeps about half, H2O at 50% beats a window at 20%, composition with
// a method.
TEST(ModelQuality, EvictionInTheLoop) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  const auto text = sample_text(model, 254, 3).value();
  QualityConfig qc;
  qc.window = 128;
  qc.method.reset();
  EXPECT_FALSE(measure_quality(model, text, qc).ok());  // nothing to measure

  EvictionConfig ec;
  ec.policy = EvictionPolicy::Full;
  qc.eviction = ec;
  auto full = measure_quality(model, text, qc).value();
  // Equal to float rounding (the masked path runs as loops, the exact one as matrix products).
  EXPECT_NEAR(full.perplexity, full.perplexity_exact, 1e-6 * full.perplexity_exact);
  EXPECT_LT(std::abs(full.perplexity_change), 1e-6);
  EXPECT_LT(full.kl_mean, 1e-9);
  EXPECT_EQ(full.kept_fraction, 1.0);
  EXPECT_EQ(full.policy, "full");
  EXPECT_EQ(full.method, "none");

  qc.eviction->policy = EvictionPolicy::Window;
  qc.eviction->budget = Budget{0.5, true};
  auto window50 = measure_quality(model, text, qc).value();
  // Not the sign of the perplexity change: the windows cut across the sampled stories, and
  // forgetting the previous story can help a little (-1.3% on this text). The next-token
  // distributions do move.
  EXPECT_NE(window50.perplexity, window50.perplexity_exact);
  EXPECT_GT(window50.kl_mean, 0.01);
  EXPECT_LT(window50.next_token_agreement, 0.99);
  EXPECT_NEAR(window50.kept_fraction, 0.5, 0.03);
  EXPECT_EQ(window50.perplexity_exact, full.perplexity_exact);

  qc.eviction->budget = Budget{0.2, true};
  auto window20 = measure_quality(model, text, qc).value();
  qc.eviction->policy = EvictionPolicy::H2O;
  qc.eviction->budget = Budget{0.5, true};
  auto h2o50 = measure_quality(model, text, qc).value();
  EXPECT_LT(h2o50.kl_mean, window20.kl_mean);
  EXPECT_NEAR(h2o50.kept_fraction, 0.5, 0.03);

  // Policy "full" with INT8 is INT8 alone (to float rounding): the mask keeps everything.
  qc.method = MethodConfig{};
  qc.method->kind = MethodKind::Int8;
  qc.eviction->policy = EvictionPolicy::Full;
  auto both = measure_quality(model, text, qc).value();
  qc.eviction.reset();
  auto int8 = measure_quality(model, text, qc).value();
  EXPECT_NEAR(both.perplexity, int8.perplexity, 1e-6 * int8.perplexity);
  EXPECT_NEAR(both.kl_mean, int8.kl_mean, 1e-6);

  // Merging runs in the loop on its own path (entry logits and member weights instead of the
  // masked softmax). With a similarity no pair of keys reaches it never merges, so it must be
  // H2O exactly (its victims are H2O's): the two paths agree to float rounding.
  qc.method.reset();
  qc.eviction = ec;
  qc.eviction->policy = EvictionPolicy::H2O;
  qc.eviction->budget = Budget{0.5, true};
  auto h2o = measure_quality(model, text, qc).value();
  qc.eviction->policy = EvictionPolicy::Merge;
  qc.eviction->merge_similarity = 1.0;
  auto unmerged = measure_quality(model, text, qc).value();
  EXPECT_EQ(unmerged.policy, "merge");
  EXPECT_NEAR(unmerged.perplexity, h2o.perplexity, 1e-5 * h2o.perplexity);
  EXPECT_NEAR(unmerged.kl_mean, h2o.kl_mean, 1e-6);
  EXPECT_EQ(unmerged.kept_fraction, h2o.kept_fraction);
  // Merging every victim into a neighbour keeps as many entries but holds every token: the
  // distributions differ from H2O's, and the run is a proper one (finite, agreeing mostly).
  qc.eviction->merge_similarity = -1.0;
  auto merged = measure_quality(model, text, qc).value();
  EXPECT_EQ(merged.kept_fraction, h2o.kept_fraction);
  EXPECT_NE(merged.kl_mean, h2o.kl_mean);
  EXPECT_TRUE(std::isfinite(merged.perplexity));
  EXPECT_GT(merged.next_token_agreement, 0.5);
  qc.eviction->merge_similarity = 1.5;
  auto bad = measure_quality(model, text, qc);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--merge-similarity"), std::string::npos);

  // Bad options name themselves.
  qc.eviction = ec;
  qc.eviction->policy = EvictionPolicy::H2O;
  qc.eviction->layer_budgets = {Budget{0.5, true}};
  auto layers = measure_quality(model, text, qc);
  ASSERT_FALSE(layers.ok());
  EXPECT_NE(layers.message().find("--layer-budgets"), std::string::npos);
}

// Prefill policies in the model loop: the prompt (half the window unless --prompt) runs whole
// and is compressed once when it ends; only the tokens after it are scored. A press that keeps
// everything (SnapKV at 100%, ThinK at every channel, MiniCache retaining every token) is the
// exact run; SnapKV at 25% keeps its budget of the prompt plus every decoded token.
TEST(ModelQuality, PrefillPressesInTheLoop) {
  REQUIRE_MODEL();
  auto model = LlamaModel::load_llama2c(kModel).value();
  const auto text = sample_text(model, 254, 3).value();
  QualityConfig qc;
  qc.window = 128;
  qc.method.reset();
  EvictionConfig ec;
  ec.policy = EvictionPolicy::SnapKV;
  ec.budget = Budget{1.0, true};
  ec.window = 16;
  qc.eviction = ec;
  const auto all = measure_quality(model, text, qc).value();
  EXPECT_EQ(all.prompt, 64);
  EXPECT_EQ(all.tokens, 2 * (127 - 64));
  EXPECT_LT(all.kl_mean, 1e-9);
  EXPECT_EQ(all.kept_fraction, 1.0);
  for (auto [policy, tweak] :
       {std::pair{EvictionPolicy::ThinK, +[](EvictionConfig& e) { e.key_channels = 1.0; }},
        std::pair{EvictionPolicy::MiniCache, +[](EvictionConfig& e) { e.retain = 1.0; }}}) {
    qc.eviction = ec;
    qc.eviction->policy = policy;
    tweak(*qc.eviction);
    const auto same = measure_quality(model, text, qc).value();
    EXPECT_LT(same.kl_mean, 1e-9) << eviction_policy_id(policy);
  }
  qc.eviction = ec;
  qc.eviction->budget = Budget{0.25, true};
  qc.prompt = 80;
  const auto snap = measure_quality(model, text, qc).value();
  EXPECT_EQ(snap.prompt, 80);
  EXPECT_GT(snap.kl_mean, 1e-4);
  // After the press each head holds 20 of the 80 prompt tokens plus the decoded ones: at the step
  // of position i, (20 + i - 79) of i + 1 tokens.
  double expected = 0;
  for (int i = 80; i < 127; ++i) expected += (20.0 + i - 79) / (i + 1);
  EXPECT_NEAR(snap.kept_fraction, expected / (127 - 80), 1e-9);
  // ThinK at a quarter of the key channels moves the distributions and keeps every token.
  qc.eviction = ec;
  qc.eviction->policy = EvictionPolicy::ThinK;
  qc.eviction->key_channels = 0.25;
  const auto think = measure_quality(model, text, qc).value();
  EXPECT_GT(think.kl_mean, 1e-6);
  EXPECT_EQ(think.kept_fraction, 1.0);
  // A window longer than the prompt, or a prompt that leaves nothing to score, names itself.
  qc.eviction = ec;
  qc.prompt = 8;
  auto bad = measure_quality(model, text, qc);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--obs-window 16: longer than the prompt"), std::string::npos)
      << bad.message();
  qc.prompt = 127;
  bad = measure_quality(model, text, qc);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--prompt 127"), std::string::npos) << bad.message();
  // SnapKV keeps its window whole: a budget it would fill leaves nothing to select.
  qc.prompt = 80;
  qc.eviction->budget = Budget{0.2, true};  // 16 tokens, the window's 16
  bad = measure_quality(model, text, qc);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--budget 20%: 16 tokens of the prompt"), std::string::npos)
      << bad.message();

  // Decode policies with a prompt: merging that never merges is H2O (its victims), also on the
  // merge path's own softmax, which must leave out the prompt positions not yet run.
  qc.eviction = ec;
  qc.eviction->policy = EvictionPolicy::H2O;
  qc.eviction->budget = Budget{0.5, true};
  qc.prompt = 64;
  const auto h2o = measure_quality(model, text, qc).value();
  qc.eviction->policy = EvictionPolicy::Merge;
  qc.eviction->merge_similarity = 1.0;
  const auto unmerged = measure_quality(model, text, qc).value();
  EXPECT_NEAR(unmerged.perplexity, h2o.perplexity, 1e-5 * h2o.perplexity);
  EXPECT_NEAR(unmerged.kl_mean, h2o.kl_mean, 1e-6);
  EXPECT_GT(h2o.kl_mean, 1e-4);
}

}  // namespace
}  // namespace kvlab
