// Memory of the streaming compressed cache over decode steps (KVComp, Jiang et al. 2025,
// Sec. 3.2-3.3): per layer, the first `prefill_tokens` tokens of a KV cache go in as the prefill,
// then every later token arrives as one decode step. After every `record_every` steps the memory
// of all simulated layers is summed by component, beside the fp16 size of the same tokens, so a
// chart can show the buffer filling and flushing into compressed blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

struct StreamConfig {
  int prefill_tokens = 0;  // 0..tokens of the cache; the rest are decode steps
  int block_size = 64;     // as CompressedCacheConfig
  int buffer_size = 128;   // a positive multiple of block_size
  double rel_scale = 0.05;
  CodecKind codec = CodecKind::Huffman;  // Huffman, rANS or BitPack
  int record_every = 16;                 // decode steps between recorded points, >= 1
  int max_layers = 0;                    // simulate only the first N layers; 0: all
};

// One recorded moment: `step` decode steps after the prefill (0 = right after it).
struct StreamPoint {
  int step = 0;
  int tokens = 0;
  CacheMemory memory;            // summed over the simulated layers
  std::uint64_t fp16_bytes = 0;  // the same tokens of those layers as fp16, K and V
  double ratio() const {
    return memory.total() == 0
               ? 0.0
               : static_cast<double>(fp16_bytes) / static_cast<double>(memory.total());
  }
};

struct StreamReport {
  std::string source;
  StreamConfig config;
  int layers = 0;  // layers simulated
  int kv_heads = 0, head_dim = 0;
  // Step 0, every record_every-th step, and always the last step.
  std::vector<StreamPoint> points;
};

// The cache layer's compressed-cache configuration for a stream config (BitPack takes the
// narrowest of 2, 4 or 8 bits that holds every code rel_scale can produce, so no later block
// overflows it).
Result<CompressedCacheConfig> stream_cache_config(const StreamConfig& config);

Result<StreamReport> simulate_stream(const KvCache& cache, const StreamConfig& config,
                                     const ProgressFn& progress = {});

}  // namespace kvlab
