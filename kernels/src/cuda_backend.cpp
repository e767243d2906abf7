// The CUDA Backend: the engine's ops on the GPU through gpu_kv.h, plain C++ (no CUDA headers).
// Fused attention splits a compressed layer where the cache keeps it: the compressed blocks are
// uploaded and their logits and value sums run on the GPU; the few fp16 buffer rows (at most
// buffer_size tokens) stay on the host, where they already live; the softmax, which needs every
// token's logit, runs on the host between the two halves.
#include "kvlab/kernels/cuda_backend.h"

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "fused_attention.cuh"
#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/kernels/cuda_device.h"
#include "kvlab/kernels/gpu_kv.h"
#include "kvlab/kernels/gpu_row_attention.h"
#include "layer_pipeline.h"

namespace kvlab::cuda {

namespace {

// Rows [rows][n] of `part` into columns [first, first + n) of rows [rows][total] of `whole`.
void place_columns(std::span<const float> part, int rows, int n, int first, int total,
                   std::span<float> whole) {
  for (int r = 0; r < rows; ++r) {
    std::copy_n(part.begin() + static_cast<std::ptrdiff_t>(r) * n, n,
                whole.begin() + static_cast<std::ptrdiff_t>(r) * total + first);
  }
}

// The inverse: columns [first, first + n) of `whole` into rows [rows][n] of `part`.
void take_columns(std::span<const float> whole, int rows, int n, int first, int total,
                  std::span<float> part) {
  for (int r = 0; r < rows; ++r) {
    std::copy_n(whole.begin() + static_cast<std::ptrdiff_t>(r) * total + first, n,
                part.begin() + static_cast<std::ptrdiff_t>(r) * n);
  }
}

std::string describe(const DeviceInfo& d) {
  return fmt::format("{} (sm_{}{}, {:.0f} GiB)", d.name, d.sm_major, d.sm_minor,
                     static_cast<double>(d.total_memory) / (1024.0 * 1024.0 * 1024.0));
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::string device) : m_device(std::move(device)) {}

  std::string id() const override { return "cuda"; }
  std::string device_name() const override { return m_device; }

  // Huffman, rANS and BitPack on the GPU; VarWidth has no GPU encoder and runs on the CPU.
  Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                    int dim, const CodecConfig& config,
                                    const HuffmanCodebook* book) override {
    if (config.kind == CodecKind::VarWidth) {
      return kvlab::encode_codes(codes, tokens, heads, dim, config, book);
    }
    return cuda::encode_codes(codes, tokens, heads, dim, config, book);
  }

  // The CUDA encoder and fused decoders read single-code books only (GpuBook::upload).
  bool huffman_pairs() const override { return false; }

  Result<std::unique_ptr<RowAttention>> decode_attention(const RowAttentionShape& shape) override {
    return make_row_attention(shape);
  }

  Status fused_attention(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                         std::span<float> out) override;

  bool has_stage(Stage stage, const MethodConfig& config, const KvCache& cache) const override {
    return gpu_has_stage(stage, config, cache);
  }
  std::string stage_gap(Stage stage, const MethodConfig& config,
                        const KvCache& cache) const override {
    return gpu_stage_gap(stage, config, cache);
  }
  // The GPU takes a run's layers when it has every stage of it: a method without a GPU
  // quantizer, a codec without a GPU encoder (VarWidth) or metrics it cannot take (keys stored
  // before RoPE) leave the whole run to the CPU's threads.
  bool runs_layers(const MethodConfig& config, const KvCache& cache) const override {
    for (Stage stage : kStages) {
      if (stage == Stage::Code && !config.codec) continue;
      if (!gpu_has_stage(stage, config, cache)) return false;
    }
    return true;
  }
  Status run_layers(const LayerRunRequest& request, std::span<LayerOutcome> outcomes) override {
    return run_layers_on_gpu(request, outcomes, m_device_peak);
  }
  std::uint64_t last_run_device_bytes() const override { return m_device_peak; }

 private:
  // softmax(q . K / sqrt(d)) . V over an uploaded layer (its first `compressed` tokens) and the
  // fp16 buffer, for a GQA group the kernels are built for.
  Status attend(const GpuLayer& layer, const Fp16KvView& buffer, int compressed,
                std::span<const float> q, int q_heads, std::span<float> out);

  std::string m_device;
  std::uint64_t m_device_peak = 0;
  // Host scratch kept between calls: every token's logits then probabilities, one part's logits
  // or probabilities, and one part's output.
  std::vector<float> m_all, m_part, m_out;
};

Status CudaBackend::fused_attention(const CompressedKvView& cache, std::span<const float> q,
                                    int q_heads, std::span<float> out) {
  const int kv_heads = cache.kv_heads, dim = cache.head_dim;
  if (kv_heads < 1 || dim < 1 || q_heads < 1 || q_heads % kv_heads != 0) {
    return make_error(fmt::format(
        "CUDA fused attention: {} query heads over {} KV heads of {} channels is no valid shape",
        q_heads, kv_heads, dim));
  }
  const std::size_t head_floats = static_cast<std::size_t>(q_heads) * dim;
  if (q.size() != head_floats || out.size() != head_floats) {
    return make_error(fmt::format(
        "CUDA fused attention: q holds {} and out {} floats, {} query heads need {} each", q.size(),
        out.size(), q_heads, head_floats));
  }
  const int compressed = cache.compressed_tokens, buffered = cache.buffered_tokens;
  if (compressed < 0 || buffered < 0 || cache.tokens() == 0) {
    return make_error("CUDA fused attention: the cache holds no tokens");
  }
  GpuLayer layer;
  if (compressed > 0) {
    auto uploaded = upload_layer(cache);
    if (!uploaded) return make_error("CUDA fused attention: " + uploaded.message());
    layer = std::move(uploaded).value();
  }
  const Fp16KvView buffer{buffered, kv_heads, dim, cache.buffer_keys, cache.buffer_values};
  const int group = q_heads / kv_heads;
  if (supported_group(group)) return attend(layer, buffer, compressed, q, q_heads, out);

  // The kernels are built for GQA groups of 1, 2, 4 and 8 query heads per KV head. Another
  // group (SmolLM2's 3, Qwen2-7B's 7) runs as `group` passes of one query head per KV head over
  // the one uploaded layer: pass j takes query heads j, group + j, 2 group + j, ... Each pass
  // reads the cache once more.
  const std::size_t pass_floats = static_cast<std::size_t>(kv_heads) * dim;
  std::vector<float> q_pass(pass_floats), out_pass(pass_floats);
  for (int j = 0; j < group; ++j) {
    for (int kv = 0; kv < kv_heads; ++kv) {
      const std::size_t head = static_cast<std::size_t>(kv) * group + j;
      std::copy_n(q.begin() + static_cast<std::ptrdiff_t>(head * dim), dim,
                  q_pass.begin() + static_cast<std::ptrdiff_t>(kv) * dim);
    }
    KVLAB_TRY(attend(layer, buffer, compressed, q_pass, kv_heads, out_pass));
    for (int kv = 0; kv < kv_heads; ++kv) {
      const std::size_t head = static_cast<std::size_t>(kv) * group + j;
      std::copy_n(out_pass.begin() + static_cast<std::ptrdiff_t>(kv) * dim, dim,
                  out.begin() + static_cast<std::ptrdiff_t>(head * dim));
    }
  }
  return Ok{};
}

Status CudaBackend::attend(const GpuLayer& layer, const Fp16KvView& buffer, int compressed,
                           std::span<const float> q, int q_heads, std::span<float> out) {
  const int buffered = buffer.tokens, total = compressed + buffered;
  const std::size_t head_floats = out.size();
  // Logits of every token: the compressed blocks' on the GPU, the buffer rows' on the host.
  m_all.assign(static_cast<std::size_t>(q_heads) * total, 0.f);
  const auto part = [&](int n) {
    m_part.resize(static_cast<std::size_t>(q_heads) * n);
    return std::span<float>(m_part);
  };
  if (compressed > 0) {
    KVLAB_TRY(attention_logits(layer, q, q_heads, part(compressed)));
    place_columns(m_part, q_heads, compressed, 0, total, m_all);
  }
  if (buffered > 0) {
    KVLAB_TRY(kvlab::fp16_attention_logits(buffer, q, q_heads, part(buffered)));
    place_columns(m_part, q_heads, buffered, compressed, total, m_all);
  }
  kvlab::softmax_rows(m_all, q_heads);

  // out = P . V, the two parts summed.
  std::fill(out.begin(), out.end(), 0.f);
  m_out.resize(head_floats);
  const auto add_part = [&] {
    for (std::size_t i = 0; i < head_floats; ++i) out[i] += m_out[i];
  };
  if (compressed > 0) {
    take_columns(m_all, q_heads, compressed, 0, total, part(compressed));
    KVLAB_TRY(attention_values(layer, m_part, q_heads, m_out));
    add_part();
  }
  if (buffered > 0) {
    take_columns(m_all, q_heads, buffered, compressed, total, part(buffered));
    KVLAB_TRY(kvlab::fp16_attention_values(buffer, m_part, q_heads, m_out));
    add_part();
  }
  return Ok{};
}

Result<std::unique_ptr<Backend>> make_cuda_backend() {
  KVLAB_TRY(require_gpu());
  auto devices = list_devices();
  if (!devices) return devices.error();
  if (devices->empty()) return make_error("CUDA: no usable GPU (no CUDA device found)");
  return std::unique_ptr<Backend>(std::make_unique<CudaBackend>(describe(devices->front())));
}

}  // namespace

void register_backend() {
  kvlab::register_cuda_backend(&make_cuda_backend);
}

}  // namespace kvlab::cuda
