// Runs a method over a whole cache, layer by layer, and reports bytes, errors and histograms.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/attention/metrics.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab {

class Backend;

struct ErrorMetrics {
  double mse = 0, max_abs = 0, snr_db = 0;
  // Attention-level; zero when the cache has no queries.
  double logit_rmse = 0, softmax_kl = 0, attn_output_rel_error = 0, attn_output_cosine = 1;
};

// What entropy coding did to one stream of codes (or to all of them, in the totals).
struct CodecStats {
  std::uint64_t codes = 0;           // codes coded
  double entropy_bits_per_code = 0;  // order-0 entropy: the bound for a code-by-code coder
  double payload_bits_per_code = 0;  // coded bits, codebook and offsets excluded
  std::uint64_t payload_bytes = 0;
  std::uint64_t metadata_bytes = 0;  // block offsets, vector bit counts, codec header
  std::uint64_t codebook_bytes = 0;  // the serialized Huffman codebook (0 for the others)
  // All four codecs on the same stream, for comparison: payload + metadata + codebook bytes,
  // indexed by CodecKind (bitpack, varwidth, huffman, rans; rans 0 where it was not sized: a
  // record from before it, or a GPU run); and the order-0 entropy bound in bytes.
  std::array<std::uint64_t, kCodecKinds.size()> codec_bytes{};
  std::uint64_t entropy_bound_bytes = 0;
  CodecStats& operator+=(const CodecStats& o);
};

struct LayerReport {
  int layer = 0;
  ByteBreakdown key_bytes, value_bytes;
  double ratio = 0;  // fp16 bytes / compressed bytes, this layer
  double bits_per_value = 0;
  ErrorMetrics key_error, value_error;  // element-wise parts only
  ErrorMetrics error;                   // K and V together, with attention metrics
  std::vector<CodeHistogram> key_histograms, value_histograms;
  CodecStats key_codec, value_codec;  // all zero when no codec ran
  // When a codec ran: the Huffman codebook's code length of each symbol (256 symbols + escape),
  // whether its symbols are pairs of codes (docs/FORMAT.md, "Pair symbols"), and the mean bits
  // a code of each of the 256 values took through it (mean_code_bits()).
  std::vector<std::uint8_t> key_code_lengths, value_code_lengths;
  bool key_code_pairs = false, value_code_pairs = false;
  std::vector<double> key_code_bits, value_code_bits;
};

// A layer's compression ratio had its codes been coded with `kind` (everything else equal), and
// with codes at their entropy bound. Zero when no codec ran.
double layer_ratio_with_codec(const LayerReport& layer, CodecKind kind);
double layer_ratio_at_entropy(const LayerReport& layer);

struct CompressionReport {
  std::string source;
  std::string method;  // method id
  std::string method_label;
  MethodConfig config;
  ModelShape shape;
  int tokens = 0;
  std::uint64_t values = 0;      // K and V elements
  std::uint64_t fp16_bytes = 0;  // the baseline: every value in fp16
  ByteBreakdown bytes;           // compressed, by component
  double ratio = 0;              // fp16_bytes / bytes.total()
  double bits_per_value = 0;
  ErrorMetrics error;
  CodecStats codec;  // summed over layers; entropy is the code-weighted mean of the streams'
  std::vector<LayerReport> layers;
  // Time. total_seconds is compress_cache's wall time; wall_seconds the whole run's, the
  // source's loading or generation (source_seconds, set by the caller that loaded it) included.
  // The parts are thread-seconds, summed over the `threads` that ran layers side by side:
  // quantize, code (the entropy coder and its decoding back; the codecs compared beside it
  // included), dequantize, and metrics (element and attention errors, histograms).
  double source_seconds = 0, quantize_seconds = 0, code_seconds = 0, dequantize_seconds = 0,
         metrics_seconds = 0, total_seconds = 0, wall_seconds = 0;
  int threads = 1;
  // Memory: the process's resident bytes when compression began (the program and whatever the
  // source holds in memory; a file source is mapped and counts only where it is being read) and
  // the most it held while compressing. Zero in reports saved before they were measured.
  std::uint64_t memory_start_bytes = 0, memory_peak_bytes = 0;
  // The most GPU memory a device backend's run held (0 when the layers ran on the CPU).
  std::uint64_t device_memory_peak_bytes = 0;
  // The backend chosen for the run: its id ("cpu", "cuda") and device name. Empty in reports
  // saved before backends existed.
  std::string backend, device;
  // Where each stage ran (indexed by Stage: quantize, code, dequantize, metrics): "cpu" or the
  // device backend's id; "" for a stage the run had none of (code without a codec) and in
  // reports saved before stages were recorded. With a device backend the stage's seconds above
  // are device-seconds.
  std::array<std::string, 4> stage_backends;
  // When a device backend was asked for and the run went to the CPU's threads instead: why, as
  // "cuda: quantize: no GPU quantizer for turboquant-3". Empty otherwise.
  std::string backend_fallback;
};

// One layer's share of a report, computed on its own (any thread, or a device backend's
// pipeline: Backend::run_layers) and added in layer order by compress_cache.
struct LayerOutcome {
  LayerReport report;
  ElementErrorSums element;
  AttentionErrorSums attention;
  CodecStats codec;
  ByteBreakdown bytes;
  double quantize = 0, code = 0, dequantize = 0, metrics = 0;  // seconds, per stage
};

// What a device backend's run_layers() needs: the cache, the method (as method_for_cache gave
// it), the CPU quantizer of that method (for stages the device lacks), and the run's progress.
struct LayerRunRequest {
  const KvCache& cache;
  const MethodConfig& config;
  const Quantizer& quantizer;
  const ProgressFn& progress;
};

// Where each stage of `r` ran and its seconds, for people: "quantize: cuda 0.12 s, code: cuda
// 0.05 s, dequantize: cuda 0.02 s, metrics: cuda 0.31 s". Empty for reports saved before stages
// were recorded.
std::string stage_summary(const CompressionReport& r);

// Ok when every value of `t` is finite; else an Error "NAME holds nan at token T, head H, channel
// C" for the first that is not. Every run checks its source so, whatever the backend.
Status check_tensor_finite(const Tensor& t, const std::string& name);

// After a layer's sums are in `out`: its report's error fields, bytes, ratio and bits per value.
// The one rule for every backend.
void finish_layer(LayerOutcome& out, const ElementErrorSums& key, const ElementErrorSums& value,
                  bool has_queries, std::uint64_t layer_values);

// `backend` (null: the CPU) runs the stages it has: a device backend that runs_layers() for this
// method takes every layer through its own pipeline; otherwise the layers run side by side on
// the engine's threads (for_each_item), the chosen codec's encoder on `backend`, and the report
// is the same, bit for bit, whatever the number of threads.
Result<CompressionReport> compress_cache(const KvCache& cache, const MethodConfig& config,
                                         const ProgressFn& progress = {},
                                         Backend* backend = nullptr);

// The memory traffic no compression of `cache` can avoid, timed on this machine: every byte of
// the source read once (a sum of its 64-bit words) and `write_bytes` (a run's compressed size)
// written once, spread over the engine's threads as a run's layers are. Seconds. For the
// whole-run benchmarks (`kvlab bench run`, bench/run_bench.cpp), which report a run as a multiple
// of it. A source mapped from a file gives its pages back as a run does.
double memory_floor_seconds(const KvCache& cache, std::uint64_t write_bytes);

// The methods the whole-run benchmarks can be asked for, by id: int8, int4, kivi-2, kivi-4,
// fp8-e4m3, q4_0, nvfp4, kvcomp-huffman, kvcomp-bitpack (each with the method's defaults
// otherwise).
Result<MethodConfig> run_bench_method(std::string_view id);

}  // namespace kvlab
