#include "kvlab/gui/method_panel.h"

#include <algorithm>
#include <array>
#include <utility>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QSpinBox>

#include "kvlab/gui/explain.h"
#include "kvlab/gui/gui_style.h"
#include "kvlab/gui/number_fields.h"

namespace kvlab::gui {

namespace {

QString about(MethodKind kind) {
  switch (kind) {
    case MethodKind::Int8:
      return QObject::tr("Symmetric INT8, one scale max|x|/127 per tensor: the naive baseline.");
    case MethodKind::Int4:
      return QObject::tr("Symmetric INT4, one scale max|x|/7 per tensor: the naive baseline.");
    case MethodKind::Kivi:
      return QObject::tr(
          "KIVI (Liu et al. 2024): keys per channel over groups of G tokens, values per token; "
          "the newest R tokens stay fp16.");
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      return QObject::tr(
          "FP8 with a per-tensor (or per-head) scale, as vLLM's kv_cache_dtype=fp8.");
    case MethodKind::Tiered:
      return QObject::tr(
          "Age-tiered: newest tokens fp16, the next ones INT8, the oldest at fewer bits.");
    case MethodKind::KvComp:
      return QObject::tr(
          "KVComp (Jiang et al. 2025) blockwise, error-bounded: step = rel_scale × (max − min) of "
          "each block channel (keys) or token (values); uint8 codes.");
  }
  return {};
}

QSpinBox* make_spin(QWidget* parent, int lo, int hi, int value, const QString& tip) {
  auto* spin = new IntField(parent);
  spin->setRange(lo, hi);
  spin->setValue(value);
  spin->setToolTip(tip);
  return spin;
}

QComboBox* make_bits_combo(QWidget* parent) {
  auto* combo = new QComboBox(parent);
  combo->addItem(QStringLiteral("2"), 2);
  combo->addItem(QStringLiteral("4"), 4);
  return combo;
}

}  // namespace

MethodPanel::MethodPanel(QWidget* parent) : QGroupBox(tr("Method"), parent) {
  const MethodConfig defaults;
  m_method = new QComboBox(this);
  for (auto id : method_ids()) m_method->addItem(QString::fromUtf8(id.data(), id.size()));
  m_method->setToolTip(
      tr("The compression method; only the fields it uses are shown below (hover each for what "
         "it changes)"));
  m_about = new QLabel(this);
  m_about->setWordWrap(true);
  style::make_muted(m_about);

  m_bits = make_bits_combo(this);
  m_bits->setToolTip(
      tr("Bits per quantized code: 2 or 4, each group storing a float scale and minimum beside "
         "its codes"));
  m_group_size = make_spin(this, 1, 4096, defaults.group_size,
                           tr("G: keys are quantized per channel over groups of G tokens, values "
                              "per token over groups of G channels; each group keeps a float "
                              "scale and minimum"));
  m_residual = make_spin(this, 0, 1 << 24, defaults.residual,
                         tr("R: the newest R tokens stay in fp16 (counted as residual bytes); "
                            "older ones are quantized"));
  m_residual->setSuffix(tr(" tokens"));
  m_per_head = new QCheckBox(tr("one scale per KV head"), this);
  m_per_head->setToolTip(
      tr("One float scale per KV head instead of one for the whole tensor, so each head uses "
         "FP8's whole range (a few more bytes of scales)"));
  m_int8_tokens = make_spin(this, 0, 1 << 24, defaults.int8_tokens,
                            tr("Tokens after the fp16 window kept in INT8; older tokens drop to "
                               "the old bits"));
  m_int8_tokens->setSuffix(tr(" tokens"));
  m_old_bits = make_bits_combo(this);
  m_old_bits->setToolTip(
      tr("Bits per code (4 or 2) for tokens older than the fp16 window and the INT8 tier"));
  m_block_size = make_spin(this, 1, 4096, defaults.block_size,
                           tr("B: keys are quantized per channel within blocks of B tokens "
                              "(values per token); also the token block of the entropy coder"));
  m_rel_scale = new RealField(this);
  m_rel_scale->setDecimals(4);
  m_rel_scale->setRange(1.0 / 255.0, 1.0);
  m_rel_scale->setSingleStep(0.01);
  m_rel_scale->setValue(defaults.rel_scale);
  m_rel_scale->setToolTip(
      tr("step = rel. scale × (max − min) of each unit (a block's channel for keys, a token for "
         "values); code = round((x − min) / step) as uint8, so the error is at most step / 2"));

  m_codec = new QComboBox(this);
  m_codec->addItem(tr("none"), -1);
  m_codec->setItemData(0, tr("No entropy coding: the uint8 codes are stored as bytes"),
                       Qt::ToolTipRole);
  const std::array<std::pair<CodecKind, QString>, 3> codecs{{
      {CodecKind::BitPack,
       tr("Fixed-width bit packing: every code in the smallest of 2, 4 or 8 bits that holds the "
          "largest code")},
      {CodecKind::VarWidth,
       tr("Variable width: each group of 16 codes packed at the width of its largest code, the "
          "width in a 4-bit header")},
      {CodecKind::Huffman,
       tr("Canonical Huffman (max 12 bits) with one codebook per layer and K/V built from the "
          "prefill histogram, as in KVComp; unseen codes take an escape")},
  }};
  for (const auto& [kind, tip] : codecs) {
    const auto id = codec_id(kind);
    m_codec->addItem(QString::fromUtf8(id.data(), static_cast<qsizetype>(id.size())),
                     static_cast<int>(kind));
    m_codec->setItemData(m_codec->count() - 1, tip, Qt::ToolTipRole);
  }
  m_codec->setToolTip(
      tr("Entropy coding of KVComp's byte codes, in blocks of B tokens per head; the results "
         "then compare all three codecs and the entropy bound"));

  m_form = new QFormLayout(this);
  m_form->addRow(tr("Method"), m_method);
  m_form->addRow(m_about);
  m_form->addRow(tr("Bits"), m_bits);
  m_form->addRow(tr("Group size"), m_group_size);
  m_form->addRow(tr("Residual"), m_residual);
  m_form->addRow(tr("Scale"), m_per_head);
  m_form->addRow(tr("INT8 tokens"), m_int8_tokens);
  m_form->addRow(tr("Old bits"), m_old_bits);
  m_form->addRow(tr("Block size"), m_block_size);
  m_form->addRow(tr("Rel. scale"), m_rel_scale);
  m_form->addRow(tr("Codec"), m_codec);
  explain::share_with_captions(m_form);

  connect(m_method, &QComboBox::currentIndexChanged, this, [this] {
    update_visible_fields();
    emit changed();
  });
  for (QComboBox* c : {m_bits, m_old_bits, m_codec}) {
    connect(c, &QComboBox::currentIndexChanged, this, &MethodPanel::changed);
  }
  for (QSpinBox* s : {m_group_size, m_residual, m_int8_tokens, m_block_size}) {
    connect(s, &QSpinBox::valueChanged, this, &MethodPanel::changed);
  }
  connect(m_per_head, &QCheckBox::toggled, this, &MethodPanel::changed);
  connect(m_rel_scale, &QDoubleSpinBox::valueChanged, this, &MethodPanel::changed);

  set_config(defaults);
}

MethodConfig MethodPanel::config() const {
  MethodConfig c;
  if (auto kind = parse_method(m_method->currentText().toStdString())) c.kind = *kind;
  c.bits = m_bits->currentData().toInt();
  c.group_size = m_group_size->value();
  c.residual = m_residual->value();
  c.per_head_scale = m_per_head->isChecked();
  c.int8_tokens = m_int8_tokens->value();
  c.old_bits = m_old_bits->currentData().toInt();
  c.block_size = m_block_size->value();
  c.rel_scale = m_rel_scale->value();
  const int codec = m_codec->currentData().toInt();
  if (c.kind == MethodKind::KvComp && codec >= 0) c.codec = static_cast<CodecKind>(codec);
  return c;
}

void MethodPanel::set_config(const MethodConfig& c) {
  const auto id = method_id(c.kind);
  m_method->setCurrentText(QString::fromUtf8(id.data(), id.size()));
  m_bits->setCurrentIndex(m_bits->findData(c.bits));
  m_group_size->setValue(c.group_size);
  m_residual->setValue(c.residual);
  m_per_head->setChecked(c.per_head_scale);
  m_int8_tokens->setValue(c.int8_tokens);
  m_old_bits->setCurrentIndex(m_old_bits->findData(c.old_bits));
  m_block_size->setValue(c.block_size);
  m_rel_scale->setValue(c.rel_scale);
  m_codec->setCurrentIndex(
      std::max(0, m_codec->findData(c.codec ? static_cast<int>(*c.codec) : -1)));
  update_visible_fields();
}

bool MethodPanel::is_field_visible(QWidget* field) const {
  int row = -1;
  QFormLayout::ItemRole role{};
  m_form->getWidgetPosition(field, &row, &role);
  return row >= 0 && m_form->isRowVisible(row);
}

void MethodPanel::update_visible_fields() {
  const MethodKind kind = config().kind;
  const bool kivi = kind == MethodKind::Kivi;
  const bool tiered = kind == MethodKind::Tiered;
  const bool fp8 = kind == MethodKind::Fp8E4M3 || kind == MethodKind::Fp8E5M2;
  const bool kvcomp = kind == MethodKind::KvComp;
  m_form->setRowVisible(m_bits, kivi);
  m_form->setRowVisible(m_group_size, kivi || tiered);
  m_form->setRowVisible(m_residual, kivi || tiered);
  m_form->setRowVisible(m_per_head, fp8);
  m_form->setRowVisible(m_int8_tokens, tiered);
  m_form->setRowVisible(m_old_bits, tiered);
  m_form->setRowVisible(m_block_size, kvcomp);
  m_form->setRowVisible(m_rel_scale, kvcomp);
  m_form->setRowVisible(m_codec, kvcomp);
  m_about->setText(about(kind));
}

}  // namespace kvlab::gui
