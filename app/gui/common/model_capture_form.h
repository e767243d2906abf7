// The "model capture" rows of the Source panel: a model (a llama2.c .bin with its tok*.bin next
// to it, or a Hugging Face folder), a prompt typed or read from a file, how many tokens to
// generate after it, and pre-RoPE keys. Capture runs on a worker thread (CaptureRunner) with
// progress and Cancel; the captured KvCache becomes the source and can be saved as .safetensors.
// Errors (a missing tokenizer, a folder without config.json, a tensor of the wrong shape) are
// shown in the rows' error box with the engine's message.
//
// It is a controller, not a widget: its rows are added to the Source panel's form, so their
// labels line up with the other sources' rows.
#pragma once

#include <cstdint>
#include <memory>

#include <QObject>
#include <QString>

#include "kvlab/engine/core/kv_cache.h"

class QCheckBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QWidget;

namespace kvlab::gui {

class CaptureRunner;
struct CaptureOutcome;

class ModelCaptureForm : public QObject {
  Q_OBJECT

 public:
  // The widgets are children of `parent`; add_rows() puts them in `form` (once), and
  // set_rows_visible() shows or hides them (the progress bar and the error box only when they
  // have something to show).
  explicit ModelCaptureForm(QWidget* parent);
  ~ModelCaptureForm() override;

  void add_rows(QFormLayout* form);
  void set_rows_visible(bool visible);

  void set_model(const QString& path);
  void set_prompt(const QString& text);
  // Reads a prompt file into the prompt box; false (and the error shown) when it cannot.
  bool load_prompt_file(const QString& path);

  // Starts a capture with the fields' values; false while one runs or when a field is missing
  // (the error is shown).
  bool start_capture();
  void cancel_capture();
  bool is_capturing() const;
  // Processes events until the running capture (if any) has finished; true when none runs.
  bool wait_until_done(int timeout_ms);
  // Writes the captured cache to `path` (.safetensors, appended when missing); false and the
  // error shown when there is no capture or the file cannot be written.
  bool save_capture(const QString& path);

  // The last successful capture (null before one), the model it came from, and a number that
  // changes with every capture (0 before one).
  std::shared_ptr<const KvCache> captured() const { return m_captured; }
  const QString& captured_model() const { return m_captured_model; }
  std::uint64_t capture_id() const { return m_capture_id; }
  const QString& last_error() const { return m_last_error; }

  // The widgets are named "capture_model", "capture_prompt", "capture_max_tokens",
  // "capture_pre_rope", "capture" (the button), "capture_cancel", "capture_save",
  // "capture_progress", "capture_status" and "capture_error", for finding them under `parent`.
  QPushButton* cancel_button() const { return m_cancel_button; }
  QProgressBar* progress_bar() const { return m_progress; }

 signals:
  // A capture finished and is now the source's cache.
  void captured_changed();

 private:
  void browse_model(bool folder);
  void browse_prompt();
  void browse_save();
  void on_succeeded(const CaptureOutcome& outcome);
  void on_failed(const QString& message, bool cancelled);
  void set_capturing(bool capturing);
  void show_error(const QString& message);
  void clear_error();
  void update_rows();

  QWidget* m_parent = nullptr;
  QFormLayout* m_form = nullptr;
  bool m_rows_visible = true;
  CaptureRunner* m_runner = nullptr;
  QWidget* m_model_row = nullptr;
  QLineEdit* m_model = nullptr;
  QPlainTextEdit* m_prompt = nullptr;
  QPushButton* m_prompt_file_button = nullptr;
  QWidget* m_prompt_file_row = nullptr;
  QWidget* m_generate_row = nullptr;
  QSpinBox* m_max_tokens = nullptr;
  QCheckBox* m_pre_rope = nullptr;
  QWidget* m_buttons_row = nullptr;
  QPushButton* m_capture_button = nullptr;
  QPushButton* m_cancel_button = nullptr;
  QPushButton* m_save_button = nullptr;
  QProgressBar* m_progress = nullptr;
  QLabel* m_status = nullptr;
  QLabel* m_error = nullptr;

  std::shared_ptr<const KvCache> m_captured;
  QString m_captured_model;
  std::uint64_t m_capture_id = 0;
  QString m_last_error;
};

}  // namespace kvlab::gui
