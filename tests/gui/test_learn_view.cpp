// The Learn page, driven offscreen: the shell's Previous / Next visit every step; the growth,
// quantization and planner steps show numbers that equal the engine's and planners' own,
// computed here independently; every step's link carries its settings and the main window
// puts them in place in the full view.
#include <qcustomplot.h>

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QElapsedTimer>
#include <QLabel>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTabBar>
#include <QTableWidget>

#include <string>

#include <algorithm>
#include <cmath>

#include "common/chart_style.h"
#include "common/gui_format.h"
#include "common/playback_controls.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "gui_test_support.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"
#include "kvlab/planners/catalog.h"
#include "kvlab/planners/memory_formula.h"
#include "kvlab/planners/serving.h"
#include "kvlab/planners/solvers.h"
#include "learn/learn_eviction_page.h"
#include "learn/learn_growth_page.h"
#include "learn/learn_huffman_page.h"
#include "learn/learn_pays_page.h"
#include "learn/learn_planner_page.h"
#include "learn/learn_quant_page.h"
#include "learn/learn_view.h"
#include "planner/planner_step_chart.h"
#include "planner/planner_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using Grouping = LearnQuantPage::Grouping;

TEST(LearnView, NextAndPreviousVisitEveryStep) {
  LearnView view;
  view.resize(1200, 800);
  view.show();
  const int n = view.page_count();
  ASSERT_EQ(n, 6);  // the five steps, in its order, then "when does compression pay?"
  ASSERT_EQ(view.step_list()->count(), n);
  int i = 0;
  for (const char* name : {"learn-growth", "learn-quant", "learn-huffman", "learn-eviction",
                           "learn-planner", "learn-pays"}) {
    EXPECT_EQ(view.index_of(QString::fromLatin1(name)), i++) << name;
  }
  EXPECT_EQ(view.index_of(QStringLiteral("learn-growth")), 0);
  EXPECT_EQ(view.index_of(QStringLiteral("learn-pays")), n - 1);
  EXPECT_EQ(view.current_index(), 0);
  EXPECT_EQ(view.position_label()->text(), QStringLiteral("page 1 of %1").arg(n));
  EXPECT_FALSE(view.previous_button()->isEnabled());
  std::vector<LearnPage*> seen{view.current_page()};
  for (int i = 1; i < n; ++i) {
    view.next_button()->click();
    EXPECT_EQ(view.current_index(), i);
    EXPECT_EQ(view.position_label()->text(), QStringLiteral("page %1 of %2").arg(i + 1).arg(n));
    EXPECT_TRUE(view.current_page()->isVisible());
    EXPECT_EQ(view.step_list()->currentRow(), i);
    EXPECT_TRUE(view.step_list()->item(i)->text().contains(view.current_page()->title()));
    seen.push_back(view.current_page());
  }
  EXPECT_FALSE(view.next_button()->isEnabled());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());  // n different pages
  for (int i = n - 2; i >= 0; --i) {
    view.previous_button()->click();
    EXPECT_EQ(view.current_index(), i);
  }
  view.step_list()->setCurrentRow(n - 1);  // a click on the list jumps there
  EXPECT_EQ(view.current_index(), n - 1);

  // Every page's button reaches the shell's signal, with the page's own link.
  std::vector<LearnLink> links;
  QObject::connect(&view, &LearnView::open_full_view,
                   [&](const LearnLink& link) { links.push_back(link); });
  for (int i = 0; i < n; ++i) {
    view.show_index(i);
    view.page(i)->full_view_button()->click();
    ASSERT_EQ(links.size(), static_cast<std::size_t>(i + 1));
    EXPECT_EQ(links.back().target, view.page(i)->link().target);
    EXPECT_EQ(links.back().planner, view.page(i)->link().planner);
  }
}

// Every control on the shell and on the growth, quantization and planner steps says what it is:
// buttons, combo and spin boxes, the formula box, form captions, list items and column headers.
TEST(LearnView, EveryControlHasATooltip) {
  LearnView view;
  std::vector<QWidget*> roots{view.previous_button(), view.next_button(), view.step_list()};
  for (int i = 0; i < view.page_count(); ++i) roots.push_back(view.page(i));
  std::string missing;
  const auto check = [&](QWidget* w) {
    const bool control = qobject_cast<QAbstractButton*>(w) || qobject_cast<QComboBox*>(w) ||
                         qobject_cast<QAbstractSpinBox*>(w) || qobject_cast<QPlainTextEdit*>(w);
    auto* caption = qobject_cast<QLabel*>(w);
    if ((control || (caption && caption->buddy())) && w->toolTip().trimmed().isEmpty()) {
      missing += std::string(" ") + w->metaObject()->className();
    }
    if (auto* list = qobject_cast<QListWidget*>(w)) {
      for (int i = 0; i < list->count(); ++i) {
        if (list->item(i)->toolTip().isEmpty()) missing += " list item";
      }
    }
    if (auto* table = qobject_cast<QTableWidget*>(w)) {
      for (int c = 0; c < table->columnCount(); ++c) {
        if (table->horizontalHeaderItem(c)->toolTip().isEmpty()) missing += " column header";
      }
    }
  };
  std::size_t controls = 0;
  for (QWidget* root : roots) {
    check(root);
    for (QWidget* w : root->findChildren<QWidget*>()) {
      // Parts Qt builds inside a composite widget (a spin box's line edit, a table's corner
      // button) are not controls of their own.
      bool part = false;
      for (QWidget* p = w->parentWidget(); p && p != root; p = p->parentWidget()) {
        part |= qobject_cast<QAbstractSpinBox*>(p) || qobject_cast<QComboBox*>(p) ||
                qobject_cast<QAbstractItemView*>(p) || qobject_cast<QTabBar*>(p);
      }
      if (part) continue;
      controls += qobject_cast<QComboBox*>(w) || qobject_cast<QAbstractSpinBox*>(w) ? 1 : 0;
      check(w);
    }
  }
  EXPECT_TRUE(missing.empty()) << "without a tooltip:" << missing;
  EXPECT_GE(controls, 15u);
}

TEST(LearnGrowthPage, FormulaAndChartFollowTheDecodeSteps) {
  LearnGrowthPage page;
  page.show();
  page.set_model(QStringLiteral("llama-3-8b"));
  page.set_scheme(QStringLiteral("kivi2"));
  page.set_target(400);
  page.set_step_tokens(10);
  page.set_prompt(100);
  EXPECT_EQ(page.tokens(), 100);
  for (int i = 0; i < 3; ++i) page.step_button()->click();
  ASSERT_EQ(page.tokens(), 130);

  // fp16: 2 (K, V) × layers × kv_heads × head_dim × 2 bytes × tokens, from the catalogue's spec.
  const auto spec = planners::find_model("llama-3-8b");
  ASSERT_TRUE(spec.ok());
  const std::uint64_t fp16 = 2ull * spec->layers * spec->kv_heads * spec->head_dim * 2 * 130;
  EXPECT_EQ(fp16, 2ull * 32 * 8 * 128 * 2 * 130);
  EXPECT_EQ(page.fp16_bytes(), fp16);
  const QString shown = format_byte_count(static_cast<double>(fp16));
  EXPECT_TRUE(page.headline_label()->text().contains(shown))
      << page.headline_label()->text().toStdString();
  EXPECT_TRUE(page.headline_label()->text().contains(QStringLiteral("130 tokens")));
  const QString formula = page.formula_text()->toPlainText();
  EXPECT_TRUE(
      formula.contains(QStringLiteral("32 layers × 8 kv_heads × 128 head_dim × 130 tokens")))
      << formula.toStdString();
  EXPECT_TRUE(formula.contains(shown)) << formula.toStdString();

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
  EXPECT_TRUE(page.headline_label()->text().contains(
      format_byte_count(static_cast<double>(report->bytes.total()))));
  page.set_step_tokens(10);

  // Another model: the numbers follow (llama-2-7b has 32 KV heads).
  page.set_model(QStringLiteral("llama-2-7b"));
  EXPECT_EQ(page.fp16_bytes(), 2ull * 32 * 32 * 128 * 2 * page.tokens());
  page.set_model(QStringLiteral("llama-3-8b"));

  // Play runs to the target and stops there; Reset goes back to the prompt.
  page.play_button()->click();
  EXPECT_TRUE(page.is_playing());
  QElapsedTimer timer;
  timer.start();
  while (page.is_playing() && timer.elapsed() < 20'000) QApplication::processEvents();
  EXPECT_FALSE(page.is_playing());
  EXPECT_EQ(page.tokens(), 400);
  page.reset_button()->click();
  EXPECT_EQ(page.tokens(), 100);

  // The link: the Planner with this model and context, fp16 and the compressed scheme.
  page.step();
  const LearnLink link = page.link();
  EXPECT_EQ(link.target, LearnLink::Target::Planner);
  ASSERT_TRUE(link.planner.has_value());
  EXPECT_EQ(link.planner->at("model").at("id"), "llama-3-8b");
  EXPECT_EQ(link.planner->at("context").get<int>(), 110);
  PlannerView planner(nullptr);
  ASSERT_TRUE(planner.restore(*link.planner)) << planner.error_text().toStdString();
  EXPECT_EQ(planner.scenario().model.id, "llama-3-8b");
  EXPECT_EQ(planner.scenario().context, 110);
  ASSERT_EQ(planner.schemes().size(), 2u);
  EXPECT_EQ(planner.schemes()[1].id, "kivi2");
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

TEST(LearnQuantPage, TableEqualsTheEngineAndKeysFavourPerChannel) {
  LearnQuantPage page;
  page.show();
  ASSERT_TRUE(page.error_text().isEmpty()) << page.error_text().toStdString();
  auto cache = generate_synthetic(page.source());
  ASSERT_TRUE(cache.ok());
  const LayerKv& layer = cache->layers.front();
  for (int bits : {2, 4, 8}) {
    page.set_bits(bits);
    page.set_group_size(32);
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
        EXPECT_EQ(page.table()->item(g, column)->text(), format_metric(got));
      }
    }
    const auto k = [&](Grouping g) { return page.errors(TensorRole::Key, g); };
    const auto v = [&](Grouping g) { return page.errors(TensorRole::Value, g); };
    EXPECT_LT(k(Grouping::PerChannel).mse, k(Grouping::PerTensor).mse) << bits;
    EXPECT_LT(k(Grouping::PerChannel).mse, k(Grouping::PerToken).mse) << bits;
    EXPECT_LT(k(Grouping::PerChannel).attention_error, k(Grouping::PerToken).attention_error);
    EXPECT_LT(v(Grouping::PerToken).attention_error, v(Grouping::PerChannel).attention_error);
    EXPECT_TRUE(
        page.conclusion_label()->text().contains(QStringLiteral("keys do best per-channel")))
        << page.conclusion_label()->text().toStdString();
    EXPECT_TRUE(
        page.conclusion_label()->text().contains(QStringLiteral("values do best per-token")));
  }

  // The charts: the chosen token's key across its channels, and four lines (3 groupings + x).
  page.set_token(37);
  page.set_head(5);
  ASSERT_EQ(page.key_chart()->graphCount(), 4);
  const QCPGraph* original = page.key_chart()->graph(3);
  ASSERT_EQ(original->data()->size(), layer.key.dim());
  for (int c : {0, 64, 127}) {
    EXPECT_FLOAT_EQ(static_cast<float>(original->data()->at(c)->value), layer.key.at(37, 5, c));
  }
  EXPECT_FLOAT_EQ(static_cast<float>(page.value_chart()->graph(3)->data()->at(9)->value),
                  layer.value.at(37, 5, 9));

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

TEST(LearnPlannerPage, AnswerEqualsThePlannersFit) {
  LearnPlannerPage page;
  page.show();
  const struct {
    const char *model, *gpu, *scheme;
    int context, batch;
  } cases[] = {{"llama-3-8b", "h100-sxm", "fp16", 8192, 8},
               {"llama-3-8b", "h100-sxm", "fp16", 8192, 200},
               {"llama-3-70b", "h100-sxm", "fp16", 4096, 1},
               {"llama-2-7b", "rtx-4090", "kivi2", 4096, 16}};
  for (const auto& c : cases) {
    page.set_model(QString::fromLatin1(c.model));
    page.set_gpu(QString::fromLatin1(c.gpu));
    page.set_scheme(QString::fromLatin1(c.scheme));
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
    EXPECT_EQ(page.answer_label()->text().contains(QStringLiteral("Does not fit")), !want->fits);
    EXPECT_TRUE(page.max_batch_label()->text().contains(
        QStringLiteral("<b>%1</b>")
            .arg(QLocale().toString(static_cast<qlonglong>(want->max_batch)))))
        << page.max_batch_label()->text().toStdString();
    EXPECT_TRUE(page.max_context_label()->text().contains(
        QStringLiteral("<b>%1</b>")
            .arg(QLocale().toString(static_cast<qlonglong>(want->max_context)))));
    EXPECT_TRUE(page.detail_label()->text().contains(
        format_byte_count(static_cast<double>(want->kv_bytes_batch_per_gpu))));
    EXPECT_GE(page.memory_chart()->plottableCount(), 4);

    // The Planner view, given the link, computes the same answer.
    PlannerView planner(nullptr);
    ASSERT_TRUE(planner.restore(*page.link().planner)) << planner.error_text().toStdString();
    ASSERT_EQ(planner.model()->results().size(), 1u);
    EXPECT_EQ(planner.model()->results()[0].fits, want->fits);
    EXPECT_EQ(planner.model()->results()[0].max_batch, want->max_batch);
    EXPECT_EQ(planner.scenario().gpu.id, c.gpu);
  }
  // A context longer than the model allows is clamped to it by the control.
  page.set_model(QStringLiteral("llama-2-7b"));
  page.set_context(1 << 20);
  EXPECT_EQ(page.context_spin()->value(), 4096);
}

// "When does compression pay?": the verdict is advise() on the one cell, the bars are each
// scheme's decode step at the users it holds, and the sentence follows the numbers: one user
// waits on the weights (don't compress), 512 users do not fit in fp16 (compress).
TEST(LearnPaysPage, SentenceAndBarsFollowTheUsers) {
  LearnPaysPage page;
  page.resize(1000, 640);
  page.show();
  page.set_model("llama-3-8b");
  page.set_gpu("h100-sxm");
  page.set_scheme("kivi2");
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
  EXPECT_EQ(page.verdict_label()->text(), "Don't compress");
  const QString alone = page.sentence();
  EXPECT_TRUE(alone.contains("weights read")) << alone.toStdString();
  EXPECT_TRUE(alone.endsWith("don't compress.")) << alone.toStdString();
  // The bars: two schemes, six parts each; the step equals plan()'s TPOT at that batch.
  ASSERT_EQ(page.step_chart()->scheme_bars().size(), 2u);
  planners::Scenario s;
  s.model = planners::find_model("llama-3-8b").value();
  s.gpu = planners::find_gpu("h100-sxm").value();
  s.context = 8192;
  s.batch = 1;
  for (int k = 0; k < 2; ++k) {
    s.scheme = planners::parse_scheme(k == 0 ? "fp16" : "kivi2").value();
    const auto r = planners::plan(s).value();
    QCPBars* bars = page.step_chart()->scheme_bars()[static_cast<std::size_t>(k)];
    ASSERT_EQ(bars->data()->size(), 6);
    EXPECT_NEAR(bars->data()->at(5)->value, r.tpot_s * 1e3, 1e-9);
    EXPECT_NEAR(bars->data()->at(0)->value, r.latency.step.t_weights * 1e3, 1e-9);
    EXPECT_NEAR(bars->data()->at(2)->value, r.latency.step.t_kv * 1e3, 1e-9);
  }
  EXPECT_LT(page.steps()[1].kv_read, page.steps()[0].kv_read);  // kivi2 reads fewer bytes

  page.set_users(512);
  ASSERT_EQ(page.users(), 512);
  const auto many = advice_for(512);
  ASSERT_TRUE(page.cell().has_value());
  EXPECT_EQ(page.cell()->verdict, many.verdict);
  EXPECT_EQ(page.cell()->verdict, "compress: kivi2");
  EXPECT_EQ(page.verdict_label()->text(), "Compress with kivi2");
  const QString crowd = page.sentence();
  EXPECT_NE(crowd, alone);
  EXPECT_TRUE(crowd.contains(QLocale().toString(many.outcomes[0].served))) << crowd.toStdString();
  EXPECT_TRUE(crowd.endsWith("Compress.")) << crowd.toStdString();
  EXPECT_EQ(page.steps()[0].served, many.outcomes[0].served);
  EXPECT_EQ(page.steps()[1].served, many.outcomes[1].served);
  EXPECT_TRUE(page.compressed_rate_label()->text().contains(
      QLocale().toString(many.outcomes[1].tokens_per_s_per_gpu, 'f', 0)));
  // The link opens the Planner with both schemes and the users as the batch.
  const LearnLink link = page.link();
  ASSERT_TRUE(link.planner.has_value());
  PlannerView planner(nullptr);
  ASSERT_TRUE(planner.restore(*link.planner)) << planner.error_text().toStdString();
  EXPECT_EQ(planner.scenario().batch, 512);
  ASSERT_EQ(planner.schemes().size(), 2u);
  EXPECT_EQ(planner.schemes()[1].id, "kivi2");
}

TEST(LearnView, MainWindowAppliesTheLinks) {
  MainWindow window(gui_test::fresh_dir() / "runs.sqlite");
  window.show();
  LearnView* learn = window.learn_view();
  ASSERT_NE(learn, nullptr);
  window.show_page(Page::Learn);
  EXPECT_EQ(window.current_page(), Page::Learn);

  // Planner: the growth page's model and context in the Planner view.
  auto* growth =
      qobject_cast<LearnGrowthPage*>(learn->page(learn->index_of(QStringLiteral("learn-growth"))));
  ASSERT_NE(growth, nullptr);
  growth->set_model(QStringLiteral("mistral-7b"));
  growth->step();
  growth->full_view_button()->click();
  EXPECT_EQ(window.current_page(), Page::Planner);
  EXPECT_EQ(window.planner_view()->scenario().model.id, "mistral-7b");
  EXPECT_EQ(window.planner_view()->scenario().context, growth->tokens());

  // Compression: the quantization page's layer and KIVI settings, run there.
  auto* quant =
      qobject_cast<LearnQuantPage*>(learn->page(learn->index_of(QStringLiteral("learn-quant"))));
  ASSERT_NE(quant, nullptr);
  quant->set_bits(4);
  window.show_page(Page::Learn);
  quant->full_view_button()->click();
  EXPECT_EQ(window.current_page(), Page::Compression);
  const SourceSpec spec = window.compression_view()->source_panel()->spec();
  EXPECT_EQ(spec.synthetic.preset, "llama3-8b");
  EXPECT_EQ(spec.synthetic.context, quant->source().context);
  const MethodConfig method = window.compression_view()->method_panel()->config();
  EXPECT_EQ(method.kind, MethodKind::Kivi);
  EXPECT_EQ(method.bits, 4);
  EXPECT_EQ(method.residual, 0);
  ASSERT_TRUE(window.compression_view()->wait_until_done(120'000));
  ASSERT_TRUE(window.compression_view()->model()->report().has_value());
  EXPECT_EQ(window.compression_view()->model()->report()->method, "kivi");
  EXPECT_EQ(window.compression_view()->model()->report()->tokens, quant->source().context);

  // Planner again, from the planner page.
  auto* fit = qobject_cast<LearnPlannerPage*>(
      learn->page(learn->index_of(QStringLiteral("learn-planner"))));
  ASSERT_NE(fit, nullptr);
  fit->set_gpu(QStringLiteral("a100-40gb"));
  fit->set_batch(3);
  fit->full_view_button()->click();
  EXPECT_EQ(window.current_page(), Page::Planner);
  EXPECT_EQ(window.planner_view()->scenario().gpu.id, "a100-40gb");
  EXPECT_EQ(window.planner_view()->scenario().batch, 3);
  ASSERT_FALSE(window.planner_view()->model()->results().empty());
  EXPECT_EQ(window.planner_view()->model()->results()[0].fits, fit->result()->fits);
}

}  // namespace
}  // namespace kvlab::gui

namespace kvlab::gui {
namespace {

// The screenshots show every playing step at its end: run_to_end gets there without the timer.
TEST(LearnView, PlaybackRunsEachPlayingStepToItsEnd) {
  LearnView view;
  auto* growth =
      qobject_cast<LearnGrowthPage*>(view.page(view.index_of(QStringLiteral("learn-growth"))));
  auto* huffman =
      qobject_cast<LearnHuffmanPage*>(view.page(view.index_of(QStringLiteral("learn-huffman"))));
  auto* eviction =
      qobject_cast<LearnEvictionPage*>(view.page(view.index_of(QStringLiteral("learn-eviction"))));
  ASSERT_TRUE(growth && huffman && eviction);
  huffman->reset();
  eviction->reset();
  ASSERT_EQ(huffman->merge_step(), 0);
  ASSERT_EQ(eviction->current_step(), 0);
  for (LearnPage* page : {static_cast<LearnPage*>(growth), static_cast<LearnPage*>(huffman),
                          static_cast<LearnPage*>(eviction)}) {
    auto* playback = page->findChild<PlaybackControls*>();
    ASSERT_NE(playback, nullptr);
    playback->run_to_end();
    EXPECT_FALSE(playback->is_playing());
  }
  EXPECT_EQ(growth->tokens(), growth->target_spin()->value());
  EXPECT_GT(huffman->step_count(), 0);
  EXPECT_EQ(huffman->merge_step(), huffman->step_count());
  EXPECT_EQ(eviction->current_step(), eviction->step_count() - 1);
}

}  // namespace
}  // namespace kvlab::gui
