// "Explain everywhere": every control a person can touch on the Compression, Eviction, Quality
// and Planner pages, every caption of a form field, every metric label and every column header
// of their tables carries a tooltip saying what it is. The audit walks the real widget tree, so
// a control added later without a tooltip fails here, named in the message.
//
// What counts as a control: QAbstractButton (push, tool, check and radio buttons), QComboBox,
// QAbstractSpinBox, QLineEdit, QPlainTextEdit, QSlider, a checkable QGroupBox; the tabs of every
// QTabBar; the items of every QListWidget; the horizontal headers of every table's model.
// What is skipped: the parts of a composite widget that Qt builds for it, i.e. anything whose
// ancestor (below the page) is a spin box, combo box, tab bar, item view, scroll bar or chart
// (QCustomPlot): the line edit inside a spin box, a tab bar's scroll arrows, a table's corner
// button. Those show their owner's tooltip or none of their own by design.
#include <gtest/gtest.h>

#include <qcustomplot.h>

#include <QAbstractButton>
#include <QAbstractSpinBox>
#include <QApplication>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QScrollBar>
#include <QSlider>
#include <QTabBar>
#include <QTableView>
#include <QToolTip>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/explain.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "compression/results_panel.h"
#include "eviction/eviction_metrics_panel.h"
#include "eviction/eviction_view.h"
#include "gui_test_support.h"
#include "planner/planner_view.h"
#include "quality/quality_view.h"
#include "runs/runs_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using gui_test::fresh_dir;

constexpr Page kAuditedPages[] = {Page::Compression, Page::Eviction, Page::Quality, Page::Planner};

// A part Qt builds inside a composite widget, not a control of its own.
bool is_internal_part(const QWidget* w, const QWidget* page) {
  for (const QWidget* p = w->parentWidget(); p && p != page; p = p->parentWidget()) {
    if (qobject_cast<const QAbstractSpinBox*>(p) || qobject_cast<const QComboBox*>(p) ||
        qobject_cast<const QTabBar*>(p) || qobject_cast<const QAbstractItemView*>(p) ||
        qobject_cast<const QScrollBar*>(p) || qobject_cast<const QCustomPlot*>(p)) {
      return true;
    }
  }
  return false;
}

bool is_control(const QWidget* w) {
  if (const auto* box = qobject_cast<const QGroupBox*>(w)) return box->isCheckable();
  return qobject_cast<const QAbstractButton*>(w) || qobject_cast<const QComboBox*>(w) ||
         qobject_cast<const QAbstractSpinBox*>(w) || qobject_cast<const QLineEdit*>(w) ||
         qobject_cast<const QPlainTextEdit*>(w) || qobject_cast<const QSlider*>(w);
}

// "QComboBox 'kivi' in MethodPanel": enough to find the widget in the source.
std::string describe(const QWidget* w) {
  QString text;
  if (const auto* b = qobject_cast<const QAbstractButton*>(w)) text = b->text();
  if (const auto* c = qobject_cast<const QComboBox*>(w)) text = c->currentText();
  if (const auto* s = qobject_cast<const QAbstractSpinBox*>(w)) text = s->text();
  if (const auto* e = qobject_cast<const QLineEdit*>(w)) text = e->placeholderText();
  if (const auto* g = qobject_cast<const QGroupBox*>(w)) text = g->title();
  if (const auto* l = qobject_cast<const QLabel*>(w)) text = l->text();
  QString where;
  for (const QWidget* p = w->parentWidget(); p; p = p->parentWidget()) {
    const QString cls = QString::fromLatin1(p->metaObject()->className());
    if (cls.startsWith(QStringLiteral("kvlab::gui::"))) {
      where = cls.mid(12);
      break;
    }
  }
  return QStringLiteral("%1%2 '%3' in %4")
      .arg(QString::fromLatin1(w->metaObject()->className()),
           w->objectName().isEmpty() ? QString() : QStringLiteral(" #") + w->objectName(), text,
           where)
      .toStdString();
}

// Everything on `page` that should explain itself and does not.
std::vector<std::string> missing_tooltips(QWidget* page) {
  std::vector<std::string> out;
  for (QWidget* w : page->findChildren<QWidget*>()) {
    if (is_internal_part(w, page)) continue;
    if (is_control(w) && w->toolTip().trimmed().isEmpty()) out.push_back(describe(w));
    // A form caption (QFormLayout makes the field its buddy) explains its field.
    if (auto* label = qobject_cast<QLabel*>(w);
        label && label->buddy() && label->toolTip().trimmed().isEmpty()) {
      out.push_back("caption " + describe(w));
    }
    if (auto* tabs = qobject_cast<QTabBar*>(w)) {
      for (int i = 0; i < tabs->count(); ++i) {
        if (tabs->tabToolTip(i).trimmed().isEmpty())
          out.push_back("tab '" + tabs->tabText(i).toStdString() + "'");
      }
    }
    if (auto* list = qobject_cast<QListWidget*>(w)) {
      for (int i = 0; i < list->count(); ++i) {
        if (list->item(i)->toolTip().trimmed().isEmpty())
          out.push_back("list item '" + list->item(i)->text().toStdString() + "'");
      }
    }
    if (auto* table = qobject_cast<QTableView*>(w); table && table->model()) {
      const QAbstractItemModel* model = table->model();
      for (int c = 0; c < model->columnCount(); ++c) {
        if (model->headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().trimmed().isEmpty()) {
          out.push_back("column header '" +
                        model->headerData(c, Qt::Horizontal).toString().toStdString() + "'");
        }
      }
    }
  }
  // Metric panels: every label, names and values alike, says what its number is.
  std::vector<QWidget*> panels;
  for (QWidget* p : page->findChildren<ResultsPanel*>()) panels.push_back(p);
  for (QWidget* p : page->findChildren<EvictionMetricsPanel*>()) panels.push_back(p);
  for (QWidget* panel : panels) {
    for (QLabel* label : panel->findChildren<QLabel*>()) {
      if (label->toolTip().trimmed().isEmpty()) out.push_back("metric " + describe(label));
    }
  }
  return out;
}

// Shows `text` as a tooltip over `anchor` and saves what Qt drew; false when none appeared.
bool save_tooltip(QWidget* anchor, const QString& text, const std::filesystem::path& path) {
  QToolTip::showText(anchor->mapToGlobal(anchor->rect().center()), text, anchor);
  QApplication::processEvents();
  QWidget* tip = nullptr;
  for (QWidget* w : QApplication::topLevelWidgets()) {
    if (w->objectName() == QStringLiteral("qtooltip_label") && w->isVisible()) tip = w;
  }
  const bool saved = tip && tip->grab().save(QString::fromStdString(path.string()));
  QToolTip::hideText();
  QApplication::processEvents();
  return saved;
}

std::string joined(const std::vector<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += "\n  " + i;
  return s;
}

// The tooltip of the label (in `panel`) whose text starts with `name`.
QString label_tip(const QWidget* panel, const QString& name) {
  for (const QLabel* l : panel->findChildren<QLabel*>()) {
    if (l->text().startsWith(name)) return l->toolTip();
  }
  return {};
}

QString header_tip(const QTableView* table, const QString& name) {
  const QAbstractItemModel* model = table->model();
  for (int c = 0; c < model->columnCount(); ++c) {
    if (model->headerData(c, Qt::Horizontal).toString() == name) {
      return model->headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString();
    }
  }
  return {};
}

TEST(Tooltips, EveryControlAndColumnOnTheFourPagesExplainsItself) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  window.show();
  // The Compression page after a KVComp run with a codec: every results row and tab exists.
  MethodConfig kvcomp;
  kvcomp.kind = MethodKind::KvComp;
  kvcomp.codec = CodecKind::Huffman;
  window.compression_view()->source_panel()->set_synthetic(gui_test::tiny_source());
  window.compression_view()->method_panel()->set_config(kvcomp);
  ASSERT_TRUE(window.compression_view()->run_and_wait(60'000))
      << window.compression_view()->last_error().toStdString();

  std::size_t controls = 0;
  for (Page page : kAuditedPages) {
    QWidget* w = window.page_widget(page);
    for (QWidget* c : w->findChildren<QWidget*>()) controls += is_control(c) ? 1 : 0;
    const auto missing = missing_tooltips(w);
    EXPECT_TRUE(missing.empty()) << page_file_name(page).toStdString()
                                 << " page: " << missing.size()
                                 << " without a tooltip:" << joined(missing);
  }
  EXPECT_GT(controls, 80u);  // the walk did find the pages' controls
}

TEST(Tooltips, SayHowTheNumbersAreComputed) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  const auto* results = gui_test::child<ResultsPanel>(window.compression_view(), "results");
  ASSERT_NE(results, nullptr);
  const QString ratio = label_tip(results, QStringLiteral("Ratio"));
  EXPECT_TRUE(ratio.contains(QStringLiteral("fp16")) && ratio.contains(QStringLiteral("metadata")))
      << ratio.toStdString();
  EXPECT_TRUE(label_tip(results, QStringLiteral("Bits / value")).contains(QStringLiteral("8 ×")));
  EXPECT_TRUE(label_tip(results, QStringLiteral("SNR")).contains(QStringLiteral("log10")));
  EXPECT_TRUE(label_tip(results, QStringLiteral("Codebook")).contains(QStringLiteral("129")));

  const auto* eviction = window.eviction_view()->findChild<EvictionMetricsPanel*>();
  ASSERT_NE(eviction, nullptr);
  const QString memory_ratio = label_tip(eviction, QStringLiteral("Memory ratio"));
  EXPECT_TRUE(memory_ratio.contains(QStringLiteral("fp16"))) << memory_ratio.toStdString();

  const auto* quality = gui_test::child<QTableView>(window.quality_view(), "table");
  ASSERT_NE(quality, nullptr);
  EXPECT_TRUE(header_tip(quality, QStringLiteral("Ratio")).contains(QStringLiteral("kept")));
  EXPECT_TRUE(header_tip(quality, QStringLiteral("KL (nats)")).contains(QStringLiteral("KL(")));

  const auto* planner = window.planner_view()->table();
  ASSERT_NE(planner, nullptr);
  EXPECT_TRUE(header_tip(planner, QStringLiteral("KV B/token\n(whole model)"))
                  .contains(QStringLiteral("2 × layers × kv_heads × head_dim")));
  EXPECT_TRUE(header_tip(planner, QStringLiteral("fits")).contains(QStringLiteral("reserve")));

  // The Runs page's column texts line up with its columns (its model gives them as tooltips).
  const QAbstractItemModel* runs = window.runs_view()->model()->table();
  EXPECT_EQ(explain::runs_columns().size(), runs->columnCount());
  EXPECT_TRUE(runs->headerData(RunsTableModel::kBits, Qt::Horizontal, Qt::ToolTipRole)
                  .toString()
                  .contains(QStringLiteral("metadata")));
  EXPECT_EQ(runs->headerData(RunsTableModel::kContext, Qt::Horizontal, Qt::ToolTipRole).toString(),
            explain::runs_columns().value(RunsTableModel::kContext));
  EXPECT_EQ(explain::planner_columns().size(), planner->model()->columnCount());

  // Form captions share their field's text.
  const MethodPanel* method = window.compression_view()->method_panel();
  const auto* group = gui_test::child<QSpinBox>(method, "group_size");
  bool caption_found = false;
  for (const QLabel* l : method->findChildren<QLabel*>()) {
    if (l->buddy() == group) {
      caption_found = true;
      EXPECT_EQ(l->toolTip().toStdString(), group->toolTip().toStdString());
    }
  }
  EXPECT_TRUE(caption_found);
}

// Not an assertion on layout: renders the four pages and one tooltip to PNG so a person can look
// at them (the paths are printed).
TEST(Tooltips, RenderPagesAndATooltip) {
  const auto dir = fresh_dir();
  MainWindow window(dir / "runs.sqlite");
  window.resize(1400, 900);
  window.show();
  window.compression_view()->source_panel()->set_synthetic(gui_test::tiny_source());
  ASSERT_TRUE(window.compression_view()->run_and_wait(60'000));
  window.eviction_view()->source_panel()->set_synthetic(gui_test::tiny_source());
  ASSERT_TRUE(window.eviction_view()->run_and_wait(60'000));
  for (Page page : kAuditedPages) {
    window.show_page(page);
    QApplication::processEvents();
    const auto path = dir / (page_file_name(page).toStdString() + ".png");
    EXPECT_TRUE(window.grab().save(QString::fromStdString(path.string())));
  }
  window.show_page(Page::Compression);
  QWidget* results = gui_test::child<ResultsPanel>(window.compression_view(), "results");
  EXPECT_TRUE(save_tooltip(results, label_tip(results, QStringLiteral("Ratio")),
                           dir / "tooltip_ratio.png"));
  MethodPanel* method = window.compression_view()->method_panel();
  EXPECT_TRUE(save_tooltip(method, gui_test::child<QDoubleSpinBox>(method, "rel_scale")->toolTip(),
                           dir / "tooltip_rel_scale.png"));
  window.show_page(Page::Eviction);
  auto* eviction = window.eviction_view()->findChild<EvictionMetricsPanel*>();
  ASSERT_NE(eviction, nullptr);
  EXPECT_TRUE(save_tooltip(eviction, label_tip(eviction, QStringLiteral("Attn-output rel. error")),
                           dir / "tooltip_eviction_rel_error.png"));
  window.show_page(Page::Planner);
  auto* planner = window.planner_view()->table();
  ASSERT_NE(planner, nullptr);
  EXPECT_TRUE(save_tooltip(planner, header_tip(planner, QStringLiteral("tok/s\nper GPU")),
                           dir / "tooltip_planner_tokens_s.png"));
  std::printf("pages and tooltip rendered to %s\n", dir.string().c_str());
}

}  // namespace
}  // namespace kvlab::gui
