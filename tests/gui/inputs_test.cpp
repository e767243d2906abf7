// What the app shows is what it computed (issue 18, part 5): a number typed outside a field's
// range is refused out loud, not clamped; results are marked stale when a setting changes after
// the run; engine errors are worded with the app's field names, not the command line's flags.
#include <gtest/gtest.h>

#include <QApplication>
#include <QComboBox>
#include <QLineEdit>
#include <QSpinBox>
#include <QtTest/QTest>

#include "gui_test_support.h"
#include "kvlab/gui/compression_view.h"
#include "kvlab/gui/gui_format.h"
#include "kvlab/gui/method_panel.h"
#include "kvlab/gui/number_fields.h"
#include "kvlab/gui/source_panel.h"
#include "kvlab/gui/stale_mark.h"

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
  QSpinBox* context = view.source_panel()->context_spin();
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
  view.source_panel()->set_synthetic(gui_test::tiny_source());
  EXPECT_FALSE(view.stale_mark()->is_stale());
  ASSERT_TRUE(view.run_and_wait());
  EXPECT_FALSE(view.stale_mark()->is_stale());
  EXPECT_FALSE(view.stale_mark()->isVisible());
  QSpinBox* group = view.method_panel()->group_size_spin();
  group->setValue(group->value() == 32 ? 16 : 32);
  EXPECT_TRUE(view.stale_mark()->is_stale());
  EXPECT_TRUE(view.stale_mark()->isVisible());
  ASSERT_TRUE(view.run_and_wait());
  EXPECT_FALSE(view.stale_mark()->isVisible());
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
