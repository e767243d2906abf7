// The Source panel's "model capture": stories260K (../shared/models) captured on a worker thread
// from the real widgets, the cache checked (shape, token count, token ids), saved as
// .safetensors and read back, then compressed in the Compression view; and the errors a person
// can run into (no such model, a folder that is not a checkpoint, a missing tokenizer, a tensor
// of the wrong shape) shown in the panel's error box. Tests that need the model are skipped with
// a message when the models folder is absent.
#include <gtest/gtest.h>

#include <QLineEdit>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>

#include <nlohmann/json.hpp>

#include "common/model_capture_form.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/method_panel.h"
#include "eviction/eviction_policy_panel.h"
#include "eviction/eviction_view.h"
#include "gui_test_support.h"
#include "kvlab/engine/model/hf_model.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/safetensors.h"
#include "quality/quality_view.h"
#include "window/main_window.h"

namespace kvlab::gui {
namespace {

using gui_test::fresh_dir;

constexpr int kTimeoutMs = 120 * 1000;
const std::string kModelDir = std::string(KVLAB_MODELS_DIR) + "/stories260K";
const std::string kModel = kModelDir + "/stories260K.bin";

bool have_model() {
  return std::filesystem::exists(kModel);
}

#define REQUIRE_MODEL()                                                        \
  if (!have_model())                                                           \
  GTEST_SKIP() << kModel                                                       \
               << " is absent: skipped (the model-capture GUI tests need the " \
                  "stories260K weights in ../shared/models)"

// What a person sees, for looking at by eye: written to $KVLAB_SCREENSHOT_DIR when set (else
// to `fallback`), after letting the layout settle.
void save_screenshot(QWidget& widget, const std::filesystem::path& fallback, const char* name) {
  const char* env = std::getenv("KVLAB_SCREENSHOT_DIR");
  const std::filesystem::path dir = env && *env ? std::filesystem::path(env) : fallback;
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 3; ++i) QApplication::processEvents();
  const auto path = dir / name;
  EXPECT_TRUE(widget.grab().save(QString::fromStdString(path.string())));
  std::cout << "screenshot: " << path.string() << "\n";
}

// Starts a capture from the form and waits for it; the form's last error (empty on success).
QString capture(ModelCaptureForm& form) {
  EXPECT_TRUE(form.start_capture()) << form.last_error().toStdString();
  EXPECT_TRUE(form.wait_until_done(kTimeoutMs));
  return form.last_error();
}

TEST(ModelCapture, CapturesStories260KAsTheSource) {
  REQUIRE_MODEL();
  const auto dir = fresh_dir();
  MainWindow window(dir / "runs.sqlite");
  window.resize(1440, 900);
  window.show();
  CompressionView& view = *window.compression_view();
  SourcePanel& source = *view.source_panel();
  int changes = 0;
  QObject::connect(&source, &SourcePanel::changed, [&] { ++changes; });

  source.set_model(QString::fromStdString(kModel));
  ModelCaptureForm& form = *source.model_capture();
  auto* capture_button = gui_test::child<QPushButton>(&source, "capture");
  auto* save_button = gui_test::child<QPushButton>(&source, "capture_save");
  auto* max_tokens = gui_test::child<QSpinBox>(&source, "capture_max_tokens");
  auto* status_label = gui_test::child<QLabel>(&source, "capture_status");
  EXPECT_EQ(source.spec().kind, SourceSpec::Kind::Model);
  EXPECT_EQ(source.spec().captured, nullptr);
  EXPECT_TRUE(capture_button->isVisible());
  EXPECT_FALSE(gui_test::child<QComboBox>(&source, "preset")->isVisible());
  EXPECT_FALSE(save_button->isEnabled());  // nothing captured yet
  EXPECT_EQ(max_tokens->value(), 256);     // the default continuation

  form.set_prompt(QStringLiteral("Once upon a time"));
  max_tokens->setValue(20);
  ASSERT_TRUE(form.start_capture());
  // On a worker thread: the UI is free, Capture is off and Cancel on until it finishes.
  EXPECT_TRUE(form.is_capturing());
  EXPECT_FALSE(capture_button->isEnabled());
  EXPECT_TRUE(form.cancel_button()->isEnabled());
  EXPECT_TRUE(form.progress_bar()->isVisible());
  ASSERT_TRUE(form.wait_until_done(kTimeoutMs));
  ASSERT_TRUE(form.last_error().isEmpty()) << form.last_error().toStdString();
  EXPECT_FALSE(gui_test::child<QLabel>(&source, "capture_error")->isVisible());
  EXPECT_FALSE(form.progress_bar()->isVisible());
  EXPECT_TRUE(capture_button->isEnabled());
  EXPECT_TRUE(save_button->isEnabled());
  EXPECT_GE(changes, 1);
  // The Quality page takes the captured model (issue 43: it did not carry over).
  QLineEdit* quality_model = nullptr;
  for (QLineEdit* edit : window.quality_view()->findChildren<QLineEdit*>()) {
    if (edit->placeholderText().contains(QStringLiteral(".gguf"))) quality_model = edit;
  }
  ASSERT_NE(quality_model, nullptr);
  EXPECT_EQ(quality_model->text(), form.captured_model());
  EXPECT_FALSE(form.captured_model().isEmpty());

  const SourceSpec spec = source.spec();
  ASSERT_EQ(spec.kind, SourceSpec::Kind::Model);
  ASSERT_NE(spec.captured, nullptr);
  const KvCache& c = *spec.captured;
  constexpr int kTokens = 25;  // BOS + 4 prompt tokens + 20 generated
  EXPECT_EQ(c.shape.layers, 5);
  EXPECT_EQ(c.shape.q_heads, 8);
  EXPECT_EQ(c.shape.kv_heads, 4);
  EXPECT_EQ(c.shape.head_dim, 8);
  ASSERT_EQ(c.layers.size(), 5u);
  EXPECT_EQ(c.tokens(), kTokens);
  EXPECT_EQ(c.layers[4].key.heads(), 4);
  EXPECT_EQ(c.layers[4].value.dim(), 8);
  EXPECT_TRUE(c.has_queries());
  EXPECT_TRUE(c.validate().ok()) << c.validate().message();
  ASSERT_EQ(c.token_ids.size(), static_cast<std::size_t>(kTokens));
  EXPECT_EQ(c.token_ids.front(), 1);  // BOS
  EXPECT_TRUE(spec.describe().contains(QStringLiteral("stories260K.bin")));
  EXPECT_TRUE(spec.describe().contains(QStringLiteral("25 tokens")));
  const QString status = status_label->text();
  EXPECT_TRUE(status.contains(QStringLiteral("25 tokens (5 prompt + 20 generated)")))
      << status.toStdString();
  EXPECT_TRUE(status.contains(QStringLiteral("there was a little girl"))) << status.toStdString();

  // Saved from the panel as .safetensors (the extension added) and read back: the same cache,
  // with its token ids as the I32 tensor "tokens".
  const auto saved = dir / "capture.safetensors";
  ASSERT_TRUE(form.save_capture(QString::fromStdString((dir / "capture").string())))
      << form.last_error().toStdString();
  auto index = read_safetensors_index(saved);
  ASSERT_TRUE(index.ok()) << index.message();
  const SafetensorsEntry* tokens = index->find("tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->dtype, SafetensorsDType::I32);
  EXPECT_EQ(tokens->shape, std::vector<std::uint64_t>{kTokens});
  auto back = load_cache_file(saved);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->token_ids, c.token_ids);
  EXPECT_EQ(back->tokens(), kTokens);
  EXPECT_TRUE(status_label->text().contains(QStringLiteral("Saved to")));

  // The capture is the Compression view's source, like a file or a synthetic cache.
  MethodConfig int8;
  int8.kind = MethodKind::Int8;
  view.method_panel()->set_config(int8);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  ASSERT_TRUE(view.model()->report().has_value());
  EXPECT_EQ(view.model()->report()->layers.size(), 5u);
  EXPECT_GT(view.model()->last_saved_run_id(), 0);
  // A second run with only the method changed reuses the cache; a new capture does not.
  int8.kind = MethodKind::Int4;
  view.method_panel()->set_config(int8);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  EXPECT_TRUE(view.model()->last_run_reused_cache());
  const std::string key = source.spec().cache_key();
  ASSERT_TRUE(capture(form).isEmpty());
  EXPECT_NE(source.spec().cache_key(), key);

  // What a person sees: the Compression page with the model source and its capture.
  window.show_page(Page::Compression);
  save_screenshot(window, dir, "compression-model-source.png");
}

// The Eviction view shares the panel: its own capture (with queries) feeds the simulation.
TEST(ModelCapture, EvictionViewRunsOnACapture) {
  REQUIRE_MODEL();
  MainWindow window(fresh_dir() / "runs.sqlite");
  EvictionView& view = *window.eviction_view();
  view.source_panel()->set_model(QString::fromStdString(kModel));
  ModelCaptureForm& form = *view.source_panel()->model_capture();
  gui_test::child<QSpinBox>(view.source_panel(), "capture_max_tokens")->setValue(100);
  ASSERT_TRUE(capture(form).isEmpty());
  ASSERT_EQ(view.source_panel()->spec().captured->tokens(), 105);  // BOS + 4 + 100
  EvictionConfig h2o;
  h2o.steps = 32;
  view.policy_panel()->set_config(h2o);
  view.policy_panel()->set_compare(std::nullopt);
  ASSERT_TRUE(view.run_and_wait(kTimeoutMs)) << view.last_error().toStdString();
  ASSERT_TRUE(view.model()->report().has_value());
  EXPECT_EQ(view.model()->report()->layers.size(), 5u);
}

TEST(ModelCapture, CancelLeavesNoCapture) {
  REQUIRE_MODEL();
  SourcePanel panel;
  panel.show();
  panel.set_model(QString::fromStdString(kModel));
  ModelCaptureForm& form = *panel.model_capture();
  auto* error_label = gui_test::child<QLabel>(&panel, "capture_error");
  auto* status_label = gui_test::child<QLabel>(&panel, "capture_status");
  auto* capture_button = gui_test::child<QPushButton>(&panel, "capture");
  // About the model's whole context.
  gui_test::child<QSpinBox>(&panel, "capture_max_tokens")->setValue(500);
  ASSERT_TRUE(form.start_capture());
  form.cancel_capture();
  ASSERT_TRUE(form.wait_until_done(kTimeoutMs));
  EXPECT_TRUE(form.last_error().isEmpty()) << form.last_error().toStdString();
  EXPECT_FALSE(error_label->isVisible());
  EXPECT_TRUE(status_label->text().contains(QStringLiteral("cancelled")))
      << status_label->text().toStdString();
  EXPECT_EQ(panel.spec().captured, nullptr);
  EXPECT_TRUE(capture_button->isEnabled());
}

// The engine's message, in the panel's error box; nothing captured, the panel ready again.
void expect_error(SourcePanel& panel, const QString& model, const QString& want) {
  SCOPED_TRACE(model.toStdString());
  panel.set_model(model);
  ModelCaptureForm& form = *panel.model_capture();
  const QString error = capture(form);
  EXPECT_TRUE(error.contains(want)) << error.toStdString();
  auto* error_label = gui_test::child<QLabel>(&panel, "capture_error");
  EXPECT_TRUE(error_label->isVisible());
  EXPECT_TRUE(error_label->text().contains(want));
  EXPECT_EQ(panel.spec().captured, nullptr);
  EXPECT_TRUE(gui_test::child<QPushButton>(&panel, "capture")->isEnabled());
  EXPECT_FALSE(gui_test::child<QPushButton>(&panel, "capture_save")->isEnabled());
}

TEST(ModelCapture, ErrorsAreShownInThePanel) {
  const auto dir = fresh_dir();
  SourcePanel panel;
  panel.show();
  ModelCaptureForm& form = *panel.model_capture();
  auto* error_label = gui_test::child<QLabel>(&panel, "capture_error");

  panel.set_model(QString());
  EXPECT_FALSE(form.start_capture());
  EXPECT_TRUE(form.last_error().contains(QStringLiteral("No model chosen")));
  EXPECT_TRUE(error_label->isVisible());
  // Another source hides the capture rows, the error box with them.
  panel.set_synthetic(gui_test::tiny_source());
  EXPECT_FALSE(error_label->isVisible());
  EXPECT_FALSE(gui_test::child<QPushButton>(&panel, "capture")->isVisible());

  expect_error(panel, QStringLiteral("/nonexistent/kvlab/model.bin"),
               QStringLiteral("/nonexistent/kvlab/model.bin: no such file or folder"));
  panel.resize(360, panel.sizeHint().height());
  save_screenshot(panel, dir, "source-panel-model-error.png");
  // A folder that is no Hugging Face checkpoint.
  expect_error(panel, QString::fromStdString(dir.string()), QStringLiteral("config.json"));
  // Not a llama2.c checkpoint.
  const auto junk = dir / "junk.bin";
  std::ofstream(junk) << "not a model";
  expect_error(panel, QString::fromStdString(junk.string()), QStringLiteral("junk.bin"));
  EXPECT_FALSE(form.load_prompt_file(QString::fromStdString((dir / "absent.txt").string())));
  EXPECT_TRUE(form.last_error().contains(QStringLiteral("absent.txt")));

  if (!have_model()) {
    GTEST_SKIP() << kModel << " is absent: the errors that need a real checkpoint are skipped";
  }
  // A llama2.c checkpoint without its tokenizer next to it.
  const auto alone = dir / "alone";
  std::filesystem::create_directories(alone);
  std::filesystem::copy_file(kModel, alone / "model.bin");
  expect_error(panel, QString::fromStdString((alone / "model.bin").string()),
               QStringLiteral("no llama2.c tokenizer (tok*.bin"));
  // A Hugging Face folder whose config does not match its tensors.
  const auto hf = dir / "hf";
  ASSERT_TRUE(convert_llama2c_to_hf(kModel, hf.string()).ok());
  nlohmann::json config = nlohmann::json::parse(std::ifstream(hf / "config.json"));
  config["intermediate_size"] = config["intermediate_size"].get<int>() + 8;
  std::ofstream(hf / "config.json") << config.dump(2);
  expect_error(panel, QString::fromStdString(hf.string()), QStringLiteral("has shape"));
  // ... and a matching one with no tokenizer.json.
  config["intermediate_size"] = config["intermediate_size"].get<int>() - 8;
  std::ofstream(hf / "config.json") << config.dump(2);
  expect_error(panel, QString::fromStdString(hf.string()), QStringLiteral("tokenizer.json"));

  // A prompt file fills the prompt box.
  const auto prompt = dir / "prompt.txt";
  std::ofstream(prompt) << "Lily had a red ball.\nShe";
  ASSERT_TRUE(form.load_prompt_file(QString::fromStdString(prompt.string())));
  EXPECT_EQ(gui_test::child<QPlainTextEdit>(&panel, "capture_prompt")->toPlainText(),
            QStringLiteral("Lily had a red ball.\nShe"));
  EXPECT_FALSE(error_label->isVisible());
}

TEST(ModelCapture, RunWithoutACaptureSaysSo) {
  MainWindow window(fresh_dir() / "runs.sqlite");
  CompressionView& view = *window.compression_view();
  view.source_panel()->set_model(QStringLiteral("/nonexistent/kvlab/model.bin"));
  EXPECT_FALSE(view.run_and_wait(kTimeoutMs));
  EXPECT_TRUE(view.last_error().contains(QStringLiteral("no model capture yet")))
      << view.last_error().toStdString();
  EXPECT_EQ(view.model()->last_saved_run_id(), 0);
}

}  // namespace
}  // namespace kvlab::gui
