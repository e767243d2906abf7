// What the mouse is over on a chart, in words, for the status bar: "Keys — layer 3: 4.27 (ratio)"
// for a bar or graph point, "position 812, step 40: 2" for a colour-map cell. One mechanism for
// every chart of the window: install_hover_readout() watches the mouse on the QCustomPlots under
// a widget and sends the text of the nearest point to a callback (the main window's status bar).
// A chart that reports its own points (the Quality chart) sets the property
// kOwnHoverProperty and is left alone.
#pragma once

#include <functional>

#include <QPointF>
#include <QString>

class QCustomPlot;
class QWidget;

namespace kvlab::gui {

inline constexpr const char* kOwnHoverProperty = "kvlab_own_hover";
// Points farther than this (pixels) from the mouse are not "under" it.
inline constexpr double kHoverRadiusPx = 12.0;

// The point of a visible graph, bar or colour map at `pixel` (widget coordinates), as text, or an
// empty string when there is none within kHoverRadiusPx. Axis labels and text tick labels (layer
// names, codec names) are used when the chart has them.
QString describe_chart_point(QCustomPlot* chart, QPointF pixel);

// From now on every chart under `root` (made before or after this call) reports the point under
// the mouse to `show`; leaving the point or the chart sends an empty string.
void install_hover_readout(QWidget* root, const std::function<void(const QString&)>& show);

}  // namespace kvlab::gui
