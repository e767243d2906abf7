// Quality measured in the model loop on real trained weights (../shared/models/stories260K,
// skipped when absent): a cache reader in the forward and the exact perplexity; the standard
// errors and agreement interval against plain statistics of the per-token values; a target
// standard error; window 0 and the checks plan_quality() makes first; one report on any number
// of threads; eviction, merging and prefill presses in the loop.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/model/model_quality.h"
#include "kvlab/engine/model/model_quality_json.h"
#include "llama_model_test_util.h"

namespace kvlab {
namespace {

using llama_test::expect_same_logits;
using llama_test::kModel;

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

// Issue 47, part 5: with `stored` the compressed run holds the method's stored cache
// (make_method_store) and each window's unscored tokens go in as one prompt. The reference here
// runs that by hand: the exact run one token at a time, the store's run the prompt at once, then
// a token at a time, and the perplexities from the log-softmax of both.
TEST(ModelQuality, AStoredCacheIsScoredAsTheStoreRunsByHand) {
  REQUIRE_MODEL();
  const auto model = LlamaModel::load_llama2c(kModel).value();
  const std::vector<int> text = sample_text(model, 150, 3).value();  // one window
  QualityConfig qc;
  qc.window = 101;
  qc.prompt = 40;
  qc.method->kind = MethodKind::Int8;
  qc.stored = true;
  const QualityReport r = measure_quality(model, text, qc).value();
  ASSERT_EQ(r.windows, 1);
  EXPECT_TRUE(r.stored);
  EXPECT_NE(r.method_label.find("(stored)"), std::string::npos) << r.method_label;
  const auto log_p = [](const std::vector<float>& logits, int token) {
    double top = *std::max_element(logits.begin(), logits.end()), sum = 0;
    for (const float x : logits) sum += std::exp(x - top);
    return logits[static_cast<std::size_t>(token)] - top - std::log(sum);
  };
  auto exact = model.new_state();
  auto stored = model.new_state();
  auto store = make_method_store(model.config(), *qc.method, qc.window);
  ASSERT_TRUE(store.ok()) << store.message();
  stored.kv_store = std::move(*store);
  std::vector<int> prompt{LlamaTokenizer::kBos};
  prompt.insert(prompt.end(), text.begin(), text.begin() + 40);
  double nll_exact = 0, nll = 0;
  int scored = 0;
  std::vector<float> ls;
  for (int i = 0; i < 100; ++i) {
    const int in = i == 0 ? LlamaTokenizer::kBos : text[static_cast<std::size_t>(i - 1)];
    const std::vector<float> le = model.forward(exact, {in}).value();
    if (i < 40) continue;
    ls = i == 40 ? model.forward(stored, prompt).value() : model.forward(stored, {in}).value();
    const int next = text[static_cast<std::size_t>(i)];
    nll_exact -= log_p(le, next);
    nll -= log_p(ls, next);
    ++scored;
  }
  ASSERT_EQ(r.tokens, scored);
  EXPECT_NEAR(r.perplexity_exact, std::exp(nll_exact / scored), 1e-9 * r.perplexity_exact);
  EXPECT_NEAR(r.perplexity, std::exp(nll / scored), 1e-9 * r.perplexity);
  EXPECT_NE(r.perplexity, r.perplexity_exact) << "int8 changes something";
  // The size is the store's own, at the window's end.
  EXPECT_NEAR(r.ratio,
              static_cast<double>(stored.kv_store->fp16_bytes()) / stored.kv_store->bytes(), 1e-12);
  EXPECT_NEAR(r.bits_per_value, 16 / r.ratio, 1e-12);
  EXPECT_TRUE(quality_report_to_json(r).at("stored").get<bool>());
}

TEST(ModelQuality, AStoredCacheNeedsAMethodTheRunnerStoresAndNoEviction) {
  REQUIRE_MODEL();
  const auto model = LlamaModel::load_llama2c(kModel).value();
  QualityConfig qc;
  qc.window = 64;
  qc.stored = true;
  qc.method.reset();
  qc.eviction = EvictionConfig{};
  auto no_method = plan_quality(model.config(), qc, 200);
  ASSERT_FALSE(no_method.ok());
  EXPECT_NE(no_method.message().find("--stored"), std::string::npos) << no_method.message();
  qc.method = MethodConfig{};
  auto with_eviction = plan_quality(model.config(), qc, 200);
  ASSERT_FALSE(with_eviction.ok());
  EXPECT_NE(with_eviction.message().find("eviction"), std::string::npos) << with_eviction.message();
  qc.eviction.reset();
  qc.method->kind = MethodKind::TurboQuant;
  auto unstored = plan_quality(model.config(), qc, 200);
  ASSERT_FALSE(unstored.ok());
  EXPECT_NE(unstored.message().find("--stored"), std::string::npos) << unstored.message();
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

// Issue 48, part 2: with a stride below the window, windows overlap and each scores only the
// tokens the windows before it did not, with the window's earlier tokens as context. The exact
// perplexity against one written here from the model's forward, window by window.
TEST(ModelQuality, AStrideOverlapsWindowsAndScoresEachTokenOnce) {
  REQUIRE_MODEL();
  const auto model = LlamaModel::load_llama2c(kModel).value();
  const std::vector<int> text = sample_text(model, 300, 7).value();
  constexpr int kWindow = 64, kStride = 16, kPer = kWindow - 1;
  QualityConfig qc;
  qc.window = kWindow;
  qc.stride = kStride;
  qc.method->kind = MethodKind::Int8;
  const QualityReport r = measure_quality(model, text, qc).value();
  const int windows = 1 + (300 - kPer) / kStride;  // 15
  EXPECT_EQ(r.windows, windows);
  EXPECT_EQ(r.stride, kStride);
  const int covered = kPer + (windows - 1) * kStride;  // every text token up to here, once
  EXPECT_EQ(r.tokens, covered);
  EXPECT_EQ(r.token_nll_delta.size(), static_cast<std::size_t>(covered));
  double nll = 0;
  for (int w = 0; w < windows; ++w) {
    auto s = model.new_state();
    int prev = LlamaTokenizer::kBos;
    for (int i = 0; i < kPer; ++i) {
      const int next = text[static_cast<std::size_t>(w * kStride + i)];
      const auto logits = model.forward(s, {prev}).value();
      if (w == 0 || i >= kPer - kStride) {
        double m = *std::max_element(logits.begin(), logits.end()), sum = 0;
        for (float x : logits) sum += std::exp(x - m);
        nll -= logits[next] - m - std::log(sum);
      }
      prev = next;
    }
  }
  EXPECT_NEAR(r.perplexity_exact, std::exp(nll / covered), 1e-6 * r.perplexity_exact);
  // More context per scored token than windows side by side give: a lower exact perplexity.
  qc.stride = 0;
  const QualityReport side = measure_quality(model, text, qc).value();
  EXPECT_EQ(side.stride, kPer);
  EXPECT_EQ(side.windows, 300 / kPer);
  EXPECT_LT(r.perplexity_exact, side.perplexity_exact);
  // The stride is checked before any work and named.
  qc.stride = kWindow;
  const auto bad = plan_quality(model.config(), qc, 300);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("--stride 64"), std::string::npos) << bad.message();
  qc.stride = -1;
  EXPECT_FALSE(plan_quality(model.config(), qc, 300).ok());
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

  // Policy "full" with INT8 is INT8 alone (to rounding): the mask keeps everything. The loop with
  // a policy attends through another path of llama_attention.cpp than the plain loop (hooks,
  // masks), whose sums round differently in the last bits; where a later layer's key lands on an
  // INT8 rounding boundary that flips a code, so the two agree to 1e-5 rather than 1e-6 (2e-6 and
  // 1.7e-6 measured). Dropping a single position moves these by orders more (window50 above).
  qc.method = MethodConfig{};
  qc.method->kind = MethodKind::Int8;
  qc.eviction->policy = EvictionPolicy::Full;
  auto both = measure_quality(model, text, qc).value();
  qc.eviction.reset();
  auto int8 = measure_quality(model, text, qc).value();
  EXPECT_NEAR(both.perplexity, int8.perplexity, 1e-5 * int8.perplexity);
  EXPECT_NEAR(both.kl_mean, int8.kl_mean, 1e-5);

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
