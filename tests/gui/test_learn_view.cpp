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
#include "plot_test_support.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

TEST(LearnView, NextAndPreviousVisitEveryStep) {
  LearnView view;
  view.resize(1200, 800);
  view.show();
  const int n = view.page_count();
  auto* steps = view.findChild<QListWidget*>(QStringLiteral("steps"));
  auto* previous = view.findChild<QPushButton*>(QStringLiteral("previous"));
  auto* next = view.findChild<QPushButton*>(QStringLiteral("next"));
  auto* position = view.findChild<QLabel*>(QStringLiteral("position"));
  ASSERT_TRUE(steps && previous && next && position);
  ASSERT_EQ(n, 6);  // the five steps, in its order, then "when does compression pay?"
  ASSERT_EQ(steps->count(), n);
  int i = 0;
  for (const char* name : {"learn-growth", "learn-quant", "learn-huffman", "learn-eviction",
                           "learn-planner", "learn-pays"}) {
    EXPECT_EQ(view.index_of(QString::fromLatin1(name)), i++) << name;
  }
  EXPECT_EQ(view.index_of(QStringLiteral("learn-growth")), 0);
  EXPECT_EQ(view.index_of(QStringLiteral("learn-pays")), n - 1);
  EXPECT_EQ(view.current_index(), 0);
  EXPECT_EQ(position->text(), QStringLiteral("page 1 of %1").arg(n));
  EXPECT_FALSE(previous->isEnabled());
  std::vector<LearnPage*> seen{view.current_page()};
  for (int i = 1; i < n; ++i) {
    next->click();
    EXPECT_EQ(view.current_index(), i);
    EXPECT_EQ(position->text(), QStringLiteral("page %1 of %2").arg(i + 1).arg(n));
    EXPECT_TRUE(view.current_page()->isVisible());
    EXPECT_EQ(steps->currentRow(), i);
    EXPECT_TRUE(steps->item(i)->text().contains(view.current_page()->title()));
    seen.push_back(view.current_page());
  }
  EXPECT_FALSE(next->isEnabled());
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());  // n different pages
  for (int i = n - 2; i >= 0; --i) {
    previous->click();
    EXPECT_EQ(view.current_index(), i);
  }
  steps->setCurrentRow(n - 1);  // a click on the list jumps there
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
  std::vector<QWidget*> roots{view.findChild<QPushButton*>(QStringLiteral("previous")),
                              view.findChild<QPushButton*>(QStringLiteral("next")),
                              view.findChild<QListWidget*>(QStringLiteral("steps"))};
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

// Each step's link, given to a Planner view, puts the step's scenario in place there (the
// models' own numbers are tested alone in tests/gui/models/test_learn_models.cpp).
TEST(LearnView, PlannerLinksRestoreInThePlannerView) {
  LearnGrowthPage growth;
  growth.set_model(QStringLiteral("llama-3-8b"));
  growth.set_scheme(QStringLiteral("kivi2"));
  growth.set_prompt(100);
  growth.step();
  {
    PlannerView planner(nullptr);
    ASSERT_TRUE(planner.restore(*growth.link().planner)) << planner.error_text().toStdString();
    EXPECT_EQ(planner.scenario().model.id, "llama-3-8b");
    EXPECT_EQ(planner.scenario().context, growth.model().tokens());
    ASSERT_EQ(planner.schemes().size(), 2u);
    EXPECT_EQ(planner.schemes()[1].id, "kivi2");
  }
  LearnPlannerPage fit;
  fit.set_model(QStringLiteral("llama-2-7b"));
  fit.set_gpu(QStringLiteral("rtx-4090"));
  fit.set_scheme(QStringLiteral("kivi2"));
  fit.set_context(4096);
  fit.set_batch(16);
  ASSERT_TRUE(fit.model().result().has_value());
  {
    PlannerView planner(nullptr);
    ASSERT_TRUE(planner.restore(*fit.link().planner)) << planner.error_text().toStdString();
    ASSERT_EQ(planner.model()->results().size(), 1u);
    EXPECT_EQ(planner.model()->results()[0].fits, fit.model().result()->fits);
    EXPECT_EQ(planner.model()->results()[0].max_batch, fit.model().result()->max_batch);
    EXPECT_EQ(planner.scenario().gpu.id, "rtx-4090");
  }
  // A context longer than the model allows is clamped to it by the control.
  fit.set_context(1 << 20);
  EXPECT_EQ(fit.model().scenario().context, 4096);
  LearnPaysPage pays;
  pays.set_scheme(QStringLiteral("kivi2"));
  pays.set_users(512);
  {
    PlannerView planner(nullptr);
    ASSERT_TRUE(planner.restore(*pays.link().planner)) << planner.error_text().toStdString();
    EXPECT_EQ(planner.scenario().batch, 512);
    ASSERT_EQ(planner.schemes().size(), 2u);
    EXPECT_EQ(planner.schemes()[1].id, "kivi2");
  }
}

// The pages draw what their models computed: the quantization step's charts and table, the
// fit step's memory bar, the pays step's bars (one group of six parts per scheme).
TEST(LearnView, PagesDrawTheirModels) {
  LearnQuantPage quant;
  quant.show();
  quant.set_bits(4);
  quant.set_token(37);
  quant.set_head(5);
  const auto plots = quant.findChildren<QCustomPlot*>();
  ASSERT_EQ(plots.size(), 2);
  const auto want = quant.model().vector(TensorRole::Key, 37, 5, -1);
  const auto key = std::find_if(plots.begin(), plots.end(), [](const QCustomPlot* p) {
    return p->yAxis->label() == QStringLiteral("key");
  });
  ASSERT_NE(key, plots.end());
  const QCustomPlot* key_chart = *key;
  ASSERT_EQ(key_chart->graphCount(), 4);
  const QCPGraph* original = key_chart->graph(3);
  ASSERT_EQ(original->data()->size(), static_cast<int>(want.original.size()));
  for (int c : {0, 64, 127}) {
    EXPECT_FLOAT_EQ(static_cast<float>(original->data()->at(c)->value), want.original[c]);
  }
  auto* table = quant.findChild<QTableWidget*>();
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->item(1, 0)->text(),
            format_metric(quant.model().value(LearnQuantModel::Grouping::PerChannel, 0)));

  LearnPlannerPage fit;
  auto* memory = fit.findChild<QCustomPlot*>();
  ASSERT_NE(memory, nullptr);
  EXPECT_EQ(memory->plottableCount(), static_cast<int>(fit.model().memory_parts().size()));

  LearnPaysPage pays;
  pays.set_users(1);
  auto* steps = pays.findChild<PlannerStepChart*>();
  ASSERT_NE(steps, nullptr);
  const auto scheme_bars = gui_test::plottables<QCPBars>(steps, "scheme_bars");
  ASSERT_EQ(scheme_bars.size(), 2u);
  for (std::size_t k = 0; k < 2; ++k) {
    QCPBars* bars = scheme_bars[k];
    ASSERT_EQ(bars->data()->size(), 6);
    EXPECT_NEAR(bars->data()->at(5)->value, pays.model().steps()[k].step * 1e3, 1e-9);
  }
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
  EXPECT_EQ(window.planner_view()->scenario().context, growth->model().tokens());

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
  EXPECT_EQ(spec.synthetic.context, quant->model().source().context);
  const MethodConfig method = window.compression_view()->method_panel()->config();
  EXPECT_EQ(method.kind, MethodKind::Kivi);
  EXPECT_EQ(method.bits, 4);
  EXPECT_EQ(method.residual, 0);
  ASSERT_TRUE(window.compression_view()->wait_until_done(120'000));
  ASSERT_TRUE(window.compression_view()->model()->report().has_value());
  EXPECT_EQ(window.compression_view()->model()->report()->method, "kivi");
  EXPECT_EQ(window.compression_view()->model()->report()->tokens, quant->model().source().context);

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
  EXPECT_EQ(window.planner_view()->model()->results()[0].fits, fit->model().result()->fits);
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
  ASSERT_EQ(huffman->model().merge_step(), 0);
  ASSERT_EQ(eviction->model().current_step(), 0);
  for (LearnPage* page : {static_cast<LearnPage*>(growth), static_cast<LearnPage*>(huffman),
                          static_cast<LearnPage*>(eviction)}) {
    auto* playback = page->findChild<PlaybackControls*>();
    ASSERT_NE(playback, nullptr);
    playback->run_to_end();
    EXPECT_FALSE(playback->is_playing());
  }
  EXPECT_EQ(growth->model().tokens(), growth->model().target());
  EXPECT_GT(huffman->model().step_count(), 0);
  EXPECT_EQ(huffman->model().merge_step(), huffman->model().step_count());
  EXPECT_EQ(eviction->model().current_step(), eviction->model().step_count() - 1);
}

}  // namespace
}  // namespace kvlab::gui
