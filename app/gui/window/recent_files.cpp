#include "window/recent_files.h"

#include <QCoreApplication>
#include <QFileInfo>

namespace kvlab::gui {

namespace {

QString absolute(const QString& path) {
  return QFileInfo(path).absoluteFilePath();
}

}  // namespace

OpenedFileKind classify_opened_file(const QString& path) {
  const QString suffix = QFileInfo(path).suffix().toLower();
  if (suffix == QLatin1String("safetensors") || suffix == QLatin1String("npy") ||
      suffix == QLatin1String("npz")) {
    return OpenedFileKind::KvTensors;
  }
  if (suffix == QLatin1String("json") || suffix == QLatin1String("gguf")) {
    return OpenedFileKind::ModelConfig;
  }
  return OpenedFileKind::Unknown;
}

QString accepted_files_text() {
  return QCoreApplication::translate("kvlab",
                                     "KV tensors (.safetensors, .npy, .npz) or a model's "
                                     "config.json or .gguf file");
}

QString open_file_dialog_filter() {
  return QCoreApplication::translate(
      "kvlab",
      "KV tensors and models (*.safetensors *.npy *.npz *.json *.gguf);;"
      "KV tensors (*.safetensors *.npy *.npz);;Hugging Face config.json (*.json);;GGUF models "
      "(*.gguf);;All files (*)");
}

void RecentFiles::add(const QString& path) {
  const QString p = absolute(path);
  m_paths.removeAll(p);
  m_paths.prepend(p);
  while (m_paths.size() > m_capacity) m_paths.removeLast();
}

void RecentFiles::set(const QStringList& paths) {
  m_paths.clear();
  for (const QString& path : paths) {
    if (path.isEmpty()) continue;
    const QString p = absolute(path);
    if (!m_paths.contains(p)) m_paths.append(p);
    if (m_paths.size() >= m_capacity) break;
  }
}

bool RecentFiles::remove(const QString& path) {
  return m_paths.removeAll(absolute(path)) > 0;
}

QStringList RecentFiles::remove_missing() {
  QStringList missing;
  for (const QString& p : m_paths) {
    if (!QFileInfo::exists(p)) missing << p;
  }
  for (const QString& p : missing) m_paths.removeAll(p);
  return missing;
}

}  // namespace kvlab::gui
