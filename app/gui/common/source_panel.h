// Where the KV cache comes from: a synthetic preset (layers, context, seed), a file
// (.safetensors, .npz, .npy, or a folder of .npy files), or a capture from a real model
// (ModelCaptureForm: the panel runs the model, and the cache it captured is the source).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <QGroupBox>
#include <QString>

#include "common/source_spec.h"
#include "kvlab/engine/sources/synthetic.h"

class QComboBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace kvlab::gui {

class ModelCaptureForm;

class SourcePanel : public QGroupBox {
  Q_OBJECT

 public:
  explicit SourcePanel(QWidget* parent = nullptr);

  SourceSpec spec() const;
  void set_synthetic(const SyntheticConfig& config);
  void set_file(const QString& path);
  // Selects the model-capture source with `path` as the model (the capture starts from its
  // Capture button or model_capture()->start_capture()).
  void set_model(const QString& path);

  ModelCaptureForm* model_capture() const { return m_capture; }

  // The synthetic fields are named "preset", "layers" and "context", for finding them.

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
  ModelCaptureForm* m_capture = nullptr;
};

}  // namespace kvlab::gui
