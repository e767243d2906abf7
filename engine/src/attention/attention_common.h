// Private to the engine: the plain fp16 and float row loops, shared by the fp16 baseline
// (fp16_attention.cpp), the fused paths for the cache's uncompressed buffer
// (fused_attention.cpp) and the model runner's decode step (model/llama_attention.cpp); the size
// check they give their callers; and how they share a long cache among the cores.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <tbb/parallel_for.h>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/threads.h"

namespace kvlab::detail {

// logits[qh][first + i] = q[qh] . k_i * scale for the fp16 key rows of `tokens` tokens,
// [tokens][heads][dim]; query head qh reads KV head qh / group; rows are `total_tokens` long.
void fp16_rows_logits(std::span<const std::uint16_t> keys, int first, int tokens, int heads,
                      int dim, int group, const float* q, float scale, int total_tokens,
                      float* logits);
// out[qh] += probs[qh][first + i] * v_i for the fp16 value rows of `tokens` tokens.
void fp16_rows_values(std::span<const std::uint16_t> values, int first, int tokens, int heads,
                      int dim, int group, const float* probs, int total_tokens, float* out);
// The same two loops over float rows (the model runner's own cache, llama_attention.cpp).
void float_rows_logits(const float* keys, int first, int tokens, int heads, int dim, int group,
                       const float* q, float scale, int total_tokens, float* logits);
void float_rows_values(const float* values, int first, int tokens, int heads, int dim, int group,
                       const float* probs, int total_tokens, float* out);

// An error naming `what` unless the input holds in_need floats and the output out_need.
Status check_sizes(const char* what, std::size_t in, std::size_t in_need, std::size_t out,
                   std::size_t out_need);

// The sum of p[0..n): 16 running sums, one per lane, then added in lane order. The compiler
// keeps the lanes in one vector register, and the result has the same bits wherever p lies (a
// plain float loop runs one dependent add at a time).
inline float lane_sum(const float* p, std::size_t n) {
  constexpr std::size_t kLanes = 16;
  float acc[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) acc[l] += p[i + l];
  }
  for (std::size_t l = 0; i + l < n; ++l) acc[l] += p[i + l];
  float sum = 0.f;
  for (const float a : acc) sum += a;
  return sum;
}

// One decode step's attention over a long cache, shared among the engine's threads: [0, count)
// items (tokens, or blocks of them) in at most worker_threads() consecutive ranges of at least
// `min_items` each (below that a thread costs more than it saves). body(part, first, last)
// runs once per range, in parallel; the first error any range returns is the result. The split
// depends only on count and the thread count, so a run's sums are the same every time.
inline constexpr int kMinPartTokens = 1024;
inline int attention_parts(int count, int min_items) {
  return std::max(1, std::min(worker_threads(), count / std::max(1, min_items)));
}
template <class Body>
Status for_attention_parts(int count, int parts, Body&& body) {
  const auto range = [&](int p) -> Status {
    const int first = static_cast<int>(static_cast<long long>(count) * p / parts);
    const int last = static_cast<int>(static_cast<long long>(count) * (p + 1) / parts);
    return body(p, first, last);
  };
  if (parts <= 1) return range(0);
  std::vector<Status> status(static_cast<std::size_t>(parts), Ok{});
  tbb::parallel_for(0, parts, [&](int p) { status[static_cast<std::size_t>(p)] = range(p); });
  for (Status& st : status) {
    if (!st) return st;
  }
  return Ok{};
}

// for_attention_parts for sums added to `out` (`size` floats): range 0 adds into `out` itself,
// every other range into its own zeroed buffer, and those are added to `out` in range order, so
// the result does not depend on which thread finishes first. body(first, last, float* sums)
// adds its range's sums to `sums` and returns a Status.
template <class Body>
Status for_attention_sums(int count, int parts, float* out, std::size_t size, Body&& body) {
  std::vector<std::vector<float>> partial(static_cast<std::size_t>(std::max(parts, 1) - 1));
  KVLAB_TRY(for_attention_parts(count, parts, [&](int p, int first, int last) -> Status {
    if (p == 0) return body(first, last, out);
    std::vector<float>& mine = partial[static_cast<std::size_t>(p - 1)];
    mine.assign(size, 0.f);
    return body(first, last, mine.data());
  }));
  for (const std::vector<float>& mine : partial) {
    for (std::size_t i = 0; i < size; ++i) out[i] += mine[i];
  }
  return Ok{};
}

}  // namespace kvlab::detail
