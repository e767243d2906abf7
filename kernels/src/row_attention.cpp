// cuda::make_row_attention (gpu_row_attention.h): a store's rows of each layer in device memory,
// attended over by the fused decode kernel (decode_attention.cuh) at every decode step, the GPU
// side of issue 47 part 1's RowAttention (engine model/row_attention.h; the CPU reference there
// reads the same bytes through row_decode.h with double sums).
//
// A layer keeps its K and V rows [token][kv head] as the kernel reads them (DecodeTensor,
// batch 1): row_decode::row_bytes(format, head_dim) bytes a row, NVFP4's nibbles in one buffer
// and its E4M3 block scales in a second, FP8's per-KV-head scales on the device beside them,
// NVFP4's global scale in the launch arguments. Storage is reserved for shape.max_tokens tokens
// when a layer begins and doubles (one device-to-device copy) when rows come past it, so a decode
// step's append is one small copy a tensor, not a reupload of the layer; every buffer is a
// cudaMalloc of its own (256-byte aligned; the kernel needs 16). attend() runs one launch:
// query heads of a group the kernel has no instantiation for (3, 5, 6, 7 in the compressed
// formats, which take 1, 2, 4 and 8 like the other fused kernels) are padded to the next group
// with zero queries, and their outputs dropped.
//
// Every CUDA call is checked and becomes an Error naming the op and the layer; nothing aborts.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "decode_attention.cuh"
#include "kvlab/kernels/gpu_kv.h"
#include "kvlab/kernels/gpu_row_attention.h"

namespace kvlab::cuda {

namespace {

using row_decode::Format;

// Tokens a layer makes room for on its first rows when the shape gives no max_tokens.
constexpr std::size_t kFirstTokens = 64;

// The group the kernel runs for `group` query heads per KV head: itself for fp16 (1 to 8 are
// built), the next of 1, 2, 4, 8 for the other formats.
int launch_group(Format f, int group) {
  if (f == Format::Fp16) return group;
  return group <= 1 ? 1 : group <= 2 ? 2 : group <= 4 ? 4 : 8;
}

class GpuRowAttention final : public RowAttention {
 public:
  GpuRowAttention(const RowAttentionShape& shape, std::string device)
      : m_shape(shape),
        m_device(std::move(device)),
        m_layers(static_cast<std::size_t>(shape.layers)) {}

  ~GpuRowAttention() override {
    // The buffers go first (their cudaFree waits for the stream's work), then the stream.
    m_layers.clear();
    m_q.reset();
    m_out.reset();
    if (m_stream) (void)cudaStreamDestroy(m_stream);
  }

  GpuRowAttention(const GpuRowAttention&) = delete;
  GpuRowAttention& operator=(const GpuRowAttention&) = delete;

  // The stream and the q / out buffers, sized for the largest launch group of any format.
  Status init() {
    KVLAB_CUDA_TRY(cudaStreamCreate(&m_stream), "row attention: creating its stream");
    const int group = m_shape.heads / m_shape.kv_heads;
    const std::size_t n = static_cast<std::size_t>(m_shape.kv_heads) *
                          launch_group(Format::Q8_0, group) * m_shape.head_dim;
    KVLAB_TRY_STATUS(m_q.allocate(n, "row attention: query buffer"));
    KVLAB_TRY_STATUS(m_out.allocate(n, "row attention: output buffer"));
    return Ok{};
  }

  std::string name() const override { return "cuda (" + m_device + ")"; }

  Status begin_layer(int layer, const RowParams& params) override {
    KVLAB_TRY_STATUS(check_layer(layer));
    Layer& L = m_layers[static_cast<std::size_t>(layer)];
    if (L.begun) return make_error(fmt::format("row attention: layer {} begun twice", layer));
    KVLAB_TRY_STATUS(check_row_params(layer, m_shape.kv_heads, params));
    const Format f = params.format;
    const std::size_t heads = static_cast<std::size_t>(m_shape.kv_heads);
    if (f == Format::Fp8E4M3) {
      const std::string what = where(layer, "uploading FP8 head scales");
      KVLAB_TRY_STATUS(
          L.key_head_scales.upload(params.key_head_scales.data(), heads, what.c_str()));
      KVLAB_TRY_STATUS(
          L.value_head_scales.upload(params.value_head_scales.data(), heads, what.c_str()));
    }
    if (f == Format::Nvfp4) {
      L.key_global = params.key_global;
      L.value_global = params.value_global;
    }
    L.format = f;
    if (m_shape.max_tokens > 0) {
      KVLAB_TRY_STATUS(reserve(L, layer, static_cast<std::size_t>(m_shape.max_tokens)));
      // The split merge's partials for a full layer now rather than at a decode step (attend
      // prepares again for its own token count, which may need more: see attend()).
      DecodeAttentionArgs a = args(L, m_shape.max_tokens);
      KVLAB_TRY_STATUS(m_dec.prepare(a));
    }
    L.begun = true;
    return Ok{};
  }

  Status append(int layer, const StoredRows& rows) override {
    KVLAB_TRY_STATUS(check_layer(layer));
    Layer& L = m_layers[static_cast<std::size_t>(layer)];
    if (!L.begun) return make_error(fmt::format("row attention: layer {} not begun", layer));
    const Format f = L.format;
    const int dim = m_shape.head_dim;
    KVLAB_TRY_STATUS(check_stored_rows(layer, f, m_shape.kv_heads, dim, L.tokens, rows));
    if (rows.tokens == 0) return Ok{};
    const std::size_t need = static_cast<std::size_t>(L.tokens) + rows.tokens;
    if (need > L.capacity) {
      KVLAB_TRY_STATUS(reserve(L, layer, std::max({need, 2 * L.capacity, kFirstTokens})));
    }
    const std::string what = where(layer, "appending rows");
    const std::size_t held = static_cast<std::size_t>(L.tokens) * m_shape.kv_heads;
    const auto put = [&](DeviceArray<std::uint8_t>& to, std::span<const std::uint8_t> from,
                         std::size_t row) -> Status {
      if (from.empty()) return Ok{};
      KVLAB_CUDA_TRY(cudaMemcpyAsync(to.get() + held * row, from.data(), from.size(),
                                     cudaMemcpyHostToDevice, m_stream),
                     what.c_str());
      return Ok{};
    };
    KVLAB_TRY_STATUS(put(L.keys, rows.keys, stored_row_bytes(f, dim)));
    KVLAB_TRY_STATUS(put(L.values, rows.values, stored_row_bytes(f, dim)));
    KVLAB_TRY_STATUS(put(L.key_scales, rows.key_scales, stored_scale_bytes(f, dim)));
    KVLAB_TRY_STATUS(put(L.value_scales, rows.value_scales, stored_scale_bytes(f, dim)));
    // The host spans may be freed once this returns: wait for the copies (pageable memory).
    KVLAB_CUDA_TRY(cudaStreamSynchronize(m_stream), what.c_str());
    L.tokens += rows.tokens;
    return Ok{};
  }

  Status attend(int layer, std::span<const float> q, std::span<float> out) override {
    KVLAB_TRY_STATUS(check_layer(layer));
    Layer& L = m_layers[static_cast<std::size_t>(layer)];
    if (!L.begun) return make_error(fmt::format("row attention: layer {} not begun", layer));
    const int dim = m_shape.head_dim;
    const std::size_t qd = static_cast<std::size_t>(m_shape.heads) * dim;
    if (q.size() != qd || out.size() != qd) {
      return make_error(fmt::format(
          "row attention, layer {}: q and out need {} floats ({} query heads of {}); {} and {} "
          "given",
          layer, qd, m_shape.heads, dim, q.size(), out.size()));
    }
    if (L.tokens == 0) {
      std::fill(out.begin(), out.end(), 0.f);
      return Ok{};
    }
    const int group = m_shape.heads / m_shape.kv_heads;
    const int padded = launch_group(L.format, group);
    const std::size_t launch_floats = static_cast<std::size_t>(m_shape.kv_heads) * padded * dim;
    const std::string what = where(layer, "attention");
    // Query head kvh * group + g goes to launch head kvh * padded + g; the others stay zero.
    const float* q_host = q.data();
    if (padded != group) {
      m_q_host.assign(launch_floats, 0.f);
      for (int kvh = 0; kvh < m_shape.kv_heads; ++kvh) {
        std::memcpy(m_q_host.data() + static_cast<std::size_t>(kvh) * padded * dim,
                    q.data() + static_cast<std::size_t>(kvh) * group * dim,
                    static_cast<std::size_t>(group) * dim * sizeof(float));
      }
      q_host = m_q_host.data();
    }
    KVLAB_CUDA_TRY(cudaMemcpyAsync(m_q.get(), q_host, launch_floats * sizeof(float),
                                   cudaMemcpyHostToDevice, m_stream),
                   what.c_str());
    const DecodeAttentionArgs a = args(L, L.tokens);
    // The partials a launch needs depend on its split of the tokens, which is not monotonic in
    // them (a chunk count capped at one wave of blocks), so each launch prepares for its own
    // shape; prepare() allocates only when the buffers it holds are too small.
    KVLAB_TRY_STATUS(m_dec.prepare(a));
    KVLAB_CUDA_TRY(m_dec.launch(a, m_stream), what.c_str());
    float* out_host = out.data();
    if (padded != group) {
      m_out_host.resize(launch_floats);
      out_host = m_out_host.data();
    }
    KVLAB_CUDA_TRY(cudaMemcpyAsync(out_host, m_out.get(), launch_floats * sizeof(float),
                                   cudaMemcpyDeviceToHost, m_stream),
                   what.c_str());
    KVLAB_CUDA_TRY(cudaStreamSynchronize(m_stream), what.c_str());
    if (padded != group) {
      for (int kvh = 0; kvh < m_shape.kv_heads; ++kvh) {
        std::memcpy(out.data() + static_cast<std::size_t>(kvh) * group * dim,
                    m_out_host.data() + static_cast<std::size_t>(kvh) * padded * dim,
                    static_cast<std::size_t>(group) * dim * sizeof(float));
      }
    }
    return Ok{};
  }

  std::uint64_t bytes() const override {
    std::uint64_t total = 0;
    for (const Layer& L : m_layers) {
      total += L.keys.bytes() + L.values.bytes() + L.key_scales.bytes() + L.value_scales.bytes() +
               L.key_head_scales.bytes() + L.value_head_scales.bytes();
    }
    return total;
  }

  int tokens(int layer) const override {
    return layer >= 0 && layer < m_shape.layers ? m_layers[static_cast<std::size_t>(layer)].tokens
                                                : 0;
  }

 private:
  struct Layer {
    bool begun = false;
    Format format = Format::Fp16;
    int tokens = 0;
    std::size_t capacity = 0;  // tokens the buffers hold room for
    DeviceArray<std::uint8_t> keys, values, key_scales, value_scales;  // scales: NVFP4
    DeviceArray<float> key_head_scales, value_head_scales;             // FP8
    float key_global = 1.f, value_global = 1.f;                        // NVFP4
  };

  Status check_layer(int layer) const {
    if (layer < 0 || layer >= m_shape.layers) {
      return make_error(
          fmt::format("row attention: no layer {} (the model has {})", layer, m_shape.layers));
    }
    return Ok{};
  }

  static std::string where(int layer, const char* op) {
    return fmt::format("row attention, layer {}: {}", layer, op);
  }

  // The launch over the layer's first `tokens` tokens, into m_out from m_q.
  DecodeAttentionArgs args(const Layer& L, int tokens) const {
    const int group = m_shape.heads / m_shape.kv_heads;
    auto a = DecodeAttentionArgs::of_shape(L.format, 1, tokens, m_shape.kv_heads,
                                           m_shape.kv_heads * launch_group(L.format, group),
                                           m_shape.head_dim);
    a.k.data = L.keys.get();
    a.v.data = L.values.get();
    a.k.scales = L.key_scales.get();
    a.v.scales = L.value_scales.get();
    a.k.head_scales = L.key_head_scales.get();
    a.v.head_scales = L.value_head_scales.get();
    a.k.global = L.key_global;
    a.v.global = L.value_global;
    a.q = m_q.get();
    a.out = m_out.get();
    return a;
  }

  // Room for `tokens` tokens (at most INT_MAX, the kernel's count), the held rows copied over.
  // New buffers are allocated and filled before the old ones go, so a failure leaves the layer
  // as it was.
  Status reserve(Layer& L, int layer, std::size_t tokens) {
    tokens = std::min<std::size_t>(tokens, INT_MAX);
    if (tokens <= L.capacity) return Ok{};
    const std::string what = where(layer, "growing its rows");
    const std::size_t rows = tokens * m_shape.kv_heads;
    const std::size_t held = static_cast<std::size_t>(L.tokens) * m_shape.kv_heads;
    const std::size_t row_sizes[2] = {stored_row_bytes(L.format, m_shape.head_dim),
                                      stored_scale_bytes(L.format, m_shape.head_dim)};
    DeviceArray<std::uint8_t>* olds[4] = {&L.keys, &L.values, &L.key_scales, &L.value_scales};
    DeviceArray<std::uint8_t> news[4];
    for (int i = 0; i < 4; ++i) {
      const std::size_t row = row_sizes[i / 2];
      if (row == 0) continue;
      KVLAB_TRY_STATUS(news[i].allocate(rows * row, what.c_str()));
      if (held > 0) {
        KVLAB_CUDA_TRY(cudaMemcpyAsync(news[i].get(), olds[i]->get(), held * row,
                                       cudaMemcpyDeviceToDevice, m_stream),
                       what.c_str());
      }
    }
    KVLAB_CUDA_TRY(cudaStreamSynchronize(m_stream), what.c_str());
    for (int i = 0; i < 4; ++i) *olds[i] = std::move(news[i]);
    L.capacity = tokens;
    return Ok{};
  }

  RowAttentionShape m_shape;
  std::string m_device;
  std::vector<Layer> m_layers;
  cudaStream_t m_stream = nullptr;
  DecodeAttention m_dec;
  DeviceArray<float> m_q, m_out;            // [kv_heads][launch group][head_dim]
  std::vector<float> m_q_host, m_out_host;  // the padded launch's q and out
};

Status check_shape(const RowAttentionShape& s) {
  if (s.layers <= 0 || s.max_tokens < 0) {
    return make_error(fmt::format(
        "CUDA row attention: {} layers, at most {} tokens (layers must be positive, max_tokens 0 "
        "or more)",
        s.layers, s.max_tokens));
  }
  if (s.kv_heads <= 0 || s.heads <= 0 || s.heads % s.kv_heads != 0 || s.kv_heads > 65535) {
    return make_error(fmt::format(
        "CUDA row attention: {} query heads over {} KV heads (heads must be a positive multiple "
        "of KV heads)",
        s.heads, s.kv_heads));
  }
  if (s.heads / s.kv_heads > DecodeAttentionPolicy::kMaxGroup) {
    return make_error(fmt::format(
        "CUDA row attention: {} query heads per KV head (the decode kernel takes at most {})",
        s.heads / s.kv_heads, DecodeAttentionPolicy::kMaxGroup));
  }
  if (s.head_dim != 64 && s.head_dim != 128 && s.head_dim != 256) {
    return make_error(fmt::format(
        "CUDA row attention: head_dim {} (the decode kernel takes 64, 128 or 256)", s.head_dim));
  }
  return Ok{};
}

}  // namespace

Result<std::unique_ptr<RowAttention>> make_row_attention(const RowAttentionShape& shape) {
  KVLAB_TRY_STATUS(check_shape(shape));
  KVLAB_TRY_STATUS(require_gpu());
  int dev = 0;
  KVLAB_CUDA_TRY(cudaGetDevice(&dev), "row attention: current device");
  cudaDeviceProp prop{};
  KVLAB_CUDA_TRY(cudaGetDeviceProperties(&prop, dev), "row attention: device properties");
  auto made = std::make_unique<GpuRowAttention>(shape, prop.name);
  KVLAB_TRY_STATUS(made->init());
  return std::unique_ptr<RowAttention>(std::move(made));
}

}  // namespace kvlab::cuda
