// TurboQuant on the GPU (Zandieh et al. 2025, arXiv:2504.19874): the device half of the CPU's
// TurboQuantQuantizer (engine/src/quant/turboquant_quantizer.cpp), byte for byte. The method's
// tables (the rotation Pi or the Hadamard's signs, the Lloyd-Max codebook, QJL's S) are built on
// the host, as calibration is, and uploaded once per head_dim; the apply step runs here.
//
// One thread codes one head vector with turboquant_rules::encode_vector(), the function the CPU
// test (TurboQuantRules.*) holds to the CPU quantizer's bytes: the same sums in the same order,
// every rounding spelled out. A launch takes a chunk of vectors; their inputs and scratch sit in
// columns (coordinate k of the chunk's vector v at k * chunk + v), so that a warp's loads of one
// coordinate are coalesced, and every thread of a warp reads the same matrix entry at once (a
// broadcast). Codes and sign bits stay one byte each on the device; download() packs them as
// the CPU stores them.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codec/bitpack.h"
#include "device_quantizer.cuh"
#include "kvlab/engine/quant/turboquant_rules.h"
#include "quant/turboquant_quantizer.h"

namespace kvlab::cuda {

namespace {

namespace tr = turboquant_rules;

constexpr int kThreads = 128;
// Vectors a launch codes: the scratch is three columns of chunk x head_dim floats (96 MiB at
// head_dim 128), whatever the tensor's length.
constexpr std::size_t kChunkVectors = std::size_t{1} << 16;
constexpr unsigned long long kNoBadVector = ~0ull;

// Columns of a chunk's inputs as floats: xs[k * chunk + v] = x[(first + v) * dim + k].
__global__ void load_columns_kernel(const void* x, DType dtype, std::size_t first,
                                    std::size_t chunk, int dim, float* xs) {
  const std::size_t n = chunk * static_cast<std::size_t>(dim);
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t v = i / dim, k = i % dim;
    xs[k * chunk + v] = load_element(x, dtype, first * dim + i);
  }
}

struct EncodeArgs {
  tr::Tables tables;
  const float* xs;
  float* ys;
  float* rs;
  std::size_t first, chunk;  // the chunk's first vector and its vectors
  std::uint8_t* codes;       // [vectors][dim] bytes (with an MSE stage)
  std::uint8_t* signs;       // [vectors][dim] bytes (QJL)
  float* norms;              // [vectors]
  float* gammas;             // [vectors] (QJL)
  unsigned long long* bad;   // the first vector whose norm is not finite
};

__global__ void encode_kernel(EncodeArgs a) {
  const std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (v >= a.chunk) return;
  const std::size_t g = a.first + v;
  const std::size_t at = g * static_cast<std::size_t>(a.tables.dim);
  const tr::Strided x{const_cast<float*>(a.xs) + v, a.chunk};
  tr::Strided y{a.ys + v, a.chunk}, r{a.rs + v, a.chunk};
  tr::Encoded e{a.tables.mse_bits > 0 ? a.codes + at : nullptr,
                a.tables.qjl ? a.signs + at : nullptr};
  const bool finite = tr::encode_vector(a.tables, x, y, r, e);
  if (!finite) {
    atomicMin(a.bad, static_cast<unsigned long long>(g));
    // encode_vector stored nothing: the vector's codes and signs are zeroed, so that a
    // dequantize() before the error is read (quantize_on_gpu's order) indexes the codebook in
    // range instead of with whatever the allocation held.
    for (int j = 0; j < a.tables.dim; ++j) {
      if (e.codes) e.codes[j] = 0;
      if (e.signs) e.signs[j] = 0;
    }
  }
  a.norms[g] = finite ? e.norm : 0.f;
  if (a.tables.qjl) a.gammas[g] = finite ? e.gamma : 0.f;
}

struct DecodeArgs {
  tr::Tables tables;
  const std::uint8_t* codes;
  const std::uint8_t* signs;
  const float* norms;
  const float* gammas;
  float* ys;
  std::size_t first, chunk;
  float* out;  // [vectors][dim]
};

__global__ void decode_kernel(DecodeArgs a) {
  const std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (v >= a.chunk) return;
  const std::size_t g = a.first + v;
  const std::size_t at = g * static_cast<std::size_t>(a.tables.dim);
  const std::uint8_t* codes = a.tables.mse_bits > 0 ? a.codes + at : nullptr;
  const std::uint8_t* signs = a.tables.qjl ? a.signs + at : nullptr;
  const auto code = [codes](int j) { return codes[j]; };
  const auto sign = [signs](int j) { return signs[j]; };
  tr::Strided y{a.ys + v, a.chunk};
  float* out = a.out + at;
  tr::decode_vector(a.tables, code, sign, a.norms[g], a.tables.qjl ? a.gammas[g] : 0.f, y, out);
}

unsigned blocks_for(std::size_t threads) {
  return static_cast<unsigned>((threads + kThreads - 1) / kThreads);
}

class TurboQuantDeviceQuantizer final : public DeviceQuantizer {
 public:
  explicit TurboQuantDeviceQuantizer(const detail::TurboQuantConfig& config) : m_cfg(config) {}

  Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t s) override {
    m_ready = false;
    KVLAB_TRY_STATUS(check_device_tensor(x, "turboquant device quantizer"));
    const std::size_t vectors = static_cast<std::size_t>(x.tokens) * x.heads;
    const std::size_t n = x.elements();
    KVLAB_TRY_STATUS(prepare(x.dim, s));
    const tr::Tables t = tables();
    // Codes with an MSE stage, signs with QJL: a byte each (one unread byte otherwise).
    const int mse_bits = detail::turboquant_mse_bits(m_cfg);
    KVLAB_TRY_STATUS(ensure_size(m_codes, mse_bits > 0 ? std::max<std::size_t>(n, 1) : 1,
                                 "GPU TurboQuant: codes"));
    KVLAB_TRY_STATUS(
        ensure_size(m_signs, m_cfg.qjl ? std::max<std::size_t>(n, 1) : 1, "GPU TurboQuant: signs"));
    KVLAB_TRY_STATUS(ensure_size(m_norms, std::max<std::size_t>(vectors * (m_cfg.qjl ? 2 : 1), 1),
                                 "GPU TurboQuant: norms"));
    KVLAB_TRY_STATUS(ensure_size(m_bad, 1, "GPU TurboQuant: flag"));
    KVLAB_CUDA_TRY(cudaMemsetAsync(m_bad.get(), 0xff, sizeof(unsigned long long), s),
                   "GPU TurboQuant: clearing the flag");
    const std::size_t chunk = std::min(vectors, kChunkVectors);
    if (chunk > 0 && x.dim > 0) {
      const std::size_t scratch = chunk * static_cast<std::size_t>(x.dim);
      KVLAB_TRY_STATUS(ensure_size(m_xs, scratch, "GPU TurboQuant: scratch"));
      KVLAB_TRY_STATUS(ensure_size(m_ys, scratch, "GPU TurboQuant: scratch"));
      if (m_cfg.qjl) KVLAB_TRY_STATUS(ensure_size(m_rs, scratch, "GPU TurboQuant: scratch"));
    }
    for (std::size_t first = 0; first < vectors && x.dim > 0; first += kChunkVectors) {
      const std::size_t count = std::min(kChunkVectors, vectors - first);
      const std::size_t elements = count * static_cast<std::size_t>(x.dim);
      load_columns_kernel<<<std::min(blocks_for(elements), 65535u), kThreads, 0, s>>>(
          x.data, x.dtype, first, count, x.dim, m_xs.get());
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU TurboQuant: loading a chunk");
      EncodeArgs a{t,
                   m_xs.get(),
                   m_ys.get(),
                   m_cfg.qjl ? m_rs.get() : m_ys.get(),
                   first,
                   count,
                   m_codes.get(),
                   m_signs.get(),
                   m_norms.get(),
                   m_cfg.qjl ? m_norms.get() + vectors : nullptr,
                   m_bad.get()};
      encode_kernel<<<blocks_for(count), kThreads, 0, s>>>(a);
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU TurboQuant: coding a chunk");
    }
    m_role = role;
    m_tokens = x.tokens;
    m_heads = x.heads;
    m_dim = x.dim;
    m_ready = true;
    return Ok{};
  }

  Status dequantize(float* out, cudaStream_t s) override {
    KVLAB_TRY_STATUS(require_tensor());
    const std::size_t vectors = this->vectors();
    if (vectors == 0 || m_dim == 0) return Ok{};
    if (out == nullptr) return make_error("turboquant device quantizer: null output");
    const tr::Tables t = tables();
    for (std::size_t first = 0; first < vectors; first += kChunkVectors) {
      const std::size_t count = std::min(kChunkVectors, vectors - first);
      const DecodeArgs a{t,
                         m_codes.get(),
                         m_signs.get(),
                         m_norms.get(),
                         m_cfg.qjl ? m_norms.get() + vectors : nullptr,
                         m_ys.get(),
                         first,
                         count,
                         out};
      decode_kernel<<<blocks_for(count), kThreads, 0, s>>>(a);
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU TurboQuant: dequantizing a chunk");
    }
    return Ok{};
  }

  Result<std::vector<CodeHistogram>> histograms(cudaStream_t s) override {
    KVLAB_TRY_STATUS(require_finite(s));
    const std::size_t n = elements();
    const int mse_bits = detail::turboquant_mse_bits(m_cfg);
    std::vector<CodeHistogram> out;
    const auto count = [&](const std::uint8_t* codes,
                           int bits) -> Result<std::vector<std::uint64_t>> {
      if (n == 0) return std::vector<std::uint64_t>(std::size_t{1} << bits, 0);
      return count_byte_codes(codes, n, bits, m_counts, s);
    };
    if (mse_bits > 0) {
      auto c = count(m_codes.get(), mse_bits);
      if (!c) return c.error();
      out.push_back(
          {"turboquant " + std::to_string(mse_bits) + "-bit Lloyd-Max", mse_bits, std::move(*c)});
    }
    if (m_cfg.qjl) {
      auto c = count(m_signs.get(), 1);
      if (!c) return c.error();
      out.push_back({"qjl residual signs", 1, std::move(*c)});
    }
    return out;
  }

  ByteBreakdown bytes() const override {
    if (!m_ready) return {};
    return detail::turboquant_bytes(m_cfg, m_tokens, m_heads, m_dim);
  }

  Result<QuantizedTensor> download(cudaStream_t s) override {
    KVLAB_TRY_STATUS(require_finite(s));
    const std::size_t n = elements(), vectors = this->vectors();
    const int mse_bits = detail::turboquant_mse_bits(m_cfg);
    QuantizedTensor q{m_role, m_tokens, m_heads, m_dim, {}, {}, {}, {}, {}};
    q.bytes = bytes();
    std::vector<std::uint8_t> codes(mse_bits > 0 ? n : 0), signs(m_cfg.qjl ? n : 0);
    q.params.resize(vectors * (m_cfg.qjl ? 2 : 1));
    if (!codes.empty()) {
      KVLAB_CUDA_TRY(cudaMemcpyAsync(codes.data(), m_codes.get(), n, cudaMemcpyDeviceToHost, s),
                     "GPU TurboQuant: downloading codes");
    }
    if (!signs.empty()) {
      KVLAB_CUDA_TRY(cudaMemcpyAsync(signs.data(), m_signs.get(), n, cudaMemcpyDeviceToHost, s),
                     "GPU TurboQuant: downloading signs");
    }
    if (vectors > 0) {
      // The norms, then (QJL) the gammas: the CPU's params.
      KVLAB_CUDA_TRY(cudaMemcpyAsync(q.params.data(), m_norms.get(), vectors * sizeof(float),
                                     cudaMemcpyDeviceToHost, s),
                     "GPU TurboQuant: downloading norms");
      if (m_cfg.qjl) {
        KVLAB_CUDA_TRY(cudaMemcpyAsync(q.params.data() + vectors, m_norms.get() + vectors,
                                       vectors * sizeof(float), cudaMemcpyDeviceToHost, s),
                       "GPU TurboQuant: downloading norms");
      }
    }
    KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU TurboQuant: download");
    q.codes.assign(q.bytes.codes, 0);
    const std::size_t mse_bytes = mse_bits > 0 ? detail::packed_bytes(n, mse_bits) : 0;
    if (!codes.empty()) detail::turboquant_pack(codes.data(), n, mse_bits, q.codes.data());
    if (!signs.empty()) detail::turboquant_pack(signs.data(), n, 1, q.codes.data() + mse_bytes);
    return q;
  }

 private:
  std::size_t vectors() const { return static_cast<std::size_t>(m_tokens) * m_heads; }
  std::size_t elements() const { return vectors() * m_dim; }

  Status require_tensor() const {
    if (!m_ready) return make_error("turboquant device quantizer: no tensor quantized yet");
    return Ok{};
  }

  // The tensor's vectors all had finite norms, as the CPU quantizer requires. Waits for the stream.
  Status require_finite(cudaStream_t s) {
    KVLAB_TRY_STATUS(require_tensor());
    unsigned long long bad = kNoBadVector;
    KVLAB_CUDA_TRY(cudaMemcpyAsync(&bad, m_bad.get(), sizeof bad, cudaMemcpyDeviceToHost, s),
                   "GPU TurboQuant: reading the flag");
    KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU TurboQuant");
    if (bad == kNoBadVector || m_heads == 0) return Ok{};
    return make_error("turboquant: " + std::string(role_name(m_role)) + " vector of token " +
                      std::to_string(bad / m_heads) + ", head " + std::to_string(bad % m_heads) +
                      " is not finite");
  }

  // The tables of head_dim `dim` on the device (built and uploaded when the head_dim changes).
  Status prepare(int dim, cudaStream_t s) {
    if (m_host && m_host->dim == dim) return Ok{};
    m_host.reset();
    auto made = detail::turboquant_tables(m_cfg, dim);
    if (!made) return made.error();
    auto host = std::make_unique<detail::TurboQuantTables>(std::move(*made));
    // Ordered on the stream before the kernels that read them; the host copies live as long as
    // this object.
    const auto put = [&](DeviceArray<float>& dst, const std::vector<float>& src) -> Status {
      if (src.empty()) {
        dst.reset();
        return Ok{};
      }
      KVLAB_TRY_STATUS(ensure_size(dst, src.size(), "GPU TurboQuant: tables"));
      KVLAB_CUDA_TRY(cudaMemcpyAsync(dst.get(), src.data(), src.size() * sizeof(float),
                                     cudaMemcpyHostToDevice, s),
                     "GPU TurboQuant: uploading tables");
      return Ok{};
    };
    KVLAB_TRY_STATUS(put(m_rotation, host->rotation));
    KVLAB_TRY_STATUS(put(m_hadamard_signs, host->signs));
    KVLAB_TRY_STATUS(put(m_boundaries, host->boundaries));
    KVLAB_TRY_STATUS(put(m_centroids, host->centroids));
    KVLAB_TRY_STATUS(put(m_sketch, host->sketch));
    m_host = std::move(host);
    return Ok{};
  }

  // The rules' view of the device tables.
  tr::Tables tables() const {
    tr::Tables t = m_host->rules();
    t.rotation = m_host->rotation.empty() ? nullptr : m_rotation.get();
    t.signs = m_host->signs.empty() ? nullptr : m_hadamard_signs.get();
    t.boundaries = m_boundaries.get();
    t.centroids = m_centroids.get();
    t.sketch = m_host->sketch.empty() ? nullptr : m_sketch.get();
    return t;
  }

  detail::TurboQuantConfig m_cfg;
  std::unique_ptr<detail::TurboQuantTables> m_host;
  bool m_ready = false;
  TensorRole m_role = TensorRole::Key;
  int m_tokens = 0, m_heads = 0, m_dim = 0;
  DeviceArray<float> m_rotation, m_hadamard_signs, m_boundaries, m_centroids, m_sketch;
  DeviceArray<float> m_xs, m_ys, m_rs;  // a chunk's columns
  DeviceArray<std::uint8_t> m_codes, m_signs;
  DeviceArray<float> m_norms;  // the norms, then the gammas
  DeviceArray<unsigned long long> m_bad;
  DeviceArray<unsigned long long> m_counts;
};

}  // namespace

std::unique_ptr<DeviceQuantizer> make_turboquant_device_quantizer(const MethodConfig& config) {
  if (config.kind != MethodKind::TurboQuant) return nullptr;
  return std::make_unique<TurboQuantDeviceQuantizer>(detail::turboquant_config(config));
}

}  // namespace kvlab::cuda
