// Decode-time eviction and merging: which tokens a policy keeps as decoding goes on, what the
// model then sees, and what it costs in memory and attention quality.
//
// The simulation, the policies and how eviction composes with quantization are described in
// docs/EVICTION.md; the policies' code is engine/src/eviction/eviction_policy.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {

enum class EvictionPolicy : std::uint8_t {
  Full,
  Window,
  Streaming,
  H2O,
  Threshold,
  Importance,
  Merge,
  TOVA,
  SnapKV,
  PyramidKV,
  KNorm,
  KeyDiff,
  ExpectedAttention,
  AdaKV,
  ChunkKV,
  ThinK,
  MiniCache
};

std::string_view eviction_policy_id(EvictionPolicy p);  // "full", "window", "streaming", ...
std::vector<std::string_view> eviction_policy_ids();
Result<EvictionPolicy> parse_eviction_policy(std::string_view id);
// The paper a policy follows, for help texts and the GUI ("H2O (Zhang et al. 2023)").
std::string_view eviction_policy_reference(EvictionPolicy p);

// When a policy decides. Decode policies cut the cache to the budget after every decode step,
// from the attention (or the positions) of that step; prefill policies compress the prompt once,
// when the prefill ends (as kvpress's presses do), and keep every token decoded after it.
enum class EvictionSchedule : std::uint8_t { Decode, Prefill };
EvictionSchedule eviction_schedule(EvictionPolicy p);
std::string_view eviction_schedule_id(EvictionSchedule s);  // "decode", "prefill"

// The prefill scorers: the policies whose per-position scores Ada-KV, ChunkKV and ThinK can
// select with (snapkv, pyramidkv, knorm, keydiff, expected-attention).
bool is_prefill_scorer(EvictionPolicy p);

// A token budget: a count, or a fraction of the tokens the sequence has at that step.
struct Budget {
  double value = 0.25;
  bool fraction = true;
  // "512" is a count, "0.25" or "25%" a fraction; an error names the text.
  static Result<Budget> parse(std::string_view text);
  int tokens_at(int context) const;  // at least 1, at most `context`
  std::string to_string() const;
};

struct EvictionConfig {
  EvictionPolicy policy = EvictionPolicy::H2O;
  Budget budget;
  std::vector<Budget> layer_budgets;  // one per layer overrides `budget`; empty: all the same
  int steps = 64;                     // decode steps (the last `steps` tokens of the cache)
  int sinks = 4;                      // streaming
  double recent_fraction = 0.5;       // h2o, merge: the budget's share for the newest tokens
  int recent = 32;                    // threshold: steps of grace for a new token
  double threshold = 0.2;             // threshold: fraction of uniform attention
  // importance: score = w_attention × mean attention / uniform + w_recency × (1 − age / context);
  // protected tokens (token type: BOS, separators) are never evicted.
  double w_attention = 1.0, w_recency = 0.5;
  std::vector<int> protected_tokens = {0};
  double merge_similarity = 0.8;  // merge: least key cosine similarity to merge
  int merge_window = 16;          // merge: kept neighbours searched on each side
  // Prefill policies. The budget is a share (or count) of the prompt's tokens.
  int window = 32;           // snapkv & co: the observation window, last prompt queries
  int pool = 5;              // snapkv & co: average pooling width over positions (odd)
  double pyramid_beta = 20;  // pyramidkv: the top layer keeps budget / beta
  EvictionPolicy scorer = EvictionPolicy::SnapKV;  // adakv, chunkkv, think: whose scores
  bool think_tokens = false;          // think: also keep only the budget's tokens, by `scorer`
  double ada_safeguard = 0.2;         // adakv: each head keeps at least this share of its budget
  int chunk = 10;                     // chunkkv: tokens per chunk
  double key_channels = 0.5;          // think: share of each head's key channels kept
  int future = 512;                   // expected-attention: future positions averaged over
  bool covariance = true;             // expected-attention: the query covariance term
  bool value_norm = true;             // expected-attention: scores times the value's norm
  double merge_t = 0.6;               // minicache: SLERP weight towards the upper layer
  double retain = 0.05;               // minicache: angular-distance threshold to retain a token
  int top_k = 8;                      // needle: "in the top k attended entries"
  std::optional<int> needle;          // the planted needle's position, when the source knows it
  std::optional<MethodConfig> quant;  // eviction then quantization of the kept tokens

  Status validate(const KvCache& cache) const;  // names the option that is wrong
  // The checks that need no cache, for a model with `layers` layers (validate() runs them too;
  // the model loop runs only these).
  Status validate_options(int layers) const;
  // The checks that need the prompt's length: a count budget above the tokens it applies to (the
  // prompt's for a prefill policy, the sequence's for a decode policy), a window longer than the
  // prompt, and (`window_in_prompt`: the window's queries sit on the prompt's last positions) a
  // SnapKV budget that its kept window would fill.
  Status validate_prompt(int prompt, int tokens, bool window_in_prompt = true) const;
};

// Whether the policy selects with another policy's scores (adakv, chunkkv, think with
// think_tokens: `scorer`), and the policy whose scores it selects with (`scorer` or itself).
bool wraps_scorer(const EvictionConfig& c);
EvictionPolicy scoring_policy(const EvictionConfig& c);
// Whether the policy (or the scorer it wraps) reads the observation window's queries.
bool needs_window(const EvictionConfig& c);
// The queries an observation window can use in a cache of `tokens` tokens with `queries` of them.
int observation_queries(int queries, int tokens);

std::string eviction_label(const EvictionConfig& config);  // "h2o budget 25% recent 50%"

// What one cell of the eviction map is.
enum class CellState : std::uint8_t { Absent = 0, Kept = 1, Evicted = 2, Merged = 3, Sink = 4 };

// The steps × positions record of one KV head. Entries are never re-admitted, so a position's
// column is at most three runs: absent until it arrives, then kept (or sink) until it leaves,
// then evicted or merged. One u16 per position holds it: the step it left (14 bits, 0x3FFF =
// never) and how (2 bits: kept-to-the-end, evicted, merged, sink); arrival follows from the
// prompt length. That is 16 / steps bits per cell.
struct EvictionMap {
  int steps = 0, positions = 0, prompt = 0;
  std::vector<std::uint16_t> cells;  // one per position
  static constexpr std::uint16_t kNever = 0x3FFF;
  CellState state(int step, int position) const;
  int arrival_step(int position) const { return position < prompt ? 0 : position - prompt; }
  std::size_t bytes() const { return cells.size() * sizeof(std::uint16_t); }
};

// Per-step numbers, summed over heads then turned into means by the report.
struct EvictionStep {
  int context = 0;  // tokens the sequence has at this step
  double kept = 0;  // entries kept, mean over KV heads (and layers in the totals)
  double memory_bytes = 0;
  double attention_mass_retained = 0;  // full-cache attention on tokens still held, mean
  double attn_output_rel_error = 0;    // sqrt(sum |o − ô|² / sum |o|²)
  double attn_output_cosine = 1;       // mean over query heads
};

struct EvictionHeadResult {
  int kept_tokens = 0;                 // at the last step
  int prompt_kept = 0;                 // prefill policies: prompt tokens kept (Ada-KV's budget)
  double attention_mass_retained = 0;  // mean over steps and the group's query heads
  bool needle_retained = false;        // the needle is still its own entry at the last step
  bool needle_in_top_k = false;        // ... and among the top-k for every query head of the group
};

struct EvictionLayerResult {
  int layer = 0;
  int budget_tokens = 0;         // at the last step
  double kept_tokens = 0;        // mean over KV heads at the last step
  double memory_bytes = 0;       // at the last step
  double full_memory_bytes = 0;  // the full cache at the last step, same storage
  double attention_mass_retained = 0, attn_output_rel_error = 0, attn_output_cosine = 1;
  double needle_retained = 0, needle_in_top_k = 0;  // fraction of KV heads
  int key_channels = 0;                             // think: key channels kept per head (0: all)
  bool merged = false;  // minicache: shares a direction with its neighbour layer
  double retained = 0;  // minicache: share of prompt tokens kept unmerged
  std::vector<std::vector<std::uint8_t>> channel_masks;  // think: [kv head][dim], 1 = kept
  std::vector<EvictionStep> steps;
  std::vector<EvictionHeadResult> heads;
};

struct EvictionReport {
  std::string source;
  std::string policy;  // policy id
  std::string label;   // "h2o (budget 25%, recent 50%)"
  EvictionConfig config;
  ModelShape shape;
  int tokens = 0, prompt = 0, steps = 0;
  double kept_tokens = 0;                          // mean over layers and KV heads at the last step
  double memory_bytes = 0, full_memory_bytes = 0;  // at the last step
  double quant_bytes_per_token = 0;  // per token and KV head, K and V; 0 without quantization
  double attention_mass_retained = 0, attn_output_rel_error = 0, attn_output_cosine = 1;
  // The same without the last step when that step is the needle query (a synthetic source's
  // last query looks for the needle alone, so its attention mass drops and its error jumps).
  std::optional<double> mass_without_needle_step, rel_error_without_needle_step;
  std::optional<double> needle_retained, needle_in_top_k;  // fraction of KV heads; none without
  std::vector<EvictionStep> steps_total;                   // per step, over all layers
  std::vector<EvictionLayerResult> layers;
  std::vector<std::vector<EvictionMap>> maps;  // [layer][kv head]
  double seconds = 0;
  double matmul_flops = 0;  // the matrix-product work, for GFLOP/s
};

// Runs the simulation. The cache must have queries (at least one per layer; with fewer than
// `steps` they are reused in order so that the last step still gets the last query).
Result<EvictionReport> simulate_eviction(const KvCache& cache, const EvictionConfig& config,
                                         const ProgressFn& progress = {});

}  // namespace kvlab
