// KVQuant on the GPU (Hooper et al. 2024, arXiv:2401.18079): the apply step of the CPU's
// KvQuantQuantizer (engine/src/quant/kvquant_quantizer.h, where the method and the stored layout
// are), byte for byte. Calibration (the key thresholds' percentiles, the k-means levels) stays on
// the host, as issue 44 allows: the tensor is read back once and calibrated by the CPU
// quantizer's own self_calibration(); the levels, their midpoints and the key ranges go up, and
// every entry is coded here by kvquant_rules.h, the functions the CPU quantizer codes with.
//
// The kernels, in order:
//  rows    the tensor as floats [tokens][heads * dim]; keys turned back before RoPE by
//          rope_rules::turn_pair at the angles the CPU turns each token by
//          (kvquant_key_rope_angles);
//  keys    one thread an entry: its code and whether it is an outlier;
//  values  one block a token: a bound for each tail from K = k + 1 groups' extremes (entry j in
//          group j mod K; the smallest group maximum is a K-th distinct entry or less, so every
//          one of the K strongest entries is at or above it), each entry past a bound ranked in
//          its tail (high_rank / low_rank), the (k+1)-th setting the range, rounded to fp16, and
//          every entry coded;
//  sparse  each token's outliers counted (a warp a token), scanned (CUB) into the CSR row
//          pointers, the count read back (quantize()'s one wait besides the calibration's), and
//          each token's outliers written in column order (a warp a token, by ballots);
//  sinks   the first tokens as fp16.
// Codes stay one byte each on the device; download() packs them as the CPU stores them.
#include <cub/cub.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codec/bitpack.h"
#include "device_quantizer.cuh"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/rope_rules.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/quant/kvquant_rules.h"
#include "launch_plan.cuh"
#include "quant/kvquant_quantizer.h"

namespace kvlab::cuda {

namespace {

namespace kr = kvquant_rules;

constexpr int kThreads = 256;
constexpr int kMaxMids = 255;  // 8 bits (the quantizer takes 2 to 8)

__device__ __forceinline__ std::size_t thread_index() {
  return blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
}
__device__ __forceinline__ std::size_t thread_count() {
  return static_cast<std::size_t>(gridDim.x) * blockDim.x;
}

__device__ __forceinline__ float fp16_value(std::uint16_t h) {
  return __half2float(__ushort_as_half(h));
}

// A float's bits as an int that orders as the float does (-0 just below +0), for integer atomics.
__device__ __forceinline__ int ordered(float v) {
  const int i = __float_as_int(v);
  return i >= 0 ? i : i ^ 0x7fffffff;
}
__device__ __forceinline__ float from_ordered(int i) {
  return __int_as_float(i >= 0 ? i : i ^ 0x7fffffff);
}

struct Rope {
  const float* cos = nullptr;  // [tokens][rotary_dims / 2]; null: no turn
  const float* sin = nullptr;
  int rotary_dims = 0;
  bool half_split = false;
};

// rows[i] = x[i] as float; key dims under RoPE turned by token t's angles (each thread computes
// its own element of the pair).
__global__ void rows_kernel(const void* x, DType dtype, int heads, int dim, std::size_t n,
                            Rope rope, float* rows) {
  const int half = rope.rotary_dims / 2;
  for (std::size_t i = thread_index(); i < n; i += thread_count()) {
    float v = load_element(x, dtype, i);
    const int d = static_cast<int>(i % dim);
    if (rope.cos != nullptr && d < rope.rotary_dims) {
      const std::size_t t = i / (static_cast<std::size_t>(heads) * dim);
      const int pair = rope.half_split ? (d < half ? d : d - half) : d / 2;
      const bool second = rope.half_split ? d >= half : (d & 1) != 0;
      const std::size_t head = i - d;
      float x0 = load_element(x, dtype, head + rope_rules::pair_first(pair, rope.half_split));
      float x1 = load_element(
          x, dtype, head + rope_rules::pair_second(pair, rope.rotary_dims, rope.half_split));
      const std::size_t at = t * half + pair;
      rope_rules::turn_pair(x0, x1, rope.cos[at], rope.sin[at]);
      v = second ? x1 : x0;
    }
    rows[i] = v;
  }
}

// Turns rows in place, a thread a pair (the reconstruction forward after RoPE).
__global__ void turn_kernel(float* rows, int tokens, int heads, int dim, Rope rope) {
  const int half = rope.rotary_dims / 2;
  const std::size_t n = static_cast<std::size_t>(tokens) * heads * half;
  for (std::size_t i = thread_index(); i < n; i += thread_count()) {
    const int pair = static_cast<int>(i % half);
    const std::size_t th = i / half;  // token * heads + head
    const std::size_t t = th / heads;
    float* x = rows + th * dim;
    const std::size_t at = t * half + pair;
    rope_rules::turn_pair(x[rope_rules::pair_first(pair, rope.half_split)],
                          x[rope_rules::pair_second(pair, rope.rotary_dims, rope.half_split)],
                          rope.cos[at], rope.sin[at]);
  }
}

__global__ void sinks_kernel(const float* rows, std::size_t n, std::uint16_t* sinks) {
  for (std::size_t i = thread_index(); i < n; i += thread_count())
    sinks[i] = float_to_fp16(rows[i]);
}

struct KeyArgs {
  const float* rows;  // from the first coded token
  std::size_t n;      // coded entries
  int channels;
  const float *inv, *bias, *lower, *upper;  // per channel
  const float* mids;
  int mid_count;
  bool sparse;
  std::uint8_t* codes;
  std::uint8_t* flags;
};

__global__ void key_codes_kernel(KeyArgs a) {
  __shared__ float mids[kMaxMids];
  for (int j = threadIdx.x; j < a.mid_count; j += blockDim.x) mids[j] = a.mids[j];
  __syncthreads();
  for (std::size_t i = thread_index(); i < a.n; i += thread_count()) {
    const int c = static_cast<int>(i % a.channels);
    const float v = a.rows[i];
    a.codes[i] = kr::entry_code(v, a.inv[c], a.bias[c], mids, a.mid_count);
    a.flags[i] = a.sparse && kr::key_outlier(v, a.lower[c], a.upper[c]) ? 1 : 0;
  }
}

struct ValueArgs {
  const float* rows;  // from the first coded token
  int tokens, channels, k;
  const float* mids;
  int mid_count;
  std::uint8_t* codes;
  std::uint8_t* flags;
  float *lower, *upper;  // per token, as stored (fp16 values)
};

// One block a token (dynamic shared memory: 2 (k + 1) ints, the groups' extremes).
__global__ void value_tails_kernel(ValueArgs a) {
  extern __shared__ int extremes[];
  __shared__ float mids[kMaxMids];
  __shared__ int tau_hi, tau_lo;
  __shared__ float kept_lower, kept_upper;
  const int K = a.k + 1, C = a.channels;
  int* gmax = extremes;
  int* gmin = extremes + K;
  for (int j = threadIdx.x; j < a.mid_count; j += blockDim.x) mids[j] = a.mids[j];
  for (int t = blockIdx.x; t < a.tokens; t += gridDim.x) {
    const float* row = a.rows + static_cast<std::size_t>(t) * C;
    for (int g = threadIdx.x; g < K; g += blockDim.x) {
      gmax[g] = ordered(-INFINITY);
      gmin[g] = ordered(INFINITY);
    }
    if (threadIdx.x == 0) {
      tau_hi = ordered(INFINITY);
      tau_lo = ordered(-INFINITY);
      kept_lower = kept_upper = 0.f;  // the CPU's range when no entry is a number
    }
    __syncthreads();
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
      const float v = row[j];
      if (v != v) continue;  // NaN: in neither tail
      atomicMax(&gmax[j % K], ordered(v));
      atomicMin(&gmin[j % K], ordered(v));
    }
    __syncthreads();
    int hi = ordered(INFINITY), lo = ordered(-INFINITY);
    for (int g = threadIdx.x; g < K; g += blockDim.x) {
      hi = min(hi, gmax[g]);
      lo = max(lo, gmin[g]);
    }
    atomicMin(&tau_hi, hi);
    atomicMax(&tau_lo, lo);
    __syncthreads();
    const float bound_hi = from_ordered(tau_hi), bound_lo = from_ordered(tau_lo);
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
      const float v = row[j];
      bool outlier = false;
      if (v >= bound_hi) {
        const int r = kr::high_rank(row, C, j);
        if (r < a.k) outlier = true;
        if (r == a.k) kept_upper = v;
      }
      if (v <= bound_lo) {
        const int r = kr::low_rank(row, C, j);
        if (r < a.k) outlier = true;
        if (r == a.k) kept_lower = v;
      }
      a.flags[static_cast<std::size_t>(t) * C + j] = outlier ? 1 : 0;
    }
    __syncthreads();
    const float lower = fp16_value(float_to_fp16(kept_lower));
    const float upper = fp16_value(float_to_fp16(kept_upper));
    float inv = 0.f, bias = 0.f;
    kr::normaliser(lower, upper, inv, bias);
    if (threadIdx.x == 0) {
      a.lower[t] = lower;
      a.upper[t] = upper;
    }
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
      a.codes[static_cast<std::size_t>(t) * C + j] =
          kr::entry_code(row[j], inv, bias, mids, a.mid_count);
    }
    __syncthreads();  // the shared state is the next token's
  }
}

__device__ __forceinline__ int warp_index() {
  return static_cast<int>((blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32);
}
__device__ __forceinline__ int warp_count() {
  return static_cast<int>(static_cast<std::size_t>(gridDim.x) * blockDim.x / 32);
}

// counts[t] = token t's outliers, a warp a token.
__global__ void row_counts_kernel(const std::uint8_t* flags, int tokens, int channels,
                                  int* counts) {
  const int lane = threadIdx.x % 32;
  for (int t = warp_index(); t < tokens; t += warp_count()) {
    int n = 0;
    for (int c = lane; c < channels; c += 32)
      n += flags[static_cast<std::size_t>(t) * channels + c];
    for (int o = 16; o > 0; o >>= 1) n += __shfl_down_sync(0xffffffffu, n, o);
    if (lane == 0) counts[t] = n;
  }
}

// Token t's outliers at row_ptr[t], in column order: columns and fp16 values.
__global__ void sparse_kernel(const float* rows, const std::uint8_t* flags, const int* row_ptr,
                              int tokens, int channels, int* cols, std::uint16_t* values) {
  const int lane = threadIdx.x % 32;
  for (int t = warp_index(); t < tokens; t += warp_count()) {
    int at = row_ptr[t];
    const std::size_t base = static_cast<std::size_t>(t) * channels;
    for (int c0 = 0; c0 < channels; c0 += 32) {
      const int c = c0 + lane;
      const bool f = c < channels && flags[base + c] != 0;
      const unsigned m = __ballot_sync(0xffffffffu, f);
      if (f) {
        const int p = at + __popc(m & ((1u << lane) - 1u));
        cols[p] = c;
        values[p] = float_to_fp16(rows[base + c]);
      }
      at += __popc(m);
    }
  }
}

// Counts of the dense codes, outliers left out (as the CPU's histograms()).
__global__ void histogram_kernel(const std::uint8_t* codes, const std::uint8_t* flags,
                                 std::size_t n, unsigned long long* bins) {
  __shared__ unsigned local[256];
  for (int j = threadIdx.x; j < 256; j += blockDim.x) local[j] = 0;
  __syncthreads();
  for (std::size_t i = thread_index(); i < n; i += thread_count()) {
    if (!flags[i]) atomicAdd(&local[codes[i]], 1u);
  }
  __syncthreads();
  for (int j = threadIdx.x; j < 256; j += blockDim.x) {
    if (local[j]) atomicAdd(&bins[j], static_cast<unsigned long long>(local[j]));
  }
}

struct DequantArgs {
  const std::uint8_t* codes;
  const std::uint16_t* sinks;
  const float* levels;
  const float *lower, *upper;  // per channel (keys) or per coded token (values)
  bool key;
  int sink_tokens, channels;
  std::size_t n;  // tokens * channels
  float* out;
};

// The CPU's dequantize(): level * scale + offset of the entry's range; sinks from fp16.
__global__ void dequant_kernel(DequantArgs a) {
  const std::size_t first = static_cast<std::size_t>(a.sink_tokens) * a.channels;
  for (std::size_t i = thread_index(); i < a.n; i += thread_count()) {
    if (i < first) {
      a.out[i] = fp16_value(a.sinks[i]);
      continue;
    }
    const std::size_t q = i - first;
    const std::size_t unit = a.key ? q % a.channels : q / a.channels;
    const float lo = a.lower[unit], up = a.upper[unit];
    const float scale = 0.5f * (up - lo), offset = 0.5f * (up + lo);
    a.out[i] = a.levels[a.codes[q]] * scale + offset;
  }
}

// The sparse entries over the dense reconstruction, a warp a token.
__global__ void sparse_out_kernel(const int* row_ptr, const int* cols, const std::uint16_t* values,
                                  int tokens, int sink_tokens, int channels, float* out) {
  const int lane = threadIdx.x % 32;
  for (int t = warp_index(); t < tokens; t += warp_count()) {
    float* row = out + static_cast<std::size_t>(sink_tokens + t) * channels;
    for (int j = row_ptr[t] + lane; j < row_ptr[t + 1]; j += 32)
      row[cols[j]] = fp16_value(values[j]);
  }
}

unsigned warp_grid(int tokens) {
  return static_cast<unsigned>(
      std::min(std::max((tokens + 7) / 8, 1), 1 << 16));  // 8 warps a block
}

class KvQuantDeviceQuantizer final : public DeviceQuantizer {
 public:
  explicit KvQuantDeviceQuantizer(const detail::KvQuantConfig& config) : m_cpu(config) {}

  Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t s) override;
  Status dequantize(float* out, cudaStream_t s) override;
  Result<std::vector<CodeHistogram>> histograms(cudaStream_t s) override;
  Result<QuantizedTensor> download(cudaStream_t s) override;
  ByteBreakdown bytes() const override {
    if (!m_ready) return {};
    const detail::KvQuantConfig& c = m_cpu.config();
    return detail::kvquant_bytes(m_role, m_tokens, m_heads, m_dim, c.sink_tokens, c.bits, m_nnz);
  }

 private:
  Status require_tensor() const {
    if (!m_ready) return make_error("kvquant device quantizer: no tensor quantized yet");
    return Ok{};
  }
  std::size_t channels() const { return static_cast<std::size_t>(m_heads) * m_dim; }
  int coded_tokens() const { return m_tokens - m_sinks; }
  Rope rope(bool inverse) const {
    Rope r;
    if (!m_turn) return r;
    const std::size_t table = static_cast<std::size_t>(m_tokens) * (m_rotary / 2);
    r.cos = m_angles.get() + (inverse ? 0 : 2 * table);
    r.sin = r.cos + table;
    r.rotary_dims = m_rotary;
    r.half_split = m_half_split;
    return r;
  }

  detail::KvQuantQuantizer m_cpu;  // its configuration and calibration
  bool m_ready = false;
  TensorRole m_role = TensorRole::Key;
  int m_tokens = 0, m_heads = 0, m_dim = 0, m_sinks = 0, m_rotary = 0;
  bool m_turn = false, m_half_split = false;
  std::size_t m_nnz = 0;
  // On the host: the levels and the key ranges (download()'s parameters), and what goes up
  // (kept until the next quantize(), beyond the asynchronous copies).
  std::vector<float> m_levels, m_consts, m_host_angles;
  detail::KvQuantKeyRanges m_keys;
  // On the device: levels, midpoints, then (keys) inv, bias, lower, upper per channel.
  DeviceArray<float> m_dev_consts, m_angles, m_rows, m_token_lower, m_token_upper;
  DeviceArray<std::uint8_t> m_codes, m_flags, m_cub_temp;
  DeviceArray<int> m_counts, m_row_ptr, m_cols;
  DeviceArray<std::uint16_t> m_sink_values, m_sparse_values;
  DeviceArray<unsigned long long> m_bins;
};

Status KvQuantDeviceQuantizer::quantize(const DeviceTensor& x, TensorRole role, cudaStream_t s) {
  m_ready = false;
  KVLAB_TRY_STATUS(check_device_tensor(x, "kvquant device quantizer"));
  const detail::KvQuantConfig& cfg = m_cpu.config();
  KVLAB_TRY_STATUS(detail::check_kvquant_config(cfg));
  const int T = x.tokens, H = x.heads, D = x.dim;
  const std::size_t C = static_cast<std::size_t>(H) * D, n = x.elements();
  const bool key = role == TensorRole::Key;

  // The calibration: the CPU quantizer's own, on the tensor read back.
  Tensor host = Tensor::uninitialized(x.dtype, T, H, D);
  if (n > 0) {
    KVLAB_CUDA_TRY(
        cudaMemcpyAsync(host.mutable_data(), x.data, host.nbytes(), cudaMemcpyDeviceToHost, s),
        "GPU KVQuant: reading the tensor back for its calibration");
    KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU KVQuant: reading the tensor back");
  }
  auto cal = m_cpu.self_calibration(host.view(), role);
  if (!cal) return cal.error();
  m_turn = key && m_cpu.keys_pre_rope();
  if (m_turn) {
    if (auto ok = cfg.rope.check(T, D); !ok) return make_error("kvquant keys: " + ok.message());
  }
  const int bits = cfg.bits, L = 1 << bits;
  if (cal->levels.size() != static_cast<std::size_t>(L) || L - 1 > kMaxMids) {
    return make_error("kvquant device quantizer: the calibration has " +
                      std::to_string(cal->levels.size()) + " levels for " + std::to_string(bits) +
                      " bits");
  }
  const int S = std::min(cfg.sink_tokens, T), Tq = T - S;
  const std::size_t coded = static_cast<std::size_t>(Tq) * C;
  const int k = detail::outliers_per_side(cfg.outlier_fraction, static_cast<int>(C));

  // Constants: levels, midpoints, and the keys' ranges as the CPU derives them.
  m_levels = cal->levels;
  const std::vector<float> mids = detail::kvquant_midpoints(cal->levels);
  m_consts = m_levels;
  m_consts.insert(m_consts.end(), mids.begin(), mids.end());
  m_keys = key ? detail::kvquant_key_ranges(*cal) : detail::KvQuantKeyRanges{};
  for (const auto* v : {&m_keys.inv, &m_keys.bias, &m_keys.lower, &m_keys.upper})
    m_consts.insert(m_consts.end(), v->begin(), v->end());
  KVLAB_TRY_STATUS(ensure_size(m_dev_consts, m_consts.size(), "GPU KVQuant: constants"));
  KVLAB_CUDA_TRY(cudaMemcpyAsync(m_dev_consts.get(), m_consts.data(),
                                 m_consts.size() * sizeof(float), cudaMemcpyHostToDevice, s),
                 "GPU KVQuant: uploading the levels");
  const float* d_levels = m_dev_consts.get();
  const float* d_mids = d_levels + L;
  const float* d_key = d_mids + (L - 1);  // inv, bias, lower, upper: C each

  // RoPE's angles, back (as quantize() turns) and forward (as dequantize() turns).
  m_rotary = m_turn ? cfg.rope.rotary_dims : 0;
  m_half_split = cfg.rope.half_split;
  m_tokens = T;
  if (m_turn && m_rotary > 0 && T > 0) {
    const std::size_t table = static_cast<std::size_t>(T) * (m_rotary / 2);
    m_host_angles.assign(4 * table, 0.f);
    float* a = m_host_angles.data();
    detail::kvquant_key_rope_angles(cfg.rope, T, S, /*inverse=*/true, a, a + table);
    detail::kvquant_key_rope_angles(cfg.rope, T, S, /*inverse=*/false, a + 2 * table,
                                    a + 3 * table);
    KVLAB_TRY_STATUS(ensure_size(m_angles, m_host_angles.size(), "GPU KVQuant: RoPE angles"));
    KVLAB_CUDA_TRY(cudaMemcpyAsync(m_angles.get(), a, m_host_angles.size() * sizeof(float),
                                   cudaMemcpyHostToDevice, s),
                   "GPU KVQuant: uploading RoPE angles");
  } else {
    m_turn = false;
  }

  KVLAB_TRY_STATUS(ensure_size(m_rows, std::max<std::size_t>(n, 1), "GPU KVQuant: rows"));
  KVLAB_TRY_STATUS(ensure_size(m_codes, std::max<std::size_t>(coded, 1), "GPU KVQuant: codes"));
  KVLAB_TRY_STATUS(ensure_size(m_flags, std::max<std::size_t>(coded, 1), "GPU KVQuant: flags"));
  KVLAB_TRY_STATUS(ensure_size(m_sink_values, std::max<std::size_t>(S * C, 1), "GPU KVQuant"));
  KVLAB_TRY_STATUS(ensure_size(m_counts, std::max(Tq, 1), "GPU KVQuant: outlier counts"));
  KVLAB_TRY_STATUS(ensure_size(m_row_ptr, static_cast<std::size_t>(Tq) + 1, "GPU KVQuant"));
  if (!key) {
    KVLAB_TRY_STATUS(ensure_size(m_token_lower, std::max(Tq, 1), "GPU KVQuant: ranges"));
    KVLAB_TRY_STATUS(ensure_size(m_token_upper, std::max(Tq, 1), "GPU KVQuant: ranges"));
  }

  if (n > 0) {
    rows_kernel<<<stride_grid(n, kThreads), kThreads, 0, s>>>(x.data, x.dtype, H, D, n, rope(true),
                                                              m_rows.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: rows");
  }
  const std::size_t sink_entries = static_cast<std::size_t>(S) * C;
  if (sink_entries > 0) {
    sinks_kernel<<<stride_grid(sink_entries, kThreads), kThreads, 0, s>>>(
        m_rows.get(), sink_entries, m_sink_values.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: sinks");
  }
  const float* coded_rows = m_rows.get() + sink_entries;
  if (coded > 0 && key) {
    const KeyArgs a{coded_rows,
                    coded,
                    static_cast<int>(C),
                    d_key,
                    d_key + C,
                    d_key + 2 * C,
                    d_key + 3 * C,
                    d_mids,
                    L - 1,
                    cfg.outlier_fraction > 0.0,
                    m_codes.get(),
                    m_flags.get()};
    key_codes_kernel<<<stride_grid(coded, kThreads), kThreads, 0, s>>>(a);
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: key codes");
  } else if (coded > 0) {
    const std::size_t smem = 2 * static_cast<std::size_t>(k + 1) * sizeof(int);
    cudaFuncAttributes attributes{};
    KVLAB_CUDA_TRY(cudaFuncGetAttributes(&attributes, value_tails_kernel),
                   "GPU KVQuant: value tails");
    if (smem + attributes.sharedSizeBytes > smem_optin()) {  // beside its static tables
      return make_error("kvquant device quantizer: " + std::to_string(k) +
                        " outliers a side of a token of " + std::to_string(C) +
                        " entries need more shared memory than this GPU has");
    }
    static std::size_t opted = 0;
    KVLAB_CUDA_TRY(allow_dynamic_smem(value_tails_kernel, smem, opted), "GPU KVQuant: value tails");
    const ValueArgs a{coded_rows,
                      Tq,
                      static_cast<int>(C),
                      k,
                      d_mids,
                      L - 1,
                      m_codes.get(),
                      m_flags.get(),
                      m_token_lower.get(),
                      m_token_upper.get()};
    value_tails_kernel<<<static_cast<unsigned>(std::min(Tq, 1 << 20)), kThreads, smem, s>>>(a);
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: value tails");
  }

  // The sparse table: row pointers by a scan of each token's count, then the entries.
  KVLAB_CUDA_TRY(cudaMemsetAsync(m_row_ptr.get(), 0, sizeof(int), s), "GPU KVQuant: rows");
  int nnz = 0;
  if (coded > 0) {
    row_counts_kernel<<<warp_grid(Tq), kThreads, 0, s>>>(m_flags.get(), Tq, static_cast<int>(C),
                                                         m_counts.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: outlier counts");
    std::size_t temp = 0;
    KVLAB_CUDA_TRY(
        cub::DeviceScan::InclusiveSum(nullptr, temp, m_counts.get(), m_row_ptr.get() + 1, Tq, s),
        "GPU KVQuant: scan");
    KVLAB_TRY_STATUS(ensure_size(m_cub_temp, std::max<std::size_t>(temp, 1), "GPU KVQuant"));
    KVLAB_CUDA_TRY(cub::DeviceScan::InclusiveSum(m_cub_temp.get(), temp, m_counts.get(),
                                                 m_row_ptr.get() + 1, Tq, s),
                   "GPU KVQuant: scan");
    KVLAB_CUDA_TRY(
        cudaMemcpyAsync(&nnz, m_row_ptr.get() + Tq, sizeof nnz, cudaMemcpyDeviceToHost, s),
        "GPU KVQuant: reading the outlier count");
    KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU KVQuant: outlier count");
  }
  if (nnz < 0) return make_error("kvquant device quantizer: more outliers than an int counts");
  m_nnz = static_cast<std::size_t>(nnz);
  if (m_nnz > 0) {
    KVLAB_TRY_STATUS(ensure_size(m_cols, m_nnz, "GPU KVQuant: sparse columns"));
    KVLAB_TRY_STATUS(ensure_size(m_sparse_values, m_nnz, "GPU KVQuant: sparse values"));
    sparse_kernel<<<warp_grid(Tq), kThreads, 0, s>>>(coded_rows, m_flags.get(), m_row_ptr.get(), Tq,
                                                     static_cast<int>(C), m_cols.get(),
                                                     m_sparse_values.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: sparse entries");
  }
  m_role = role;
  m_heads = H;
  m_dim = D;
  m_sinks = S;
  m_ready = true;
  return Ok{};
}

Status KvQuantDeviceQuantizer::dequantize(float* out, cudaStream_t s) {
  KVLAB_TRY_STATUS(require_tensor());
  const std::size_t C = channels(), n = static_cast<std::size_t>(m_tokens) * C;
  if (n == 0) return Ok{};
  if (out == nullptr) return make_error("kvquant device quantizer: null output");
  const bool key = m_role == TensorRole::Key;
  const int L = 1 << m_cpu.config().bits;
  const float* d_key = m_dev_consts.get() + L + (L - 1);
  const DequantArgs a{m_codes.get(),
                      m_sink_values.get(),
                      m_dev_consts.get(),
                      key ? d_key + 2 * C : m_token_lower.get(),
                      key ? d_key + 3 * C : m_token_upper.get(),
                      key,
                      m_sinks,
                      static_cast<int>(C),
                      n,
                      out};
  dequant_kernel<<<stride_grid(n, kThreads), kThreads, 0, s>>>(a);
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: dequantizing");
  if (m_nnz > 0) {
    sparse_out_kernel<<<warp_grid(coded_tokens()), kThreads, 0, s>>>(
        m_row_ptr.get(), m_cols.get(), m_sparse_values.get(), coded_tokens(), m_sinks,
        static_cast<int>(C), out);
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: sparse entries");
  }
  if (m_turn) {
    const std::size_t pairs = static_cast<std::size_t>(m_tokens) * m_heads * (m_rotary / 2);
    if (pairs > 0) {
      turn_kernel<<<stride_grid(pairs, kThreads), kThreads, 0, s>>>(out, m_tokens, m_heads, m_dim,
                                                                    rope(false));
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: RoPE");
    }
  }
  return Ok{};
}

Result<std::vector<CodeHistogram>> KvQuantDeviceQuantizer::histograms(cudaStream_t s) {
  KVLAB_TRY_STATUS(require_tensor());
  const detail::KvQuantConfig& cfg = m_cpu.config();
  const int bits = cfg.bits;
  CodeHistogram h{"kvquant " + std::string(role_name(m_role)) + " " +
                      (cfg.levels == detail::KvQuantLevels::KMeans ? "nuq" : "nf") +
                      std::to_string(bits),
                  bits, std::vector<std::uint64_t>(std::size_t{1} << bits, 0)};
  const std::size_t coded = static_cast<std::size_t>(coded_tokens()) * channels();
  if (coded > 0) {
    KVLAB_TRY_STATUS(ensure_size(m_bins, 256, "GPU KVQuant: histogram"));
    KVLAB_CUDA_TRY(cudaMemsetAsync(m_bins.get(), 0, 256 * sizeof(unsigned long long), s),
                   "GPU KVQuant: histogram");
    histogram_kernel<<<std::min(stride_grid(coded, kThreads), 4096u), kThreads, 0, s>>>(
        m_codes.get(), m_flags.get(), coded, m_bins.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU KVQuant: histogram");
    unsigned long long c[256];
    KVLAB_CUDA_TRY(cudaMemcpyAsync(c, m_bins.get(), sizeof c, cudaMemcpyDeviceToHost, s),
                   "GPU KVQuant: histogram");
    KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU KVQuant: histogram");
    for (std::size_t i = 0; i < h.counts.size(); ++i) h.counts[i] = c[i];
  }
  return std::vector<CodeHistogram>{std::move(h)};
}

Result<QuantizedTensor> KvQuantDeviceQuantizer::download(cudaStream_t s) {
  KVLAB_TRY_STATUS(require_tensor());
  const detail::KvQuantConfig& cfg = m_cpu.config();
  const int Tq = coded_tokens();
  const std::size_t C = channels(), coded = static_cast<std::size_t>(Tq) * C;
  const std::size_t sink_entries = static_cast<std::size_t>(m_sinks) * C;
  const bool key = m_role == TensorRole::Key;
  std::vector<std::uint8_t> codes(coded);
  std::vector<float> lower(key ? 0 : Tq), upper(key ? 0 : Tq);
  std::vector<std::uint16_t> residual(sink_entries + m_nnz);
  std::vector<int> row_ptr(static_cast<std::size_t>(Tq) + 1), cols(m_nnz);
  const auto get = [&](void* dst, const void* src, std::size_t bytes) -> Status {
    if (bytes == 0) return Ok{};
    KVLAB_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s),
                   "GPU KVQuant: download");
    return Ok{};
  };
  KVLAB_TRY_STATUS(get(codes.data(), m_codes.get(), coded));
  if (!key) {
    KVLAB_TRY_STATUS(get(lower.data(), m_token_lower.get(), Tq * sizeof(float)));
    KVLAB_TRY_STATUS(get(upper.data(), m_token_upper.get(), Tq * sizeof(float)));
  }
  KVLAB_TRY_STATUS(get(residual.data(), m_sink_values.get(), sink_entries * 2));
  KVLAB_TRY_STATUS(get(residual.data() + sink_entries, m_sparse_values.get(), m_nnz * 2));
  KVLAB_TRY_STATUS(get(row_ptr.data(), m_row_ptr.get(), row_ptr.size() * sizeof(int)));
  KVLAB_TRY_STATUS(get(cols.data(), m_cols.get(), m_nnz * sizeof(int)));
  KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU KVQuant: download");

  QuantizedTensor q{m_role, m_tokens, m_heads, m_dim, {}, {}, {}, {}, {}};
  q.codes.assign(detail::packed_bytes(coded, cfg.bits), 0);
  detail::kvquant_pack(codes.data(), coded, cfg.bits, q.codes.data(), 0);
  q.params = m_levels;
  // Then the ranges' lower and upper ends: per channel (keys) or per coded token (values).
  const std::vector<float>& lo = key ? m_keys.lower : lower;
  const std::vector<float>& up = key ? m_keys.upper : upper;
  q.params.insert(q.params.end(), lo.begin(), lo.end());
  q.params.insert(q.params.end(), up.begin(), up.end());
  q.residual = std::move(residual);
  q.bounds = {m_sinks, static_cast<int>(m_nnz)};
  q.bounds.insert(q.bounds.end(), row_ptr.begin(), row_ptr.end());
  q.bounds.insert(q.bounds.end(), cols.begin(), cols.end());
  q.bytes = bytes();
  return q;
}

}  // namespace

std::unique_ptr<DeviceQuantizer> make_kvquant_device_quantizer(const MethodConfig& config) {
  if (config.kind != MethodKind::KvQuant) return nullptr;
  return std::make_unique<KvQuantDeviceQuantizer>(detail::kvquant_config(config));
}

}  // namespace kvlab::cuda
