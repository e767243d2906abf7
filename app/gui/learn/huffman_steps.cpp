#include "learn/huffman_steps.h"

#include <algorithm>

namespace kvlab::gui {

HuffmanSteps HuffmanSteps::build(std::span<const std::pair<int, std::uint64_t>> leaves) {
  HuffmanSteps s;
  s.m_leaves = static_cast<int>(leaves.size());
  for (const auto& [symbol, weight] : leaves) s.m_nodes.push_back({weight, symbol, -1, -1, 0});
  std::vector<int> roots(leaves.size());
  for (std::size_t i = 0; i < roots.size(); ++i) roots[i] = static_cast<int>(i);
  const auto lighter = [&](int a, int b) {
    const auto& na = s.m_nodes[static_cast<std::size_t>(a)];
    const auto& nb = s.m_nodes[static_cast<std::size_t>(b)];
    return na.weight != nb.weight ? na.weight < nb.weight : a < b;
  };
  while (roots.size() > 1) {
    // The two lightest roots: a partial sort of the (at most 256) roots is plenty fast here.
    std::partial_sort(roots.begin(), roots.begin() + 2, roots.end(), lighter);
    const int a = roots[0], b = roots[1];
    const Node& na = s.m_nodes[static_cast<std::size_t>(a)];
    const Node& nb = s.m_nodes[static_cast<std::size_t>(b)];
    const Node merged{na.weight + nb.weight, kInternal, a, b, 1 + std::max(na.height, nb.height)};
    roots.erase(roots.begin(), roots.begin() + 2);
    roots.push_back(static_cast<int>(s.m_nodes.size()));
    s.m_nodes.push_back(merged);
  }
  s.m_words.assign(leaves.size(), std::string());
  if (s.m_leaves == 1) s.m_words[0].push_back('0');  // a lone leaf still takes one bit
  // Code words: the path from the root, walked iteratively (a skewed tree is 255 deep).
  std::vector<std::pair<int, std::string>> stack;
  if (s.m_leaves > 1) stack.emplace_back(s.root(), std::string());
  while (!stack.empty()) {
    auto [node, word] = std::move(stack.back());
    stack.pop_back();
    const Node& n = s.m_nodes[static_cast<std::size_t>(node)];
    if (n.left < 0) {
      s.m_words[static_cast<std::size_t>(node)] = word;
      continue;
    }
    stack.emplace_back(n.right, word + '1');
    stack.emplace_back(n.left, word + '0');
  }
  return s;
}

HuffmanSteps HuffmanSteps::from_counts(std::span<const std::uint64_t> counts, int max_leaves) {
  std::vector<std::pair<int, std::uint64_t>> leaves;
  for (std::size_t v = 0; v < counts.size(); ++v) {
    if (counts[v] > 0) leaves.emplace_back(static_cast<int>(v), counts[v]);
  }
  int other_codes = 0;
  if (static_cast<int>(leaves.size()) > std::max(1, max_leaves)) {
    other_codes = static_cast<int>(leaves.size()) - (max_leaves - 1);
    std::stable_sort(leaves.begin(), leaves.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    std::uint64_t other = 0;
    for (std::size_t i = max_leaves - 1; i < leaves.size(); ++i) other += leaves[i].second;
    leaves.resize(static_cast<std::size_t>(max_leaves - 1));
    std::sort(leaves.begin(), leaves.end());  // back in code order, "other" last
    leaves.emplace_back(kOther, other);
  }
  HuffmanSteps s = build(leaves);
  s.m_other_codes = other_codes;
  return s;
}

std::vector<int> HuffmanSteps::roots_after(int merges) const {
  merges = std::clamp(merges, 0, merge_count());
  const int exist = m_leaves + merges;
  std::vector<bool> child(static_cast<std::size_t>(exist), false);
  for (int i = m_leaves; i < exist; ++i) {
    child[static_cast<std::size_t>(m_nodes[static_cast<std::size_t>(i)].left)] = true;
    child[static_cast<std::size_t>(m_nodes[static_cast<std::size_t>(i)].right)] = true;
  }
  std::vector<int> roots;
  for (int i = 0; i < exist; ++i) {
    if (!child[static_cast<std::size_t>(i)]) roots.push_back(i);
  }
  return roots;
}

std::uint64_t HuffmanSteps::total_bits() const {
  std::uint64_t bits = 0;
  for (int i = 0; i < m_leaves; ++i)
    bits += m_nodes[static_cast<std::size_t>(i)].weight * length(i);
  return bits;
}

std::vector<int> huffman_lengths(std::span<const std::uint64_t> counts) {
  const HuffmanSteps steps = HuffmanSteps::from_counts(counts, static_cast<int>(counts.size()));
  std::vector<int> lengths(counts.size(), 0);
  for (int i = 0; i < steps.leaf_count(); ++i) {
    lengths[static_cast<std::size_t>(steps.nodes()[static_cast<std::size_t>(i)].symbol)] =
        steps.length(i);
  }
  return lengths;
}

}  // namespace kvlab::gui
