// Learn page (c)'s Huffman tree: the widget that draws the forest of a HuffmanSteps
// (huffman_steps.h) after any number of merges.
#pragma once

#include <QWidget>

#include "learn/huffman_steps.h"

namespace kvlab::gui {

// Draws the forest of a HuffmanSteps after some merges: leaves on the bottom row, labelled by
// code value and count; merged nodes above their children by height, with their weight; edges
// marked 0 (left) and 1 (right). The node the last merge made and the two roots the next merge
// takes are highlighted; once every merge is done each leaf shows its code word.
class HuffmanTreeWidget : public QWidget {
  Q_OBJECT

 public:
  explicit HuffmanTreeWidget(QWidget* parent = nullptr);

  void set_steps(const HuffmanSteps& steps);
  void set_merges(int merges);
  int merges() const { return m_merges; }
  const HuffmanSteps& steps() const { return m_steps; }
  // The line drawn above the tree: what the last merge did, or why there is nothing to merge.
  QString message() const;
  // Where node `node` is drawn (its centre), for tests; invalid when not drawn now.
  QPointF node_position(int node) const;

  // Wide enough that the leaves' labels never overlap (a slot of 40 px per leaf).
  QSize minimumSizeHint() const override;
  QSize sizeHint() const override { return {900, 330}; }

 protected:
  void paintEvent(QPaintEvent* event) override;
  bool event(QEvent* event) override;

 private:
  QString leaf_name(int node) const;
  QString node_tooltip(int node) const;
  int node_at(QPointF point) const;
  bool drawn(int node) const;

  HuffmanSteps m_steps;
  int m_merges = 0;
  std::vector<double> m_slot;  // per node: horizontal position in leaf slots (in-order)
};

}  // namespace kvlab::gui
