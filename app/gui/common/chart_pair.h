// Two charts that share a row when the page is wide enough for both at their minimum widths, and
// become two tabs of one chart area when it is not (a 1024-pixel laptop window): nothing is cut
// off and the page never scrolls sideways to reach the second chart. The widget's own minimum
// width is the wider chart's, so a narrow window can always give it what it needs.
#pragma once

#include <QString>
#include <QWidget>

class QSplitter;
class QStackedLayout;
class QTabWidget;

namespace kvlab::gui {

class ChartPair : public QWidget {
  Q_OBJECT

 public:
  ChartPair(QWidget* first, const QString& first_title, QWidget* second,
            const QString& second_title, QWidget* parent = nullptr);

  // True while the charts are shown as tabs (the page is too narrow for both side by side).
  bool tabbed() const;
  // Hides or shows the second chart (a comparison that was not asked for); the first then has
  // the whole width and no tab bar.
  void set_second_shown(bool shown);
  // The tabs' names, used while the charts are tabs.
  void set_titles(const QString& first, const QString& second);
  QSize minimumSizeHint() const override;
  QSize sizeHint() const override;

 protected:
  void resizeEvent(QResizeEvent* event) override;
  bool event(QEvent* event) override;

 private:
  // The width both charts need side by side.
  int side_by_side_width() const;
  void arrange(bool as_tabs);

  QWidget* m_first;
  QWidget* m_second;
  QString m_first_title;
  QString m_second_title;
  bool m_second_shown = true;
  QSplitter* m_row;
  QTabWidget* m_tabs;
  QStackedLayout* m_stack;
};

}  // namespace kvlab::gui
