// Exports of what the views show: any chart to PNG, SVG or PDF, any table to CSV or JSON. One
// mechanism for every view: install_export_menus() gives every chart and table under a widget a
// right-click "Export…" entry, and File ▸ Export chart / Export table use the same functions.
#pragma once

#include <nlohmann/json.hpp>

#include <QString>
#include <QStringList>

class QCustomPlot;
class QMenu;
class QTableView;
class QWidget;

namespace kvlab::gui {

// The format follows the file name's suffix (case-insensitive): .png, .svg or .pdf. The chart is
// drawn at its on-screen size (PNG at twice the pixels, for print). Returns an empty string on
// success, else a one-line message naming the file and the problem (unknown suffix, a folder
// that cannot be written).
QString export_chart(QCustomPlot* chart, const QString& path);

// The table as the person sees it: a header row of the column titles, then one row per table
// row, the cells' text. CSV is RFC 4180 (CRLF line ends; a field with a comma, quote, CR or LF is
// quoted and its quotes doubled). JSON is an array with one object per row, keyed by the column
// titles (cells as strings, empty cells as ""), so a script reads it without guessing.
QString table_to_csv(const QTableView* table);
nlohmann::json table_to_json(const QTableView* table);
// Writes one of the above by suffix (.csv or .json); the same error rule as export_chart.
QString export_table(const QTableView* table, const QString& path);

// Reads RFC 4180 CSV text back into rows of fields (the inverse of table_to_csv's quoting).
QList<QStringList> parse_csv(const QString& text);

// The two halves every export dialog shares. ask_save_path: a save dialog starting in the folder
// of the last export, the filter's suffix added when none was typed; empty when cancelled.
// write_file_whole: the bytes written whole or not at all (an old file stays as it was on
// failure); empty on success, else a message naming the file.
QString ask_save_path(QWidget* parent, const QString& title, const QString& base_name,
                      const QString& filters);
QString write_file_whole(const QString& path, const QByteArray& bytes);

// Ask for a file name (PNG, SVG, PDF or CSV, JSON) and export; the result goes to `parent`'s
// status bar when it is a QMainWindow, and failures also to a message box. Returns whether a file
// was written.
bool export_chart_dialog(QCustomPlot* chart, QWidget* parent);
bool export_table_dialog(const QTableView* table, QWidget* parent);

// The right-click menu of a chart ("Export chart…") or a table or its viewport ("Export
// table…"), owned by `menu_parent`; null for other widgets and for a chart or table with a
// context-menu policy of its own.
QMenu* export_menu_for(QWidget* widget, QWidget* menu_parent);

// From now on, a right click on any chart or table under `root` (made before or after this call)
// opens export_menu_for()'s menu.
void install_export_menus(QWidget* root);

}  // namespace kvlab::gui
