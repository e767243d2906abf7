// What File ▸ Open and drag-and-drop accept, and the Open Recent list: plain logic, no widgets.
#pragma once

#include <QString>
#include <QStringList>

namespace kvlab::gui {

// Where an opened file goes: KV tensors become the Compression page's file source, a Hugging
// Face config.json becomes an imported model on the Planner page.
enum class OpenedFileKind { KvTensors, ModelConfig, Unknown };

// By extension (case-insensitive): .safetensors, .npy and .npz are KV tensors, .json and .gguf a
// model for the planner; anything else is Unknown.
OpenedFileKind classify_opened_file(const QString& path);

// "KV tensors (.safetensors, .npy, .npz) or a model's config.json or .gguf file", for messages.
QString accepted_files_text();
// The file dialog's filters, the accepted kinds first.
QString open_file_dialog_filter();

// The most recently opened files, newest first, at most `capacity`, each once (by absolute path).
class RecentFiles {
 public:
  static constexpr int kDefaultCapacity = 10;

  explicit RecentFiles(int capacity = kDefaultCapacity) : m_capacity(capacity) {}

  // Moves (or adds) the file to the front, as an absolute path, and drops the oldest past the
  // capacity.
  void add(const QString& path);
  // Replaces the list (from the settings), keeping the first `capacity` distinct entries.
  void set(const QStringList& paths);
  void clear() { m_paths.clear(); }
  bool remove(const QString& path);
  // Removes the files that no longer exist; returns them, in list order.
  QStringList remove_missing();

  const QStringList& paths() const { return m_paths; }
  int capacity() const { return m_capacity; }

 private:
  int m_capacity;
  QStringList m_paths;
};

}  // namespace kvlab::gui
