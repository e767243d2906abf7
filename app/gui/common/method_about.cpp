#include "common/method_about.h"

#include <QObject>

#include "kvlab/engine/quant/method_about.h"

namespace kvlab::gui {

QString method_description(MethodKind kind) {
  const std::string_view text = method_summary(kind);  // the text `kvlab methods` prints
  return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size()));
}

QString method_citation(MethodKind kind) {
  const std::string_view ref = method_reference(kind);
  return QObject::tr("Reference: %1")
      .arg(QString::fromUtf8(ref.data(), static_cast<qsizetype>(ref.size())));
}

}  // namespace kvlab::gui
