// Grabs every page of the main window to PNG files (compression.png, eviction.png, ...), for
// documentation and for checking the layout without a display.
#pragma once

#include <QString>
#include <QStringList>

namespace kvlab::gui {

class MainWindow;

// Shows each page in turn, lets the layout settle, and saves QWidget::grab() of the window to
// `dir`/<page>.png, then the Compression page's Key channels tab (compression-channels.png), then
// each step of the Learn page to `dir`/learn-<step>.png (learn-growth.png,
// learn-quant.png, ...). Creates `dir`. Returns the files written; `error` is set when one fails.
// An empty Quality page first measures a few configurations of the stories260K model when its
// weights are found ($KVLAB_MODELS_DIR, or shared/models above the program or working folder).
QStringList save_page_screenshots(MainWindow& window, const QString& dir, QString* error);

// The pages that are wider than the window gives them, so that they scroll sideways at its
// present size: "quality: needs 1046 px, has 1000". Shows each page in turn and returns to the
// one shown before.
QStringList pages_wider_than_window(MainWindow& window);

}  // namespace kvlab::gui
