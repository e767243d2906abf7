// The Quality page's Generate tab on the real stories260K model (../shared/models, skipped when
// absent): fp16 and two checked caches continue the same prompt; the chart draws each cache's
// memory token by token, the texts stream in with fp16's first, the summary names the bytes,
// speeds and departure points; the bytes drawn are each format's byte formula, and fp16's tokens
// are those of `kvlab generate --method fp16` (the CLI's process, not this one). A missing model
// is an error on the tab, not a crash. Each finished cache is stored as a generate run.
#include <gtest/gtest.h>

#include <qcustomplot.h>

#include <filesystem>
#include <memory>
#include <tuple>

#include <QComboBox>
#include <QCoreApplication>
#include <QLabel>
#include <QStandardItemModel>
#include <QTabWidget>
#include <QTextBrowser>
#include <nlohmann/json.hpp>

#include "../cli/cli_test_support.h"
#include "gui_test_support.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/store/runs_store.h"
#include "quality/generate_model.h"
#include "quality/generate_panel.h"
#include "quality/quality_view.h"

namespace kvlab::gui {
namespace {

namespace fs = std::filesystem;

const std::string kModelDir = std::string(KVLAB_MODELS_DIR) + "/stories260K";
const std::string kModel = kModelDir + "/stories260K.bin";
constexpr int kTokens = 40;

#define REQUIRE_STORIES()                                               \
  if (!fs::exists(kModel) || !fs::exists(kModelDir + "/tok512.bin")) {  \
    GTEST_SKIP() << "the stories260K weights are not at " << kModelDir; \
  }

// A Quality view on stories260K saving its runs into a database of its own, and the ids saved.
struct SavingView {
  SavingView() {
    auto opened = RunsStore::open(gui_test::fresh_dir() / "runs.sqlite");
    if (!opened.ok()) return;
    store = std::make_shared<RunsStore>(std::move(opened).value());
    view = std::make_unique<QualityView>(store);
    view->set_model_path(QString::fromStdString(kModel));
    QObject::connect(view.get(), &QualityView::run_saved,
                     [this](qint64 id) { saved.push_back(id); });
  }
  SavingView(const SavingView&) = delete;  // the view's signal writes into this one
  SavingView& operator=(const SavingView&) = delete;
  std::shared_ptr<RunsStore> store;
  std::unique_ptr<QualityView> view;
  std::vector<qint64> saved;
};

TEST(GeneratePanel, CachesGenerateSideBySideWithFp16) {
  REQUIRE_STORIES();
  QualityView view(nullptr);
  view.resize(1200, 800);
  view.show();
  view.set_model_path(QString::fromStdString(kModel));
  view.chart_tabs()->setCurrentIndex(QualityView::kGenerateTab);
  GeneratePanel& panel = *view.generate_panel();
  panel.set_prompt(QStringLiteral("Once upon a time"));
  panel.set_tokens(kTokens);
  panel.set_checked({QStringLiteral("int8"), QStringLiteral("kivi-2")});
  ASSERT_TRUE(panel.generate());
  ASSERT_TRUE(panel.wait_until_done(120'000));
  const GenerateModel& model = *panel.model();
  ASSERT_TRUE(model.error().isEmpty()) << model.error().toStdString();
  const auto& series = model.series();
  ASSERT_EQ(series.size(), 3u);
  EXPECT_EQ(series[0].name, "fp16");
  EXPECT_EQ(series[1].name, "kivi-2");  // in the tab's order, not the order checked
  EXPECT_EQ(series[2].name, "int8");
  const int prompt = 5;  // BOS + "Once upon a time"
  for (const GenerateSeries& s : series) {
    ASSERT_EQ(s.ids.size(), static_cast<std::size_t>(kTokens)) << s.name.toStdString();
    EXPECT_TRUE(s.done);
    EXPECT_GT(s.decode_tps, 0.0);
    EXPECT_EQ(s.tokens.front(), prompt);  // the first token comes from the prompt's logits
    EXPECT_EQ(s.tokens.back(), prompt + kTokens - 1);
  }
  // The bytes drawn: stories260K holds 5 layers x 4 KV heads x 8 channels per token.
  constexpr double kMiB = 1024.0 * 1024.0;
  const double stored = prompt + kTokens - 1;
  EXPECT_DOUBLE_EQ(series[0].mib.back(), 2 * 5 * stored * 32 * 2 / kMiB);    // fp16 rows
  EXPECT_DOUBLE_EQ(series[2].mib.back(), 2 * 5 * (stored * 32 + 4) / kMiB);  // bytes + scale
  EXPECT_DOUBLE_EQ(series[0].fp16_mib, series[0].mib.back());
  // int8 agrees with fp16 for a while on this model; the departure is where the ids part.
  for (std::size_t i = 1; i < series.size(); ++i) {
    const GenerateSeries& s = series[i];
    ASSERT_GE(s.agree, 0);
    for (int t = 0; t < s.agree; ++t) EXPECT_EQ(s.ids[t], series[0].ids[t]);
    if (s.agree < kTokens) {
      EXPECT_NE(s.ids[s.agree], series[0].ids[s.agree]);
    }
  }
  // fp16's tokens are the CLI's.
  const cli_test::Output cli =
      cli_test::run_kvlab("generate --model " + kModel + " --tokenizer " + kModelDir +
                          "/tok512.bin --prompt 'Once upon a time' --method fp16 --json --tokens " +
                          std::to_string(kTokens));
  ASSERT_EQ(cli.code, 0) << cli.out;
  const auto j = nlohmann::json::parse(cli.out);
  EXPECT_EQ(j["generated_ids"].get<std::vector<int>>(), series[0].ids);

  // What the tab shows.
  auto* chart = gui_test::child<QCustomPlot>(&panel, "chart");
  ASSERT_EQ(chart->graphCount(), 3);
  EXPECT_EQ(chart->graph(0)->name(), "fp16");
  EXPECT_EQ(chart->graph(0)->data()->size(), kTokens);
  const QString summary = gui_test::child<QLabel>(&panel, "summary")->text();
  EXPECT_TRUE(summary.contains("int8: ")) << summary.toStdString();
  EXPECT_TRUE(summary.contains("x fp16's speed")) << summary.toStdString();
  const QString texts = gui_test::child<QTextBrowser>(&panel, "texts")->toPlainText();
  EXPECT_TRUE(texts.startsWith("fp16: ")) << texts.toStdString();
  EXPECT_TRUE(texts.contains("kivi-2")) << texts.toStdString();
}

// Each finished cache is stored as a generate run, as `kvlab generate --compare --save` stores
// one: fp16's on its own, each method's beside fp16's speeds, with its bytes, its text and where
// it departs from fp16; the summary names the runs.
TEST(GeneratePanel, FinishedCachesAreStoredAsGenerateRuns) {
  REQUIRE_STORIES();
  SavingView saving;
  ASSERT_TRUE(saving.store) << "the runs database did not open";
  GeneratePanel& panel = *saving.view->generate_panel();
  const auto& [store, saved] = std::tie(saving.store, saving.saved);
  panel.set_prompt(QStringLiteral("Once upon a time"));
  panel.set_tokens(12);
  panel.set_checked({QStringLiteral("int8")});
  ASSERT_TRUE(panel.generate());
  ASSERT_TRUE(panel.wait_until_done(120'000));
  QCoreApplication::processEvents();
  const GenerateModel& model = *panel.model();
  ASSERT_TRUE(model.error().isEmpty()) << model.error().toStdString();
  const auto& series = model.series();
  ASSERT_EQ(series.size(), 2u);
  ASSERT_EQ(saved.size(), 2u);
  EXPECT_EQ(series[0].run_id, saved[0]);
  EXPECT_EQ(series[1].run_id, saved[1]);

  auto fp16 = store->load_run(saved[0]);
  ASSERT_TRUE(fp16.ok()) << fp16.message();
  EXPECT_EQ(fp16->kind, "generate");
  EXPECT_EQ(fp16->method, "fp16");
  EXPECT_FALSE(fp16->metrics.contains("fp16_decode_tokens_per_second"));
  auto int8 = store->load_run(saved[1]);
  ASSERT_TRUE(int8.ok()) << int8.message();
  EXPECT_EQ(int8->kind, "generate");
  EXPECT_EQ(int8->params.value("method", std::string()), "int8");
  const nlohmann::json& m = int8->metrics;
  constexpr double kMiB = 1024.0 * 1024.0;
  EXPECT_DOUBLE_EQ(m["cache_bytes"].get<double>() / kMiB, series[1].mib.back());
  EXPECT_DOUBLE_EQ(m["decode_tokens_per_second"].get<double>(), series[1].decode_tps);
  EXPECT_DOUBLE_EQ(m["fp16_decode_tokens_per_second"].get<double>(), series[0].decode_tps);
  EXPECT_DOUBLE_EQ(m["decode_speed_vs_fp16"].get<double>(),
                   series[1].decode_tps / series[0].decode_tps);
  EXPECT_EQ(m["greedy_tokens_agreeing"].get<int>(), series[1].agree);
  EXPECT_EQ(m["generated"].get<std::string>(), series[1].pieces.join(QString()).toStdString());
  EXPECT_EQ(m["tokens"].get<int>(), 5 + 12 - 1);  // the prompt and every token but the last
  EXPECT_FALSE(m.contains("peak_resident_bytes")) << "the app shares its process: no peak";
  const QString summary = gui_test::child<QLabel>(&panel, "summary")->text();
  EXPECT_TRUE(summary.contains(QStringLiteral("run #%1").arg(saved[1]))) << summary.toStdString();
}

// The prompt in micro-batches (the tab's "Batch", kvlab generate --batch): fp16's tokens
// are the CLI's with the same batch, and the stored runs say how the prompt ran.
TEST(GeneratePanel, APromptInBatchesRunsAsTheCliRunsIt) {
  REQUIRE_STORIES();
  SavingView saving;
  ASSERT_TRUE(saving.store) << "the runs database did not open";
  GeneratePanel& panel = *saving.view->generate_panel();
  const auto& [store, saved] = std::tie(saving.store, saving.saved);
  const std::string prompt = "Once upon a time, there was a little girl named Lily.";
  panel.set_prompt(QString::fromStdString(prompt));
  panel.set_tokens(20);
  panel.set_batch(4);
  panel.set_checked({QStringLiteral("kivi-2")});
  ASSERT_TRUE(panel.generate());
  ASSERT_TRUE(panel.wait_until_done(120'000));
  QCoreApplication::processEvents();
  const GenerateModel& model = *panel.model();
  ASSERT_TRUE(model.error().isEmpty()) << model.error().toStdString();
  ASSERT_EQ(model.series().size(), 2u);
  const cli_test::Output cli = cli_test::run_kvlab("generate --model " + kModel + " --tokenizer " +
                                                   kModelDir + "/tok512.bin --prompt '" + prompt +
                                                   "' --method fp16 --batch 4 --json --tokens 20");
  ASSERT_EQ(cli.code, 0) << cli.out;
  const auto j = nlohmann::json::parse(cli.out);
  EXPECT_EQ(j["prefill_batch"].get<int>(), 4);
  EXPECT_EQ(j["generated_ids"].get<std::vector<int>>(), model.series()[0].ids);
  ASSERT_EQ(saved.size(), 2u);
  for (const qint64 id : saved) {
    auto run = store->load_run(id);
    ASSERT_TRUE(run.ok()) << run.message();
    EXPECT_EQ(run->params.value("prefill_batch", -1), 4) << run->params.dump();
  }
}

// "Attend on" (kvlab generate --backend): the CPU unless chosen, the GPU choice enabled only
// where a GPU is usable. stories260K's heads of 8 channels are no shape the GPU's decode kernel
// serves, so the GPU choice ("auto") attends on the CPU here on any machine, with the same tokens.
TEST(GeneratePanel, AttendOnOffersTheGpuOnlyWhereOneIsUsable) {
  REQUIRE_STORIES();
  QualityView view(nullptr);
  view.set_model_path(QString::fromStdString(kModel));
  GeneratePanel& panel = *view.generate_panel();
  auto* backend = gui_test::child<QComboBox>(&panel, "backend");
  ASSERT_EQ(backend->count(), 2);
  EXPECT_EQ(backend->currentData().toString(), "cpu");
  const QStandardItem* gpu = qobject_cast<QStandardItemModel*>(backend->model())->item(1);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(backend->itemData(1).toString(), "auto");
  EXPECT_EQ(gpu->isEnabled(), make_backend("cuda").ok());
  EXPECT_TRUE(backend->toolTip().contains("GPU")) << backend->toolTip().toStdString();
  panel.set_prompt(QStringLiteral("Once upon a time"));
  panel.set_tokens(12);
  panel.set_checked({QStringLiteral("int8")});
  std::vector<std::vector<int>> ids;
  for (const int choice : {0, 1}) {
    backend->setCurrentIndex(choice);
    ASSERT_TRUE(panel.generate());
    ASSERT_TRUE(panel.wait_until_done(120'000));
    QCoreApplication::processEvents();
    const GenerateModel& model = *panel.model();
    ASSERT_TRUE(model.error().isEmpty()) << model.error().toStdString();
    ASSERT_EQ(model.series().size(), 2u);
    for (const GenerateSeries& s : model.series()) {
      ASSERT_TRUE(s.measured);
      EXPECT_EQ(s.measured->decode_attention, "cpu") << s.name.toStdString();
      ids.push_back(s.ids);
    }
  }
  EXPECT_EQ(ids[0], ids[2]);  // fp16's, both choices
  EXPECT_EQ(ids[1], ids[3]);  // int8's
}

TEST(GeneratePanel, AMissingModelIsAnErrorOnTheTab) {
  QualityView view(nullptr);
  view.set_model_path(QStringLiteral("/nonexistent/model.gguf"));
  GeneratePanel& panel = *view.generate_panel();
  panel.set_tokens(4);
  ASSERT_TRUE(panel.generate());
  ASSERT_TRUE(panel.wait_until_done(60'000));
  EXPECT_FALSE(panel.model()->error().isEmpty());
  auto* error = gui_test::child<QLabel>(&panel, "error");
  EXPECT_FALSE(error->isHidden());
  EXPECT_TRUE(error->text().contains("nonexistent")) << error->text().toStdString();

  view.set_model_path(QString());
  EXPECT_FALSE(panel.generate());
  EXPECT_TRUE(error->text().contains("Choose a model")) << error->text().toStdString();
}

}  // namespace
}  // namespace kvlab::gui
