// The prefill policies ("presses", after kvpress): what one layer keeps of its prompt when the
// prefill ends. The decode-time simulation (eviction.cpp) and the model loop (loop_hooks.h) both
// call them on the same [tokens][heads][dim] float rows, so each rule exists once. The rules and
// their references are in docs/EVICTION.md and beside each function in presses.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/eviction/eviction.h"

namespace kvlab::detail {

// One layer's prompt as the presses read it. Rows are [position][head][dim], `*_stride` floats
// apart; keys and queries are post-RoPE.
struct PressLayer {
  int layer = 0, layers = 1;
  int prompt = 0;  // positions 0..prompt-1 are compressed
  int kv_heads = 0, q_heads = 0, dim = 0;
  const float* keys = nullptr;
  const float* values = nullptr;
  std::int64_t kv_stride = 0;
  // The observation window: `window_rows` queries, oldest first, `q_stride` floats apart. Query
  // i sits at position window_positions[i] and sees the keys up to it (causal); with no positions
  // (decode-time queries of a synthetic source) every query sees the whole prompt.
  const float* window = nullptr;
  std::int64_t q_stride = 0;
  int window_rows = 0;
  std::vector<int> window_positions;
  const RopeSpec* rope = nullptr;  // how the keys were turned (expected attention); may be null
};

// A press's decision for one layer.
struct PressResult {
  std::vector<std::vector<int>> kept;                    // [kv head]: prompt positions, ascending
  std::vector<std::vector<std::uint8_t>> channel_masks;  // think: [kv head][dim], 1 = kept
  int budget = 0;                                        // tokens per head this layer may keep
};

// Per KV head and prompt position, the score `scorer` gives (higher is kept first).
std::vector<std::vector<double>> press_scores(EvictionPolicy scorer, const EvictionConfig& c,
                                              const PressLayer& in);

// Tokens per head the layer keeps: the budget of the prompt, or PyramidKV's share for its depth.
int press_budget(const EvictionConfig& c, const Budget& budget, const PressLayer& in);

// ChunkKV: the chunks of `chunk` positions kept of a `prompt`-token prompt at a budget of `tokens`
// (at least one).
int chunks_kept(int prompt, int chunk, int tokens);

// The whole decision of a prefill policy for one layer (token selection; ThinK's channels).
PressResult run_press(const EvictionConfig& c, const Budget& budget, const PressLayer& in);

// ThinK: zeroes the pruned key channels of the prompt's rows in `keys` (same layout as in.keys).
void apply_channel_masks(const PressResult& r, const PressLayer& in, float* keys);

// MiniCache: merges rows [0, prompt) of two adjacent layers' K (or V) in place. Each token's
// vectors (per KV head) keep their own norms and share one direction, the SLERP of theirs at
// `t`; tokens whose directions are too far apart (the retention rule in presses.cpp) stay as
// they are and are flagged in `retained` ([position][head], 1 = kept unmerged).
void minicache_merge(float* lower, float* upper, std::int64_t stride, int prompt, int heads,
                     int dim, double t, double retain, std::vector<std::uint8_t>& retained);

// Whether layer l shares its prompt with a neighbour under MiniCache, and which one.
int minicache_partner(int layer, int layers);  // -1: not merged

}  // namespace kvlab::detail
