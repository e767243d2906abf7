#include "common/source_panel.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QLocale>
#include <QPushButton>
#include <QSpinBox>

#include "common/explain.h"
#include "common/gui_style.h"
#include "common/model_capture_form.h"
#include "common/number_fields.h"

namespace kvlab::gui {

namespace {

constexpr int kDefaultContext = 1024;  // snappy in the GUI; the CLI defaults to 4096
// The kind combo's rows, in SourceSpec::Kind order.
constexpr int kSyntheticRow = 0, kFileRow = 1, kModelRow = 2;

// The preset's shape and its trained context: a hint, since a longer cache is allowed (as on
// the CLI) up to the engine's limits.
QString shape_text(const SyntheticPreset& p) {
  const ModelShape& s = p.shape;
  return QObject::tr("%1 layers · %2 q heads · %3 kv heads · head_dim %4\ntrained to %5 tokens")
      .arg(s.layers)
      .arg(s.q_heads)
      .arg(s.kv_heads)
      .arg(s.head_dim)
      .arg(QLocale().toString(p.max_context));
}

}  // namespace

SourcePanel::SourcePanel(QWidget* parent) : QGroupBox(tr("Source"), parent) {
  m_kind = new QComboBox(this);
  m_kind->addItem(tr("synthetic preset"));
  m_kind->addItem(tr("file…"));
  m_kind->addItem(tr("model capture…"));
  m_kind->setToolTip(
      tr("A seeded synthetic cache shaped like a real model, your own file, or the cache of a "
         "real model run on your prompt"));

  m_preset = new QComboBox(this);

  m_preset->setObjectName(QStringLiteral("preset"));
  for (const auto& p : synthetic_presets()) m_preset->addItem(QString::fromStdString(p.name));
  m_preset->setCurrentText(QStringLiteral("llama3-8b"));
  m_preset->setToolTip(
      tr("A synthetic cache shaped like this model (layers, KV heads, head_dim, RoPE): key "
         "outlier channels, an attention sink, heavy hitters and a needle, with decode-time "
         "queries"));

  m_layers = new IntField(this);

  m_layers->setObjectName(QStringLiteral("layers"));
  m_layers->setRange(0, 512);
  m_layers->setToolTip(tr("How many layers to generate; 0 takes the preset's count"));
  m_context = new IntField(this);
  m_context->setObjectName(QStringLiteral("context"));
  m_context->setRange(1, kMaxSyntheticContext);  // the engine's limit, as on the CLI
  m_context->setSingleStep(256);
  m_context->setValue(kDefaultContext);
  m_context->setSuffix(tr(" tokens"));
  m_context->setToolTip(
      tr("Tokens in the generated cache, up to %1; the cache must fit in the memory free now "
         "(the run says so before it starts when it does not)")
          .arg(QLocale().toString(kMaxSyntheticContext)));
  m_seed = new IntField(this);
  m_seed->setRange(0, 1 << 30);
  m_seed->setValue(1);
  m_seed->setToolTip(
      tr("Seed of the generator: the same preset, size and seed give the same "
         "cache"));

  m_file = new QLineEdit(this);
  m_file->setPlaceholderText(tr(".safetensors, .npz, .npy or a folder"));
  m_file->setToolTip(
      tr("A KV cache: .safetensors, .npz, a .npy of [layers, 2, tokens, kv_heads, head_dim], or "
         "a folder of layers.{i}.key.npy / layers.{i}.value.npy files"));
  auto* browse_file = new QPushButton(tr("File…"), this);
  browse_file->setToolTip(tr("Choose a .safetensors, .npz or .npy cache file"));
  auto* browse_folder = new QPushButton(tr("Folder…"), this);
  browse_folder->setToolTip(tr("A folder of layers.{i}.key.npy / layers.{i}.value.npy files"));
  m_file_row = new QWidget(this);
  auto* file_layout = new QHBoxLayout(m_file_row);
  file_layout->setContentsMargins(0, 0, 0, 0);
  file_layout->addWidget(m_file, 1);
  file_layout->addWidget(browse_file);
  file_layout->addWidget(browse_folder);

  m_shape = new QLabel(this);
  // No word wrap (the text breaks its own line): with a height-for-width row, Qt 6.4's
  // QFormLayout keeps a height from before hidden rows were shown again, and the Preset row
  // came back zero pixels tall after switching sources (issue 43, item 5).
  m_shape->setWordWrap(false);
  style::make_muted(m_shape);
  m_shape->setToolTip(tr("The preset's shape: what the memory formula multiplies"));

  m_form = new QFormLayout(this);
  m_form->addRow(tr("Source"), m_kind);
  m_form->addRow(tr("Preset"), m_preset);
  m_form->addRow(tr("Layers"), m_layers);
  m_form->addRow(tr("Context"), m_context);
  m_form->addRow(tr("Seed"), m_seed);
  m_form->addRow(tr("File"), m_file_row);
  m_form->addRow(QString(), m_shape);
  m_capture = new ModelCaptureForm(this);
  m_capture->add_rows(m_form);
  style::share_with_captions(m_form);

  connect(m_kind, &QComboBox::currentIndexChanged, this, &SourcePanel::on_kind_changed);
  connect(m_preset, &QComboBox::currentIndexChanged, this, &SourcePanel::on_preset_changed);
  for (QSpinBox* spin : {m_layers, m_context, m_seed}) {
    connect(spin, &QSpinBox::valueChanged, this, &SourcePanel::changed);
  }
  connect(m_file, &QLineEdit::textChanged, this, &SourcePanel::changed);
  connect(browse_file, &QPushButton::clicked, this, [this] { browse(false); });
  connect(browse_folder, &QPushButton::clicked, this, [this] { browse(true); });
  connect(m_capture, &ModelCaptureForm::captured_changed, this, &SourcePanel::changed);
  on_preset_changed();
  on_kind_changed();
}

void SourcePanel::on_kind_changed() {
  const int kind = m_kind->currentIndex();
  m_capture->set_rows_visible(kind == kModelRow);
  m_form->setRowVisible(m_file_row, kind == kFileRow);
  for (QWidget* w : {static_cast<QWidget*>(m_preset), static_cast<QWidget*>(m_layers),
                     static_cast<QWidget*>(m_context), static_cast<QWidget*>(m_seed),
                     static_cast<QWidget*>(m_shape)}) {
    m_form->setRowVisible(w, kind == kSyntheticRow);
  }
  emit changed();
}

void SourcePanel::on_preset_changed() {
  const auto preset = find_synthetic_preset(m_preset->currentText().toStdString());
  if (preset) {
    m_layers->setSpecialValueText(tr("preset (%1)").arg(preset->shape.layers));
    m_shape->setText(shape_text(*preset));
  }
  emit changed();
}

void SourcePanel::browse(bool folder) {
  const QString start = m_file->text().isEmpty() ? QString() : QFileInfo(m_file->text()).path();
  const QString path =
      folder ? QFileDialog::getExistingDirectory(this, tr("Folder of .npy files"), start)
             : QFileDialog::getOpenFileName(
                   this, tr("KV cache file"), start,
                   tr("KV caches (*.safetensors *.npz *.npy);;All files (*)"));
  if (!path.isEmpty()) m_file->setText(path);
}

SourceSpec SourcePanel::spec() const {
  SourceSpec s;
  const int kind = m_kind->currentIndex();
  s.kind = kind == kFileRow    ? SourceSpec::Kind::File
           : kind == kModelRow ? SourceSpec::Kind::Model
                               : SourceSpec::Kind::Synthetic;
  s.synthetic.preset = m_preset->currentText().toStdString();
  s.synthetic.layers = m_layers->value();
  s.synthetic.context = m_context->value();
  s.synthetic.seed = static_cast<std::uint64_t>(m_seed->value());
  s.file = m_file->text().trimmed();
  s.captured = m_capture->captured();
  s.model = m_capture->captured_model();
  s.capture_id = m_capture->capture_id();
  return s;
}

void SourcePanel::set_synthetic(const SyntheticConfig& config) {
  m_kind->setCurrentIndex(kSyntheticRow);
  m_preset->setCurrentText(QString::fromStdString(config.preset));
  m_layers->setValue(config.layers);
  m_context->setValue(config.context);
  m_seed->setValue(static_cast<int>(config.seed));
}

void SourcePanel::set_file(const QString& path) {
  m_kind->setCurrentIndex(kFileRow);
  m_file->setText(path);
}

void SourcePanel::set_model(const QString& path) {
  m_kind->setCurrentIndex(kModelRow);
  m_capture->set_model(path);
}

}  // namespace kvlab::gui
