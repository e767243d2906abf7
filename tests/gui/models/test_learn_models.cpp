// The models of Learn steps (a), (b), (e) and (f) alone, with no widget: the cache growing, the
// quantization groupings, "what fits on my GPU?" and "when does compression pay?" give numbers
// equal to the engine's and the planners' own, computed here independently, and links that
// carry their settings.
#include <gtest/gtest.h>

#include <QLocale>

#include <algorithm>
#include <cmath>

#include "common/gui_format.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"
#include "kvlab/planners/catalog.h"
#include "kvlab/planners/serving.h"
#include "kvlab/planners/solvers.h"
#include "learn/learn_fit_model.h"
#include "learn/learn_growth_model.h"
#include "learn/learn_pays_model.h"
#include "learn/learn_quant_model.h"

namespace kvlab::gui {
namespace {

using Grouping = LearnQuantModel::Grouping;

TEST(LearnGrowthModel, FormulaAndBytesFollowTheDecodeSteps) {
  LearnGrowthModel page;
  ASSERT_TRUE(page.set_model("llama-3-8b"));
  ASSERT_TRUE(page.set_scheme("kivi2"));
  EXPECT_FALSE(page.set_scheme("no-such-scheme"));
  page.set_target(400);
  page.set_step_tokens(10);
  page.set_prompt(100);
  EXPECT_EQ(page.tokens(), 100);
  for (int i = 0; i < 3; ++i) page.step();
  ASSERT_EQ(page.tokens(), 130);

  // fp16: 2 (K, V) × layers × kv_heads × head_dim × 2 bytes × tokens, from the catalogue's spec.
  const auto spec = planners::find_model("llama-3-8b");
  ASSERT_TRUE(spec.ok());
  const std::uint64_t fp16 = 2ull * spec->layers * spec->kv_heads * spec->head_dim * 2 * 130;
  EXPECT_EQ(fp16, 2ull * 32 * 8 * 128 * 2 * 130);
  EXPECT_EQ(page.fp16_bytes(), fp16);
  const QString shown = format_byte_count(static_cast<double>(fp16));
  EXPECT_TRUE(page.headline().contains(shown)) << page.headline().toStdString();
  EXPECT_TRUE(page.headline().contains(QStringLiteral("130 tokens")));
  const QString formula = page.formula();
  EXPECT_TRUE(
      formula.contains(QStringLiteral("32 layers × 8 kv_heads × 128 head_dim × 130 tokens")))
      << formula.toStdString();
  EXPECT_TRUE(formula.contains(shown)) << formula.toStdString();
  // The chart's lines: solid up to the tokens now (ending there), dashed to the target.
  const auto lines = page.lines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].done_tokens.back(), 130);
  EXPECT_EQ(lines[0].done_bytes.back(), static_cast<double>(fp16));
  EXPECT_EQ(lines[0].ahead_tokens.back(), 400);
  EXPECT_EQ(lines[0].ahead_bytes.back(), 2.0 * 32 * 8 * 128 * 2 * 400);
  EXPECT_EQ(lines[1].scheme->id, "kivi2");

  // KIVI-2 at 300 tokens (160 quantized in groups of 32, the newest 140 in fp16): what the
  // engine's KIVI quantizer keeps for a cache of this shape and length.
  page.set_step_tokens(170);
  page.step();
  ASSERT_EQ(page.tokens(), 300);
  SyntheticConfig source;
  source.preset = "llama3-8b";
  source.context = 300;
  source.queries = 0;
  auto cache = generate_synthetic(source);
  ASSERT_TRUE(cache.ok()) << cache.message();
  MethodConfig kivi;  // KIVI 2-bit, G = 32, R = 128: the planner's kivi2
  auto report = compress_cache(*cache, kivi);
  ASSERT_TRUE(report.ok()) << report.message();
  EXPECT_EQ(page.compressed_bytes(), report->bytes.total());
  EXPECT_LT(page.compressed_bytes(), page.fp16_bytes());
  EXPECT_TRUE(
      page.headline().contains(format_byte_count(static_cast<double>(report->bytes.total()))));
  page.set_step_tokens(10);

  // Another model: the numbers follow (llama-2-7b has 32 KV heads).
  ASSERT_TRUE(page.set_model("llama-2-7b"));
  EXPECT_EQ(page.fp16_bytes(), 2ull * 32 * 32 * 128 * 2 * page.tokens());
  ASSERT_TRUE(page.set_model("llama-3-8b"));

  // Decoding stops at the target; reset goes back to the prompt; a prompt past the target says so.
  while (!page.at_end()) page.step();
  EXPECT_EQ(page.tokens(), 400);
  page.step();
  EXPECT_EQ(page.tokens(), 400);
  page.reset();
  EXPECT_EQ(page.tokens(), 100);
  EXPECT_TRUE(page.error_text().isEmpty());
  page.set_prompt(500);
  EXPECT_TRUE(page.error_text().contains(QStringLiteral("longer than")))
      << page.error_text().toStdString();
  page.set_prompt(100);
  // A target past the model's context is clamped to it.
  page.set_target(1 << 22);
  EXPECT_EQ(page.target(), spec->max_context);
  page.set_target(400);

  // The link: the Planner with this model and context, fp16 and the compressed scheme.
  page.step();
  const LearnLink link = page.link();
  EXPECT_EQ(link.target, LearnLink::Target::Planner);
  ASSERT_TRUE(link.planner.has_value());
  EXPECT_EQ(link.planner->at("model").at("id"), "llama-3-8b");
  EXPECT_EQ(link.planner->at("context").get<int>(), 110);
  EXPECT_EQ(link.planner->at("schemes"), nlohmann::json::array({"fp16", "kivi2"}));
}

// Min/max affine round trip over all of `x`, written here from the definition.
std::vector<float> per_tensor(const std::vector<float>& x, int bits) {
  float lo = x[0], hi = x[0];
  for (float v : x) lo = std::min(lo, v), hi = std::max(hi, v);
  const float levels = static_cast<float>((1 << bits) - 1), step = (hi - lo) / levels;
  std::vector<float> out;
  for (float v : x) out.push_back(lo + std::min(levels, std::round((v - lo) / step)) * step);
  return out;
}

double mse(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return s / static_cast<double>(a.size());
}

TEST(LearnQuantModel, TableEqualsTheEngineAndKeysFavourPerChannel) {
  LearnQuantModel page;
  ASSERT_TRUE(page.error_text().isEmpty()) << page.error_text().toStdString();
  auto cache = generate_synthetic(page.source());
  ASSERT_TRUE(cache.ok());
  const LayerKv& layer = cache->layers.front();
  EXPECT_FALSE(page.set_bits(3));
  EXPECT_FALSE(page.set_group_size(48));
  for (int bits : {2, 4, 8}) {
    ASSERT_TRUE(page.set_bits(bits));
    ASSERT_TRUE(page.set_group_size(32));
    MethodConfig m;
    m.group_size = 32;
    m.residual = 0;
    if (bits == 8) {
      m.kind = MethodKind::Tiered;
      m.int8_tokens = layer.key.tokens();
    } else {
      m.bits = bits;
    }
    auto q = make_quantizer(m);
    ASSERT_TRUE(q.ok());
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const Tensor& t = role == TensorRole::Key ? layer.key : layer.value;
      const std::vector<float> x = t.view().to_float();
      ASSERT_EQ(page.original(role), x);
      std::vector<float> per_channel(x.size()), per_token(x.size());
      (*q)->dequantize(*(*q)->quantize(t.view(), TensorRole::Key), per_channel);
      (*q)->dequantize(*(*q)->quantize(t.view(), TensorRole::Value), per_token);
      const double want[] = {mse(x, per_tensor(x, bits)), mse(x, per_channel), mse(x, per_token)};
      for (int g = 0; g < 3; ++g) {
        const double got = page.errors(role, static_cast<Grouping>(g)).mse;
        EXPECT_NEAR(got, want[g], 1e-9 * std::max(1.0, want[g])) << bits << " bits, grouping " << g;
        const int column = role == TensorRole::Key ? 0 : 3;
        EXPECT_EQ(page.value(static_cast<Grouping>(g), column), got);
      }
    }
    const auto k = [&](Grouping g) { return page.errors(TensorRole::Key, g); };
    const auto v = [&](Grouping g) { return page.errors(TensorRole::Value, g); };
    EXPECT_LT(k(Grouping::PerChannel).mse, k(Grouping::PerTensor).mse) << bits;
    EXPECT_LT(k(Grouping::PerChannel).mse, k(Grouping::PerToken).mse) << bits;
    EXPECT_LT(k(Grouping::PerChannel).attention_error, k(Grouping::PerToken).attention_error);
    EXPECT_LT(v(Grouping::PerToken).attention_error, v(Grouping::PerChannel).attention_error);
    EXPECT_EQ(page.best_in_column(0), Grouping::PerChannel) << bits;
    EXPECT_TRUE(page.conclusion().contains(QStringLiteral("keys do best per-channel")))
        << page.conclusion().toStdString();
    EXPECT_TRUE(page.conclusion().contains(QStringLiteral("values do best per-token")));
  }

  // The charts' vectors: the chosen token's key across its channels, all or a quarter.
  const auto all = page.vector(TensorRole::Key, 37, 5, -1);
  ASSERT_EQ(static_cast<int>(all.original.size()), layer.key.dim());
  for (int c : {0, 64, 127}) EXPECT_FLOAT_EQ(all.original[c], layer.key.at(37, 5, c));
  const auto quarter = page.vector(TensorRole::Value, 37, 5, 3);
  EXPECT_EQ(quarter.first, 96);
  EXPECT_EQ(quarter.last, 128);
  EXPECT_FLOAT_EQ(quarter.original[9], layer.value.at(37, 5, 96 + 9));
  EXPECT_EQ(quarter.reconstructed[1].size(), quarter.original.size());

  // The link: KIVI (or the INT8 tier at 8 bits) on the same synthetic layer.
  page.set_bits(4);
  page.set_group_size(64);
  LearnLink link = page.link();
  EXPECT_EQ(link.target, LearnLink::Target::Compression);
  ASSERT_TRUE(link.source && link.method);
  EXPECT_EQ(link.source->preset, "llama3-8b");
  EXPECT_EQ(link.source->layers, 1);
  EXPECT_EQ(link.source->context, layer.key.tokens());
  EXPECT_EQ(link.method->kind, MethodKind::Kivi);
  EXPECT_EQ(link.method->bits, 4);
  EXPECT_EQ(link.method->group_size, 64);
  page.set_bits(8);
  EXPECT_EQ(page.link().method->kind, MethodKind::Tiered);
}

TEST(LearnFitModel, AnswerEqualsThePlannersFit) {
  LearnFitModel page;
  const struct {
    const char *model, *gpu, *scheme;
    int context, batch;
  } cases[] = {{"llama-3-8b", "h100-sxm", "fp16", 8192, 8},
               {"llama-3-8b", "h100-sxm", "fp16", 8192, 200},
               {"llama-3-70b", "h100-sxm", "fp16", 4096, 1},
               {"llama-2-7b", "rtx-4090", "kivi2", 4096, 16}};
  for (const auto& c : cases) {
    ASSERT_TRUE(page.set_model(c.model));
    ASSERT_TRUE(page.set_gpu(c.gpu));
    ASSERT_TRUE(page.set_scheme(c.scheme));
    page.set_context(c.context);
    page.set_batch(c.batch);
    planners::Scenario s;
    s.model = *planners::find_model(c.model);
    s.gpu = *planners::find_gpu(c.gpu);
    s.scheme = *planners::parse_scheme(c.scheme);
    s.context = c.context;
    s.batch = c.batch;
    const auto want = planners::plan(s);
    ASSERT_TRUE(want.ok()) << want.message();
    ASSERT_TRUE(page.result().has_value()) << page.error_text().toStdString();
    EXPECT_EQ(page.result()->fits, want->fits) << c.model << " " << c.batch;
    EXPECT_EQ(page.answer().contains(QStringLiteral("Does not fit")), !want->fits);
    EXPECT_TRUE(page.max_batch_text().contains(
        QStringLiteral("<b>%1</b>")
            .arg(QLocale().toString(static_cast<qlonglong>(want->max_batch)))))
        << page.max_batch_text().toStdString();
    EXPECT_TRUE(page.max_context_text().contains(
        QStringLiteral("<b>%1</b>")
            .arg(QLocale().toString(static_cast<qlonglong>(want->max_context)))));
    EXPECT_TRUE(page.detail().contains(
        format_byte_count(static_cast<double>(want->kv_bytes_batch_per_gpu))));
    const auto parts = page.memory_parts();
    ASSERT_EQ(parts.size(), 4u);
    EXPECT_EQ(parts[2].bytes, static_cast<double>(want->kv_bytes_batch_per_gpu));
    EXPECT_EQ(parts[2].kind,
              want->fits ? LearnFitModel::Part::Kind::Kv : LearnFitModel::Part::Kind::KvOver);
    // The schemes table: every storage at the same scenario, the current one marked.
    const auto rows = page.scheme_rows();
    ASSERT_EQ(rows.size(), LearnFitModel::scheme_ids().size());
    for (std::size_t r = 0; r < rows.size(); ++r) {
      planners::Scenario other = s;
      other.scheme = *planners::parse_scheme(LearnFitModel::scheme_ids()[r]);
      const auto plan = planners::plan(other);
      ASSERT_TRUE(plan.ok());
      EXPECT_EQ(rows[r].fits, plan->fits);
      EXPECT_EQ(rows[r].current, LearnFitModel::scheme_ids()[r] == c.scheme);
      EXPECT_EQ(rows[r].cells[3], QLocale().toString(static_cast<qlonglong>(plan->max_batch)));
    }
    // The link carries the scenario.
    const LearnLink link = page.link();
    ASSERT_TRUE(link.planner.has_value());
    EXPECT_EQ(link.planner->at("gpu").at("id"), c.gpu);
    EXPECT_EQ(link.planner->at("batch").get<int>(), c.batch);
    EXPECT_EQ(link.planner->at("schemes"), nlohmann::json::array({c.scheme}));
  }
  // A context longer than the model allows is clamped to it; unknown ids are refused.
  ASSERT_TRUE(page.set_model("llama-2-7b"));
  page.set_context(1 << 20);
  EXPECT_EQ(page.scenario().context, 4096);
  EXPECT_FALSE(page.set_model("no-such-model"));
  EXPECT_FALSE(page.set_gpu("no-such-gpu"));
  EXPECT_EQ(page.scenario().model.id, "llama-2-7b");
}

// "When does compression pay?": the verdict is advise() on the one cell, the steps are each
// scheme's decode step at the users it holds, and the sentence follows the numbers: one user
// waits on the weights (don't compress), 512 users do not fit in fp16 (compress).
TEST(LearnPaysModel, SentenceAndStepsFollowTheUsers) {
  LearnPaysModel page;
  // The defaults the page opens on, with their advice already computed.
  EXPECT_EQ(page.scenario().model.id, "llama-3-8b");
  EXPECT_EQ(page.scenario().gpu.id, "h100-sxm");
  EXPECT_EQ(page.compressed_scheme().id, "kivi2");
  EXPECT_EQ(page.context(), 8192);
  EXPECT_EQ(page.users(), 32);
  EXPECT_TRUE(page.cell().has_value()) << page.error_text().toStdString();
  ASSERT_TRUE(page.set_model("llama-3-8b"));
  ASSERT_TRUE(page.set_gpu("h100-sxm"));
  ASSERT_TRUE(page.set_scheme("kivi2"));
  page.set_context(8192);
  const auto advice_for = [](int users) {
    planners::AdviceSpec spec;
    spec.base.model = planners::find_model("llama-3-8b").value();
    spec.base.gpu = planners::find_gpu("h100-sxm").value();
    spec.schemes = {planners::parse_scheme("fp16").value(),
                    planners::parse_scheme("kivi2").value()};
    spec.contexts = {8192};
    spec.concurrencies = {users};
    return planners::advise(spec).value().cells.front();
  };
  page.set_users(1);
  ASSERT_EQ(page.users(), 1);
  ASSERT_EQ(page.context(), 8192);
  ASSERT_TRUE(page.cell().has_value()) << page.error_text().toStdString();
  const auto one = advice_for(1);
  EXPECT_EQ(page.cell()->recommended, one.recommended);
  EXPECT_EQ(page.cell()->verdict, "don't compress");
  EXPECT_EQ(page.verdict(), "Don't compress");
  const QString alone = page.sentence();
  EXPECT_TRUE(alone.contains("weights read")) << alone.toStdString();
  EXPECT_TRUE(alone.endsWith("don't compress.")) << alone.toStdString();
  // The steps: two schemes; each step equals plan()'s TPOT at that batch.
  ASSERT_EQ(page.steps().size(), 2u);
  planners::Scenario s;
  s.model = planners::find_model("llama-3-8b").value();
  s.gpu = planners::find_gpu("h100-sxm").value();
  s.context = 8192;
  s.batch = 1;
  for (int k = 0; k < 2; ++k) {
    s.scheme = planners::parse_scheme(k == 0 ? "fp16" : "kivi2").value();
    const auto r = planners::plan(s).value();
    const StepParts& step = page.steps()[static_cast<std::size_t>(k)];
    EXPECT_NEAR(step.step, r.tpot_s, 1e-12);
    EXPECT_NEAR(step.weights_read, r.latency.step.t_weights, 1e-12);
    EXPECT_NEAR(step.kv_read, r.latency.step.t_kv, 1e-12);
  }
  EXPECT_LT(page.steps()[1].kv_read, page.steps()[0].kv_read);  // kivi2 reads fewer bytes

  page.set_users(512);
  ASSERT_EQ(page.users(), 512);
  const auto many = advice_for(512);
  ASSERT_TRUE(page.cell().has_value());
  EXPECT_EQ(page.cell()->verdict, many.verdict);
  EXPECT_EQ(page.cell()->verdict, "compress: kivi2");
  EXPECT_EQ(page.verdict(), "Compress with kivi2");
  const QString crowd = page.sentence();
  EXPECT_NE(crowd, alone);
  EXPECT_TRUE(crowd.contains(QLocale().toString(many.outcomes[0].served))) << crowd.toStdString();
  EXPECT_TRUE(crowd.endsWith("Compress.")) << crowd.toStdString();
  EXPECT_EQ(page.steps()[0].served, many.outcomes[0].served);
  EXPECT_EQ(page.steps()[1].served, many.outcomes[1].served);
  EXPECT_TRUE(page.rate_text(1).contains(
      QLocale().toString(many.outcomes[1].tokens_per_s_per_gpu, 'f', 0)));
  // Users and contexts go to the nearest power of two the sliders offer.
  page.set_users(700);
  EXPECT_EQ(page.users(), 512);
  page.set_context(10000);
  EXPECT_EQ(page.context(), 8192);
  page.set_users(512);
  // The link opens the Planner with both schemes and the users as the batch.
  const LearnLink link = page.link();
  ASSERT_TRUE(link.planner.has_value());
  EXPECT_EQ(link.planner->at("batch").get<int>(), 512);
  EXPECT_EQ(link.planner->at("schemes"), nlohmann::json::array({"fp16", "kivi2"}));
}

}  // namespace
}  // namespace kvlab::gui
