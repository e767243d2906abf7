#include "common/chart_export.h"

#include <qcustomplot.h>

#include <QApplication>
#include <QContextMenuEvent>
#include <QDir>
#include <QFileDialog>
#include <QFileInfo>
#include <QMainWindow>
#include <QMenu>
#include <QMessageBox>
#include <QSaveFile>
#include <QStatusBar>
#include <QSvgGenerator>
#include <QTableView>

#include "common/gui_format.h"
#include "kvlab/engine/io/json_text.h"

namespace kvlab::gui {
namespace {

QString folder_error(const QString& path) {
  const QFileInfo info(path);
  const QFileInfo dir(info.absolutePath());
  if (!dir.exists())
    return QObject::tr("'%1': the folder %2 does not exist").arg(path, dir.filePath());
  if (!dir.isWritable()) {
    return QObject::tr("'%1': the folder %2 is not writable").arg(path, dir.filePath());
  }
  return {};
}

QString csv_field(const QString& text) {
  const bool quote = text.contains(QLatin1Char(',')) || text.contains(QLatin1Char('"')) ||
                     text.contains(QLatin1Char('\r')) || text.contains(QLatin1Char('\n'));
  if (!quote) return text;
  QString doubled = text;
  doubled.replace(QLatin1Char('"'), QStringLiteral("\"\""));
  return QLatin1Char('"') + doubled + QLatin1Char('"');
}

// Through the model, so item tables and model views (the Runs page) export alike, in the order
// and with the filter the view shows.
QString header_text(const QTableView* table, int column) {
  const QString text = table->model()->headerData(column, Qt::Horizontal).toString();
  if (!text.isEmpty()) return text;
  return QObject::tr("column %1").arg(column + 1);
}

QString cell_text(const QTableView* table, int row, int column) {
  const QModelIndex index = table->model()->index(row, column);
  const QVariant full = index.data(kFullTextRole);  // not the shortened text on screen
  const QString text = full.isValid() ? full.toString() : index.data().toString();
  if (!text.isEmpty()) return text;
  if (const auto* label = qobject_cast<const QLabel*>(table->indexWidget(index))) {
    return label->text();
  }
  return {};
}

QString last_folder;  // where the last export went, for the next dialog (this session only)

void report(QWidget* parent, const QString& error, const QString& done) {
  if (auto* window = qobject_cast<QMainWindow*>(parent ? parent->window() : nullptr)) {
    window->statusBar()->showMessage(error.isEmpty() ? done : error, 8000);
  }
  if (!error.isEmpty()) QMessageBox::warning(parent, QObject::tr("Export"), error);
}

}  // namespace

// QSaveFile renames over the target at the end.
QString write_file_whole(const QString& path, const QByteArray& bytes) {
  QSaveFile file(path);
  if (!file.open(QIODevice::WriteOnly)) {
    return QObject::tr("'%1': cannot write: %2").arg(path, file.errorString());
  }
  file.write(bytes);
  if (!file.commit()) return QObject::tr("'%1': cannot write: %2").arg(path, file.errorString());
  return {};
}

QString ask_save_path(QWidget* parent, const QString& title, const QString& base_name,
                      const QString& filters) {
  const QString start =
      QDir(last_folder.isEmpty() ? QDir::homePath() : last_folder).filePath(base_name);
  QString selected;
  QString path = QFileDialog::getSaveFileName(parent, title, start, filters, &selected);
  if (path.isEmpty()) return {};
  if (QFileInfo(path).suffix().isEmpty()) {
    // "PNG image (*.png)" → ".png": the filter chosen gives the format when none was typed.
    const qsizetype star = selected.indexOf(QStringLiteral("*."));
    if (star >= 0) {
      path += selected.mid(star + 1, selected.indexOf(QLatin1Char(')'), star) - star - 1);
    }
  }
  last_folder = QFileInfo(path).absolutePath();
  return path;
}

QString export_chart(QCustomPlot* chart, const QString& path) {
  if (!chart) return QObject::tr("'%1': there is no chart to export").arg(path);
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix != QLatin1String("png") && suffix != QLatin1String("svg") &&
      suffix != QLatin1String("pdf")) {
    return QObject::tr("'%1': unknown chart format '%2' (use .png, .svg or .pdf)")
        .arg(path, suffix.isEmpty() ? QObject::tr("no suffix") : suffix);
  }
  if (QString e = folder_error(path); !e.isEmpty()) return e;
  const int w = std::max(chart->width(), 200), h = std::max(chart->height(), 150);
  bool ok = false;
  if (suffix == QLatin1String("png")) {
    ok = chart->savePng(path, w, h, 2.0);
  } else if (suffix == QLatin1String("pdf")) {
    ok = chart->savePdf(path, w, h, QCP::epNoCosmetic, QStringLiteral("kvlab"));
  } else {
    QSvgGenerator svg;
    svg.setFileName(path);
    svg.setSize(QSize(w, h));
    svg.setViewBox(QRect(0, 0, w, h));
    svg.setTitle(QStringLiteral("kvlab chart"));
    QCPPainter painter;
    ok = painter.begin(&svg);
    if (ok) {
      chart->toPainter(&painter, w, h);
      ok = painter.end();
    }
  }
  if (!ok || !QFileInfo::exists(path)) {
    return QObject::tr("'%1': the chart could not be written as %2").arg(path, suffix.toUpper());
  }
  return {};
}

QString table_to_csv(const QTableView* table) {
  QString out;
  const int columns = table->model()->columnCount();
  QStringList fields;
  for (int c = 0; c < columns; ++c) fields << csv_field(header_text(table, c));
  out += fields.join(QLatin1Char(',')) + QStringLiteral("\r\n");
  for (int r = 0; r < table->model()->rowCount(); ++r) {
    fields.clear();
    for (int c = 0; c < columns; ++c) fields << csv_field(cell_text(table, r, c));
    out += fields.join(QLatin1Char(',')) + QStringLiteral("\r\n");
  }
  return out;
}

nlohmann::json table_to_json(const QTableView* table) {
  nlohmann::json rows = nlohmann::json::array();
  for (int r = 0; r < table->model()->rowCount(); ++r) {
    nlohmann::json row = nlohmann::json::object();
    for (int c = 0; c < table->model()->columnCount(); ++c) {
      row[header_text(table, c).toStdString()] = cell_text(table, r, c).toStdString();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

QString export_table(const QTableView* table, const QString& path) {
  if (!table) return QObject::tr("'%1': there is no table to export").arg(path);
  const QString suffix = QFileInfo(path).suffix().toLower();
  QByteArray bytes;
  if (suffix == QLatin1String("csv")) {
    bytes = table_to_csv(table).toUtf8();
  } else if (suffix == QLatin1String("json")) {
    bytes = QByteArray::fromStdString(json_text(table_to_json(table), 2)) + '\n';
  } else {
    return QObject::tr("'%1': unknown table format '%2' (use .csv or .json)")
        .arg(path, suffix.isEmpty() ? QObject::tr("no suffix") : suffix);
  }
  if (QString e = folder_error(path); !e.isEmpty()) return e;
  return write_file_whole(path, bytes);
}

QList<QStringList> parse_csv(const QString& text) {
  QList<QStringList> rows;
  QStringList row;
  QString field;
  bool quoted = false, any = false;
  for (qsizetype i = 0; i < text.size(); ++i) {
    const QChar ch = text[i];
    if (quoted) {
      if (ch == QLatin1Char('"')) {
        if (i + 1 < text.size() && text[i + 1] == QLatin1Char('"')) {
          field += QLatin1Char('"');
          ++i;
        } else {
          quoted = false;
        }
      } else {
        field += ch;
      }
      continue;
    }
    if (ch == QLatin1Char('"')) {
      quoted = true;
      any = true;
    } else if (ch == QLatin1Char(',')) {
      row << field;
      field.clear();
      any = true;
    } else if (ch == QLatin1Char('\n') || ch == QLatin1Char('\r')) {
      if (ch == QLatin1Char('\r') && i + 1 < text.size() && text[i + 1] == QLatin1Char('\n')) ++i;
      row << field;
      rows << row;
      row.clear();
      field.clear();
      any = false;
    } else {
      field += ch;
      any = true;
    }
  }
  if (any || !field.isEmpty()) {
    row << field;
    rows << row;
  }
  return rows;
}

bool export_chart_dialog(QCustomPlot* chart, QWidget* parent) {
  if (!chart) return false;
  const QString path =
      ask_save_path(parent, QObject::tr("Export chart"), QStringLiteral("kvlab-chart.png"),
                    QObject::tr("PNG image (*.png);;SVG drawing (*.svg);;PDF document (*.pdf)"));
  if (path.isEmpty()) return false;
  const QString error = export_chart(chart, path);
  report(parent, error, QObject::tr("Chart saved to %1").arg(QDir::toNativeSeparators(path)));
  return error.isEmpty();
}

bool export_table_dialog(const QTableView* table, QWidget* parent) {
  if (!table) return false;
  const QString path =
      ask_save_path(parent, QObject::tr("Export table"), QStringLiteral("kvlab-table.csv"),
                    QObject::tr("CSV table (*.csv);;JSON (*.json)"));
  if (path.isEmpty()) return false;
  const QString error = export_table(table, path);
  report(parent, error, QObject::tr("Table saved to %1").arg(QDir::toNativeSeparators(path)));
  return error.isEmpty();
}

QMenu* export_menu_for(QWidget* widget, QWidget* menu_parent) {
  if (auto* chart = qobject_cast<QCustomPlot*>(widget)) {
    if (chart->contextMenuPolicy() != Qt::DefaultContextMenu) return nullptr;  // its own menu
    auto* menu = new QMenu(menu_parent);
    menu->addAction(QObject::tr("Export chart\u2026 (PNG, SVG, PDF)"), chart,
                    [chart] { export_chart_dialog(chart, chart); });
    return menu;
  }
  // A table's mouse events arrive at its viewport.
  auto* table = qobject_cast<QTableView*>(widget);
  if (!table && widget) table = qobject_cast<QTableView*>(widget->parentWidget());
  if (table && (widget == table || widget == table->viewport())) {
    if (table->contextMenuPolicy() != Qt::DefaultContextMenu) return nullptr;
    auto* menu = new QMenu(menu_parent);
    menu->addAction(QObject::tr("Export table\u2026 (CSV, JSON)"), table,
                    [table] { export_table_dialog(table, table); });
    return menu;
  }
  return nullptr;
}

namespace {

// One filter for the whole application: charts and tables made after the window (a page's
// charts are rebuilt as runs come in) get the menu too.
class ExportMenuFilter : public QObject {
 public:
  explicit ExportMenuFilter(QWidget* root) : QObject(root), m_root(root) {}

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    if (event->type() != QEvent::ContextMenu || !watched->isWidgetType()) return false;
    auto* widget = static_cast<QWidget*>(watched);
    if (!m_root->isAncestorOf(widget)) return false;
    QMenu* menu = export_menu_for(widget, widget);
    if (!menu) return false;
    menu->setAttribute(Qt::WA_DeleteOnClose);
    menu->popup(static_cast<QContextMenuEvent*>(event)->globalPos());
    return true;
  }

 private:
  QWidget* m_root;
};

}  // namespace

void install_export_menus(QWidget* root) {
  qApp->installEventFilter(new ExportMenuFilter(root));
}

}  // namespace kvlab::gui
