// Exports, driven offscreen: a real chart of the Compression view to PNG, SVG and PDF (each file
// read back by an independent reader: QImage, QSvgRenderer, the PDF header); a table to CSV and
// JSON and back; a stored run from the Runs page to JSON, CSV and HTML, read back and compared
// with the run as the store holds it.
#include <gtest/gtest.h>
#include <qcustomplot.h>

#include <cmath>
#include <fstream>
#include <memory>
#include <sstream>

#include <QContextMenuEvent>
#include <QFile>
#include <QImage>
#include <QMenu>
#include <QSvgRenderer>
#include <QTableWidget>

#include "common/chart_export.h"
#include "common/chart_hover.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "gui_test_support.h"
#include "runs/runs_view.h"
#include "window/main_window.h"
#include "window/window_actions.h"

namespace kvlab::gui {
namespace {

using gui_test::fresh_dir;
using gui_test::tiered_method;
using gui_test::tiny_source;

constexpr int kTimeoutMs = 60000;

std::string read_all(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

QString q(const std::filesystem::path& p) {
  return QString::fromStdString(p.string());
}

TEST(Export, ChartOfTheCompressionViewToPngSvgPdf) {
  const auto dir = fresh_dir();
  MainWindow window(dir / "runs.sqlite");
  window.resize(1280, 860);
  window.show();
  CompressionView& view = *window.compression_view();
  view.source_panel()->set_synthetic(tiny_source());
  view.method_panel()->set_config(tiered_method());
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();

  QCustomPlot* chart = chart_under_focus_or_first(&view);
  ASSERT_NE(chart, nullptr);
  ASSERT_GT(chart->plottableCount(), 0);
  std::unique_ptr<QMenu> menu(export_menu_for(chart, nullptr));  // right-click Export
  ASSERT_NE(menu, nullptr);
  EXPECT_TRUE(menu->actions().front()->text().startsWith(QStringLiteral("Export chart")));

  const auto png = dir / "chart.png";
  EXPECT_EQ(export_chart(chart, q(png)), QString());
  const QImage image(q(png));
  ASSERT_FALSE(image.isNull());
  EXPECT_EQ(image.width(), 2 * chart->width());  // twice the on-screen pixels
  EXPECT_EQ(image.height(), 2 * chart->height());
  // Not a blank picture: the bars and axes put several colours on it.
  QSet<QRgb> colours;
  for (int y = 0; y < image.height(); y += 7) {
    for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
  }
  EXPECT_GT(colours.size(), 4);

  const auto svg = dir / "chart.SVG";  // the suffix is read case-insensitively
  EXPECT_EQ(export_chart(chart, q(svg)), QString());
  QSvgRenderer renderer(q(svg));
  ASSERT_TRUE(renderer.isValid());
  EXPECT_EQ(renderer.viewBox().width(), chart->width());
  EXPECT_NE(read_all(svg).find("<svg"), std::string::npos);

  const auto pdf = dir / "chart.pdf";
  EXPECT_EQ(export_chart(chart, q(pdf)), QString());
  const std::string pdf_bytes = read_all(pdf);
  EXPECT_EQ(pdf_bytes.rfind("%PDF-", 0), 0u);
  EXPECT_NE(pdf_bytes.find("%%EOF"), std::string::npos);

  // Bad names: a message naming the file and the problem, nothing written.
  const QString bmp = export_chart(chart, q(dir / "chart.bmp"));
  EXPECT_TRUE(bmp.contains(QStringLiteral("chart.bmp")) && bmp.contains(QStringLiteral("bmp")))
      << bmp.toStdString();
  EXPECT_FALSE(std::filesystem::exists(dir / "chart.bmp"));
  const QString missing = export_chart(chart, q(dir / "no-such-folder" / "c.png"));
  EXPECT_TRUE(missing.contains(QStringLiteral("does not exist"))) << missing.toStdString();
}

TEST(Export, TableToCsvAndJsonReadsBackAsShown) {
  QTableWidget table(3, 3);
  table.setHorizontalHeaderLabels(
      {QStringLiteral("name"), QStringLiteral("value, unit"), QStringLiteral("note")});
  const QString cells[3][3] = {
      {QStringLiteral("int8"), QStringLiteral("1.97"), QStringLiteral("plain")},
      {QStringLiteral("kivi \"2\""), QStringLiteral("4,375"), QStringLiteral("two\nlines")},
      {QStringLiteral("fp8"), QString(), QStringLiteral("ünïcode ✓")},
  };
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) {
      if (!cells[r][c].isEmpty()) table.setItem(r, c, new QTableWidgetItem(cells[r][c]));
    }
  }
  const auto dir = fresh_dir();
  ASSERT_EQ(export_table(&table, q(dir / "t.csv")), QString());
  QFile csv(q(dir / "t.csv"));
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  const QString text = QString::fromUtf8(csv.readAll());
  EXPECT_TRUE(text.startsWith(QStringLiteral("name,\"value, unit\",note\r\n")));
  const auto rows = parse_csv(text);
  ASSERT_EQ(rows.size(), 4);
  EXPECT_EQ(rows[0], (QStringList{QStringLiteral("name"), QStringLiteral("value, unit"),
                                  QStringLiteral("note")}));
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) EXPECT_EQ(rows[r + 1][c], cells[r][c]) << r << "," << c;
  }

  ASSERT_EQ(export_table(&table, q(dir / "t.json")), QString());
  const auto json = nlohmann::json::parse(read_all(dir / "t.json"));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 3u);
  EXPECT_EQ(json[1].at("name").get<std::string>(), "kivi \"2\"");
  EXPECT_EQ(json[1].at("value, unit").get<std::string>(), "4,375");
  EXPECT_EQ(json[1].at("note").get<std::string>(), "two\nlines");
  EXPECT_EQ(json[2].at("value, unit").get<std::string>(), "");
  EXPECT_EQ(json[2].at("note").get<std::string>(), cells[2][2].toStdString());

  const QString xls = export_table(&table, q(dir / "t.xls"));
  EXPECT_TRUE(xls.contains(QStringLiteral("t.xls"))) << xls.toStdString();
}

TEST(Export, StoredRunsFromTheRunsPageReadBackEqualToTheStore) {
  const auto dir = fresh_dir();
  const auto db = dir / "runs.sqlite";
  MainWindow window(db);
  window.show();
  CompressionView& view = *window.compression_view();
  view.source_panel()->set_synthetic(tiny_source());
  view.method_panel()->set_config(tiered_method());
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  const std::int64_t first = view.model()->last_saved_run_id();
  MethodConfig int8;
  int8.kind = MethodKind::Int8;
  view.method_panel()->set_config(int8);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  const std::int64_t second = view.model()->last_saved_run_id();
  ASSERT_GT(first, 0);
  ASSERT_GT(second, first);

  RunsView& runs = *window.runs_view();
  auto store = RunsStore::open(db);
  ASSERT_TRUE(store.ok()) << store.message();
  auto record = store->load_run(first);
  ASSERT_TRUE(record.ok()) << record.message();

  runs.select_runs({first});
  auto* export_button = gui_test::child<QPushButton>(&runs, "export");
  EXPECT_TRUE(export_button->isEnabled());
  ASSERT_EQ(runs.export_selected(q(dir / "run.json")), QString());
  const auto json = nlohmann::json::parse(read_all(dir / "run.json"));
  EXPECT_EQ(json.at("id").get<std::int64_t>(), first);
  EXPECT_EQ(json.at("kind").get<std::string>(), record->kind);
  EXPECT_EQ(json.at("params"), record->params);
  EXPECT_EQ(json.at("metrics"), record->metrics);
  EXPECT_EQ(json.at("artifacts").at("histograms"), record->artifacts.at("histograms"));

  // CSV: key,value rows; every top-level number of the metrics comes back to the last digit.
  ASSERT_EQ(runs.export_selected(q(dir / "run.csv")), QString());
  QFile csv(q(dir / "run.csv"));
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  QMap<QString, QString> values;
  for (const QStringList& row : parse_csv(QString::fromUtf8(csv.readAll()))) {
    ASSERT_EQ(row.size(), 2) << row.join(QLatin1Char('|')).toStdString();
    values.insert(row[0], row[1]);
  }
  EXPECT_EQ(values.value(QStringLiteral("id")), QString::number(first));
  EXPECT_EQ(values.value(QStringLiteral("method")), QStringLiteral("tiered"));
  int numbers = 0;
  for (const auto& [key, value] : record->metrics.items()) {
    if (!value.is_number()) continue;
    const QString shown = values.value(QStringLiteral("metrics.") + QString::fromStdString(key));
    ASSERT_FALSE(shown.isEmpty()) << key;
    EXPECT_EQ(shown.toDouble(), value.get<double>()) << key;
    ++numbers;
  }
  EXPECT_GT(numbers, 3);

  // Both runs: an HTML comparison and a JSON array; CSV refuses two runs by name.
  runs.select_runs({first, second});
  EXPECT_EQ(runs.selected_run_ids().size(), 2u);
  EXPECT_TRUE(export_button->text().contains(QStringLiteral("2")));
  ASSERT_EQ(runs.export_selected(q(dir / "both.html")), QString());
  const std::string html = read_all(dir / "both.html");
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<svg"), std::string::npos);
  ASSERT_EQ(runs.export_selected(q(dir / "both.json")), QString());
  const auto both = nlohmann::json::parse(read_all(dir / "both.json"));
  ASSERT_EQ(both.size(), 2u);
  EXPECT_EQ(both[0].at("id").get<std::int64_t>(), second);  // newest first, as the table
  EXPECT_EQ(both[1].at("id").get<std::int64_t>(), first);
  const QString two_csv = runs.export_selected(q(dir / "both.csv"));
  EXPECT_TRUE(two_csv.contains(QStringLiteral("one run"))) << two_csv.toStdString();
  EXPECT_FALSE(std::filesystem::exists(dir / "both.csv"));
}

TEST(Export, EveryChartAndTableInTheWindowHasTheExportMenu) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  window.show();
  // A chart made after the window (pages rebuild theirs) is covered as well.
  auto* late = new QCustomPlot(window.compression_view());
  int charts = 0, tables = 0;
  for (auto* chart : window.findChildren<QCustomPlot*>()) {
    if (chart->property(kOwnHoverProperty).toBool()) continue;
    std::unique_ptr<QMenu> menu(export_menu_for(chart, nullptr));
    ASSERT_NE(menu, nullptr) << chart->objectName().toStdString();
    EXPECT_EQ(menu->actions().size(), 1);
    ++charts;
  }
  for (auto* table : window.findChildren<QTableWidget*>()) {
    std::unique_ptr<QMenu> menu(export_menu_for(table->viewport(), nullptr));
    ASSERT_NE(menu, nullptr);
    EXPECT_TRUE(menu->actions().front()->text().startsWith(QStringLiteral("Export table")));
    ++tables;
  }
  EXPECT_GT(charts, 10);
  EXPECT_GE(tables, 3);
  EXPECT_EQ(export_menu_for(window.runs_view(), nullptr), nullptr);  // not a chart or table
  // The right click itself, on the late chart: the filter opens the menu.
  const QPoint at(late->width() / 2, late->height() / 2);
  QContextMenuEvent click(QContextMenuEvent::Mouse, at, late->mapToGlobal(at));
  QApplication::sendEvent(late, &click);
  EXPECT_TRUE(click.isAccepted());
  QMenu* shown = nullptr;
  for (auto* m : late->findChildren<QMenu*>()) shown = m;
  ASSERT_NE(shown, nullptr);
  EXPECT_TRUE(shown->actions().front()->text().startsWith(QStringLiteral("Export chart")));
  shown->close();
  EXPECT_TRUE(gui_test::child<QAction>(&window, "export_chart")->isEnabled());
  EXPECT_TRUE(gui_test::child<QAction>(&window, "export_table")->isEnabled());
}

}  // namespace
}  // namespace kvlab::gui
