// FP8 KV cache on the GPU, as vLLM's kv_cache_dtype=fp8 (vllm/attention/layer.py,
// calc_kv_scales; csrc/quantization/fp8/nvidia/quant_utils.cuh): the device half of the CPU's
// Fp8Quantizer and Fp8CalibratedQuantizer (engine/src/quant/fp8_quantizer.cpp), byte for byte.
//  - dynamic (calib_tokens 0): scale = max|x| / fp8_max per tensor or per head (1 where the max
//    is 0), code = fp8(x * (1 / scale));
//  - calibrated (calib_tokens > 0): scale = max|x| over the first calib_tokens tokens / 200 (keys)
//    or / 100 (values), code = fp8(x / scale) saturating, the clipped values (|x / scale| > max)
//    counted into bounds {calib tokens, count low 31 bits, count high bits}.
// x_hat = float(code) * scale. Three launches on the caller's stream: a per-head max|x| (block
// maxima, then atomicMax on the bits: non-negative floats order as their bit patterns), the
// scales in one thread (the CPU's float operations in its order), then the codes. The conversions
// are the CPU's own functions (quant/fp8_rules.h, __host__ __device__).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "device_quantizer.cuh"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/quant/fp8_rules.h"
#include "quant/fp8_calibrated.h"

namespace kvlab::cuda {

namespace {

constexpr int kThreads = 128;             // one block per row of `dim` values (128 in most models)
constexpr int kMaxAmaxBlocks = 1024;      // blocks per head for the max|x|
constexpr int kMaxRowBlocks = 8192;       // blocks for the codes and the reconstruction
constexpr int kMaxCalibTokens = 1 << 24;  // validate()'s limit (method.cpp kMaxWindow)

using detail::E4M3;
using detail::E5M2;

template <class T, class Op>
__device__ T block_reduce(T v, Op op) {
  __shared__ T s[kThreads];
  s[threadIdx.x] = v;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride)
      s[threadIdx.x] = op(s[threadIdx.x], s[threadIdx.x + stride]);
    __syncthreads();
  }
  return s[0];
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ unsigned long long operator()(unsigned long long a, unsigned long long b) const {
    return a + b;
  }
};

// amax_bits[h] = bits of max|x| over tokens [0, tokens) of head blockIdx.y (zeroed before).
__global__ void head_amax_kernel(const void* x, DType dtype, int tokens, int heads, int dim,
                                 unsigned int* amax_bits) {
  const int h = blockIdx.y;
  float m = 0.f;
  for (int t = blockIdx.x; t < tokens; t += gridDim.x) {
    const std::size_t base = (static_cast<std::size_t>(t) * heads + h) * dim;
    for (int d = threadIdx.x; d < dim; d += blockDim.x) {
      m = fmaxf(m, fabsf(load_element(x, dtype, base + d)));
    }
  }
  m = block_reduce(m, MaxOp{});
  if (threadIdx.x == 0) atomicMax(&amax_bits[h], __float_as_uint(m));
}

// scales[s] = a > 0 ? a / divisor : 1 and inv[s] = 1 / scales[s], with a the max of head s (per
// head) or of every head; as the CPU, in float.
__global__ void scales_kernel(const unsigned int* amax_bits, int heads, bool per_head, int n_scales,
                              float divisor, float* scales, float* inv) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  float all = 0.f;
  for (int h = 0; h < heads; ++h) all = fmaxf(all, __uint_as_float(amax_bits[h]));
  for (int s = 0; s < n_scales; ++s) {
    const float a = per_head ? __uint_as_float(amax_bits[s]) : all;
    const float scale = a > 0.f ? __fdiv_rn(a, divisor) : 1.f;
    scales[s] = scale;
    inv[s] = __fdiv_rn(1.f, scale);
  }
}

struct EncodeArgs {
  const void* x;
  DType dtype;
  std::size_t rows;  // tokens * heads
  int heads, dim;
  bool per_head;
  float top;  // fp8_max: |x / scale| above it is clipped
  std::uint8_t* codes;
  unsigned long long* clipped;
};

// codes[i] = fp8(x[i] / factor) (Divide) or fp8(x[i] * factor), factor of the row's head (per
// head) or factor[0]; with Count, adds how many have |x[i] / factor| > top to *clipped.
template <class F, bool Divide, bool Count>
__global__ void encode_kernel(EncodeArgs a, const float* factor) {
  unsigned long long n_clipped = 0;
  for (std::size_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const float f = factor[a.per_head ? row % a.heads : 0];
    const std::size_t base = row * a.dim;
    for (int d = threadIdx.x; d < a.dim; d += blockDim.x) {
      const float xi = load_element(a.x, a.dtype, base + d);
      // A NaN input passes through as x86's mul/div pass it, sign and all (CUDA's would give its
      // canonical NaN). Otherwise x * inf (x = 0) or 0 / 0: only a scale that underflowed to 0 (a
      // head of float32 values all below ~2^-141) makes a NaN here, and its sign reaches the code.
      const float v = isnan(xi) ? xi : x86_nan(Divide ? __fdiv_rn(xi, f) : __fmul_rn(xi, f));
      a.codes[base + d] = detail::fp8_encode<F>(v);
      if constexpr (Count) n_clipped += fabsf(v) > a.top ? 1u : 0u;
    }
  }
  if constexpr (Count) {
    n_clipped = block_reduce(n_clipped, SumOp{});
    if (threadIdx.x == 0 && n_clipped > 0) atomicAdd(a.clipped, n_clipped);
  }
}

unsigned row_blocks(std::size_t rows) {
  return static_cast<unsigned>(std::min<std::size_t>(rows, kMaxRowBlocks));
}

// Calibrated: x / scale, clipped values counted (vLLM divides); dynamic: x * (1 / scale), as the
// CPU's Fp8Quantizer multiplies by its inverse.
template <class F>
void launch_encode(const EncodeArgs& a, bool calibrated, const float* scales, const float* inv,
                   cudaStream_t stream) {
  if (calibrated) {
    encode_kernel<F, true, true><<<row_blocks(a.rows), kThreads, 0, stream>>>(a, scales);
  } else {
    encode_kernel<F, false, false><<<row_blocks(a.rows), kThreads, 0, stream>>>(a, inv);
  }
}

// out[i] = float(codes[i]) * scale of the row's head (per head) or scales[0].
template <class F>
__global__ void dequantize_kernel(const std::uint8_t* codes, std::size_t rows, int heads, int dim,
                                  bool per_head, const float* scales, float* out) {
  for (std::size_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const float scale = scales[per_head ? row % heads : 0];
    const std::size_t base = row * dim;
    for (int d = threadIdx.x; d < dim; d += blockDim.x) {
      const float c = detail::fp8_decode<F>(codes[base + d]);
      // x86 passes a NaN operand through (the CPU's m_table[c] * scale); the GPU would not.
      out[base + d] = c != c ? c : __fmul_rn(c, scale);
    }
  }
}

class Fp8DeviceQuantizer final : public DeviceQuantizer {
 public:
  Fp8DeviceQuantizer(Fp8Format format, bool per_head, int calib_tokens)
      : m_format(format), m_per_head(per_head), m_calib_tokens(calib_tokens) {}

  Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t stream) override {
    m_ready = false;
    KVLAB_TRY_STATUS(check_device_tensor(x, "fp8 device quantizer"));
    if (x.heads > 65535) {
      return make_error("fp8 device quantizer: " + std::to_string(x.heads) +
                        " KV heads, more than the 65535 a grid row takes");
    }
    const std::size_t n = x.elements();
    const bool calibrated = m_calib_tokens > 0;
    const int heads = x.heads;
    // The CPU's params: per head, or one scale (Fp8Quantizer pushes none without heads).
    const int n_scales = m_per_head ? heads : (calibrated || heads > 0 ? 1 : 0);
    KVLAB_TRY_STATUS(ensure_size(m_codes, n, "fp8 device quantizer: allocating codes"));
    KVLAB_TRY_STATUS(ensure_size(m_amax, std::max(heads, 1), "fp8 device quantizer: amax"));
    KVLAB_TRY_STATUS(ensure_size(m_scales, std::max(n_scales, 1), "fp8 device quantizer: scales"));
    KVLAB_TRY_STATUS(ensure_size(m_inv, std::max(n_scales, 1), "fp8 device quantizer: scales"));
    KVLAB_TRY_STATUS(ensure_size(m_clipped, 1, "fp8 device quantizer: clipped count"));
    KVLAB_CUDA_TRY(cudaMemsetAsync(m_amax.get(), 0, m_amax.bytes(), stream),
                   "fp8 device quantizer: zeroing amax");
    KVLAB_CUDA_TRY(cudaMemsetAsync(m_clipped.get(), 0, m_clipped.bytes(), stream),
                   "fp8 device quantizer: zeroing clipped count");

    const int amax_tokens = calibrated ? std::min(m_calib_tokens, x.tokens) : x.tokens;
    if (amax_tokens > 0 && heads > 0 && x.dim > 0) {
      const dim3 grid(static_cast<unsigned>(std::min(amax_tokens, kMaxAmaxBlocks)),
                      static_cast<unsigned>(heads));
      head_amax_kernel<<<grid, kThreads, 0, stream>>>(x.data, x.dtype, amax_tokens, heads, x.dim,
                                                      m_amax.get());
      KVLAB_CUDA_TRY(cudaGetLastError(), "fp8 device quantizer: max|x| launch");
    }
    const float top = fp8_max(m_format);
    const float divisor = !calibrated               ? top
                          : role == TensorRole::Key ? detail::kVllmKScaleConstant
                                                    : detail::kVllmVScaleConstant;
    scales_kernel<<<1, 1, 0, stream>>>(m_amax.get(), heads, m_per_head, n_scales, divisor,
                                       m_scales.get(), m_inv.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "fp8 device quantizer: scales launch");

    const std::size_t rows = static_cast<std::size_t>(x.tokens) * heads;
    if (rows > 0 && x.dim > 0) {
      const EncodeArgs a{x.data,     x.dtype, rows,          heads,          x.dim,
                         m_per_head, top,     m_codes.get(), m_clipped.get()};
      if (m_format == Fp8Format::E4M3) {
        launch_encode<E4M3>(a, calibrated, m_scales.get(), m_inv.get(), stream);
      } else {
        launch_encode<E5M2>(a, calibrated, m_scales.get(), m_inv.get(), stream);
      }
      KVLAB_CUDA_TRY(cudaGetLastError(), "fp8 device quantizer: encode launch");
    }
    m_role = role;
    m_tokens = x.tokens;
    m_heads = heads;
    m_dim = x.dim;
    m_n_scales = n_scales;
    m_calib = calibrated ? amax_tokens : 0;
    m_ready = true;
    return Ok{};
  }

  Status dequantize(float* out, cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor());
    const std::size_t rows = static_cast<std::size_t>(m_tokens) * m_heads;
    if (rows == 0 || m_dim == 0) return Ok{};
    if (out == nullptr) return make_error("fp8 device quantizer: null output for dequantize");
    const unsigned blocks = row_blocks(rows);
    if (m_format == Fp8Format::E4M3) {
      dequantize_kernel<E4M3><<<blocks, kThreads, 0, stream>>>(m_codes.get(), rows, m_heads, m_dim,
                                                               m_per_head, m_scales.get(), out);
    } else {
      dequantize_kernel<E5M2><<<blocks, kThreads, 0, stream>>>(m_codes.get(), rows, m_heads, m_dim,
                                                               m_per_head, m_scales.get(), out);
    }
    KVLAB_CUDA_TRY(cudaGetLastError(), "fp8 device quantizer: dequantize launch");
    return Ok{};
  }

  Result<std::vector<CodeHistogram>> histograms(cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor());
    const std::size_t n = elements();
    std::vector<std::uint64_t> counts(256, 0);
    if (n > 0) {
      auto c = count_byte_codes(m_codes.get(), n, 8, m_hist_scratch, stream);
      if (!c) return c.error();
      counts = std::move(*c);
    }
    std::vector<CodeHistogram> out;
    out.push_back(
        CodeHistogram{m_format == Fp8Format::E4M3 ? "fp8-e4m3" : "fp8-e5m2", 8, std::move(counts)});
    if (m_calib_tokens > 0) {
      auto clipped = read_clipped(stream);
      if (!clipped) return clipped.error();
      out.push_back(
          CodeHistogram{"clipped (saturated to the fp8 max)", 1, {n - *clipped, *clipped}});
    }
    return out;
  }

  ByteBreakdown bytes() const override {
    ByteBreakdown b;
    if (!m_ready) return b;
    b.codes = elements();
    b.scales = static_cast<std::uint64_t>(m_n_scales) * sizeof(float);  // fp32 scales
    b.metadata = kTensorHeaderBytes;
    return b;
  }

  Result<QuantizedTensor> download(cudaStream_t stream) override {
    KVLAB_TRY_STATUS(require_tensor());
    QuantizedTensor q{m_role, m_tokens, m_heads, m_dim, {}, {}, {}, {}, {}};
    q.codes.resize(elements());
    q.params.resize(static_cast<std::size_t>(m_n_scales));
    if (!q.codes.empty()) {
      KVLAB_CUDA_TRY(cudaMemcpyAsync(q.codes.data(), m_codes.get(), q.codes.size(),
                                     cudaMemcpyDeviceToHost, stream),
                     "fp8 device quantizer: downloading codes");
    }
    if (!q.params.empty()) {
      KVLAB_CUDA_TRY(
          cudaMemcpyAsync(q.params.data(), m_scales.get(), q.params.size() * sizeof(float),
                          cudaMemcpyDeviceToHost, stream),
          "fp8 device quantizer: downloading scales");
    }
    if (m_calib_tokens > 0) {
      auto clipped = read_clipped(stream);  // waits for the stream
      if (!clipped) return clipped.error();
      q.bounds = {m_calib, static_cast<int>(*clipped & 0x7fffffffu),
                  static_cast<int>(*clipped >> 31)};
    } else {
      KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "fp8 device quantizer: download");
    }
    q.bytes = bytes();
    return q;
  }

 private:
  std::size_t elements() const { return static_cast<std::size_t>(m_tokens) * m_heads * m_dim; }

  Status require_tensor() const {
    if (!m_ready) return make_error("fp8 device quantizer: no tensor quantized yet");
    return Ok{};
  }

  // The clipped count of the last tensor; waits for the stream.
  Result<std::uint64_t> read_clipped(cudaStream_t stream) {
    unsigned long long clipped = 0;
    KVLAB_CUDA_TRY(
        cudaMemcpyAsync(&clipped, m_clipped.get(), sizeof clipped, cudaMemcpyDeviceToHost, stream),
        "fp8 device quantizer: reading the clipped count");
    KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "fp8 device quantizer: clipped count");
    return static_cast<std::uint64_t>(clipped);
  }

  Fp8Format m_format;
  bool m_per_head;
  int m_calib_tokens;  // 0: dynamic scales
  bool m_ready = false;
  TensorRole m_role = TensorRole::Key;
  int m_tokens = 0, m_heads = 0, m_dim = 0, m_n_scales = 0, m_calib = 0;
  DeviceArray<std::uint8_t> m_codes;
  DeviceArray<unsigned int> m_amax;  // bits of each head's max|x|
  DeviceArray<float> m_scales;       // the params, in the CPU's order
  DeviceArray<float> m_inv;          // 1 / scale (dynamic mode's multiplier)
  DeviceArray<unsigned long long> m_clipped;
  DeviceArray<unsigned long long> m_hist_scratch;
};

}  // namespace

// Null for all but fp8-e4m3 / fp8-e5m2 as make_quantizer builds them unwrapped: a rotation wraps
// the CPU quantizer (rotated_quantizer.h), and the rest are configurations make_quantizer rejects.
std::unique_ptr<DeviceQuantizer> make_fp8_device_quantizer(const MethodConfig& config) {
  if (config.kind != MethodKind::Fp8E4M3 && config.kind != MethodKind::Fp8E5M2) return nullptr;
  if (config.rotation != RotationKind::None || config.rotate_values) return nullptr;
  if (config.param_dtype || config.codec) return nullptr;
  if (config.calib_tokens < 0 || config.calib_tokens > kMaxCalibTokens) return nullptr;
  const Fp8Format format = config.kind == MethodKind::Fp8E4M3 ? Fp8Format::E4M3 : Fp8Format::E5M2;
  return std::make_unique<Fp8DeviceQuantizer>(format, config.per_head_scale, config.calib_tokens);
}

}  // namespace kvlab::cuda
