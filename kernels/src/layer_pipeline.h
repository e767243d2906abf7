// A whole compression run on the GPU (Backend::run_layers of the CUDA backend): every layer
// streamed host -> device through pinned buffers and run through its stages there.
//
//   host     stage(l+1): copy layer l+1 into a pinned slot (on the engine's threads), then an
//            async upload on the copy stream
//   device   launch(l): quantize K and V, dequantize, element and attention errors, on the
//            compute stream, waiting for layer l's upload only
//   host     finish(l): wait for layer l; histograms; the entropy coder (Huffman / BitPack on
//            the GPU, the other codecs sized there); the layer's outcome
//
// Two slots, so layer l+1's copy and upload overlap layer l's compute. Device memory holds two
// layers as stored, one layer's reconstructions and codes, and the metrics' scratch: bounded by
// a few layers, whatever the number of layers.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/quant/compress.h"

namespace kvlab::cuda {

// Why the GPU does not run `stage` of `config` over `cache` (the stages a run_layers() run
// takes), or "" where it does.
std::string gpu_stage_gap(Stage stage, const MethodConfig& config, const KvCache& cache);
inline bool gpu_has_stage(Stage stage, const MethodConfig& config, const KvCache& cache) {
  return gpu_stage_gap(stage, config, cache).empty();
}

// The run; `device_peak_bytes` receives the most device memory it held.
Status run_layers_on_gpu(const LayerRunRequest& request, std::span<LayerOutcome> outcomes,
                         std::uint64_t& device_peak_bytes);

}  // namespace kvlab::cuda
