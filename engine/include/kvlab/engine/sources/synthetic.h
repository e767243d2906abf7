// Synthetic KV caches shaped like real models, seeded and reproducible.
//
// Each knob reproduces one property of real caches that makes compression hard:
//  - key outlier channels: a few channels per head with much larger magnitude (KIVI, Liu et al.
//    2024, Sec. 3: why keys are quantized per channel); placed on low-frequency RoPE pairs, where
//    real models show them, so they stay put as positions advance;
//  - RoPE: keys are rotated by position on adjacent pairs (theta from the preset);
//  - values have no channel outliers, only a mild per-token scale;
//  - an attention sink at token 0 with a small value vector (StreamingLLM, Xiao et al. 2024);
//  - a few heavy-hitter tokens that every query attends to strongly (H2O, Zhang et al. 2023);
//  - one "needle" token that only the last query retrieves (needle-in-a-haystack).
// Queries are decode-time queries at position `context`, generated from the same per-head
// attention direction the sink and heavy hitters are planted along, so attention metrics see the
// structure the keys were built with.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

struct SyntheticPreset {
  std::string name;
  ModelShape shape;
  double rope_theta = 10000.0;
  int max_context = 4096;  // the model's trained context: a hint, not a limit
};

// The engine's limits on a synthetic cache: at most this many tokens, at most
// kMaxSyntheticCacheBytes of keys and values, and, generated in memory, no more than the memory
// available (a larger cache is written to a file with save_synthetic_file and read in place).
inline constexpr int kMaxSyntheticContext = 1 << 20;
inline constexpr std::uint64_t kMaxSyntheticCacheBytes = 64ull << 30;

// Built-in presets: llama2-7b, llama3-8b, mistral-7b, qwen2.5-7b, tiny.
const std::vector<SyntheticPreset>& synthetic_presets();
Result<SyntheticPreset> find_synthetic_preset(std::string_view name);

struct SyntheticConfig {
  std::string preset = "llama3-8b";
  int layers = 0;      // 0: the preset's layer count
  int context = 4096;  // tokens in the cache
  std::uint64_t seed = 1;
  DType dtype = DType::F16;
  int queries = 8;  // decode-time queries per layer (0: none)

  int outlier_channels = 4;     // per KV head
  double outlier_scale = 12.0;  // outlier channel std / normal channel std
  double sink_strength = 10.0;  // logit boost of token 0 over an average token
  int heavy_hitters = 6;        // tokens every query attends to strongly
  double heavy_hitter_strength = 6.0;
  double needle_position = 0.37;  // where the needle sits, as a fraction of the context
  double needle_strength = 16.0;  // logit boost of the needle for the last query
};

Result<KvCache> generate_synthetic(const SyntheticConfig& config, const ProgressFn& progress = {});
// Writes the cache generate_synthetic would make to a .safetensors file, generating and writing
// a few layers at a time (one per thread), so a cache far larger than memory (llama3-8b at 128K:
// 16 GiB of fp16) can be written and then read in place (--source file:PATH).
Status save_synthetic_file(const SyntheticConfig& config, const std::filesystem::path& path,
                           const ProgressFn& progress = {});

// Where the planted tokens are, so tests and the GUI can point at them.
struct SyntheticLandmarks {
  int sink = 0;
  std::vector<int> heavy_hitters;
  int needle = 0;
};
SyntheticLandmarks synthetic_landmarks(const SyntheticConfig& config);

}  // namespace kvlab
