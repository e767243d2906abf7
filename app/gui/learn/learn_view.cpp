#include "learn/learn_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QListWidget>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QStackedWidget>
#include <QVBoxLayout>

#include "learn/learn_eviction_page.h"
#include "learn/learn_growth_page.h"
#include "learn/learn_huffman_page.h"
#include "learn/learn_pays_page.h"
#include "learn/learn_planner_page.h"
#include "learn/learn_quant_page.h"

namespace kvlab::gui {

LearnView::LearnView(QWidget* parent) : QWidget(parent) {
  m_list = new QListWidget;
  m_list->setObjectName(QStringLiteral("steps"));
  m_list->setToolTip(tr("The steps of the walk-through; click one to go straight to it"));
  m_list->setFixedWidth(190);
  m_list->setSpacing(2);
  m_list->setWordWrap(true);
  m_stack = new QStackedWidget;

  add_page(new LearnGrowthPage, QStringLiteral("learn-growth"));
  add_page(new LearnQuantPage, QStringLiteral("learn-quant"));
  add_page(new LearnHuffmanPage, QStringLiteral("learn-huffman"));
  add_page(new LearnEvictionPage, QStringLiteral("learn-eviction"));
  add_page(new LearnPlannerPage, QStringLiteral("learn-planner"));
  add_page(new LearnPaysPage, QStringLiteral("learn-pays"));

  m_previous = new QPushButton(tr("◀ Previous"));
  m_previous->setObjectName(QStringLiteral("previous"));
  m_previous->setToolTip(tr("Go back one step of the walk-through"));
  m_next = new QPushButton(tr("Next ▶"));
  m_next->setObjectName(QStringLiteral("next"));
  m_next->setToolTip(tr("Go on to the next step of the walk-through"));
  m_position = new QLabel;
  m_position->setObjectName(QStringLiteral("position"));
  m_position->setToolTip(tr("Which step of the walk-through this is"));
  m_position->setAlignment(Qt::AlignCenter);

  auto* nav = new QHBoxLayout;
  nav->setContentsMargins(16, 0, 16, 6);
  nav->addWidget(m_previous);
  nav->addStretch(1);
  nav->addWidget(m_position);
  nav->addStretch(1);
  nav->addWidget(m_next);

  auto* list_box = new QVBoxLayout;
  auto* list_title = new QLabel(tr("<b>Learn</b> — KV-cache compression, step by step"));
  list_title->setWordWrap(true);
  list_title->setFixedWidth(190);
  m_list_title = list_title;
  list_box->addWidget(list_title);
  list_box->addWidget(m_list, 1);

  // The step scrolls on its own; the list of steps and Previous / Next stay in sight.
  m_step_scroll = new QScrollArea;
  m_step_scroll->setWidget(m_stack);
  m_step_scroll->setWidgetResizable(true);
  m_step_scroll->setFrameShape(QFrame::NoFrame);
  m_step_scroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  auto* right = new QVBoxLayout;
  right->setContentsMargins(0, 0, 0, 0);
  right->addWidget(m_step_scroll, 1);
  right->addLayout(nav);

  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  // The view answers for its own minimum (the steps without the list, see resizeEvent).
  layout->setSizeConstraint(QLayout::SetNoConstraint);
  layout->addLayout(list_box);
  layout->addLayout(right, 1);

  connect(m_list, &QListWidget::currentRowChanged, this, &LearnView::show_index);
  connect(m_previous, &QPushButton::clicked, this, &LearnView::show_previous);
  connect(m_next, &QPushButton::clicked, this, &LearnView::show_next);
  show_index(0);
}

QSize LearnView::minimumSizeHint() const {
  // As wide as the widest step (the page scrolls sideways rather than squeeze it), but only as
  // tall as a few lines of it: the step scrolls inside the view, under the list and buttons.
  const QSize steps = m_stack->minimumSizeHint();
  const int scroll_bar = m_step_scroll->verticalScrollBar()->sizeHint().width();
  return {steps.width() + scroll_bar, 240 + m_next->sizeHint().height()};
}

void LearnView::resizeEvent(QResizeEvent* event) {
  // On a narrow window the list of steps gives its width to the step shown; Previous / Next and
  // "step N of 6" below still lead through the walk-through.
  const bool fits =
      event->size().width() >= m_list->width() + m_stack->minimumSizeHint().width() + 12;
  m_list->setVisible(fits);
  m_list_title->setVisible(fits);
  QWidget::resizeEvent(event);
}

bool LearnView::event(QEvent* event) {
  // A step's minimum changed (a wider Huffman tree): the scroll area around the page must hear
  // of it, which a layout without a size constraint does not tell it.
  if (event->type() == QEvent::LayoutRequest) updateGeometry();
  return QWidget::event(event);
}

void LearnView::add_page(LearnPage* page, const QString& file_name) {
  page->setObjectName(file_name);
  m_pages.push_back(page);
  m_file_names << file_name;
  m_stack->addWidget(page);
  auto* item =
      new QListWidgetItem(QStringLiteral("%1. %2").arg(m_pages.size()).arg(page->title()), m_list);
  item->setToolTip(page->title());
  connect(page, &LearnPage::open_full_view, this, &LearnView::open_full_view);
}

int LearnView::current_index() const {
  return m_stack->currentIndex();
}

LearnPage* LearnView::page(int index) const {
  if (index < 0 || index >= page_count()) return nullptr;
  return m_pages[static_cast<std::size_t>(index)];
}

QString LearnView::page_file_name(int index) const {
  return index >= 0 && index < m_file_names.size() ? m_file_names[index] : QString();
}

int LearnView::index_of(const QString& name) const {
  return static_cast<int>(m_file_names.indexOf(name));
}

void LearnView::show_index(int index) {
  if (index < 0 || index >= page_count()) return;
  m_stack->setCurrentIndex(index);
  if (m_list->currentRow() != index) {
    const QSignalBlocker block(m_list);
    m_list->setCurrentRow(index);
  }
  update_navigation();
}

void LearnView::show_next() {
  show_index(current_index() + 1);
}

void LearnView::show_previous() {
  show_index(current_index() - 1);
}

void LearnView::update_navigation() {
  const int i = current_index();
  m_position->setText(tr("page %1 of %2").arg(i + 1).arg(page_count()));
  m_previous->setEnabled(i > 0);
  m_next->setEnabled(i + 1 < page_count());
}

}  // namespace kvlab::gui
