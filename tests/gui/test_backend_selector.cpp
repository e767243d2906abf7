// The Compression page's backend selector: Auto, CPU and CUDA are offered, each named with its
// device (CUDA, unavailable in this test program, which registers no CUDA library, says why and
// cannot be picked from the list); a CPU or Auto run names where it ran and where each stage ran
// in the results heading; CUDA chosen anyway fails in the view's normal error display and saves
// nothing.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QLabel>
#include <QPushButton>
#include <QStandardItemModel>

#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "compression/results_panel.h"
#include "gui_test_support.h"
#include "kvlab/engine/core/backend.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using gui_test::fresh_dir;
using gui_test::tiny_source;

constexpr int kTimeoutMs = 60'000;

MethodConfig kvcomp_huffman() {
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.codec = CodecKind::Huffman;
  return m;
}

TEST(BackendSelector, OffersAutoCpuCudaWithAutoFirst) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  window.show();
  QComboBox* combo = gui_test::child<QComboBox>(window.compression_view(), "backend");
  ASSERT_NE(combo, nullptr);
  EXPECT_TRUE(combo->isVisibleTo(&window));
  ASSERT_EQ(combo->count(), 3);
  const char* ids[] = {"auto", "cpu", "cuda"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(combo->itemData(i).toString(), QString::fromLatin1(ids[i]));
  }
  // Auto names what it would take: the GPU when CUDA is usable, else the CPU.
  EXPECT_EQ(combo->itemText(0),
            make_backend("cuda") ? QStringLiteral("Auto: CUDA") : QStringLiteral("Auto: CPU"));
  EXPECT_EQ(combo->itemText(1),
            QStringLiteral("CPU: ") + QString::fromStdString(make_cpu_backend()->device_name()));
  EXPECT_EQ(combo->itemText(2), QStringLiteral("CUDA (unavailable)"));
  EXPECT_TRUE(combo->itemData(2, Qt::ToolTipRole).toString().startsWith(QStringLiteral("CUDA")))
      << combo->itemData(2, Qt::ToolTipRole).toString().toStdString();
  auto* model = qobject_cast<QStandardItemModel*>(combo->model());
  ASSERT_NE(model, nullptr);
  EXPECT_TRUE(model->item(1)->isEnabled());
  EXPECT_FALSE(model->item(2)->isEnabled());
  EXPECT_EQ(combo->currentData().toString(), QStringLiteral("auto"));
}

TEST(BackendSelector, CpuAndAutoRunsNameTheDevice) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  CompressionView& view = *window.compression_view();
  auto* backend = gui_test::child<QComboBox>(&view, "backend");
  view.source_panel()->set_synthetic(tiny_source());
  view.method_panel()->set_config(kvcomp_huffman());
  const QString device = QString::fromStdString(make_cpu_backend()->device_name());
  for (const char* id : {"cpu", "auto"}) {
    view.set_backend(QString::fromLatin1(id));
    ASSERT_EQ(backend->currentData().toString(), QString::fromLatin1(id));
    ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << id << ": " << view.last_error().toStdString();
    ASSERT_TRUE(view.model()->report().has_value());
    EXPECT_EQ(view.model()->report()->backend, "cpu") << id;  // no GPU library in this program
    const QString heading =
        gui_test::child<QLabel>(gui_test::child<ResultsPanel>(&view, "results"), "heading")->text();
    EXPECT_TRUE(heading.contains(QStringLiteral("on cpu: ") + device.toHtmlEscaped()))
        << heading.toStdString();
    for (const char* stage :
         {"quantize: cpu ", "code: cpu ", "dequantize: cpu ", "metrics: cpu "}) {
      EXPECT_TRUE(heading.contains(QString::fromLatin1(stage))) << heading.toStdString();
    }
    EXPECT_TRUE(backend->isEnabled());
  }
}

TEST(BackendSelector, UnavailableCudaIsShownAsARunError) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  CompressionView& view = *window.compression_view();
  view.source_panel()->set_synthetic(tiny_source());
  view.method_panel()->set_config(kvcomp_huffman());
  view.set_backend(QStringLiteral("cuda"));
  EXPECT_FALSE(view.run_and_wait(kTimeoutMs));
  EXPECT_TRUE(view.last_error().startsWith(QStringLiteral("backend cuda: CUDA")))
      << view.last_error().toStdString();
  EXPECT_FALSE(view.model()->report().has_value());
  EXPECT_EQ(view.model()->last_saved_run_id(), 0);
  EXPECT_TRUE(view.run_button()->isEnabled());
  EXPECT_TRUE(gui_test::child<QComboBox>(&view, "backend")->isEnabled());

  // Back on the CPU the same view runs.
  view.set_backend(QStringLiteral("cpu"));
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  EXPECT_GT(view.model()->last_saved_run_id(), 0);
}

}  // namespace
}  // namespace kvlab::gui
