// What the desktop tests share: a fixture with its own settings folder (never the user's) and
// real input files (a .npy and a .safetensors cache, a published config.json, a text file), and
// helpers that drop files on a window, read a menu and read a Runs page row.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>

#include <QAction>
#include <QApplication>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFile>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QMenuBar>
#include <QMessageBox>
#include <QMimeData>
#include <QPainter>
#include <QPixmap>
#include <QPushButton>
#include <QScreen>
#include <QSettings>
#include <QStandardPaths>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTest>
#include <QTextBrowser>
#include <QTimer>
#include <QUndoStack>
#include <QUrl>

#include <qcustomplot.h>

#include "common/app_settings.h"
#include "common/chart_pair.h"
#include "common/source_panel.h"
#include "compression/compression_view.h"
#include "compression/layer_chart.h"
#include "compression/method_panel.h"
#include "gui_test_support.h"
#include "kvlab/engine/quant/method_about.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/safetensors.h"
#include "kvlab/planners/catalog.h"
#include "learn/learn_view.h"
#include "planner/planner_view.h"
#include "runs/runs_view.h"
#include "window/help_browser.h"
#include "window/main_window.h"
#include "window/screenshots.h"
#include "window/window_actions.h"

namespace kvlab::gui::desktop_test {

namespace fs = std::filesystem;

inline QString qpath(const fs::path& p) {
  return QString::fromStdString(p.string());
}

// meta-llama/Llama-3.2-1B's config.json as published.
constexpr const char* kLlamaConfig = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": 128001, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 2048, "initializer_range": 0.02, "intermediate_size": 8192,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 16, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "transformers_version": "4.45.0.dev0", "use_cache": true, "vocab_size": 128256})";

// One float32 .npy shaped [layers, 2, tokens, kv_heads, head_dim] (keys, then values), as
// numpy.save writes it: the layout load_npy_cache reads.
inline void write_npy_cache(const KvCache& cache, const fs::path& path) {
  const auto& first = cache.layers.front().key;
  const std::string shape = "(" + std::to_string(cache.layers.size()) + ", 2, " +
                            std::to_string(first.tokens()) + ", " + std::to_string(first.heads()) +
                            ", " + std::to_string(first.dim()) + ")";
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
  dict += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const char len[2] = {static_cast<char>(dict.size() & 0xff), static_cast<char>(dict.size() >> 8)};
  out.write(len, 2);
  out << dict;
  for (const LayerKv& layer : cache.layers) {
    for (const Tensor* t : {&layer.key, &layer.value}) {
      for (int tok = 0; tok < t->tokens(); ++tok) {
        for (int h = 0; h < t->heads(); ++h) {
          for (int d = 0; d < t->dim(); ++d) {
            const float v = t->at(tok, h, d);
            out.write(reinterpret_cast<const char*>(&v), sizeof v);
          }
        }
      }
    }
  }
}

struct DropResult {
  bool enter_accepted = false;
  bool drop_accepted = false;
};

// What the window system delivers when files are dragged over `target` and released.
inline DropResult drop_files(QWidget* target, const QStringList& paths) {
  QMimeData mime;
  QList<QUrl> urls;
  for (const QString& p : paths) urls << QUrl::fromLocalFile(p);
  mime.setUrls(urls);
  const QPoint at = target->rect().center();
  QDragEnterEvent enter(at, Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(target, &enter);
  QDropEvent drop(QPointF(at), Qt::CopyAction, &mime, Qt::LeftButton, Qt::NoModifier);
  QApplication::sendEvent(target, &drop);
  return {enter.isAccepted(), drop.isAccepted()};
}

inline QStringList menu_texts(QMenu* menu) {
  QStringList out;
  for (QAction* a : menu->actions()) {
    if (!a->isSeparator()) out << a->text();
  }
  return out;
}

inline QStringList row_texts(const RunsView& runs, int row) {
  QStringList out;
  for (int c = 0; c < RunsTableModel::kColumnCount; ++c) out << runs.cell_text(row, c);
  return out;
}

class Desktop : public ::testing::Test {
 protected:
  void SetUp() override {
    m_dir = gui_test::fresh_dir();
    // Never the user's settings: QSettings and QStandardPaths both point into the test folder.
    QStandardPaths::setTestModeEnabled(true);
    for (auto format : {QSettings::NativeFormat, QSettings::IniFormat}) {
      QSettings::setPath(format, QSettings::UserScope, qpath(m_dir / "config"));
    }
    ASSERT_TRUE(settings_file_path().startsWith(qpath(m_dir)))
        << settings_file_path().toStdString();

    auto cache = generate_synthetic(gui_test::tiny_source());
    ASSERT_TRUE(cache.ok()) << cache.message();
    m_cache = std::move(*cache);
    m_npy = qpath(m_dir / "tiny.npy");
    write_npy_cache(m_cache, m_dir / "tiny.npy");
    m_safetensors = qpath(m_dir / "tiny.safetensors");
    ASSERT_TRUE(save_safetensors_cache(m_cache, m_dir / "tiny.safetensors").ok());
    fs::create_directories(m_dir / "Llama-3.2-1B");
    std::ofstream(m_dir / "Llama-3.2-1B" / "config.json") << kLlamaConfig;
    m_config = qpath(m_dir / "Llama-3.2-1B" / "config.json");
    std::ofstream(m_dir / "notes.txt") << "not a tensor";
    m_notes = qpath(m_dir / "notes.txt");
  }

  fs::path db() const { return m_dir / "runs.sqlite"; }

  fs::path m_dir;
  KvCache m_cache;
  QString m_npy, m_safetensors, m_config, m_notes;
};

}  // namespace kvlab::gui::desktop_test
