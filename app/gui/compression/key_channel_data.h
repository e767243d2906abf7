// What the "Key channel magnitudes" chart shows: per channel of a layer's key heads, the
// largest |k| over the tokens before and after a rotation (engine: key_channel_absmax), and the
// per-channel series drawn from it for one KV head, or the max or mean over the heads.
#pragma once

#include <cstdint>
#include <vector>

#include <QString>

#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab::gui {

struct KeyChannelStats {
  int layer = 0;
  int heads = 0;
  int dim = 0;
  std::vector<float> before;  // [heads][dim]: max over tokens of |k|
  std::vector<float> after;   // the same after `rotation`
  RotationKind rotation = RotationKind::Hadamard;
  std::uint64_t seed = 0;
  // False when the method panel chose no rotation, so the chart shows a stand-in (Hadamard, or
  // orthogonal where the head size is not a power of two).
  bool chosen = false;
};

// The rotation the chart applies for the method panel's `chosen` one: itself, or for None
// Hadamard (orthogonal when `dim` is not a power of two).
RotationKind shown_rotation(RotationKind chosen, int dim);

// Layer `layer`'s keys of `cache`, before and after shown_rotation(chosen), each KV head's
// matrix from `seed` as a run with that rotation draws it. The error names the layer.
Result<KeyChannelStats> compute_key_channel_stats(const KvCache& cache, int layer,
                                                  RotationKind chosen, std::uint64_t seed);

// Which heads a series reads: the max over the KV heads, their mean, or head h (h >= 0).
inline constexpr int kMaxOverHeads = -1;
inline constexpr int kMeanOverHeads = -2;

struct KeyChannelSeries {
  std::vector<double> channel;  // 0 .. dim-1
  std::vector<double> before;
  std::vector<double> after;
  QString title;        // "Key channels: layer 3, max of 8 heads", "..., KV head 2"
  QString before_name;  // "unrotated, max 14.2"
  QString after_name;   // "hadamard, max 3.1"; "hadamard (none chosen), max 3.1" as a stand-in
};

KeyChannelSeries key_channel_series(const KeyChannelStats& stats, int heads_pick);

}  // namespace kvlab::gui
