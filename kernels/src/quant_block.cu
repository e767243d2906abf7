// Device quantizers of the block formats: llama.cpp's KV-cache types (q8_0, q4_0, q4_1, q5_0,
// q5_1, iq4_nl, with llama.cpp's attn_rot Hadamard where the method has it) and the FP4 formats
// (nvfp4, mxfp4). Each gives the bytes of its CPU quantizer (ggml_block_quantizer.cpp,
// fp4_quantizer.cpp) for the same input: the per-block rules live in quant_block_ggml.cuh and
// quant_block_fp4.cuh, over the CPU's own functions (model/ggml_block_rules.h,
// quant/fp4_rules.h, quant/fp8_rules.h). Kernels are one thread per block; every launch is on the
// caller's stream and checked.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "device_quantizer.cuh"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/rotation.h"
#include "launch_plan.cuh"
#include "quant_block_fp4.cuh"
#include "quant_block_ggml.cuh"

namespace kvlab::cuda {

namespace {

namespace bq = block_quant;

constexpr int kThreads = 256;

// --- Histograms of the stored codes ------------------------------------------------------------

// How to read the codes of one unit (a block) of `stride` bytes: `count` bytes from `first`,
// each one code (xor `xor_mask`: Q8_0's int8 shown as code + 128) or two nibble codes (low
// first); Q5 adds bit j (low nibble of byte j) and bit j + 16 (its high nibble) of the 32-bit
// little-endian qh at `qh`.
enum class HistKind { Bytes, Nibbles, Q5 };
struct HistSpec {
  HistKind kind = HistKind::Bytes;
  int stride = 1, first = 0, count = 1, qh = 0;
  unsigned xor_mask = 0;
  int bins = 256;  // at most 256
};

__global__ void histogram_kernel(const std::uint8_t* data, std::size_t units, HistSpec spec,
                                 unsigned long long* bins) {
  __shared__ unsigned long long local[256];
  for (int i = threadIdx.x; i < spec.bins; i += blockDim.x) local[i] = 0;
  __syncthreads();
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t u = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += stride) {
    const std::uint8_t* p = data + u * spec.stride;
    const std::uint32_t qh = spec.kind == HistKind::Q5 ? bq::load_u32(p + spec.qh) : 0u;
    for (int k = 0; k < spec.count; ++k) {
      const unsigned byte = p[spec.first + k];
      if (spec.kind == HistKind::Bytes) {
        atomicAdd(&local[(byte ^ spec.xor_mask) & 0xffu], 1ull);
        continue;
      }
      unsigned lo = byte & 0x0fu, hi = byte >> 4;
      if (spec.kind == HistKind::Q5) {
        lo |= ((qh >> k) & 1u) << 4;
        hi |= ((qh >> (k + 16)) & 1u) << 4;
      }
      atomicAdd(&local[lo], 1ull);
      atomicAdd(&local[hi], 1ull);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < spec.bins; i += blockDim.x) {
    if (local[i] != 0) atomicAdd(&bins[i], local[i]);
  }
}

// Counts of the codes of `units` units at `data` (device), read back. Waits for the stream.
Result<std::vector<std::uint64_t>> device_histogram(const std::uint8_t* data, std::size_t units,
                                                    const HistSpec& spec,
                                                    DeviceArray<unsigned long long>& bins,
                                                    cudaStream_t stream) {
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(spec.bins), 0);
  if (units == 0) return counts;
  const std::size_t n = counts.size();
  KVLAB_TRY_STATUS(ensure_size(bins, n, "block quantizer histogram: allocating bins"));
  KVLAB_CUDA_TRY(cudaMemsetAsync(bins.get(), 0, n * sizeof(unsigned long long), stream),
                 "block quantizer histogram: zeroing bins");
  histogram_kernel<<<stride_grid(units, kThreads), kThreads, 0, stream>>>(data, units, spec,
                                                                          bins.get());
  KVLAB_CUDA_TRY(cudaGetLastError(), "block quantizer histogram: launch");
  std::vector<unsigned long long> host(n);
  KVLAB_CUDA_TRY(cudaMemcpyAsync(host.data(), bins.get(), n * sizeof(unsigned long long),
                                 cudaMemcpyDeviceToHost, stream),
                 "block quantizer histogram: reading bins");
  KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "block quantizer histogram");
  std::copy(host.begin(), host.end(), counts.begin());
  return counts;
}

// --- What every block quantizer keeps ----------------------------------------------------------

class BlockQuantizerBase : public DeviceQuantizer {
 public:
  explicit BlockQuantizerBase(std::string name) : m_name(std::move(name)) {}

  ByteBreakdown bytes() const override { return m_bytes; }

  Result<QuantizedTensor> download(cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor("download"));
    QuantizedTensor q{m_role, m_tokens, m_heads, m_dim, {}, {}, {}, {}, {}};
    q.codes.resize(m_code_bytes);
    if (m_code_bytes != 0) {
      KVLAB_CUDA_TRY(cudaMemcpyAsync(q.codes.data(), m_codes.get(), m_code_bytes,
                                     cudaMemcpyDeviceToHost, stream),
                     "block quantizer download: codes");
    }
    KVLAB_TRY_STATUS(download_params(q.params, stream));
    KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "block quantizer download");
    q.bytes = m_bytes;
    return Result<QuantizedTensor>(std::move(q));
  }

 protected:
  // The method's QuantizedTensor::params, copied on the stream (download() then waits).
  virtual Status download_params(std::vector<float>& params, cudaStream_t stream) {
    (void)params, (void)stream;
    return Ok{};
  }

  // Checks the shape of `x`, forgets the last tensor and records this one's shape.
  Status begin(const DeviceTensor& x, TensorRole role) {
    m_valid = false;
    if (x.tokens < 0 || x.heads < 0 || x.dim < 0) {
      return make_error(m_name + ": the tensor's shape " + std::to_string(x.tokens) + " x " +
                        std::to_string(x.heads) + " x " + std::to_string(x.dim) +
                        " has a negative size");
    }
    if (x.elements() != 0 && x.data == nullptr) {
      return make_error(m_name + ": the " + role_name(role) + " tensor has no device data");
    }
    m_role = role;
    m_tokens = x.tokens;
    m_heads = x.heads;
    m_dim = x.dim;
    return Ok{};
  }

  Status block_error(int block) const {
    return make_error(m_name + ": head_dim " + std::to_string(m_dim) + " of the " +
                      role_name(m_role) + " tensor is not a multiple of the " + m_name +
                      " block size " + std::to_string(block));
  }

  Status require_tensor(const char* what) const {
    if (m_valid) return Ok{};
    return make_error(m_name + ": " + what + "() called without a quantized tensor");
  }

  std::size_t elements() const { return static_cast<std::size_t>(m_tokens) * m_heads * m_dim; }

  std::string m_name;
  TensorRole m_role = TensorRole::Key;
  int m_tokens = 0, m_heads = 0, m_dim = 0;
  bool m_valid = false;
  ByteBreakdown m_bytes;
  DeviceArray<std::uint8_t> m_codes;
  std::size_t m_code_bytes = 0;
  DeviceArray<unsigned long long> m_bins;
};

// --- llama.cpp's KV-cache block types ----------------------------------------------------------

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

template <GgmlType T>
Status launch_ggml_quantize(const void* src, DType dtype, std::size_t blocks, int type_size,
                            std::uint8_t* codes, cudaStream_t stream) {
  bq::ggml_quantize_kernel<T><<<stride_grid(blocks, kThreads), kThreads, 0, stream>>>(
      src, dtype, blocks, type_size, codes);
  KVLAB_CUDA_TRY(cudaGetLastError(), "llama.cpp block quantize: launch");
  return Ok{};
}

template <GgmlType T>
Status launch_ggml_dequantize(const std::uint8_t* codes, std::size_t blocks, int type_size,
                              float* out, cudaStream_t stream) {
  bq::ggml_dequantize_kernel<T>
      <<<stride_grid(blocks, kThreads), kThreads, 0, stream>>>(codes, blocks, type_size, out);
  KVLAB_CUDA_TRY(cudaGetLastError(), "llama.cpp block dequantize: launch");
  return Ok{};
}

// hadamard_transform of every n-value chunk of the n_values at `src` into `dst` (see
// hadamard_chunks_kernel). The scale is the CPU's float 1.0f / std::sqrt(float(n)).
Status launch_hadamard(const void* src, DType dtype, float* dst, std::size_t n_values, int n,
                       cudaStream_t stream) {
  const std::size_t chunks = n_values / static_cast<std::size_t>(n);
  if (chunks == 0) return Ok{};
  const float scale = 1.0f / std::sqrt(static_cast<float>(n));
  const int threads = std::min(n / 2, kThreads);
  // A block a chunk, striding over the rest.
  bq::hadamard_chunks_kernel<<<stride_grid(chunks, 1), threads, 0, stream>>>(src, dtype, dst, n,
                                                                             scale, chunks);
  KVLAB_CUDA_TRY(cudaGetLastError(), "llama.cpp attn_rot Hadamard: launch");
  return Ok{};
}

class GgmlBlockDeviceQuantizer final : public BlockQuantizerBase {
 public:
  GgmlBlockDeviceQuantizer(GgmlType type, const GgmlTypeInfo& info, bool hadamard)
      : BlockQuantizerBase(lower(info.name)),
        m_type(type),
        m_hadamard(hadamard),
        m_type_size(info.type_size),
        m_min_bytes(type == GgmlType::Q4_1 || type == GgmlType::Q5_1 ? 2 : 0) {}

  Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t stream) override {
    KVLAB_TRY_STATUS(begin(x, role));
    if (m_dim <= 0 || m_dim % bq::kGgmlBlock != 0) {
      return make_error("llama.cpp " + m_name + " cache: head_dim " + std::to_string(m_dim) +
                        " is not a multiple of the block size 32 (llama.cpp stores each K/V row "
                        "in whole 32-value blocks)");
    }
    const std::size_t n = elements();
    const std::size_t blocks = n / bq::kGgmlBlock;
    m_code_bytes = blocks * static_cast<std::size_t>(m_type_size);
    KVLAB_TRY_STATUS(ensure_size(m_codes, m_code_bytes, "llama.cpp block quantize: codes"));
    // ggml_block_quantizer.cpp: llama_attn_rotate_rows on each head before ggml_quantize.
    m_rotation =
        m_hadamard && llama_attn_rot_enabled(m_type, m_dim) ? llama_attn_rot_size(role, m_dim) : 0;
    const void* src = x.data;
    DType dtype = x.dtype;
    if (m_rotation > 0 && n > 0) {
      KVLAB_TRY_STATUS(ensure_size(m_rotated, n, "llama.cpp attn_rot: rotated values"));
      KVLAB_TRY_STATUS(launch_hadamard(x.data, x.dtype, m_rotated.get(), n, m_rotation, stream));
      src = m_rotated.get();
      dtype = DType::F32;
    }
    if (blocks > 0) KVLAB_TRY_STATUS(quantize_blocks(src, dtype, blocks, stream));
    m_bytes = ByteBreakdown{};
    m_bytes.scales = blocks * 2;
    m_bytes.zero_points = blocks * static_cast<std::uint64_t>(m_min_bytes);
    m_bytes.codes = blocks * static_cast<std::uint64_t>(m_type_size - 2 - m_min_bytes);
    m_bytes.metadata = kTensorHeaderBytes;
    m_valid = true;
    return Ok{};
  }

  // ggml_dequantize, then the rotation undone (the matrix is its own inverse) as the CPU's
  // dequantize() does with llama_attn_rotate.
  Status dequantize(float* out, cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor("dequantize"));
    const std::size_t n = elements();
    if (n == 0) return Ok{};
    const std::size_t blocks = n / bq::kGgmlBlock;
    KVLAB_TRY_STATUS(dequantize_blocks(blocks, out, stream));
    if (m_rotation > 0)
      KVLAB_TRY_STATUS(launch_hadamard(out, DType::F32, out, n, m_rotation, stream));
    return Ok{};
  }

  // As the CPU's histograms(): Q8_0 int8 as code + 128 (8 bits), Q5_x the nibble with its qh bit
  // (5 bits), Q4_x and IQ4_NL the nibble (4 bits).
  Result<std::vector<CodeHistogram>> histograms(cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor("histograms"));
    const bool five = m_type == GgmlType::Q5_0 || m_type == GgmlType::Q5_1;
    HistSpec spec;
    spec.stride = m_type_size;
    if (m_type == GgmlType::Q8_0) {
      spec.kind = HistKind::Bytes;
      spec.first = 2;
      spec.count = bq::kGgmlBlock;
      spec.xor_mask = 0x80u;
      spec.bins = 256;
    } else {
      spec.kind = five ? HistKind::Q5 : HistKind::Nibbles;
      spec.first = m_type_size - bq::kGgmlBlock / 2;
      spec.count = bq::kGgmlBlock / 2;
      spec.qh = 2 + m_min_bytes;
      spec.bins = five ? 32 : 16;
    }
    const int bits = m_type == GgmlType::Q8_0 ? 8 : five ? 5 : 4;
    auto counts = device_histogram(m_codes.get(), m_code_bytes / m_type_size, spec, m_bins, stream);
    if (!counts) return counts.error();
    return std::vector<CodeHistogram>{CodeHistogram{m_name, bits, std::move(*counts)}};
  }

 private:
  Status quantize_blocks(const void* src, DType dtype, std::size_t blocks, cudaStream_t stream) {
    std::uint8_t* codes = m_codes.get();
    switch (m_type) {
      case GgmlType::Q4_0:
        return launch_ggml_quantize<GgmlType::Q4_0>(src, dtype, blocks, m_type_size, codes, stream);
      case GgmlType::Q4_1:
        return launch_ggml_quantize<GgmlType::Q4_1>(src, dtype, blocks, m_type_size, codes, stream);
      case GgmlType::Q5_0:
        return launch_ggml_quantize<GgmlType::Q5_0>(src, dtype, blocks, m_type_size, codes, stream);
      case GgmlType::Q5_1:
        return launch_ggml_quantize<GgmlType::Q5_1>(src, dtype, blocks, m_type_size, codes, stream);
      case GgmlType::Q8_0:
        return launch_ggml_quantize<GgmlType::Q8_0>(src, dtype, blocks, m_type_size, codes, stream);
      case GgmlType::IQ4_NL:
        return launch_ggml_quantize<GgmlType::IQ4_NL>(src, dtype, blocks, m_type_size, codes,
                                                      stream);
      default:
        return make_error("llama.cpp " + m_name + " cache: no device quantizer for this type");
    }
  }

  Status dequantize_blocks(std::size_t blocks, float* out, cudaStream_t stream) {
    const std::uint8_t* codes = m_codes.get();
    switch (m_type) {
      case GgmlType::Q4_0:
        return launch_ggml_dequantize<GgmlType::Q4_0>(codes, blocks, m_type_size, out, stream);
      case GgmlType::Q4_1:
        return launch_ggml_dequantize<GgmlType::Q4_1>(codes, blocks, m_type_size, out, stream);
      case GgmlType::Q5_0:
        return launch_ggml_dequantize<GgmlType::Q5_0>(codes, blocks, m_type_size, out, stream);
      case GgmlType::Q5_1:
        return launch_ggml_dequantize<GgmlType::Q5_1>(codes, blocks, m_type_size, out, stream);
      case GgmlType::Q8_0:
        return launch_ggml_dequantize<GgmlType::Q8_0>(codes, blocks, m_type_size, out, stream);
      case GgmlType::IQ4_NL:
        return launch_ggml_dequantize<GgmlType::IQ4_NL>(codes, blocks, m_type_size, out, stream);
      default:
        return make_error("llama.cpp " + m_name + " cache: no device dequantizer for this type");
    }
  }

  GgmlType m_type;
  bool m_hadamard;
  int m_type_size;
  int m_min_bytes;
  int m_rotation = 0;  // the Hadamard size of the last tensor; 0: not rotated
  DeviceArray<float> m_rotated;
};

// --- NVFP4
// ----------------------------------------------------------------------------------------

// Layout as fp4_quantizer.cpp: all nibbles [token][head][dim/2], then one E4M3 scale byte per
// 16 values; params = {global scale}.
class Nvfp4DeviceQuantizer final : public BlockQuantizerBase {
 public:
  Nvfp4DeviceQuantizer() : BlockQuantizerBase("nvfp4") {}

  Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t stream) override {
    KVLAB_TRY_STATUS(begin(x, role));
    if (m_dim % bq::kNvfp4Block != 0) return block_error(bq::kNvfp4Block);
    const std::size_t n = elements();
    const std::size_t blocks = n / bq::kNvfp4Block;
    m_code_bytes = n / 2 + blocks;
    KVLAB_TRY_STATUS(ensure_size(m_codes, m_code_bytes, "nvfp4 quantize: codes"));
    KVLAB_TRY_STATUS(ensure_size(m_amax, 1, "nvfp4 quantize: amax"));
    KVLAB_TRY_STATUS(ensure_size(m_global, 1, "nvfp4 quantize: global scale"));
    KVLAB_CUDA_TRY(cudaMemsetAsync(m_amax.get(), 0, sizeof(unsigned int), stream),
                   "nvfp4 quantize: zeroing amax");
    if (n > 0) {
      bq::tensor_amax_kernel<<<stride_grid(n, kThreads), kThreads, 0, stream>>>(x.data, x.dtype, n,
                                                                                m_amax.get());
      KVLAB_CUDA_TRY(cudaGetLastError(), "nvfp4 quantize: amax launch");
    }
    bq::nvfp4_global_kernel<<<1, 1, 0, stream>>>(m_amax.get(), m_global.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "nvfp4 quantize: global scale launch");
    if (blocks > 0) {
      bq::nvfp4_quantize_kernel<<<stride_grid(blocks, kThreads), kThreads, 0, stream>>>(
          x.data, x.dtype, blocks, m_global.get(), m_codes.get(), m_codes.get() + n / 2);
      KVLAB_CUDA_TRY(cudaGetLastError(), "nvfp4 quantize: launch");
    }
    m_bytes = ByteBreakdown{};
    m_bytes.codes = n / 2;
    m_bytes.scales = blocks + sizeof(float);
    m_bytes.metadata = kTensorHeaderBytes;
    m_valid = true;
    return Ok{};
  }

  Status dequantize(float* out, cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor("dequantize"));
    const std::size_t n = elements();
    const std::size_t blocks = n / bq::kNvfp4Block;
    if (blocks == 0) return Ok{};
    bq::nvfp4_dequantize_kernel<<<stride_grid(blocks, kThreads), kThreads, 0, stream>>>(
        m_codes.get(), m_codes.get() + n / 2, m_global.get(), blocks, out);
    KVLAB_CUDA_TRY(cudaGetLastError(), "nvfp4 dequantize: launch");
    return Ok{};
  }

  Result<std::vector<CodeHistogram>> histograms(cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor("histograms"));
    const std::size_t n = elements();
    const std::size_t blocks = n / bq::kNvfp4Block;
    HistSpec codes;  // the 8 nibble bytes of each block
    codes.kind = HistKind::Nibbles;
    codes.stride = bq::kNvfp4Block / 2;
    codes.count = bq::kNvfp4Block / 2;
    codes.bins = 16;
    HistSpec scales;  // one E4M3 byte per block
    auto c = device_histogram(m_codes.get(), blocks, codes, m_bins, stream);
    if (!c) return c.error();
    auto s = device_histogram(m_codes.get() + n / 2, blocks, scales, m_bins, stream);
    if (!s) return s.error();
    return std::vector<CodeHistogram>{CodeHistogram{"e2m1", 4, std::move(*c)},
                                      CodeHistogram{"nvfp4 block scales (e4m3)", 8, std::move(*s)}};
  }

 private:
  Status download_params(std::vector<float>& params, cudaStream_t stream) override {
    params.assign(1, 0.0f);
    KVLAB_CUDA_TRY(cudaMemcpyAsync(params.data(), m_global.get(), sizeof(float),
                                   cudaMemcpyDeviceToHost, stream),
                   "nvfp4 download: global scale");
    return Ok{};
  }

  DeviceArray<unsigned int> m_amax;
  DeviceArray<float> m_global;
};

// --- MXFP4
// ----------------------------------------------------------------------------------------

// llama.cpp's block_mxfp4, 17 bytes per 32 values: the E8M0 exponent, then 16 nibble bytes.
class Mxfp4DeviceQuantizer final : public BlockQuantizerBase {
 public:
  Mxfp4DeviceQuantizer() : BlockQuantizerBase("mxfp4") {}

  Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t stream) override {
    KVLAB_TRY_STATUS(begin(x, role));
    if (m_dim % bq::kMxfp4Block != 0) return block_error(bq::kMxfp4Block);
    const std::size_t blocks = elements() / bq::kMxfp4Block;
    m_code_bytes = blocks * bq::kMxfp4Bytes;
    KVLAB_TRY_STATUS(ensure_size(m_codes, m_code_bytes, "mxfp4 quantize: codes"));
    if (blocks > 0) {
      bq::mxfp4_quantize_kernel<<<stride_grid(blocks, kThreads), kThreads, 0, stream>>>(
          x.data, x.dtype, blocks, m_codes.get());
      KVLAB_CUDA_TRY(cudaGetLastError(), "mxfp4 quantize: launch");
    }
    m_bytes = ByteBreakdown{};
    m_bytes.codes = blocks * (bq::kMxfp4Block / 2);
    m_bytes.scales = blocks;
    m_bytes.metadata = kTensorHeaderBytes;
    m_valid = true;
    return Ok{};
  }

  Status dequantize(float* out, cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor("dequantize"));
    const std::size_t blocks = elements() / bq::kMxfp4Block;
    if (blocks == 0) return Ok{};
    bq::mxfp4_dequantize_kernel<<<stride_grid(blocks, kThreads), kThreads, 0, stream>>>(
        m_codes.get(), blocks, out);
    KVLAB_CUDA_TRY(cudaGetLastError(), "mxfp4 dequantize: launch");
    return Ok{};
  }

  Result<std::vector<CodeHistogram>> histograms(cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor("histograms"));
    const std::size_t blocks = m_code_bytes / bq::kMxfp4Bytes;
    HistSpec codes;  // bytes 1 ... 16 of each block, two nibbles each
    codes.kind = HistKind::Nibbles;
    codes.stride = bq::kMxfp4Bytes;
    codes.first = 1;
    codes.count = bq::kMxfp4Block / 2;
    codes.bins = 16;
    HistSpec exps;  // byte 0 of each block
    exps.stride = bq::kMxfp4Bytes;
    auto c = device_histogram(m_codes.get(), blocks, codes, m_bins, stream);
    if (!c) return c.error();
    auto e = device_histogram(m_codes.get(), blocks, exps, m_bins, stream);
    if (!e) return e.error();
    return std::vector<CodeHistogram>{CodeHistogram{"e2m1 (llama.cpp index)", 4, std::move(*c)},
                                      CodeHistogram{"mxfp4 exponents (e8m0)", 8, std::move(*e)}};
  }
};

std::unique_ptr<DeviceQuantizer> make_ggml(GgmlType type, bool hadamard) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  if (info == nullptr || !ggml_quantizable(type) || info->block_size != bq::kGgmlBlock) {
    return nullptr;
  }
  return std::make_unique<GgmlBlockDeviceQuantizer>(type, *info, hadamard);
}

}  // namespace

std::unique_ptr<DeviceQuantizer> make_block_device_quantizer(const MethodConfig& config) {
  // make_quantizer wraps these in a RotatedQuantizer for any other rotation; the settings below
  // belong to other methods (make_quantizer refuses them here), so none of them is run.
  if (config.rotation != RotationKind::None || config.rotate_values || config.param_dtype ||
      config.codec || config.calib_tokens != 0) {
    return nullptr;
  }
  switch (config.kind) {
    case MethodKind::Q8_0:
      return make_ggml(GgmlType::Q8_0, config.llama_rotation);
    case MethodKind::Q4_0:
      return make_ggml(GgmlType::Q4_0, config.llama_rotation);
    case MethodKind::Q4_1:
      return make_ggml(GgmlType::Q4_1, config.llama_rotation);
    case MethodKind::Q5_0:
      return make_ggml(GgmlType::Q5_0, config.llama_rotation);
    case MethodKind::Q5_1:
      return make_ggml(GgmlType::Q5_1, config.llama_rotation);
    case MethodKind::IQ4_NL:
      return make_ggml(GgmlType::IQ4_NL, config.llama_rotation);
    case MethodKind::Nvfp4:
      return std::make_unique<Nvfp4DeviceQuantizer>();
    case MethodKind::Mxfp4:
      return std::make_unique<Mxfp4DeviceQuantizer>();
    default:
      return nullptr;
  }
}

}  // namespace kvlab::cuda
