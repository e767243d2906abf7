// One KV head's eviction policy: the entries it keeps, the attention they have received, who is
// protected, and the rule that cuts the cache down to its budget (eviction.h describes the
// policies). The decode-time simulation (eviction.cpp) and the model loop (model_quality.cpp)
// both drive it, so the rules exist once.
//
// Driving it: the prompt's positions are kept from the start; each decode step admits its new
// token, feeds the attention every query head of the group paid to the kept entries (summed over
// the group, as H2O accumulates it), then calls evict(step, context).
#pragma once

#include <Eigen/Dense>
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "kvlab/engine/eviction/eviction.h"

namespace kvlab::detail {

// How a position left the cache, in the top two bits of its map cell.
enum : std::uint16_t { kLeftNever = 0, kLeftEvicted = 1, kLeftMerged = 2, kLeftSink = 3 };

inline std::uint16_t map_cell(int leave_step, std::uint16_t how) {
  return static_cast<std::uint16_t>((leave_step & 0x3FFF) | (how << 14));
}

class EvictionHeadPolicy {
 public:
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  // `tokens`: positions this head will ever hold; `prompt`: the first positions, present before
  // step 0; `group`: query heads per KV head (mean attention is per query head).
  EvictionHeadPolicy(const EvictionConfig& config, Budget budget, int tokens, int prompt,
                     int group);

  // The merge policy compares keys: the head's keys, one row per position (kept and updated
  // here as entries merge).
  void set_merge_keys(RowMatrix keys) { m_merge_keys = std::move(keys); }
  // One position's key row, for a loop that learns the keys as it goes (set before the position
  // can be compared, i.e. before the evict() that follows its admission).
  void set_merge_key(int t, const float* key) {
    m_merge_keys.row(t) = Eigen::Map<const Eigen::RowVectorXf>(key, m_merge_keys.cols());
  }

  // Token `t` enters the cache (decode steps admit positions prompt, prompt + 1, ... in order).
  void admit(int t) {
    m_kept.push_back(t);
    m_held[static_cast<std::size_t>(t)] = 1;
  }

  // The kept entries (their representative positions), ascending.
  const std::vector<int>& kept() const { return m_kept; }
  // 1 for each position whose K and V the cache still holds (alone or inside a merged entry).
  const std::vector<char>& held() const { return m_held; }
  bool is_entry(int t) const;
  // A merged entry's tokens and their weights; empty for a plain entry.
  const std::vector<std::pair<int, float>>& members(int e) const {
    return m_members[static_cast<std::size_t>(e)];
  }
  std::size_t merged_entries() const;

  // The logit of entry e from the token logits: the members' weighted logit + log(count).
  double entry_logit(const float* logits, int e) const;

  // Attention probability `p` one query head paid to entry e.
  void add_attention(int e, double p) {
    m_acc[static_cast<std::size_t>(e)] += p;
    m_step[static_cast<std::size_t>(e)] += p;
  }

  // A prefill policy's decision: of the prompt, only `kept` (ascending positions) stay. Called
  // once, before the first decode step; the rest are recorded as evicted at step 0.
  void retain_prompt(const std::vector<int>& kept);

  // Cuts the kept entries down to the budget at `context` tokens; `step` is recorded in the map.
  void evict(int step, int context);

  const EvictionMap& map() const { return m_map; }
  EvictionMap take_map() { return std::move(m_map); }

 private:
  int steps_seen(int e, int context) const { return context - std::max(m_prompt, e); }
  double mean_attention(int e, int context) const;
  int merge_partner(std::size_t i, const std::vector<char>& going) const;
  void merge(int from, int into, int step);
  void drop(int e, int step);

  const EvictionConfig& m_c;
  Budget m_budget;
  int m_prompt = 0, m_group = 1;
  std::vector<int> m_kept;
  std::vector<double> m_acc;
  std::vector<double> m_step;  // attention received in the current step (TOVA)
  std::vector<int> m_count;
  std::vector<std::vector<std::pair<int, float>>> m_members;  // merged entries: token, weight
  std::vector<char> m_held, m_static_protect;
  RowMatrix m_merge_keys;
  EvictionMap m_map;
};

}  // namespace kvlab::detail
