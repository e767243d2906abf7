#include "common/model_capture_form.h"

#include <atomic>
#include <filesystem>
#include <utility>

#include <QCheckBox>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>

#include "common/capture_runner.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/number_fields.h"
#include "kvlab/engine/sources/cache_file.h"

namespace kvlab::gui {

namespace {

constexpr int kDefaultMaxTokens = 256;
constexpr int kPromptLines = 4;
constexpr qint64 kMaxPromptFileBytes = 4 << 20;  // a prompt, not a corpus
constexpr int kGeneratedPreviewChars = 160;

// Every capture gets its own number, so a source's cache key changes with each capture (also
// across the Compression and Eviction views' panels).
std::uint64_t next_capture_id() {
  static std::atomic<std::uint64_t> counter{0};
  return ++counter;
}

QString elided(const QString& text, int chars) {
  QString t = text.simplified();
  if (t.size() > chars) t = t.left(chars - 1) + QChar(0x2026);
  return t;
}

QWidget* row_of(QWidget* parent, std::initializer_list<std::pair<QWidget*, int>> widgets) {
  auto* row = new QWidget(parent);
  auto* layout = new QHBoxLayout(row);
  layout->setContentsMargins(0, 0, 0, 0);
  for (const auto& [w, stretch] : widgets) layout->addWidget(w, stretch);
  return row;
}

}  // namespace

ModelCaptureForm::ModelCaptureForm(QWidget* parent) : QObject(parent), m_parent(parent) {
  m_runner = new CaptureRunner(this);

  m_model = new QLineEdit(parent);

  m_model->setObjectName(QStringLiteral("capture_model"));
  m_model->setPlaceholderText(tr(".gguf, llama2.c .bin or Hugging Face folder"));
  m_model->setToolTip(
      tr("A GGUF model (llama or qwen2, its tokenizer inside), a llama2.c checkpoint (.bin, its "
         "tokenizer tok*.bin next to it) or a Hugging Face folder (config.json, "
         "model.safetensors, tokenizer.json)"));
  auto* browse_file = new QPushButton(tr("File…"), parent);
  browse_file->setToolTip(tr("A GGUF model (.gguf) or a llama2.c checkpoint (.bin)"));
  auto* browse_folder = new QPushButton(tr("Folder…"), parent);
  browse_folder->setToolTip(tr("A Hugging Face checkpoint folder with config.json"));
  m_model_row = row_of(parent, {{m_model, 1}, {browse_file, 0}, {browse_folder, 0}});

  m_prompt = new QPlainTextEdit(parent);

  m_prompt->setObjectName(QStringLiteral("capture_prompt"));
  m_prompt->setPlainText(QStringLiteral("Once upon a time"));
  m_prompt->setPlaceholderText(tr("The prompt; BOS is added"));
  m_prompt->setToolTip(
      tr("The text the model reads (BOS is added); the cache holds its K and V and those of the "
         "generated continuation"));
  m_prompt->setTabChangesFocus(true);
  m_prompt->setFixedHeight(m_prompt->fontMetrics().lineSpacing() * kPromptLines +
                           2 * (m_prompt->frameWidth() + 4));
  m_prompt_file_button = new QPushButton(tr("From file…"), parent);
  m_prompt_file_button->setToolTip(tr("Read the prompt from a text file"));
  m_prompt_file_row = row_of(parent, {{new QWidget(parent), 1}, {m_prompt_file_button, 0}});

  m_max_tokens = new IntField(parent);

  m_max_tokens->setObjectName(QStringLiteral("capture_max_tokens"));
  m_max_tokens->setRange(0, 1 << 20);
  m_max_tokens->setSingleStep(64);
  m_max_tokens->setValue(kDefaultMaxTokens);
  m_max_tokens->setSuffix(tr(" tokens"));
  m_max_tokens->setToolTip(
      tr("Greedy continuation after the prompt; it stops early at EOS or the model's context"));
  m_pre_rope = new QCheckBox(tr("Keys before RoPE"), parent);
  m_pre_rope->setObjectName(QStringLiteral("capture_pre_rope"));
  m_pre_rope->setToolTip(tr("Capture keys before the rotary embedding instead of after it"));
  m_generate_row = row_of(parent, {{m_max_tokens, 1}, {m_pre_rope, 0}});

  m_capture_button = new QPushButton(tr("Capture"), parent);

  m_capture_button->setObjectName(QStringLiteral("capture"));
  m_capture_button->setToolTip(tr("Run the model on the prompt and keep its KV cache"));
  m_cancel_button = new QPushButton(tr("Cancel"), parent);
  m_cancel_button->setObjectName(QStringLiteral("capture_cancel"));
  m_cancel_button->setToolTip(tr("Stop the capture; the previous capture, if any, is kept"));
  m_save_button = new QPushButton(tr("Save…"), parent);
  m_save_button->setObjectName(QStringLiteral("capture_save"));
  m_save_button->setToolTip(tr("Write the captured cache as .safetensors"));
  m_buttons_row = row_of(parent, {{m_capture_button, 1}, {m_cancel_button, 1}, {m_save_button, 1}});

  m_progress = new QProgressBar(parent);

  m_progress->setObjectName(QStringLiteral("capture_progress"));
  m_progress->setRange(0, 100);
  m_progress->setToolTip(tr("How far the capture has got"));
  m_status = new QLabel(tr("No capture yet."), parent);
  m_status->setObjectName(QStringLiteral("capture_status"));
  m_status->setWordWrap(true);
  m_status->setTextFormat(Qt::PlainText);
  m_status->setTextInteractionFlags(Qt::TextSelectableByMouse);
  style::make_muted(m_status);
  m_error = new QLabel(parent);
  m_error->setObjectName(QStringLiteral("capture_error"));
  m_error->setWordWrap(true);
  m_error->setTextFormat(Qt::PlainText);
  m_error->setTextInteractionFlags(Qt::TextSelectableByMouse);
  style::make_error_banner(m_error);

  connect(browse_file, &QPushButton::clicked, this, [this] { browse_model(false); });
  connect(browse_folder, &QPushButton::clicked, this, [this] { browse_model(true); });
  connect(m_prompt_file_button, &QPushButton::clicked, this, &ModelCaptureForm::browse_prompt);
  connect(m_capture_button, &QPushButton::clicked, this, [this] { start_capture(); });
  connect(m_cancel_button, &QPushButton::clicked, this, &ModelCaptureForm::cancel_capture);
  connect(m_save_button, &QPushButton::clicked, this, &ModelCaptureForm::browse_save);
  connect(m_runner, &CaptureRunner::progress, this, [this](int percent, const QString& stage) {
    m_progress->setValue(percent);
    m_status->setText(tr("%1… %2%").arg(stage).arg(percent));
  });
  connect(m_runner, &CaptureRunner::succeeded, this, &ModelCaptureForm::on_succeeded);
  connect(m_runner, &CaptureRunner::failed, this, &ModelCaptureForm::on_failed);
  set_capturing(false);
}

ModelCaptureForm::~ModelCaptureForm() = default;

void ModelCaptureForm::add_rows(QFormLayout* form) {
  m_form = form;
  form->addRow(tr("Model"), m_model_row);
  form->addRow(tr("Prompt"), m_prompt);
  form->addRow(QString(), m_prompt_file_row);
  form->addRow(tr("Generate"), m_generate_row);
  form->addRow(m_buttons_row);
  form->addRow(m_progress);
  form->addRow(m_status);
  form->addRow(m_error);
  update_rows();
}

void ModelCaptureForm::set_rows_visible(bool visible) {
  m_rows_visible = visible;
  update_rows();
}

void ModelCaptureForm::update_rows() {
  const auto show = [this](QWidget* w, bool visible) {
    if (m_form) {
      m_form->setRowVisible(w, visible);
    } else {
      w->setVisible(visible);
    }
  };
  for (QWidget* w : {m_model_row, static_cast<QWidget*>(m_prompt), m_prompt_file_row,
                     m_generate_row, m_buttons_row, static_cast<QWidget*>(m_status)}) {
    show(w, m_rows_visible);
  }
  show(m_progress, m_rows_visible && is_capturing());
  show(m_error, m_rows_visible && !m_last_error.isEmpty());
}

void ModelCaptureForm::set_model(const QString& path) {
  m_model->setText(path);
}

void ModelCaptureForm::set_prompt(const QString& text) {
  m_prompt->setPlainText(text);
}

bool ModelCaptureForm::load_prompt_file(const QString& path) {
  QFile file(path);
  if (!file.open(QIODevice::ReadOnly)) {
    show_error(tr("%1: cannot open the prompt file: %2").arg(path, file.errorString()));
    return false;
  }
  if (file.size() > kMaxPromptFileBytes) {
    show_error(tr("%1: %2 bytes, more than a prompt (at most %3 bytes)")
                   .arg(path)
                   .arg(file.size())
                   .arg(kMaxPromptFileBytes));
    return false;
  }
  m_prompt->setPlainText(QString::fromUtf8(file.readAll()));
  clear_error();
  return true;
}

bool ModelCaptureForm::start_capture() {
  if (is_capturing()) return false;
  const QString model = m_model->text().trimmed();
  if (model.isEmpty()) {
    show_error(
        tr("No model chosen: pick a .gguf file, a llama2.c .bin or a Hugging Face folder first."));
    return false;
  }
  CaptureJob job;
  job.model = model.toStdString();
  job.prompt = m_prompt->toPlainText().toStdString();
  job.config.max_tokens = m_max_tokens->value();
  job.config.pre_rope = m_pre_rope->isChecked();
  if (!m_runner->start(job)) return false;
  clear_error();
  set_capturing(true);
  m_progress->setValue(0);
  m_status->setText(tr("Loading %1…").arg(QFileInfo(model).fileName()));
  return true;
}

void ModelCaptureForm::cancel_capture() {
  if (is_capturing()) m_runner->cancel();
}

bool ModelCaptureForm::is_capturing() const {
  return m_runner->busy();
}

bool ModelCaptureForm::wait_until_done(int timeout_ms) {
  return m_runner->wait_until_done(timeout_ms);
}

void ModelCaptureForm::on_succeeded(const CaptureOutcome& outcome) {
  m_captured = outcome.cache;
  m_captured_model = QString::fromStdString(outcome.job.model);
  m_capture_id = next_capture_id();
  set_capturing(false);
  const KvCache& c = *m_captured;
  const int generated = c.tokens() - outcome.prompt_tokens;
  QString text = tr("Captured %1 tokens (%2 prompt + %3 generated) from %4: %5 layers · %6 KV "
                    "heads · head_dim %7 · %8 keys")
                     .arg(c.tokens())
                     .arg(outcome.prompt_tokens)
                     .arg(generated)
                     .arg(QFileInfo(m_captured_model).fileName())
                     .arg(c.shape.layers)
                     .arg(c.shape.kv_heads)
                     .arg(c.shape.head_dim)
                     .arg(outcome.job.config.pre_rope ? tr("pre-RoPE") : tr("post-RoPE"));
  if (!outcome.generated.trimmed().isEmpty()) {
    text += QStringLiteral("\n\u201c") + elided(outcome.generated, kGeneratedPreviewChars) +
            QStringLiteral("\u201d");
  }
  m_status->setText(text);
  emit captured_changed();
}

void ModelCaptureForm::on_failed(const QString& message, bool cancelled) {
  set_capturing(false);
  if (cancelled) {
    m_status->setText(m_captured ? tr("Capture cancelled; the previous capture is kept.")
                                 : tr("Capture cancelled."));
    return;
  }
  m_status->setText(m_captured ? tr("Capture failed; the previous capture is kept.")
                               : tr("No capture yet."));
  show_error(tr("The capture failed: %1").arg(message));
}

bool ModelCaptureForm::save_capture(const QString& path) {
  if (!m_captured) {
    show_error(tr("Nothing to save: capture a model first."));
    return false;
  }
  QString target = path;
  if (!target.endsWith(QStringLiteral(".safetensors"), Qt::CaseInsensitive)) {
    target += QStringLiteral(".safetensors");
  }
  if (auto s = save_cache_file(*m_captured, std::filesystem::path(target.toStdString())); !s) {
    show_error(tr("The capture could not be saved: %1").arg(QString::fromStdString(s.message())));
    return false;
  }
  clear_error();
  m_status->setText(m_status->text().section(QLatin1Char('\n'), 0, 0) + QLatin1Char('\n') +
                    tr("Saved to %1").arg(target));
  return true;
}

void ModelCaptureForm::browse_model(bool folder) {
  const QString current = m_model->text().trimmed();
  const QString start = current.isEmpty() ? QString() : QFileInfo(current).path();
  const QString path =
      folder ? QFileDialog::getExistingDirectory(m_parent, tr("Hugging Face model folder"), start)
             : QFileDialog::getOpenFileName(
                   m_parent, tr("Model file"), start,
                   tr("Models (*.gguf *.bin);;GGUF models (*.gguf);;llama2.c checkpoints (*.bin);;"
                      "All files (*)"));
  if (!path.isEmpty()) m_model->setText(path);
}

void ModelCaptureForm::browse_prompt() {
  const QString path = QFileDialog::getOpenFileName(m_parent, tr("Prompt file"), QString(),
                                                    tr("Text (*.txt *.md);;All files (*)"));
  if (!path.isEmpty()) load_prompt_file(path);
}

void ModelCaptureForm::browse_save() {
  const QString start = m_captured_model.isEmpty()
                            ? QString()
                            : QFileInfo(m_captured_model).path() + QStringLiteral("/capture");
  const QString path = QFileDialog::getSaveFileName(m_parent, tr("Save the captured cache"), start,
                                                    tr("safetensors (*.safetensors)"));
  if (!path.isEmpty()) save_capture(path);
}

void ModelCaptureForm::set_capturing(bool capturing) {
  m_capture_button->setEnabled(!capturing);
  m_cancel_button->setEnabled(capturing);
  m_save_button->setEnabled(!capturing && m_captured != nullptr);
  m_model_row->setEnabled(!capturing);
  m_prompt->setReadOnly(capturing);
  m_prompt_file_button->setEnabled(!capturing);
  m_max_tokens->setEnabled(!capturing);
  m_pre_rope->setEnabled(!capturing);
  update_rows();
}

void ModelCaptureForm::show_error(const QString& engine_message) {
  const QString message = in_gui_terms(engine_message);
  m_last_error = message;
  m_error->setText(message);
  update_rows();
}

void ModelCaptureForm::clear_error() {
  m_last_error.clear();
  update_rows();
}

}  // namespace kvlab::gui
