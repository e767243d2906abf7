#include "compression/method_panel.h"

#include <algorithm>
#include <array>
#include <climits>
#include <initializer_list>
#include <utility>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QLabel>
#include <QSignalBlocker>
#include <QSpinBox>

#include "common/explain.h"
#include "common/gui_style.h"
#include "common/method_about.h"
#include "common/number_fields.h"

namespace kvlab::gui {

namespace {

QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
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

// The bit widths the engine accepts for `kind` (method.cpp's validate()).
std::initializer_list<int> bit_choices(MethodKind kind) {
  static constexpr std::initializer_list<int> kivi{2, 4};
  static constexpr std::initializer_list<int> kvquant{2, 3, 4};
  static constexpr std::initializer_list<int> turboquant{1, 2, 3, 4};
  if (kind == MethodKind::KvQuant) return kvquant;
  if (kind == MethodKind::TurboQuant) return turboquant;
  return kivi;
}

// The rotation of `kind`: TurboQuant always rotates (orthogonal unless Hadamard is chosen).
std::initializer_list<RotationKind> rotation_choices(MethodKind kind) {
  static constexpr std::initializer_list<RotationKind> any{
      RotationKind::None, RotationKind::Hadamard, RotationKind::Orthogonal};
  static constexpr std::initializer_list<RotationKind> turboquant{RotationKind::Hadamard,
                                                                  RotationKind::Orthogonal};
  return kind == MethodKind::TurboQuant ? turboquant : any;
}

QString rotation_tip(RotationKind kind) {
  switch (kind) {
    case RotationKind::None:
      return QObject::tr("No rotation: the quantizer sees the keys and values as they are");
    case RotationKind::Hadamard:
      return QObject::tr(
          "Randomized Hadamard H·D (QuaRot): a random ±1 per channel, then the Walsh–Hadamard "
          "transform; needs a power-of-two head size");
    case RotationKind::Orthogonal:
      return QObject::tr(
          "Haar-random orthogonal matrix (the Q of a seeded Gaussian matrix's QR), one per KV "
          "head; any head size");
  }
  return {};
}

// The dtype the method's reference keeps its group parameters in.
DType reference_param_dtype(MethodKind kind) {
  MethodConfig c;
  c.kind = kind;
  return method_param_dtype(c);
}

// Selects the item whose data is `data`; false (selection kept) when there is none.
bool select_data(QComboBox* combo, const QVariant& data) {
  const int i = combo->findData(data);
  if (i < 0) return false;
  combo->setCurrentIndex(i);
  return true;
}

}  // namespace

MethodPanel::MethodPanel(QWidget* parent) : QGroupBox(tr("Method"), parent) {
  build_fields();

  m_form = new QFormLayout(this);
  m_form->addRow(tr("Method"), m_method);
  m_form->addRow(m_about);
  m_form->addRow(tr("Bits"), m_bits);
  m_form->addRow(tr("Group size"), m_group_size);
  m_form->addRow(tr("Residual"), m_residual);
  m_form->addRow(tr("Param. dtype"), m_param_dtype);
  m_form->addRow(tr("Scale"), m_per_head);
  m_form->addRow(tr("Calibration"), m_calib_tokens);
  m_form->addRow(tr("INT8 tokens"), m_int8_tokens);
  m_form->addRow(tr("Old bits"), m_old_bits);
  m_form->addRow(tr("Block size"), m_block_size);
  m_form->addRow(tr("Rel. scale"), m_rel_scale);
  m_form->addRow(tr("Codec"), m_codec);
  m_form->addRow(tr("llama.cpp"), m_llama_rotation);
  m_form->addRow(tr("Levels"), m_levels);
  m_form->addRow(tr("Outliers"), m_outliers);
  m_form->addRow(tr("Keys"), m_pre_rope);
  m_form->addRow(tr("QJL"), m_qjl);
  m_form->addRow(tr("Rotation"), m_rotation);
  m_form->addRow(tr("Rotation seed"), m_rotation_seed);
  m_form->addRow(tr("Values"), m_rotate_values);
  style::share_with_captions(m_form);

  // Each field named after its MethodConfig field, for finding it (tests, accessibility).
  const std::pair<QWidget*, const char*> names[] = {{m_method, "method"},
                                                    {m_about, "about"},
                                                    {m_bits, "bits"},
                                                    {m_group_size, "group_size"},
                                                    {m_residual, "residual"},
                                                    {m_param_dtype, "param_dtype"},
                                                    {m_per_head, "per_head"},
                                                    {m_calib_tokens, "calib_tokens"},
                                                    {m_int8_tokens, "int8_tokens"},
                                                    {m_old_bits, "old_bits"},
                                                    {m_block_size, "block_size"},
                                                    {m_rel_scale, "rel_scale"},
                                                    {m_codec, "codec"},
                                                    {m_llama_rotation, "llama_rotation"},
                                                    {m_levels, "levels"},
                                                    {m_outliers, "outliers"},
                                                    {m_pre_rope, "pre_rope"},
                                                    {m_qjl, "qjl"},
                                                    {m_rotation, "rotation"},
                                                    {m_rotation_seed, "rotation_seed"},
                                                    {m_rotate_values, "rotate_values"}};
  for (const auto& [field, name] : names) field->setObjectName(QLatin1String(name));

  connect(m_method, &QComboBox::currentIndexChanged, this, [this] {
    update_visible_fields();
    emit changed();
  });
  for (QComboBox* c : {m_bits, m_old_bits, m_codec, m_param_dtype, m_levels, m_rotation}) {
    connect(c, &QComboBox::currentIndexChanged, this, [this] {
      update_visible_fields();
      emit changed();
    });
  }
  for (QSpinBox* s :
       {m_group_size, m_residual, m_int8_tokens, m_block_size, m_calib_tokens, m_rotation_seed}) {
    connect(s, &QSpinBox::valueChanged, this, &MethodPanel::changed);
  }
  for (QCheckBox* b : {m_per_head, m_llama_rotation, m_pre_rope, m_qjl, m_rotate_values}) {
    connect(b, &QCheckBox::toggled, this, &MethodPanel::changed);
  }
  for (QDoubleSpinBox* s : {m_rel_scale, m_outliers}) {
    connect(s, &QDoubleSpinBox::valueChanged, this, &MethodPanel::changed);
  }

  set_config(MethodConfig{});
}

void MethodPanel::build_fields() {
  const MethodConfig defaults;
  m_method = new QComboBox(this);
  for (auto id : method_ids()) m_method->addItem(qs(id));
  for (int i = 0; i < m_method->count(); ++i) {
    if (auto kind = parse_method(m_method->itemText(i).toStdString())) {
      m_method->setItemData(i, method_description(*kind), Qt::ToolTipRole);
    }
  }
  m_method->setToolTip(
      tr("The compression method; only the fields it uses are shown below (hover each for what "
         "it changes)"));
  m_about = new QLabel(this);
  m_about->setWordWrap(true);
  m_about->setTextFormat(Qt::PlainText);
  m_about->setTextInteractionFlags(Qt::TextSelectableByMouse);
  style::make_muted(m_about);

  m_bits = make_bits_combo(this);
  m_bits->setToolTip(
      tr("Bits per quantized code: KIVI 2 or 4 (each group storing a scale and minimum beside "
         "its codes); KVQuant 2, 3 or 4 (2^bits non-uniform levels); TurboQuant 1 to 4 (the QJL "
         "bit included)"));
  m_group_size = make_spin(this, 1, 4096, defaults.group_size,
                           tr("G: keys are quantized per channel over groups of G tokens, values "
                              "per token over groups of G channels; each group keeps a float "
                              "scale and minimum"));
  m_residual = make_spin(this, 0, 1 << 24, defaults.residual,
                         tr("R: the newest R tokens stay in fp16 (counted as residual bytes); "
                            "older ones are quantized"));
  m_residual->setSuffix(tr(" tokens"));
  m_param_dtype = new QComboBox(this);
  for (DType dt : {DType::F16, DType::BF16, DType::F32}) {
    m_param_dtype->addItem(qs(dtype_name(dt)), static_cast<int>(dt));
  }
  m_param_dtype->setToolTip(
      tr("The dtype each group's step and minimum is stored in: KIVI's reference keeps them in "
         "fp16 (the tensor's dtype), KVComp in f32; f32 costs more bytes, fp16 adds its rounding "
         "to every value of the group"));
  m_per_head = new QCheckBox(tr("one scale per KV head"), this);
  m_per_head->setToolTip(
      tr("One float scale per KV head instead of one for the whole tensor, so each head uses "
         "FP8's whole range (a few more bytes of scales)"));
  m_calib_tokens = make_spin(this, 0, 1 << 24, defaults.calib_tokens,
                             tr("Scales calibrated once from the first N tokens, as vLLM's "
                                "calculate_kv_scales (amax/200 for keys, amax/100 for values), "
                                "later tokens saturating; 0: one scale from the whole tensor's "
                                "max|x|/448. KVQuant: the prefill tokens its levels and key "
                                "thresholds are fitted on (0: the whole tensor)"));
  m_calib_tokens->setSuffix(tr(" tokens"));
  m_calib_tokens->setSpecialValueText(tr("whole tensor"));
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
  const std::array<std::pair<CodecKind, QString>, 4> codecs{{
      {CodecKind::BitPack,
       tr("Fixed-width bit packing: every code in the smallest of 2, 4 or 8 bits that holds the "
          "largest code")},
      {CodecKind::VarWidth,
       tr("Variable width: each group of 16 codes packed at the width of its largest code, the "
          "width in a 4-bit header")},
      {CodecKind::Huffman,
       tr("Canonical Huffman (max 12 bits) with one codebook per layer and K/V built from the "
          "prefill histogram, as in KVComp; unseen codes take an escape")},
      {CodecKind::Rans,
       tr("Interleaved rANS over the same symbols: 32 states per block decode side by side, "
          "frequencies in 1/4096 (fractions of a bit), no per-vector bit counts")},
  }};
  for (const auto& [kind, tip] : codecs) {
    m_codec->addItem(qs(codec_id(kind)), static_cast<int>(kind));
    m_codec->setItemData(m_codec->count() - 1, tip, Qt::ToolTipRole);
  }
  m_codec->setToolTip(
      tr("Entropy coding of KVComp's byte codes, in blocks of B tokens per head; the results "
         "then compare all four codecs and the entropy bound"));

  m_llama_rotation = new QCheckBox(tr("Hadamard rotation (attn_rot)"), this);
  m_llama_rotation->setToolTip(
      tr("llama.cpp rotates K and V of a quantized cache with a Hadamard matrix by default "
         "(head size a multiple of 64); off as with LLAMA_ATTN_ROT_DISABLE=1"));
  m_levels = new QComboBox(this);
  m_levels->addItem(tr("k-means"), false);
  m_levels->setItemData(0,
                        tr("Levels fitted by k-means on the tensor's calibration (KVQuant's "
                           "non-uniform \"nuq\" datatype)"),
                        Qt::ToolTipRole);
  m_levels->addItem(tr("NormalFloat"), true);
  m_levels->setItemData(1, tr("Fixed NormalFloat levels: the quantiles of a normal distribution"),
                        Qt::ToolTipRole);
  m_levels->setToolTip(tr("KVQuant's 2^bits levels in [−1, 1]: fitted or NormalFloat"));
  m_outliers = new RealField(this);
  m_outliers->setDecimals(4);
  m_outliers->setRange(0.0, 0.5);
  m_outliers->setSingleStep(0.005);
  m_outliers->setValue(defaults.outlier_fraction);
  m_outliers->setToolTip(
      tr("Fraction of values kept exactly (fp16) in KVQuant's sparse outlier table; the rest "
         "are quantized within the thresholds they leave"));
  m_pre_rope = new QCheckBox(tr("quantized before RoPE"), this);
  m_pre_rope->setChecked(defaults.pre_rope);
  m_pre_rope->setToolTip(
      tr("KVQuant quantizes keys per channel before the rotary embedding, where their outlier "
         "channels stay put, and applies RoPE after dequantizing. Used wherever the source says "
         "how RoPE turned its keys (model captures, llama.cpp state files read with their model); "
         "unchecked: the keys as stored"));
  m_qjl = new QCheckBox(tr("1-bit QJL sketch of the residual"), this);
  m_qjl->setToolTip(
      tr("Spends one of the bits on the sign of a random projection of the residual (QJL), so "
         "inner products with queries are unbiased; needs 2 bits or more"));
  m_rotation = new QComboBox(this);
  m_rotation->setToolTip(
      tr("A rotation of every head vector before the quantizer, one matrix per KV head: it "
         "spreads outlier channels over the head (see the Key channels tab); TurboQuant always "
         "rotates"));
  m_rotation_seed = make_spin(this, 0, INT_MAX, 0,
                              tr("Seed of the rotation matrices (each KV head's from it and the "
                                 "head's index); stored with the run, 8 bytes per tensor"));
  m_rotate_values = new QCheckBox(tr("rotate values too"), this);
  m_rotate_values->setToolTip(
      tr("Rotate the values as well as the keys (a real engine undoes it on the attention "
         "output); needs a rotation"));
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
  if (method_has_param_dtype(c.kind) && m_param_dtype->currentIndex() >= 0) {
    const auto dt = static_cast<DType>(m_param_dtype->currentData().toInt());
    // The reference's dtype stays implicit, as the command line without --param-dtype.
    if (dt != reference_param_dtype(c.kind)) c.param_dtype = dt;
  }
  if (method_takes_calib_tokens(c.kind)) c.calib_tokens = m_calib_tokens->value();
  if (method_is_llama_block(c.kind)) c.llama_rotation = m_llama_rotation->isChecked();
  c.normal_float = m_levels->currentData().toBool();
  c.outlier_fraction = m_outliers->value();
  c.pre_rope = m_pre_rope->isChecked();
  c.qjl = c.kind == MethodKind::TurboQuant && c.bits >= 2 && m_qjl->isChecked();
  if (m_rotation->currentIndex() >= 0) {
    c.rotation = static_cast<RotationKind>(m_rotation->currentData().toInt());
  }
  c.rotation_seed = static_cast<std::uint64_t>(m_rotation_seed->value());
  c.rotate_values = wraps_rotation(c) && m_rotate_values->isChecked();
  return c;
}

void MethodPanel::set_config(const MethodConfig& c) {
  m_method->setCurrentText(qs(method_id(c.kind)));
  refill_method_choices(c.kind);
  select_data(m_bits, c.bits);
  m_group_size->setValue(c.group_size);
  m_residual->setValue(c.residual);
  select_data(m_param_dtype, static_cast<int>(method_param_dtype(c)));
  m_per_head->setChecked(c.per_head_scale);
  m_calib_tokens->setValue(c.calib_tokens);
  m_int8_tokens->setValue(c.int8_tokens);
  select_data(m_old_bits, c.old_bits);
  m_block_size->setValue(c.block_size);
  m_rel_scale->setValue(c.rel_scale);
  m_codec->setCurrentIndex(
      std::max(0, m_codec->findData(c.codec ? static_cast<int>(*c.codec) : -1)));
  m_llama_rotation->setChecked(c.llama_rotation);
  select_data(m_levels, c.normal_float);
  m_outliers->setValue(c.outlier_fraction);
  m_pre_rope->setChecked(c.pre_rope);
  m_qjl->setChecked(c.qjl);
  // TurboQuant reads "none" as its default, orthogonal (method.cpp's turboquant_config()).
  if (!select_data(m_rotation, static_cast<int>(c.rotation))) {
    select_data(m_rotation, static_cast<int>(RotationKind::Orthogonal));
  }
  m_rotation_seed->setValue(static_cast<int>(std::min<std::uint64_t>(c.rotation_seed, INT_MAX)));
  m_rotate_values->setChecked(c.rotate_values);
  update_visible_fields();
}

bool MethodPanel::is_field_visible(QWidget* field) const {
  int row = -1;
  QFormLayout::ItemRole role{};
  m_form->getWidgetPosition(field, &row, &role);
  return row >= 0 && m_form->isRowVisible(row);
}

void MethodPanel::refill_method_choices(MethodKind kind) {
  const bool kind_changed = kind != m_choices_for;
  m_choices_for = kind;
  {
    const QSignalBlocker block(m_bits);
    const int bits = m_bits->currentData().toInt();
    m_bits->clear();
    for (int b : bit_choices(kind)) m_bits->addItem(QString::number(b), b);
    if (!select_data(m_bits, bits)) select_data(m_bits, 2);
  }
  {
    // The reference's dtype is marked and, when the method changes, chosen again.
    const QSignalBlocker block(m_param_dtype);
    const DType reference = reference_param_dtype(kind);
    for (int i = 0; i < m_param_dtype->count(); ++i) {
      const auto dt = static_cast<DType>(m_param_dtype->itemData(i).toInt());
      m_param_dtype->setItemText(
          i, dt == reference ? tr("%1 (reference)").arg(qs(dtype_name(dt))) : qs(dtype_name(dt)));
    }
    if (kind_changed) select_data(m_param_dtype, static_cast<int>(reference));
  }
  {
    const QSignalBlocker block(m_rotation);
    const QVariant rotation = m_rotation->currentData();
    m_rotation->clear();
    for (RotationKind r : rotation_choices(kind)) {
      m_rotation->addItem(qs(rotation_id(r)), static_cast<int>(r));
      m_rotation->setItemData(m_rotation->count() - 1, rotation_tip(r), Qt::ToolTipRole);
    }
    // TurboQuant's own rotation is not carried over to another method, nor the other way.
    const auto fallback =
        kind == MethodKind::TurboQuant ? RotationKind::Orthogonal : RotationKind::None;
    if (kind_changed || !select_data(m_rotation, rotation)) {
      select_data(m_rotation, static_cast<int>(fallback));
    }
  }
}

void MethodPanel::update_visible_fields() {
  const auto parsed = parse_method(m_method->currentText().toStdString());
  const MethodKind kind = parsed ? *parsed : MethodKind::Kivi;
  if (kind != m_choices_for) refill_method_choices(kind);
  const bool kivi = kind == MethodKind::Kivi;
  const bool tiered = kind == MethodKind::Tiered;
  const bool kvcomp = kind == MethodKind::KvComp;
  const bool kvquant = kind == MethodKind::KvQuant;
  const bool turbo = kind == MethodKind::TurboQuant;
  m_form->setRowVisible(m_bits, kivi || kvquant || turbo);
  m_form->setRowVisible(m_group_size, kivi || tiered);
  m_form->setRowVisible(m_residual, kivi || tiered);
  m_form->setRowVisible(m_param_dtype, method_has_param_dtype(kind));
  m_form->setRowVisible(m_per_head, method_is_fp8(kind));
  m_form->setRowVisible(m_calib_tokens, method_takes_calib_tokens(kind));
  m_form->setRowVisible(m_int8_tokens, tiered);
  m_form->setRowVisible(m_old_bits, tiered);
  m_form->setRowVisible(m_block_size, kvcomp);
  m_form->setRowVisible(m_rel_scale, kvcomp);
  m_form->setRowVisible(m_codec, kvcomp);
  m_form->setRowVisible(m_llama_rotation, method_is_llama_block(kind));
  m_form->setRowVisible(m_levels, kvquant);
  m_form->setRowVisible(m_outliers, kvquant);
  m_form->setRowVisible(m_pre_rope, kvquant);
  m_form->setRowVisible(m_qjl, turbo);
  m_form->setRowVisible(m_rotate_values, !turbo);
  m_qjl->setEnabled(m_bits->currentData().toInt() >= 2);
  const bool rotates =
      turbo || m_rotation->currentData().toInt() != static_cast<int>(RotationKind::None);
  m_rotation_seed->setEnabled(rotates);
  m_rotate_values->setEnabled(rotates);
  m_about->setText(method_description(kind) + QLatin1Char('\n') + method_citation(kind));
}

}  // namespace kvlab::gui
