#include "common/source_spec.h"

#include <QDateTime>
#include <QFileInfo>
#include <QObject>

namespace kvlab::gui {

std::string SourceSpec::cache_key() const {
  if (kind == Kind::Model) return "model-capture:" + std::to_string(capture_id);
  if (kind == Kind::File) {
    const QFileInfo info(file);
    return "file:" + info.absoluteFilePath().toStdString() + ":" + std::to_string(info.size()) +
           ":" + std::to_string(info.lastModified().toMSecsSinceEpoch());
  }
  const SyntheticConfig& s = synthetic;
  return "synthetic:" + s.preset + ":" + std::to_string(s.layers) + ":" +
         std::to_string(s.context) + ":" + std::to_string(s.seed);
}

QString SourceSpec::describe() const {
  if (kind == Kind::Model) {
    if (!captured) return QObject::tr("model capture (none yet)");
    return QObject::tr("model %1, %2 tokens")
        .arg(QFileInfo(model).fileName())
        .arg(captured->tokens());
  }
  if (kind == Kind::File) return QObject::tr("file %1").arg(QFileInfo(file).fileName());
  return QObject::tr("synthetic %1, %2 tokens, seed %3")
      .arg(QString::fromStdString(synthetic.preset))
      .arg(synthetic.context)
      .arg(synthetic.seed);
}

}  // namespace kvlab::gui
