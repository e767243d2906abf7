#include "common/gui_format.h"

#include <QDateTime>
#include <QRegularExpression>

#include "kvlab/store/run_records.h"

namespace kvlab::gui {

namespace {

// One way of writing each unit for the app, the command line and the HTML report.
QString formatted(double value, MetricFormat format) {
  return QString::fromStdString(format_metric_value(value, format));
}

}  // namespace

QString format_ratio(double ratio) {
  return formatted(ratio, MetricFormat::Ratio);
}

QString format_bits_per_value(double bits) {
  return formatted(bits, MetricFormat::Bits);
}

QString format_metric(double value) {
  return formatted(value, MetricFormat::Number);
}

QString format_snr_db(double db) {
  return formatted(db, MetricFormat::Decibels);
}

QString format_percent(double fraction) {
  return formatted(fraction, MetricFormat::Percent);
}

QString format_signed_percent(double fraction) {
  return formatted(fraction, MetricFormat::SignedPercent);
}

QString format_byte_count(double bytes) {
  return formatted(bytes, MetricFormat::Bytes);
}

QString format_local_time(const std::string& created_at, bool seconds) {
  const QDateTime t = QDateTime::fromString(QString::fromStdString(created_at), Qt::ISODateWithMs);
  if (!t.isValid()) return QString::fromStdString(created_at);
  return t.toLocalTime().toString(seconds ? QStringLiteral("yyyy-MM-dd HH:mm:ss")
                                          : QStringLiteral("yyyy-MM-dd HH:mm"));
}

QString in_gui_terms(const QString& message) {
  // The engine names the command line's options; the app names its fields.
  static const std::pair<const char*, const char*> kFields[] = {
      {"budget", "Budget"},
      {"layer-budgets", "Per-layer budgets"},
      {"steps", "Decode steps"},
      {"sinks", "Sinks"},
      {"recent-fraction", "Recent share"},
      {"recent", "Grace steps"},
      {"threshold", "Threshold"},
      {"w-attention", "Attention weight"},
      {"w-recency", "Recency weight"},
      {"merge-similarity", "Merge similarity"},
      {"merge-window", "Merge window"},
      {"quant", "Quantize kept"},
      {"top-k", "Top-k"},
      {"needle", "Needle position"},
      {"protect", "Protected tokens"},
      {"bits", "Bits"},
      {"group-size", "Group size"},
      {"residual", "Residual"},
      {"int8-tokens", "INT8 tokens"},
      {"old-bits", "Old bits"},
      {"block-size", "Block size"},
      {"rel-scale", "Rel. scale"},
      {"codec", "Codec"},
      {"param-dtype", "Param. dtype"},
      {"calib-tokens", "Calibration"},
      {"no-attn-rot", "Hadamard rotation (attn_rot)"},
      {"levels", "Levels"},
      {"outliers", "Outliers"},
      {"qjl", "QJL"},
      {"rotation", "Rotation"},
      {"rotation-seed", "Rotation seed"},
      {"rotate-values", "Rotate values too"},
      {"method", "Method"},
      {"policy", "Policy"},
      {"context", "Context"},
      {"layers", "Layers"},
      {"seed", "Seed"},
      {"source", "Source"},
      {"scheme", "Scheme"},
      {"model", "Model"},
      {"gpu", "GPU"},
      {"tp", "Tensor parallel"},
      {"pp", "Pipeline parallel"},
      {"reserve-gib", "Reserve"},
      {"window", "Window"},
      {"backend", "Backend"},
  };
  static const QRegularExpression flag(QStringLiteral("--([a-z][a-z0-9-]*)"));
  QString out;
  qsizetype at = 0;
  for (auto it = flag.globalMatch(message); it.hasNext();) {
    const QRegularExpressionMatch m = it.next();
    out += message.mid(at, m.capturedStart() - at);
    const QString name = m.captured(1);
    QString field;
    for (const auto& [option, label] : kFields) {
      if (name == QLatin1String(option)) field = QObject::tr(label);
    }
    if (field.isEmpty()) {  // an option without a field of its own: its words
      field = name;
      field.replace(QLatin1Char('-'), QLatin1Char(' '));
      field[0] = field[0].toUpper();
    }
    out += field;
    at = m.capturedEnd();
  }
  return out + message.mid(at);
}

QString format_seconds(double seconds) {
  return formatted(seconds, MetricFormat::Seconds);
}

QString method_and_label(const std::string& method, const std::string& label) {
  if (label.empty() || method.find(label) != std::string::npos) {
    return QString::fromStdString(method);
  }
  if (label.find(method) != std::string::npos) return QString::fromStdString(label);
  return QStringLiteral("%1 · %2").arg(QString::fromStdString(method),
                                       QString::fromStdString(label));
}

}  // namespace kvlab::gui
