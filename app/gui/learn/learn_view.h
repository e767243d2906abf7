// The Learn page: a guided walk through KV-cache compression in six steps, each live on the real
// engine and planners: (1) the cache growing during decoding, (2) quantization groupings (KIVI),
// (3) Huffman coding of the codes, (4) eviction, (5) "what fits on my GPU?", (6) "when does
// compression pay?". A list of the steps on the left, the step in the middle, Previous / Next
// and "page N of 6" below. Every page's
// "Open in the … view" link is re-emitted for the main window to apply.
#pragma once

#include <vector>

#include <QString>
#include <QWidget>

#include "learn/learn_page.h"

class QLabel;
class QListWidget;
class QPushButton;
class QScrollArea;
class QStackedWidget;

namespace kvlab::gui {

class LearnView : public QWidget {
  Q_OBJECT

 public:
  explicit LearnView(QWidget* parent = nullptr);

  int page_count() const { return static_cast<int>(m_pages.size()); }
  int current_index() const;
  LearnPage* page(int index) const;
  LearnPage* current_page() const { return page(current_index()); }
  // "learn-growth", "learn-quant", ...: the screenshot file name of a page.
  QString page_file_name(int index) const;
  // The index of the page whose file name is `name` ("learn-quant"), or -1.
  int index_of(const QString& name) const;

  QSize minimumSizeHint() const override;

 public slots:
  void show_index(int index);
  void show_next();
  void show_previous();

 signals:
  void open_full_view(const kvlab::gui::LearnLink& link);

 protected:
  void resizeEvent(QResizeEvent* event) override;
  bool event(QEvent* event) override;

 private:
  void add_page(LearnPage* page, const QString& file_name);
  void update_navigation();

  std::vector<LearnPage*> m_pages;
  QStringList m_file_names;
  QListWidget* m_list = nullptr;
  QLabel* m_list_title = nullptr;
  QStackedWidget* m_stack = nullptr;
  QScrollArea* m_step_scroll = nullptr;  // around m_stack
  QPushButton* m_previous = nullptr;
  QPushButton* m_next = nullptr;
  QLabel* m_position = nullptr;
};

}  // namespace kvlab::gui
