#include "common/chart_pair.h"

#include <QResizeEvent>
#include <QSplitter>
#include <QStackedLayout>
#include <QTabBar>
#include <QTabWidget>
#include <algorithm>

namespace kvlab::gui {

namespace {

int min_width(const QWidget* w) {
  return std::max(w->minimumWidth(), w->minimumSizeHint().width());
}

int min_height(const QWidget* w) {
  return std::max(w->minimumHeight(), w->minimumSizeHint().height());
}

}  // namespace

ChartPair::ChartPair(QWidget* first, const QString& first_title, QWidget* second,
                     const QString& second_title, QWidget* parent)
    : QWidget(parent),
      m_first(first),
      m_second(second),
      m_first_title(first_title),
      m_second_title(second_title) {
  m_row = new QSplitter(Qt::Horizontal);
  m_row->setChildrenCollapsible(false);
  m_tabs = new QTabWidget;
  m_tabs->setDocumentMode(true);
  m_tabs->tabBar()->setUsesScrollButtons(false);  // two short names always fit
  m_stack = new QStackedLayout(this);
  m_stack->setContentsMargins(0, 0, 0, 0);
  m_stack->addWidget(m_row);
  m_stack->addWidget(m_tabs);
  // The stack's minimum would be the side-by-side one; this widget answers for its own.
  m_stack->setSizeConstraint(QLayout::SetNoConstraint);
  arrange(false);
}

bool ChartPair::tabbed() const {
  return m_stack->currentWidget() == m_tabs;
}

int ChartPair::side_by_side_width() const {
  if (!m_second_shown) return min_width(m_first);
  return min_width(m_first) + min_width(m_second) + m_row->handleWidth();
}

void ChartPair::set_second_shown(bool shown) {
  m_second_shown = shown;
  arrange(width() < side_by_side_width());
  updateGeometry();
}

void ChartPair::set_titles(const QString& first, const QString& second) {
  m_first_title = first;
  m_second_title = second;
  if (tabbed()) {
    m_tabs->setTabText(0, first);
    m_tabs->setTabText(1, second);
  }
}

QSize ChartPair::minimumSizeHint() const {
  const int tab_bar = m_tabs->tabBar()->sizeHint().height();
  return {std::max(min_width(m_first), min_width(m_second)),
          std::max(min_height(m_first), min_height(m_second)) + tab_bar};
}

QSize ChartPair::sizeHint() const {
  return {side_by_side_width(),
          std::max(m_first->sizeHint().height(), m_second->sizeHint().height())};
}

void ChartPair::resizeEvent(QResizeEvent* event) {
  arrange(event->size().width() < side_by_side_width());
  QWidget::resizeEvent(event);
}

bool ChartPair::event(QEvent* event) {
  // A chart's minimum changed: the page's layout must hear of it, which a layout without a size
  // constraint does not tell it.
  if (event->type() == QEvent::LayoutRequest) updateGeometry();
  return QWidget::event(event);
}

void ChartPair::arrange(bool as_tabs) {
  if (as_tabs != tabbed() || m_first->parentWidget() == nullptr) {
    if (as_tabs) {
      m_tabs->addTab(m_first, m_first_title);
      m_tabs->addTab(m_second, m_second_title);
      m_tabs->setTabToolTip(0, m_first->toolTip());
      m_tabs->setTabToolTip(1, m_second->toolTip());
      m_tabs->setCurrentIndex(0);
      m_stack->setCurrentWidget(m_tabs);
    } else {
      m_row->addWidget(m_first);
      m_row->addWidget(m_second);
      m_row->setStretchFactor(0, 1);
      m_row->setStretchFactor(1, 1);
      m_stack->setCurrentWidget(m_row);
    }
    m_first->show();
  }
  if (as_tabs) {
    m_second->show();
    m_tabs->setTabVisible(1, m_second_shown);
  } else {
    m_second->setVisible(m_second_shown);
  }
}

}  // namespace kvlab::gui
