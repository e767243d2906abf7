#include "kvlab/gui/gui_format.h"

#include <cmath>

#include "kvlab/planners/memory_formula.h"

namespace kvlab::gui {

QString format_ratio(double ratio) {
  return QString::number(ratio, 'f', 2) + QStringLiteral("×");
}

QString format_bits_per_value(double bits) {
  return QString::number(bits, 'f', 2);
}

QString format_metric(double value) {
  if (value == 0.0) return QStringLiteral("0");
  return QString::number(value, 'g', 3);
}

QString format_snr_db(double db) {
  return QString::number(db, 'f', 1) + QStringLiteral(" dB");
}

QString format_percent(double fraction) {
  return QString::number(100.0 * fraction, 'g', 3) + QStringLiteral(" %");
}

QString format_byte_count(double bytes) {
  return QString::fromStdString(planners::format_bytes(bytes));
}

QString format_seconds(double seconds) {
  if (seconds < 1.0) return QString::number(std::round(seconds * 1000.0)) + QStringLiteral(" ms");
  return QString::number(seconds, 'f', 2) + QStringLiteral(" s");
}

}  // namespace kvlab::gui
