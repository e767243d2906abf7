// One KV head's eviction policy (see eviction_policy.h; the policies are in eviction.h).
#include "eviction/eviction_policy.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvlab::detail {

EvictionHeadPolicy::EvictionHeadPolicy(const EvictionConfig& config, Budget budget, int tokens,
                                       int prompt, int group)
    : m_c(config), m_budget(budget), m_prompt(prompt), m_group(group) {
  const int T = tokens, P = prompt;
  m_acc.assign(T, 0.0);
  m_step.assign(T, 0.0);
  m_count.assign(T, 1);
  m_members.assign(T, {});
  m_held.assign(T, 0);
  m_static_protect.assign(T, 0);
  m_map.steps = T - P;
  m_map.positions = T;
  m_map.prompt = P;
  m_map.cells.assign(T, map_cell(EvictionMap::kNever, kLeftNever));
  if (m_c.policy == EvictionPolicy::Streaming) {
    for (int t = 0; t < std::min(m_c.sinks, T); ++t) m_static_protect[t] = 1;
  } else if (m_c.policy == EvictionPolicy::Importance) {
    for (int t : m_c.protected_tokens) {
      if (t >= 0 && t < T) m_static_protect[t] = 1;
    }
  }
  for (int t = 0; t < T; ++t) {
    if (m_static_protect[t]) m_map.cells[t] = map_cell(EvictionMap::kNever, kLeftSink);
  }
  m_kept.resize(P);
  std::iota(m_kept.begin(), m_kept.end(), 0);
  std::fill(m_held.begin(), m_held.begin() + P, 1);
}

bool EvictionHeadPolicy::is_entry(int t) const {
  return std::binary_search(m_kept.begin(), m_kept.end(), t);
}

std::size_t EvictionHeadPolicy::merged_entries() const {
  std::size_t merged = 0;
  for (int e : m_kept) merged += !m_members[e].empty();
  return merged;
}

double EvictionHeadPolicy::entry_logit(const float* logits, int e) const {
  const auto& mem = m_members[e];
  if (mem.empty()) return logits[e];
  double z = 0;
  for (const auto& [t, c] : mem) z += static_cast<double>(c) * logits[t];
  return z + std::log(static_cast<double>(m_count[e]));
}

double EvictionHeadPolicy::mean_attention(int e, int context) const {
  return m_acc[e] / (static_cast<double>(steps_seen(e, context)) * m_group);
}

void EvictionHeadPolicy::retain_prompt(const std::vector<int>& kept) {
  std::size_t k = 0;
  for (int t = 0; t < m_prompt; ++t) {
    if (k < kept.size() && kept[k] == t) {
      ++k;
    } else {
      drop(t, 0);
    }
  }
  std::vector<int> rest(m_kept.begin() + std::min<std::ptrdiff_t>(m_prompt, m_kept.size()),
                        m_kept.end());
  m_kept = kept;
  m_kept.insert(m_kept.end(), rest.begin(), rest.end());
}

void EvictionHeadPolicy::evict(int s, int context) {
  if (m_c.policy == EvictionPolicy::Full ||
      eviction_schedule(m_c.policy) == EvictionSchedule::Prefill) {
    return;
  }
  const int budget = m_budget.tokens_at(context);
  const std::size_t n = m_kept.size();
  const double uniform = 1.0 / static_cast<double>(n);
  const int last_pos = context - 1;

  // Who may not go, and the score the rest are ranked by (lowest goes first).
  std::vector<char> keep(n, 0);
  std::vector<double> score(n, 0.0);
  std::size_t recent = 0;
  if (m_c.policy == EvictionPolicy::H2O || m_c.policy == EvictionPolicy::Merge) {
    recent = static_cast<std::size_t>(std::floor(m_c.recent_fraction * budget));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const int e = m_kept[i];
    keep[i] = m_static_protect[e] || i + recent >= n;
    switch (m_c.policy) {
      case EvictionPolicy::Window:
      case EvictionPolicy::Streaming:
        score[i] = e;
        break;
      case EvictionPolicy::H2O:
      case EvictionPolicy::Merge:
        score[i] = m_acc[e];
        break;
      case EvictionPolicy::Threshold:
        // Tokens generated during decoding get `recent` steps before they are judged.
        keep[i] = keep[i] || (e >= m_prompt && steps_seen(e, context) <= m_c.recent);
        score[i] = mean_attention(e, context) / uniform;
        break;
      case EvictionPolicy::Importance:
        score[i] = m_c.w_attention * mean_attention(e, context) / uniform +
                   m_c.w_recency * (1.0 - static_cast<double>(last_pos - e) / context);
        break;
      case EvictionPolicy::TOVA:
        // Only this step's attention counts (TOVA's rule: the lowest current score goes).
        score[i] = m_step[e];
        break;
      default:
        break;
    }
  }
  if (m_c.policy == EvictionPolicy::TOVA) {
    for (int e : m_kept) m_step[static_cast<std::size_t>(e)] = 0;
  }
  std::vector<std::size_t> victims;
  std::vector<std::size_t> candidates;
  for (std::size_t i = 0; i < n; ++i) {
    if (keep[i]) continue;
    if (m_c.policy == EvictionPolicy::Threshold && score[i] < m_c.threshold) {
      victims.push_back(i);
    } else {
      candidates.push_back(i);
    }
  }
  const std::size_t remaining = n - victims.size();
  if (remaining > static_cast<std::size_t>(budget)) {
    const std::size_t excess = std::min(remaining - budget, candidates.size());
    const auto lower = [&](std::size_t a, std::size_t b) {
      return score[a] != score[b] ? score[a] < score[b] : m_kept[a] < m_kept[b];
    };
    std::nth_element(candidates.begin(), candidates.begin() + excess, candidates.end(), lower);
    candidates.resize(excess);
    std::sort(candidates.begin(), candidates.end(), lower);
    victims.insert(victims.end(), candidates.begin(), candidates.end());
  }
  if (victims.empty()) return;

  std::vector<char> going(n, 0);
  for (std::size_t i : victims) going[i] = 1;
  for (std::size_t i : victims) {
    const int e = m_kept[i];
    const int into = m_c.policy == EvictionPolicy::Merge ? merge_partner(i, going) : -1;
    if (into >= 0) {
      merge(e, m_kept[into], s);
    } else {
      drop(e, s);
    }
  }
  std::size_t w = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!going[i]) m_kept[w++] = m_kept[i];
  }
  m_kept.resize(w);
}

// The kept entry (index into m_kept) most similar to entry i among its `merge_window` kept
// neighbours on each side that stay, or -1 when none reaches `merge_similarity`.
int EvictionHeadPolicy::merge_partner(std::size_t i, const std::vector<char>& going) const {
  const auto ki = m_merge_keys.row(m_kept[i]);
  const double ni = ki.norm();
  int best = -1;
  double best_cos = m_c.merge_similarity;
  const auto consider = [&](std::size_t j) {
    const auto kj = m_merge_keys.row(m_kept[j]);
    const double nj = kj.norm();
    if (ni == 0 || nj == 0) return;
    const double cosine = ki.dot(kj) / (ni * nj);
    if (cosine >= best_cos) best_cos = cosine, best = static_cast<int>(j);
  };
  int seen = 0;
  for (std::size_t j = i; j-- > 0 && seen < m_c.merge_window;) {
    if (!going[j]) consider(j), ++seen;
  }
  seen = 0;
  for (std::size_t j = i + 1; j < m_kept.size() && seen < m_c.merge_window; ++j) {
    if (!going[j]) consider(j), ++seen;
  }
  return best;
}

void EvictionHeadPolicy::merge(int from, int into, int s) {
  double wf = m_acc[from], wi = m_acc[into];
  if (!(wf + wi > 0)) wf = m_count[from], wi = m_count[into];
  const double a = wf / (wf + wi);
  auto& dst = m_members[into];
  if (dst.empty()) dst.emplace_back(into, 1.0f);
  for (auto& [t, c] : dst) c = static_cast<float>(c * (1.0 - a));
  if (m_members[from].empty()) {
    dst.emplace_back(from, static_cast<float>(a));
  } else {
    for (const auto& [t, c] : m_members[from]) dst.emplace_back(t, static_cast<float>(c * a));
    m_members[from].clear();
  }
  m_merge_keys.row(into) = (static_cast<float>(1.0 - a) * m_merge_keys.row(into) +
                            static_cast<float>(a) * m_merge_keys.row(from))
                               .eval();
  m_count[into] += m_count[from];
  m_acc[into] += m_acc[from];
  m_map.cells[from] = map_cell(s, kLeftMerged);
}

void EvictionHeadPolicy::drop(int e, int s) {
  m_map.cells[e] = map_cell(s, kLeftEvicted);
  m_held[e] = 0;
  for (const auto& [t, c] : m_members[e]) m_held[t] = 0;
  m_members[e].clear();
}

}  // namespace kvlab::detail
