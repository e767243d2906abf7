// The Quality page's Generate tab (issue 47, part 3): the model chosen on the left continues a
// prompt with its cache held in each checked method's stored form, fp16 first. While it runs the
// chart draws each cache's MiB growing token by token against fp16's, and the texts stream in,
// each method's text red from the token where it departs from fp16's; a summary gives the bytes
// held, the decode speed against fp16 and the departure point. GenerateModel holds the state.
#pragma once

#include <functional>
#include <memory>

#include <QWidget>

class QComboBox;
class QCustomPlot;
class QLabel;
class QListWidget;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTextBrowser;

namespace kvlab {
class RunsStore;
}

namespace kvlab::gui {

class GenerateModel;

class GeneratePanel : public QWidget {
  Q_OBJECT

 public:
  // `model_path` gives the model the page's Model field names when Generate is pressed; each
  // finished method's run is saved into `store` (none: not saved).
  GeneratePanel(std::function<QString()> model_path, std::shared_ptr<RunsStore> store,
                QWidget* parent = nullptr);

  void set_prompt(const QString& text);
  void set_tokens(int tokens);
  void set_batch(int tokens);  // prompt tokens per forward pass; 0: the whole prompt
  // Checks exactly the methods with these names (generate_choices()).
  void set_checked(const QStringList& names);
  // Starts a generation; false (the error shown) when the input is incomplete or one is running.
  bool generate();
  bool wait_until_done(int timeout_ms);
  GenerateModel* model() const { return m_model; }
  // The parts are named for finding them: "prompt", "tokens", "methods", "generate",
  // "cancel", "progress", "chart", "summary", "texts", "error".

 signals:
  void status_message(const QString& text, int timeout_ms);
  void run_saved(qint64 id);

 private:
  void redraw();

  std::function<QString()> m_model_path;
  GenerateModel* m_model;
  QPlainTextEdit* m_prompt;
  QSpinBox* m_tokens;
  QSpinBox* m_batch;
  QComboBox* m_backend;
  QListWidget* m_methods;
  QPushButton* m_generate;
  QPushButton* m_cancel;
  QProgressBar* m_progress;
  QCustomPlot* m_chart;
  QLabel* m_summary;
  QLabel* m_error;
  QTextBrowser* m_texts;
};

}  // namespace kvlab::gui
