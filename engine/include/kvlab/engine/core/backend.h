// Where an op runs. A Backend is the table of the engine ops that also have a GPU implementation:
// the CPU backend calls the engine's reference functions, the CUDA backend (kernels/, built only
// when nvcc is found) runs them on the GPU under the same contracts, producing the same bytes
// (docs/FORMAT.md). Callers choose one by name and never write #ifdef: the CUDA library registers
// its factory once at start-up (the apps call kvlab::register_backends()), and without it "cuda"
// is a clear error while "auto" quietly takes the CPU.
//
// A compression run is four stages (Stage). The CPU has every stage of every method; a device
// backend answers has_stage() for each and runs the layers itself (run_layers()), the stages it
// lacks falling back to the CPU's; the report names where each stage ran (stage_backends).
//
// A backend object is used by one thread at a time (it may keep scratch buffers).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/row_attention.h"

namespace kvlab {

struct KvCache;
struct MethodConfig;
struct LayerOutcome;
struct LayerRunRequest;

// The stages of a compression run, in the order a layer goes through them: quantize (codes and
// parameters), code (the entropy coder and its sizes), dequantize (the reconstruction), metrics
// (element and attention errors, histograms).
enum class Stage : std::uint8_t { Quantize, Code, Dequantize, Metrics };
inline constexpr std::array<Stage, 4> kStages{Stage::Quantize, Stage::Code, Stage::Dequantize,
                                              Stage::Metrics};
std::string_view stage_id(Stage stage);  // "quantize", "code", "dequantize", "metrics"

class Backend {
 public:
  virtual ~Backend();

  // "cpu" or "cuda".
  virtual std::string id() const = 0;
  // What runs the ops, for reports: the CPU model, or the GPU's name.
  virtual std::string device_name() const = 0;

  // encode_codes() of code_codec.h: the same contract and the same bytes.
  virtual Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens,
                                            int heads, int dim, const CodecConfig& config,
                                            const HuffmanCodebook* book) = 0;
  // Whether encode_codes and fused_attention take Huffman books whose symbols are pairs of codes
  // (HuffmanCodebook::pairs()); where not, callers build single-code books (choose_codebook()).
  virtual bool huffman_pairs() const { return true; }
  // fused_attention() of fused_attention.h: softmax(q . K / sqrt(d)) . V over a compressed layer,
  // its fp16 buffer included. q and out [q_heads][head_dim].
  virtual Status fused_attention(const CompressedKvView& cache, std::span<const float> q,
                                 int q_heads, std::span<float> out) = 0;

  // Whether this backend runs `stage` of a run of `config` over `cache` on its own device. The
  // CPU runs every stage; a stage a device backend lacks runs on the CPU.
  virtual bool has_stage(Stage stage, const MethodConfig& config, const KvCache& cache) const;
  // Why this backend does not run `stage` of that run on its device ("no GPU quantizer for
  // kvquant-3"), or "" where it does. The default names the backend only.
  virtual std::string stage_gap(Stage stage, const MethodConfig& config,
                                const KvCache& cache) const;
  // True when this backend runs a run's layers itself (run_layers) for `config` over `cache`;
  // false leaves them to compress_cache's CPU loop on the engine's threads (the CPU backend, and
  // a device backend for a method whose quantizer it lacks).
  virtual bool runs_layers(const MethodConfig& config, const KvCache& cache) const;
  // Every layer of the request's cache into outcomes[layer] (one per layer), each stage where
  // has_stage() says and on the CPU otherwise; progress and cancel through request.progress.
  // Only called where runs_layers() is true.
  virtual Status run_layers(const LayerRunRequest& request, std::span<LayerOutcome> outcomes);
  // The most device memory the last run_layers() held, in bytes (0 for the CPU).
  virtual std::uint64_t last_run_device_bytes() const { return 0; }

  // Where a stored cache's decode steps attend (kv_store.h, `kvlab generate --backend`): a
  // RowAttention on this backend's device for a model of `shape`, which a method store hands
  // its rows to as it writes them; null where the store's own attention runs them (the CPU). An
  // Error names a shape the device's kernel cannot serve.
  virtual Result<std::unique_ptr<RowAttention>> decode_attention(const RowAttentionShape& shape);
};

// Why "cuda" is unavailable when no CUDA library was built in.
inline constexpr std::string_view kBuiltWithoutCuda =
    "CUDA: this kvlab was built without CUDA (nvcc was not found at build time, or KVLAB_CUDA=OFF)";

// The names make_backend() accepts, in the order a selector lists them: "auto", "cpu", "cuda".
std::span<const std::string_view> backend_ids();

// "cpu"; "cuda" (an Error when kvlab was built without CUDA or no GPU is usable); "auto" (the
// GPU when one is usable, else the CPU). Any other name is an Error listing the valid ones.
Result<std::unique_ptr<Backend>> make_backend(std::string_view id);
std::unique_ptr<Backend> make_cpu_backend();

// The CUDA library registers its factory here at start-up (kvlab::cuda::register_backend()).
// The factory returns an Error with the driver's reason when no GPU is usable. Call it before
// any thread calls make_backend().
using BackendFactory = Result<std::unique_ptr<Backend>> (*)();
void register_cuda_backend(BackendFactory factory);

}  // namespace kvlab
