// Issue 22's methods in the Method panel (each one's fields, a valid MethodConfig, its reference
// cited), the new options' names in error messages, and the Compression page's Key channel
// magnitudes chart on the synthetic llama3-8b cache: a rotation lowers the largest key channel.
#include <gtest/gtest.h>

#include <algorithm>

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QLabel>
#include <QSpinBox>
#include <QTabWidget>

#include "common/gui_format.h"
#include "common/layer_picker.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/key_channel_chart.h"
#include "compression/key_channel_panel.h"
#include "compression/method_panel.h"
#include "gui_test_support.h"
#include "kvlab/engine/io/report_json.h"
#include "kvlab/engine/quant/method_json.h"

namespace kvlab::gui {
namespace {

QString qs(std::string_view s) {
  return QString::fromUtf8(s.data(), static_cast<qsizetype>(s.size()));
}

using gui_test::child;
using gui_test::field_shown;

QList<int> bit_items(const MethodPanel& p) {
  QList<int> bits;
  for (int i = 0; i < child<QComboBox>(&p, "bits")->count(); ++i)
    bits << child<QComboBox>(&p, "bits")->itemData(i).toInt();
  return bits;
}

QStringList rotation_items(const MethodPanel& p) {
  QStringList items;
  for (int i = 0; i < child<QComboBox>(&p, "rotation")->count(); ++i)
    items << child<QComboBox>(&p, "rotation")->itemText(i);
  return items;
}

void pick(MethodPanel& p, const char* id) {
  child<QComboBox>(&p, "method")->setCurrentText(QString::fromLatin1(id));
  ASSERT_EQ(child<QComboBox>(&p, "method")->currentText(), QString::fromLatin1(id));
}

void expect_valid(const MethodConfig& c) {
  auto q = make_quantizer(c);
  EXPECT_TRUE(q.ok()) << method_label(c) << ": " << q.message();
}

TEST(MethodPanel, EveryMethodCitesItsReference) {
  MethodPanel panel;
  for (auto id : method_ids()) {
    child<QComboBox>(&panel, "method")->setCurrentText(qs(id));
    const MethodKind kind = *parse_method(id);
    EXPECT_TRUE(child<QLabel>(&panel, "about")->text().contains(qs(method_reference(kind))))
        << id << ": " << child<QLabel>(&panel, "about")->text().toStdString();
    EXPECT_FALSE(child<QComboBox>(&panel, "method")
                     ->itemData(child<QComboBox>(&panel, "method")->currentIndex(), Qt::ToolTipRole)
                     .toString()
                     .isEmpty())
        << id;
    // Every method builds with the fields the panel shows at their defaults.
    expect_valid(panel.config());
    EXPECT_TRUE(field_shown(panel, "rotation")) << id;
  }
}

TEST(MethodPanel, LlamaCppBlockTypesTakeTheirRotation) {
  MethodPanel panel;
  panel.show();
  for (const char* id : {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"}) {
    pick(panel, id);
    EXPECT_TRUE(field_shown(panel, "llama_rotation")) << id;
    EXPECT_FALSE(field_shown(panel, "bits")) << id;
    EXPECT_FALSE(field_shown(panel, "param_dtype")) << id;
    EXPECT_FALSE(field_shown(panel, "qjl")) << id;
    EXPECT_FALSE(field_shown(panel, "pre_rope")) << id;
    EXPECT_TRUE(panel.config().llama_rotation) << id;  // llama.cpp's default
    child<QCheckBox>(&panel, "llama_rotation")->setChecked(false);
    const MethodConfig c = panel.config();
    EXPECT_FALSE(c.llama_rotation) << id;
    expect_valid(c);
    child<QCheckBox>(&panel, "llama_rotation")->setChecked(true);
  }
  for (const char* id : {"nvfp4", "mxfp4"}) {
    pick(panel, id);
    EXPECT_FALSE(field_shown(panel, "llama_rotation")) << id;
    EXPECT_FALSE(field_shown(panel, "bits")) << id;
    expect_valid(panel.config());
  }
}

TEST(MethodPanel, KvQuantFields) {
  MethodPanel panel;
  panel.show();
  pick(panel, "kvquant");
  EXPECT_EQ(bit_items(panel), (QList<int>{2, 3, 4}));
  EXPECT_TRUE(field_shown(panel, "levels"));
  EXPECT_TRUE(field_shown(panel, "outliers"));
  EXPECT_TRUE(field_shown(panel, "pre_rope"));
  EXPECT_TRUE(panel.config().pre_rope);  // the paper's way by default
  EXPECT_FALSE(field_shown(panel, "group_size"));
  child<QCheckBox>(&panel, "pre_rope")->setChecked(false);
  child<QComboBox>(&panel, "bits")->setCurrentIndex(child<QComboBox>(&panel, "bits")->findData(3));
  child<QComboBox>(&panel, "levels")
      ->setCurrentIndex(child<QComboBox>(&panel, "levels")->findData(true));
  child<QDoubleSpinBox>(&panel, "outliers")->setValue(0.02);
  const MethodConfig c = panel.config();
  EXPECT_EQ(c.kind, MethodKind::KvQuant);
  EXPECT_EQ(c.bits, 3);
  EXPECT_TRUE(c.normal_float);
  EXPECT_DOUBLE_EQ(c.outlier_fraction, 0.02);
  EXPECT_FALSE(c.pre_rope);
  expect_valid(c);
  MethodPanel other;
  other.set_config(c);
  EXPECT_EQ(method_params_json(other.config()), method_params_json(c));
}

TEST(MethodPanel, TurboQuantFieldsAndItsOwnRotation) {
  MethodPanel panel;
  panel.show();
  pick(panel, "turboquant");
  EXPECT_EQ(bit_items(panel), (QList<int>{1, 2, 3, 4}));
  EXPECT_EQ(rotation_items(panel), (QStringList{"hadamard", "orthogonal"}));
  EXPECT_EQ(child<QComboBox>(&panel, "rotation")->currentText(), QStringLiteral("orthogonal"));
  EXPECT_TRUE(field_shown(panel, "qjl"));
  EXPECT_FALSE(field_shown(panel, "rotate_values"));
  child<QComboBox>(&panel, "bits")->setCurrentIndex(child<QComboBox>(&panel, "bits")->findData(1));
  EXPECT_FALSE(child<QCheckBox>(&panel, "qjl")->isEnabled());  // QJL takes one of at least two bits
  child<QComboBox>(&panel, "bits")->setCurrentIndex(child<QComboBox>(&panel, "bits")->findData(3));
  EXPECT_TRUE(child<QCheckBox>(&panel, "qjl")->isEnabled());
  child<QCheckBox>(&panel, "qjl")->setChecked(true);
  child<QComboBox>(&panel, "rotation")->setCurrentText(QStringLiteral("hadamard"));
  child<QSpinBox>(&panel, "rotation_seed")->setValue(9);
  const MethodConfig c = panel.config();
  EXPECT_EQ(c.bits, 3);
  EXPECT_TRUE(c.qjl);
  EXPECT_EQ(c.rotation, RotationKind::Hadamard);
  EXPECT_EQ(c.rotation_seed, 9u);
  expect_valid(c);
  EXPECT_EQ(method_label(c), "turboquant-3 qjl hadamard");
  // Back to KIVI: 2 or 4 bits again, and no rotation carried over from TurboQuant.
  pick(panel, "kivi");
  EXPECT_EQ(bit_items(panel), (QList<int>{2, 4}));
  EXPECT_EQ(panel.config().rotation, RotationKind::None);
  expect_valid(panel.config());
}

TEST(MethodPanel, ParamDtypeWithTheReferenceDefault) {
  MethodPanel panel;
  panel.show();
  pick(panel, "kivi");
  EXPECT_TRUE(field_shown(panel, "param_dtype"));
  EXPECT_EQ(child<QComboBox>(&panel, "param_dtype")->currentText(),
            QStringLiteral("f16 (reference)"));
  EXPECT_FALSE(panel.config().param_dtype.has_value());  // the reference, as the CLI default
  child<QComboBox>(&panel, "param_dtype")
      ->setCurrentIndex(
          child<QComboBox>(&panel, "param_dtype")->findData(static_cast<int>(DType::F32)));
  MethodConfig c = panel.config();
  ASSERT_TRUE(c.param_dtype.has_value());
  EXPECT_EQ(*c.param_dtype, DType::F32);
  expect_valid(c);
  pick(panel, "kvcomp");
  EXPECT_EQ(child<QComboBox>(&panel, "param_dtype")->currentText(),
            QStringLiteral("f32 (reference)"));
  EXPECT_FALSE(panel.config().param_dtype.has_value());
  pick(panel, "int8");
  EXPECT_FALSE(field_shown(panel, "param_dtype"));
  EXPECT_FALSE(panel.config().param_dtype.has_value());
  // A stored KIVI-2 with fp32 parameters comes back as it was.
  c = MethodConfig{};
  c.param_dtype = DType::BF16;
  panel.set_config(c);
  EXPECT_EQ(panel.config().param_dtype, std::optional<DType>(DType::BF16));
}

TEST(MethodPanel, Fp8CalibrationTokens) {
  MethodPanel panel;
  panel.show();
  pick(panel, "fp8-e4m3");
  EXPECT_TRUE(field_shown(panel, "calib_tokens"));
  EXPECT_EQ(child<QSpinBox>(&panel, "calib_tokens")->text(), QStringLiteral("whole tensor"));
  child<QSpinBox>(&panel, "calib_tokens")->setValue(64);
  EXPECT_EQ(panel.config().calib_tokens, 64);
  expect_valid(panel.config());
  pick(panel, "kivi");
  EXPECT_FALSE(field_shown(panel, "calib_tokens"));
  EXPECT_EQ(panel.config().calib_tokens, 0);  // only fp8 calibrates
}

TEST(MethodPanel, RotationBeforeAnyMethod) {
  MethodPanel panel;
  panel.show();
  pick(panel, "q4_0");
  EXPECT_EQ(rotation_items(panel), (QStringList{"none", "hadamard", "orthogonal"}));
  EXPECT_FALSE(child<QCheckBox>(&panel, "rotate_values")->isEnabled());  // nothing to rotate yet
  child<QCheckBox>(&panel, "rotate_values")->setChecked(true);
  EXPECT_FALSE(panel.config().rotate_values);
  child<QComboBox>(&panel, "rotation")->setCurrentText(QStringLiteral("orthogonal"));
  EXPECT_TRUE(child<QCheckBox>(&panel, "rotate_values")->isEnabled());
  child<QSpinBox>(&panel, "rotation_seed")->setValue(42);
  const MethodConfig c = panel.config();
  EXPECT_EQ(c.rotation, RotationKind::Orthogonal);
  EXPECT_EQ(c.rotation_seed, 42u);
  EXPECT_TRUE(c.rotate_values);
  expect_valid(c);
  MethodPanel other;
  other.set_config(c);
  EXPECT_EQ(method_params_json(other.config()), method_params_json(c));
  EXPECT_EQ(method_label(other.config()), method_label(c));
}

TEST(GuiFormat, NewMethodOptionsReadAsFields) {
  EXPECT_EQ(in_gui_terms(QStringLiteral("--param-dtype f16: only kivi")),
            QStringLiteral("Param. dtype f16: only kivi"));
  EXPECT_EQ(in_gui_terms(QStringLiteral("--rotate-values: choose a --rotation first")),
            QStringLiteral("Rotate values too: choose a Rotation first"));
  EXPECT_EQ(in_gui_terms(QStringLiteral("--rotation-seed, --calib-tokens, --no-attn-rot")),
            QStringLiteral("Rotation seed, Calibration, Hadamard rotation (attn_rot)"));
  EXPECT_EQ(in_gui_terms(QStringLiteral("--levels --outliers --qjl")),
            QStringLiteral("Levels Outliers QJL"));
}

double max_value(const QCPGraph* g) {
  double m = 0;
  for (auto it = g->data()->constBegin(); it != g->data()->constEnd(); ++it) {
    m = std::max(m, it->value);
  }
  return m;
}

TEST(CompressionView, KeyChannelChartShowsWhatRotationDoes) {
  const auto dir = gui_test::fresh_dir();
  auto store = RunsStore::open(dir / "runs.sqlite");
  ASSERT_TRUE(store.ok()) << store.message();
  CompressionView view(std::make_shared<RunsStore>(std::move(store).value()));
  view.resize(1200, 800);
  view.show();
  auto* key_channels = child<KeyChannelPanel>(&view, "key_channels");
  SyntheticConfig source;  // llama3-8b: 8 KV heads of 128 channels, outlier key channels
  source.preset = "llama3-8b";
  source.layers = 2;
  source.context = 256;
  source.seed = 1;
  view.source_panel()->set_synthetic(source);
  MethodConfig q4;
  q4.kind = MethodKind::Q4_0;
  view.method_panel()->set_config(q4);
  ASSERT_TRUE(view.run_and_wait(120'000)) << view.last_error().toStdString();

  view.lower_tabs()->setCurrentIndex(CompressionView::kKeyChannelTab);
  KeyChannelChart* chart = child<KeyChannelChart>(key_channels, "chart");
  const QCPGraph* before = child<QCPGraph>(chart, "before_graph");
  const QCPGraph* after = child<QCPGraph>(chart, "after_graph");
  ASSERT_EQ(chart->graphCount(), 2);
  EXPECT_EQ(before->dataCount(), 128);
  EXPECT_EQ(after->dataCount(), 128);
  // No rotation chosen: Hadamard, labelled as a stand-in.
  EXPECT_TRUE(after->name().contains(QStringLiteral("hadamard"))) << after->name().toStdString();
  EXPECT_TRUE(after->name().contains(QStringLiteral("none chosen")));
  EXPECT_TRUE(chart->title().contains(QStringLiteral("layer 0")));
  EXPECT_LT(max_value(after), max_value(before));
  EXPECT_GT(max_value(after), 0.0);

  // The method panel's rotation is shown without running again.
  child<QComboBox>(view.method_panel(), "rotation")->setCurrentText(QStringLiteral("orthogonal"));
  EXPECT_TRUE(after->name().contains(QStringLiteral("orthogonal"))) << after->name().toStdString();
  EXPECT_FALSE(after->name().contains(QStringLiteral("none chosen")));
  EXPECT_LT(max_value(after), max_value(before));

  // Another layer, one head, the mean.
  child<QSpinBox>(key_channels, "layer")->setValue(1);
  EXPECT_TRUE(chart->title().contains(QStringLiteral("layer 1")));
  ASSERT_TRUE(key_channels->stats().has_value());
  EXPECT_EQ(key_channels->stats()->layer, 1);
  key_channels->select_heads(3);
  EXPECT_TRUE(chart->title().contains(QStringLiteral("KV head 3")));
  key_channels->select_heads(kMeanOverHeads);
  EXPECT_TRUE(chart->title().contains(QStringLiteral("mean of 8 head")));

  // A stored report has no cache: the chart says so.
  view.model()->show_report(*view.model()->report(), QStringLiteral("run #1"));
  EXPECT_EQ(before->dataCount(), 0);
  EXPECT_TRUE(chart->title().contains(QStringLiteral("run")));
}

}  // namespace
}  // namespace kvlab::gui
