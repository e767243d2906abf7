// Where the KV cache comes from: a synthetic preset (layers, context, seed) or a file
// (.safetensors, .npz, .npy, or a folder of .npy files).
#pragma once

#include <string>

#include <QGroupBox>
#include <QString>

#include "kvlab/engine/synthetic.h"

class QComboBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace kvlab::gui {

struct SourceSpec {
  enum class Kind { Synthetic, File };
  Kind kind = Kind::Synthetic;
  SyntheticConfig synthetic;
  QString file;

  // Equal keys produce the same cache, so the generated or loaded cache can be reused when only
  // the method changes. A file's key includes its size and modification time.
  std::string cache_key() const;
  QString describe() const;  // "synthetic llama3-8b, 1024 tokens, seed 1"
};

class SourcePanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit SourcePanel(QWidget* parent = nullptr);

  SourceSpec spec() const;
  void set_synthetic(const SyntheticConfig& config);
  void set_file(const QString& path);

  QComboBox* preset_combo() const { return m_preset; }
  QSpinBox* layers_spin() const { return m_layers; }
  QSpinBox* context_spin() const { return m_context; }

 signals:
  void changed();

 private:
  void on_kind_changed();
  void on_preset_changed();
  void browse(bool folder);

  QFormLayout* m_form = nullptr;
  QComboBox* m_kind = nullptr;
  QComboBox* m_preset = nullptr;
  QSpinBox* m_layers = nullptr;
  QSpinBox* m_context = nullptr;
  QSpinBox* m_seed = nullptr;
  QWidget* m_file_row = nullptr;
  QLineEdit* m_file = nullptr;
  QLabel* m_shape = nullptr;
};

}  // namespace kvlab::gui
