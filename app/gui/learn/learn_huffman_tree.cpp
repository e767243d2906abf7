#include "learn/learn_huffman_tree.h"

#include <algorithm>

#include <QEvent>
#include <QHelpEvent>
#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <QToolTip>

namespace kvlab::gui {
namespace {

const QColor kLeafFill{225, 234, 246};
const QColor kLeafPen{70, 110, 170};
const QColor kNodeFill{245, 245, 245};
const QColor kNodePen{110, 110, 110};
const QColor kEdge{150, 150, 150};
const QColor kJustMerged{60, 150, 90};
const QColor kNextMerge{230, 140, 40};
constexpr double kMargin = 8;
constexpr double kMessageHeight = 22;
constexpr double kNodeHeight = 17;
constexpr double kLeafHeight = 32;
constexpr double kWordHeight = 15;

// Counts in at most five characters, so a leaf fits a narrow slot: 987, 9876, 41.2k, 262k, 1.05M.
QString compact(std::uint64_t n) {
  const double x = static_cast<double>(n);
  if (n < 10'000) return QString::number(n);
  if (n < 1'000'000) return QString::number(x / 1e3, 'f', x < 1e5 ? 1 : 0) + QLatin1Char('k');
  return QString::number(x / 1e6, 'f', 2) + QLatin1Char('M');
}

QFont sized(QFont f, double points, bool bold = false) {
  f.setPointSizeF(points);
  f.setBold(bold);
  return f;
}

}  // namespace

HuffmanTreeWidget::HuffmanTreeWidget(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  setMouseTracking(true);
}

QSize HuffmanTreeWidget::minimumSizeHint() const {
  constexpr int kLeafSlot = 40;
  const int leaves = m_steps.leaf_count() * kLeafSlot + static_cast<int>(2 * kMargin);
  return {std::max(480, leaves), 240};
}

void HuffmanTreeWidget::set_steps(const HuffmanSteps& steps) {
  m_steps = steps;
  m_merges = 0;
  // Leaves take slots left to right in the finished tree's order, so no edge ever crosses
  // another; a merged node sits midway between its children.
  m_slot.assign(m_steps.nodes().size(), 0.0);
  int next = 0;
  std::vector<std::pair<int, bool>> stack;  // (node, children done)
  if (m_steps.root() >= 0) stack.emplace_back(m_steps.root(), false);
  while (!stack.empty()) {
    const auto [node, done] = stack.back();
    stack.pop_back();
    const auto& n = m_steps.nodes()[static_cast<std::size_t>(node)];
    if (n.left < 0) {
      m_slot[static_cast<std::size_t>(node)] = next++;
    } else if (done) {
      m_slot[static_cast<std::size_t>(node)] =
          (m_slot[static_cast<std::size_t>(n.left)] + m_slot[static_cast<std::size_t>(n.right)]) /
          2;
    } else {
      stack.emplace_back(node, true);
      stack.emplace_back(n.right, false);
      stack.emplace_back(n.left, false);
    }
  }
  updateGeometry();  // the minimum width follows the number of leaves
  update();
}

void HuffmanTreeWidget::set_merges(int merges) {
  m_merges = std::clamp(merges, 0, m_steps.merge_count());
  update();
}

bool HuffmanTreeWidget::drawn(int node) const {
  return node >= 0 && node < m_steps.leaf_count() + m_merges;
}

QString HuffmanTreeWidget::leaf_name(int node) const {
  const auto& n = m_steps.nodes()[static_cast<std::size_t>(node)];
  if (n.symbol == HuffmanSteps::kOther) return tr("other");
  if (n.symbol >= 0) return tr("code %1").arg(n.symbol);
  return tr("node %1").arg(QLocale().toString(static_cast<qulonglong>(n.weight)));
}

QString HuffmanTreeWidget::message() const {
  const int leaves = m_steps.leaf_count(), total = m_steps.merge_count();
  const auto& nodes = m_steps.nodes();
  if (leaves == 0) return tr("No codes to build a tree from.");
  if (leaves == 1) {
    return tr("Only %1 occurs: there is nothing to merge. A code still needs one bit, so it gets "
              "the 1-bit code word 0 (the engine's codebook does the same).")
        .arg(leaf_name(0));
  }
  const auto name = [&](int node) {  // "code 7 (30.6k)", "other (81.1k)", "node 107k"
    const auto& n = nodes[static_cast<std::size_t>(node)];
    return n.left >= 0 ? tr("node %1").arg(compact(n.weight))
                       : tr("%1 (%2)").arg(leaf_name(node), compact(n.weight));
  };
  const auto pair_text = [&](int node) {
    const auto& n = nodes[static_cast<std::size_t>(node)];
    return tr("%1 + %2").arg(name(n.left), name(n.right));
  };
  if (m_merges == 0) {
    return tr("%1 leaves, one per code value, weighted by its count. Each step merges the two "
              "lightest roots; the first: %2.")
        .arg(leaves)
        .arg(pair_text(m_steps.merged_node(1)));
  }
  const int made = m_steps.merged_node(m_merges);
  const QString last =
      tr("Merge %1 of %2: %3 = %4.")
          .arg(m_merges)
          .arg(total)
          .arg(pair_text(made), compact(nodes[static_cast<std::size_t>(made)].weight));
  if (m_merges == total) {
    return last + tr(" One tree: a code word is the path from the root (0 = left, 1 = right).");
  }
  return last + tr(" %1 roots left; next: %2.")
                    .arg(leaves - m_merges)
                    .arg(pair_text(m_steps.merged_node(m_merges + 1)));
}

QPointF HuffmanTreeWidget::node_position(int node) const {
  if (!drawn(node)) return {};
  const int leaves = m_steps.leaf_count();
  const double slot_w = (width() - 2 * kMargin) / std::max(1, leaves);
  const double leaf_y = height() - kMargin - kWordHeight - kLeafHeight / 2;
  const double top_y = kMessageHeight + 16 + kNodeHeight / 2;  // below the message and legend
  const int levels = std::max(1, m_steps.nodes().back().height);
  const double gap = std::max(0.0, leaf_y - kLeafHeight / 2 + kNodeHeight / 2 - top_y) / levels;
  const auto& n = m_steps.nodes()[static_cast<std::size_t>(node)];
  const double y =
      n.left < 0 ? leaf_y : leaf_y - kLeafHeight / 2 + kNodeHeight / 2 - n.height * gap;
  return {kMargin + (m_slot[static_cast<std::size_t>(node)] + 0.5) * slot_w, y};
}

void HuffmanTreeWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  p.fillRect(rect(), Qt::white);
  p.setPen(QColor(40, 40, 40));
  p.setFont(sized(font(), 9.5));
  p.drawText(QRectF(kMargin, 2, width() - 2 * kMargin, kMessageHeight),
             Qt::AlignLeft | Qt::AlignVCenter,
             p.fontMetrics().elidedText(message(), Qt::ElideRight, width() - 2 * kMargin));
  const int leaves = m_steps.leaf_count();
  if (leaves == 0) return;
  if (m_merges == 0 && leaves > 1) {
    p.setPen(QColor(140, 140, 140));
    p.setFont(sized(font(), 10.5));
    p.drawText(rect(), Qt::AlignCenter,
               tr("Press Step or Play to merge the two lightest nodes, one merge at a time.\n"
                  "The leaves already stand where they will hang in the finished tree."));
  }
  const auto& nodes = m_steps.nodes();
  const bool done = m_merges == m_steps.merge_count();
  const int made = m_merges > 0 ? m_steps.merged_node(m_merges) : -1;
  const int next = done ? -1 : m_steps.merged_node(m_merges + 1);
  const auto is_next = [&](int i) {
    return next >= 0 && (nodes[static_cast<std::size_t>(next)].left == i ||
                         nodes[static_cast<std::size_t>(next)].right == i);
  };
  const double slot_w = (width() - 2 * kMargin) / leaves;
  const QFont small = sized(font(), slot_w < 40 ? 7 : 8);
  const QFont bold = sized(font(), slot_w < 40 ? 7 : 8.5, true);

  // Edges first, so the nodes cover their ends.
  p.setFont(sized(font(), 7.5, true));
  for (int i = leaves; i < leaves + m_merges; ++i) {
    const auto& n = nodes[static_cast<std::size_t>(i)];
    const QPointF from = node_position(i) + QPointF(0, kNodeHeight / 2);
    for (const int child : {n.left, n.right}) {
      const bool leaf = nodes[static_cast<std::size_t>(child)].left < 0;
      const QPointF to = node_position(child) - QPointF(0, (leaf ? kLeafHeight : kNodeHeight) / 2);
      p.setPen(QPen(i == made ? kJustMerged : kEdge, i == made ? 2.0 : 1.2));
      p.drawLine(from, to);
      const QPointF mid = (from + to) / 2 + QPointF(child == n.left ? -7 : 7, 0);
      p.setPen(child == n.left ? QColor(52, 101, 164) : QColor(200, 55, 55));
      p.drawText(QRectF(mid.x() - 6, mid.y() - 7, 12, 14), Qt::AlignCenter,
                 child == n.left ? QStringLiteral("0") : QStringLiteral("1"));
    }
  }
  for (int i = 0; i < leaves + m_merges; ++i) {
    const auto& n = nodes[static_cast<std::size_t>(i)];
    const QPointF c = node_position(i);
    QColor pen = n.left < 0 ? kLeafPen : kNodePen;
    double pen_width = 1.0;
    if (is_next(i)) pen = kNextMerge, pen_width = 2.5;
    if (i == made || (made >= 0 && (nodes[static_cast<std::size_t>(made)].left == i ||
                                    nodes[static_cast<std::size_t>(made)].right == i))) {
      pen = kJustMerged, pen_width = 2.5;
    }
    p.setPen(QPen(pen, pen_width));
    if (n.left < 0) {
      const double w = std::min(slot_w - 4, 70.0);
      const QRectF box(c.x() - w / 2, c.y() - kLeafHeight / 2, w, kLeafHeight);
      p.setBrush(n.symbol == HuffmanSteps::kOther ? QColor(235, 235, 235) : kLeafFill);
      p.drawRoundedRect(box, 4, 4);
      p.setPen(QColor(20, 20, 20));
      p.setFont(bold);
      p.drawText(box.adjusted(1, 1, -1, -kLeafHeight / 2), Qt::AlignCenter,
                 n.symbol >= 0 ? QString::number(n.symbol) : tr("other"));
      p.setFont(small);
      p.drawText(box.adjusted(1, kLeafHeight / 2 - 1, -1, -1), Qt::AlignCenter, compact(n.weight));
      if (done) {
        // The code word under the leaf, or its length when the word is wider than the slot.
        const QString word = QString::fromStdString(m_steps.code_word(i));
        const QString shown = p.fontMetrics().horizontalAdvance(word) <= slot_w - 2
                                  ? word
                                  : tr("%1 b").arg(word.size());
        p.setPen(QColor(200, 55, 55));
        p.drawText(QRectF(c.x() - slot_w / 2, box.bottom() + 1, slot_w, kWordHeight),
                   Qt::AlignCenter, shown);
      }
    } else {
      p.setFont(small);
      const QString text = compact(n.weight);
      const double w = p.fontMetrics().horizontalAdvance(text) + 10;
      const QRectF box(c.x() - w / 2, c.y() - kNodeHeight / 2, w, kNodeHeight);
      p.setBrush(i == made ? QColor(214, 238, 214) : kNodeFill);
      p.drawRoundedRect(box, kNodeHeight / 2, kNodeHeight / 2);
      p.setPen(QColor(20, 20, 20));
      p.drawText(box, Qt::AlignCenter, text);
    }
  }
  // Legend: top right, under the message.
  p.setFont(sized(font(), 8));
  const QString legend[] = {tr("just merged"), tr("merged next")};
  const QColor colors[] = {kJustMerged, kNextMerge};
  double x = width() - kMargin;
  for (int k = 1; k >= 0; --k) {
    const double w = p.fontMetrics().horizontalAdvance(legend[k]);
    x -= w;
    p.setPen(QColor(60, 60, 60));
    p.drawText(QRectF(x, kMessageHeight, w, 14), Qt::AlignVCenter, legend[k]);
    x -= 18;
    p.setPen(QPen(colors[k], 2.5));
    p.setBrush(Qt::NoBrush);
    p.drawRoundedRect(QRectF(x, kMessageHeight + 3, 12, 8), 2, 2);
    x -= 12;
  }
}

QString HuffmanTreeWidget::node_tooltip(int node) const {
  const auto& nodes = m_steps.nodes();
  const auto& n = nodes[static_cast<std::size_t>(node)];
  const QString weight = QLocale().toString(static_cast<qulonglong>(n.weight));
  const bool done = m_merges == m_steps.merge_count();
  if (n.left >= 0) {
    return tr("Made by merge %1: weight %2 = %3 + %4 (its two children). Its subtree's code "
              "words all start with the path down to it.")
        .arg(node - m_steps.leaf_count() + 1)
        .arg(weight, leaf_name(n.left), leaf_name(n.right));
  }
  QString text = n.symbol == HuffmanSteps::kOther
                     ? tr("The %1 least frequent code values, as one leaf: %2 codes together")
                           .arg(m_steps.other_codes())
                           .arg(weight)
                     : tr("Code value %1 occurs %2 times in the tensor").arg(n.symbol).arg(weight);
  if (done) {
    text += tr("; code word %1 (%2 bits)")
                .arg(QString::fromStdString(m_steps.code_word(node)))
                .arg(m_steps.length(node));
  }
  return text;
}

int HuffmanTreeWidget::node_at(QPointF point) const {
  int best = -1;
  double best_d = 18 * 18;
  for (int i = 0; i < m_steps.leaf_count() + m_merges; ++i) {
    const QPointF d = node_position(i) - point;
    const double d2 = d.x() * d.x() + d.y() * d.y();
    if (d2 < best_d) best = i, best_d = d2;
  }
  return best;
}

bool HuffmanTreeWidget::event(QEvent* event) {
  if (event->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(event);
    const int node = node_at(help->pos());
    QToolTip::showText(help->globalPos(), node >= 0 ? node_tooltip(node) : toolTip(), this);
    return true;
  }
  return QWidget::event(event);
}

}  // namespace kvlab::gui
