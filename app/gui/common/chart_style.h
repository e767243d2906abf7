// Shared look of the QCustomPlot charts: fonts, colours, titles, and byte units for axes.
#pragma once

#include <QColor>
#include <QString>
#include <QVector>
#include <cstddef>
#include <vector>

class QCustomPlot;
class QCPAxisRect;
class QCPItemStraightLine;
class QCPItemText;
class QCPLegend;
class QCPTextElement;

namespace kvlab::gui {

namespace palette {
inline const QColor kKey{52, 101, 164};        // keys: blue
inline const QColor kValue{230, 140, 40};      // values: orange
inline const QColor kError{200, 55, 55};       // error curves: red
inline const QColor kMse{120, 80, 170};        // MSE: purple
inline const QColor kRatio{60, 150, 90};       // ratios: green
inline const QColor kCodes{70, 110, 170};      // histogram bars
inline const QColor kCodeLength{200, 55, 55};  // Huffman code lengths: red
// The four codecs, in CodecKind order, and the entropy bound.
inline const QColor kBitPack{150, 150, 150};
inline const QColor kVarWidth{110, 160, 210};
inline const QColor kHuffman{60, 150, 90};
inline const QColor kRans{215, 140, 40};
inline const QColor kEntropy{30, 30, 30};
inline const QColor kNeedle{200, 30, 160};  // the planted needle, and its query
// Lines of many series (one per policy or method), distinct and readable on white; they repeat
// after kSeriesColors.
inline constexpr std::size_t kSeriesColors = 11;
QColor series(std::size_t i);
}  // namespace palette

// Fonts, white background, light grid on every axis rect of the plot.
void style_plot(QCustomPlot* plot);
void style_axis_rect(QCPAxisRect* rect);
// Drag to pan and Ctrl + wheel to zoom; the wheel alone scrolls the page the chart sits in (a
// chart under the mouse used to zoom instead, and the page would not scroll past it).
void pan_and_ctrl_wheel_zoom(QCustomPlot* plot);
// Inserts a bold title row above the plot's first layout row and returns it.
QCPTextElement* add_title(QCustomPlot* plot, const QString& text);
// Puts `legend` (taken out of wherever it is) as one horizontal, centred line in a new row
// `row` of the plot layout, so it never covers data.
void add_legend_row(QCustomPlot* plot, QCPLegend* legend, int row);

// A dashed vertical line across the axis rect with a bold label near its top, hidden until
// placed: the needle's position on an eviction map, the needle query's step on the curves.
struct VerticalMarker {
  QCPItemStraightLine* line = nullptr;
  QCPItemText* label = nullptr;
};
VerticalMarker add_vertical_marker(QCustomPlot* plot, const QString& text, const QColor& color,
                                   Qt::Alignment label_alignment);
// Shows the marker at `x`, its label's anchor at `label_x` (plot coordinates).
void place_vertical_marker(const VerticalMarker& marker, double x, double label_x);

// A unit for an axis measured in bytes, chosen so the largest value reads 1..1023.
struct ByteUnit {
  double bytes = 1;  // bytes per axis unit
  QString name;      // "B", "KiB", "MiB", "GiB"
};
ByteUnit byte_unit_for(double max_bytes);

// The series QCustomPlot's setData takes.
inline QVector<double> to_qvector(const std::vector<double>& v) {
  return {v.begin(), v.end()};
}

}  // namespace kvlab::gui
