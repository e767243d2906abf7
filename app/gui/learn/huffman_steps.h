// The classic Huffman construction (Huffman 1952, "A Method for the Construction of
// Minimum-Redundancy Codes", Proc. IRE 40(9)) recorded merge by merge, so Learn step (c) can show
// the forest after any number of merges. The engine's codebook (HuffmanCodebook) is
// length-limited and canonical; this one is the textbook tree, unlimited, built here so each
// merge can be shown.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace kvlab::gui {

class HuffmanSteps {
 public:
  static constexpr int kInternal = -1;  // Node::symbol of a merged node
  static constexpr int kOther = -2;     // Node::symbol of the leaf that stands for rare codes

  struct Node {
    std::uint64_t weight = 0;
    int symbol = kInternal;     // the code value of a leaf, kOther, or kInternal
    int left = -1, right = -1;  // children (node indices) of a merged node; left is the lighter
    int height = 0;             // 0 for a leaf, 1 + the taller child's height otherwise
  };

  // Leaves (symbol, weight > 0), in the order given; then one merged node per merge, in merge
  // order. Each merge joins the two lightest roots (ties: the older node first), the lighter
  // becoming the left child (bit 0).
  static HuffmanSteps build(std::span<const std::pair<int, std::uint64_t>> leaves);
  // The tree over the values that occur in `counts` (indexed by code value), in code order; when
  // more than `max_leaves` occur, over the max_leaves - 1 most frequent and a last kOther leaf
  // that stands for the rest (other_codes() of them), so the drawing stays legible.
  static HuffmanSteps from_counts(std::span<const std::uint64_t> counts, int max_leaves = 256);

  const std::vector<Node>& nodes() const { return m_nodes; }
  int leaf_count() const { return m_leaves; }
  int other_codes() const { return m_other_codes; }
  int merge_count() const { return m_leaves > 1 ? m_leaves - 1 : 0; }
  // Roots of the forest after the first `merges` merges (node indices, ascending).
  std::vector<int> roots_after(int merges) const;
  // The node that merge `merge` (1-based) created.
  int merged_node(int merge) const { return m_leaves + merge - 1; }
  int root() const { return m_nodes.empty() ? -1 : static_cast<int>(m_nodes.size()) - 1; }
  // Bit string of a leaf in the finished tree: the edges from the root down, 0 = left. A lone
  // leaf gets "0": a code needs at least one bit (as the engine's codebook gives it length 1).
  const std::string& code_word(int leaf) const { return m_words[static_cast<std::size_t>(leaf)]; }
  int length(int leaf) const { return static_cast<int>(code_word(leaf).size()); }
  // Sum of weight × length over the leaves: the bits of every symbol once coded.
  std::uint64_t total_bits() const;

 private:
  std::vector<Node> m_nodes;
  std::vector<std::string> m_words;  // per leaf
  int m_leaves = 0;
  int m_other_codes = 0;
};

// Code length per code value (0 for values with count 0) of the classic Huffman code over every
// value that occurs; a single value gets length 1.
std::vector<int> huffman_lengths(std::span<const std::uint64_t> counts);

}  // namespace kvlab::gui
