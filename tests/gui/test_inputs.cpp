// What the app shows is what it computed (issue 18, part 5): a number typed outside a field's
// range is refused out loud, not clamped; results are marked stale when a setting changes after
// the run; engine errors are worded with the app's field names, not the command line's flags.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QDir>
#include <QFile>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QtTest/QTest>

#include "common/gui_format.h"
#include "common/model_capture_form.h"
#include "common/number_fields.h"
#include "common/source_panel.h"
#include "common/stale_mark.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "gui_test_support.h"
#include "quality/quality_chart.h"

namespace kvlab::gui {
namespace {

// Types `text` into the spin box, replacing what was there, and presses Enter.
void type_into(QAbstractSpinBox* box, const QString& text) {
  box->setFocus();
  box->selectAll();
  QTest::keyClicks(box, text);
  QTest::keyClick(box, Qt::Key_Return);
  QApplication::processEvents();  // the refusal is shown after the box put its value back
}

TEST(Inputs, AContextAboveTheRangeIsRefusedWithAMessageNotClamped) {
  CompressionView view(nullptr);
  view.show();
  QSpinBox* context = gui_test::child<QSpinBox>(view.source_panel(), "context");
  ASSERT_NE(qobject_cast<IntField*>(context), nullptr) << "the context field is a plain spin box";
  context->setValue(4096);
  const int max = context->maximum();
  ASSERT_LT(max, 10'000'000);

  type_into(context, QStringLiteral("10000000"));
  EXPECT_EQ(context->value(), 4096) << "the typed number was clamped to " << context->value();
  const QString refusal = static_cast<IntField*>(context)->refusal();
  EXPECT_TRUE(refusal.contains(QStringLiteral("10000000"))) << refusal.toStdString();
  EXPECT_TRUE(refusal.contains(QString::number(max))) << refusal.toStdString();
  EXPECT_TRUE(refusal.startsWith(QStringLiteral("Context"))) << refusal.toStdString();
  EXPECT_TRUE(context->toolTip().contains(refusal));
  EXPECT_TRUE(context->property("refused").toBool());

  // A good value clears the mark; the field's own tooltip comes back.
  type_into(context, QStringLiteral("2048"));
  EXPECT_EQ(context->value(), 2048);
  EXPECT_TRUE(static_cast<IntField*>(context)->refusal().isEmpty());
  EXPECT_FALSE(context->property("refused").toBool());
  EXPECT_FALSE(context->toolTip().contains(QStringLiteral("10000000")));
}

// The GUI's limits are the engine's (issue 43, item 2): llama3-8b was trained to 8,192 tokens,
// but `kvlab compress --source synthetic:llama3-8b --context 32768` runs, and so does the page.
TEST(Inputs, TheContextGoesAsFarAsTheEngineNotThePresetsTrainedContext) {
  CompressionView view(nullptr);
  view.show();
  SourcePanel* source = view.source_panel();
  auto* context = gui_test::child<QSpinBox>(source, "context");
  ASSERT_EQ(gui_test::child<QComboBox>(source, "preset")->currentText(),
            QStringLiteral("llama3-8b"));
  type_into(context, QStringLiteral("32768"));
  EXPECT_EQ(context->value(), 32768) << static_cast<IntField*>(context)->refusal().toStdString();
  type_into(gui_test::child<QSpinBox>(source, "layers"), QStringLiteral("1"));
  ASSERT_TRUE(view.run_and_wait()) << view.last_error().toStdString();
  ASSERT_TRUE(view.model()->report().has_value());
  EXPECT_EQ(view.model()->report()->tokens, 32768);
  EXPECT_EQ(view.model()->report()->shape.layers, 1);
}

// The visible fields of `panel` drawn shorter than their minimum height (squeezed by a stale
// layout), by class name.
std::string squeezed_fields(QWidget* panel) {
  std::string out;
  for (QWidget* w : panel->findChildren<QWidget*>()) {
    const bool field = qobject_cast<QComboBox*>(w) || qobject_cast<QAbstractSpinBox*>(w) ||
                       qobject_cast<QLineEdit*>(w) || qobject_cast<QPushButton*>(w);
    const QWidget* owner = w->parentWidget();  // a spin box's or combo box's own line edit
    if (qobject_cast<const QAbstractSpinBox*>(owner) || qobject_cast<const QComboBox*>(owner)) {
      continue;
    }
    if (field && w->isVisible() && w->height() < w->minimumSizeHint().height()) {
      out += std::string(w->metaObject()->className()) + " ";
    }
  }
  return out;
}

// Issue 43, item 5: a file run that fails, then a model capture that fails, then back to the
// synthetic preset: every synthetic row is there again (the Preset row used to stay hidden).
TEST(Inputs, SwitchingSourcesAfterFailuresKeepsEveryRow) {
  CompressionView view(nullptr);
  view.resize(1024, 700);
  view.show();
  SourcePanel* source = view.source_panel();
  auto* layers = gui_test::child<QSpinBox>(source, "layers");
  QComboBox* kind = nullptr;
  for (QComboBox* box : source->findChildren<QComboBox*>()) {
    if (box->count() == 3 && box->itemText(0) == QStringLiteral("synthetic preset")) kind = box;
  }
  ASSERT_NE(kind, nullptr);
  QPushButton* capture = nullptr;
  for (QPushButton* b : source->findChildren<QPushButton*>()) {
    if (b->text() == QStringLiteral("Capture")) capture = b;
  }
  ASSERT_NE(capture, nullptr);
  source->set_file(QStringLiteral("/nonexistent/cache.safetensors"));
  QTest::mouseClick(view.run_button(), Qt::LeftButton);
  view.wait_until_done(60'000);
  EXPECT_FALSE(view.last_error().isEmpty());
  source->set_model(QStringLiteral("/nonexistent/model.gguf"));
  QTest::mouseClick(capture, Qt::LeftButton);
  source->model_capture()->wait_until_done(60'000);
  EXPECT_FALSE(source->model_capture()->last_error().isEmpty());
  // Back to the synthetic preset as a person would: the combo box, with the keyboard.
  kind->setFocus();
  QTest::keyClick(kind, Qt::Key_Home);
  QApplication::processEvents();
  ASSERT_EQ(kind->currentIndex(), 0);
  EXPECT_TRUE(gui_test::child<QComboBox>(source, "preset")->isVisible());
  EXPECT_TRUE(layers->isVisible());
  EXPECT_TRUE(gui_test::child<QSpinBox>(source, "context")->isVisible());
  // Shown at its full height, not squeezed to nothing between its neighbours.
  EXPECT_GE(gui_test::child<QComboBox>(source, "preset")->height(),
            gui_test::child<QComboBox>(source, "preset")->minimumSizeHint().height());
  EXPECT_GE(gui_test::child<QComboBox>(source, "preset")->y(), kind->geometry().bottom());
  EXPECT_GE(layers->y(), gui_test::child<QComboBox>(source, "preset")->geometry().bottom());
  EXPECT_EQ(squeezed_fields(source), "");
  // And the model capture's rows, with their error, when it comes back.
  QTest::keyClick(kind, Qt::Key_End);
  QApplication::processEvents();
  ASSERT_EQ(kind->currentIndex(), 2);
  EXPECT_EQ(squeezed_fields(source), "");
  QTest::keyClick(kind, Qt::Key_Home);
  QApplication::processEvents();
  EXPECT_EQ(squeezed_fields(source), "");
  ASSERT_TRUE(view.run_and_wait()) << view.last_error().toStdString();
}

// Issue 43, item 7: a GGUF model chosen as the source file is named as a model, with the way to
// capture a cache from it.
TEST(Inputs, AGgufAsTheSourceFileSaysToCaptureFromIt) {
  const QString path = QDir::temp().filePath(QStringLiteral("kvlab-inputs-header-only.gguf"));
  {
    QFile f(path);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(QByteArray("GGUF") + QByteArray(60, '\0'));
  }
  CompressionView view(nullptr);
  view.show();
  view.source_panel()->set_file(path);
  EXPECT_FALSE(view.run_and_wait());
  EXPECT_TRUE(view.last_error().contains(QStringLiteral("a GGUF model, not a KV cache")))
      << view.last_error().toStdString();
  EXPECT_TRUE(view.last_error().contains(QStringLiteral("'model capture…' source")))
      << view.last_error().toStdString();
  QFile::remove(path);
}

TEST(Inputs, RealFieldsRefuseToo) {
  RealField field;
  field.setRange(0.01, 2.0);
  field.setDecimals(2);
  field.setValue(0.5);
  field.setAccessibleName(QStringLiteral("Rel. scale"));
  field.show();
  type_into(&field, QStringLiteral("25"));
  EXPECT_DOUBLE_EQ(field.value(), 0.5);
  EXPECT_TRUE(field.refusal().startsWith(QStringLiteral("Rel. scale: 25")))
      << field.refusal().toStdString();
}

TEST(Inputs, ResultsAreMarkedStaleWhenASettingChangesAfterTheRun) {
  CompressionView view(nullptr);
  view.show();
  auto* stale = gui_test::child<StaleMark>(&view, "stale");
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  EXPECT_FALSE(stale->is_stale());
  ASSERT_TRUE(view.run_and_wait());
  EXPECT_FALSE(stale->is_stale());
  EXPECT_FALSE(stale->isVisible());
  QSpinBox* group = gui_test::child<QSpinBox>(view.method_panel(), "group_size");
  group->setValue(group->value() == 32 ? 16 : 32);
  EXPECT_TRUE(stale->is_stale());
  EXPECT_TRUE(stale->isVisible());
  ASSERT_TRUE(view.run_and_wait());
  EXPECT_FALSE(stale->isVisible());
}

// Labels of points that nearly coincide (FP8 and H2O 50% at the same ratio and change, as on the
// stories260K Quality page) are moved apart or hidden, never drawn over each other.
TEST(Charts, QualityPointLabelsNeverOverlap) {
  QualityChart chart;
  chart.resize(700, 380);
  chart.show();
  QualityChartData data;
  data.x_label = QStringLiteral("memory ratio");
  data.y_label = QStringLiteral("perplexity change (%), log scale");
  data.log_y = true;
  const char* names[] = {"FP8 E4M3",    "H2O 50%", "KIVI-2", "StreamingLLM 50%", "INT8",
                         "KVComp 0.05", "KIVI-4",  "INT4",   "H2O 20%",          "Merge 50%"};
  const double xy[][2] = {{2.00, 2.72}, {1.99, 2.53}, {1.63, 2.73}, {1.97, 5.0}, {2.0, 0.39},
                          {1.47, 0.99}, {1.43, 0.11}, {3.99, 797},  {2.01, 2.6}, {1.98, 2.65}};
  for (int i = 0; i < 10; ++i) {
    data.points.push_back({xy[i][0], xy[i][1], QString::fromLatin1(names[i]), false});
  }
  chart.set_data(data);
  chart.replot();
  QApplication::processEvents();
  int shown = 0;
  for (int i = 0; i < chart.point_count(); ++i) {
    const QRectF a = chart.label_rect(i);
    if (a.isEmpty()) continue;
    ++shown;
    EXPECT_TRUE(QRectF(chart.axisRect()->rect()).contains(a)) << names[i];
    for (int j = i + 1; j < chart.point_count(); ++j) {
      EXPECT_FALSE(a.intersects(chart.label_rect(j))) << names[i] << " over " << names[j];
    }
  }
  EXPECT_GE(shown, 7);  // most keep their label
}

TEST(Inputs, EngineErrorsUseTheFieldNames) {
  EXPECT_EQ(in_gui_terms(QStringLiteral("--group-size 0: must be between 1 and 4096")),
            QStringLiteral("Group size 0: must be between 1 and 4096"));
  EXPECT_EQ(in_gui_terms(QStringLiteral("--recent-fraction 2: must be between 0 and 1")),
            QStringLiteral("Recent share 2: must be between 0 and 1"));
  EXPECT_EQ(in_gui_terms(QStringLiteral("--codec huffman: use --codec none")),
            QStringLiteral("Codec huffman: use Codec none"));
  EXPECT_EQ(in_gui_terms(QStringLiteral("--some-new-option: bad")),
            QStringLiteral("Some new option: bad"));
  EXPECT_EQ(in_gui_terms(QStringLiteral("no flags here")), QStringLiteral("no flags here"));
}

}  // namespace
}  // namespace kvlab::gui
