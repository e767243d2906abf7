// The group family on the GPU: per-tensor symmetric INT8 / INT4 (symmetric_quantizer.cpp), the
// age tiers with KIVI as their one-tier case (tiered_quantizer.cpp, kivi_quantizer.cpp) and
// KVComp's blockwise quantizer (kvcomp_quantizer.cpp). Every code and parameter comes from
// group_rules.h, the rules the CPU quantizers call, so the bytes are theirs. Codes stay one byte
// each on the device (the entropy coder and the dequantizer read them so); download() packs them
// as the CPU does (bitpack.h).
//
// Kernels: the group passes are group_quantize.cu's; the symmetric scale comes from a max-|x|
// reduction kept on the device (no round trip to the host).
#include <algorithm>
#include <string>
#include <vector>

#include "code_encode.cuh"
#include "codec/bitpack.h"
#include "device_quantizer.cuh"
#include "group_quantize.cuh"
#include "kvlab/engine/quant/group_rules.h"
#include "launch_plan.cuh"
#include "quant/group_quant.h"
#include "quant/quantizers.h"

namespace kvlab::cuda {

namespace {

constexpr std::uint64_t kHeaderBytes = 16;  // kTensorHeaderBytes: shape and method, 4 x u32

// ---- symmetric -------------------------------------------------------------------------------

// max |x| over the tensor, as the bits of a non-negative float (ordered as the floats are).
__global__ void amax_kernel(const void* x, DType dtype, std::size_t n, unsigned* amax_bits) {
  float m = 0.f;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    m = fmaxf(m, fabsf(load_element(x, dtype, i)));
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) atomicMax(amax_bits, __float_as_uint(m));
}

__global__ void symmetric_codes_kernel(const void* x, DType dtype, std::size_t n,
                                       const unsigned* amax_bits, int bits, std::uint8_t* codes,
                                       float* scale_out) {
  const float scale = rules::symmetric_scale(__uint_as_float(*amax_bits), bits);
  const float inv = 1.f / scale;
  if (blockIdx.x == 0 && threadIdx.x == 0) *scale_out = scale;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    codes[i] = rules::symmetric_code(load_element(x, dtype, i), inv, bits);
  }
}

__global__ void symmetric_dequant_kernel(const std::uint8_t* codes, std::size_t n,
                                         const float* scale_in, int bits, float* out) {
  const float scale = *scale_in;
  const float offset = static_cast<float>(1 << (bits - 1));
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = (static_cast<float>(codes[i]) - offset) * scale;
  }
}

// The residual: stored values as fp16 (float_to_fp16 of the converted value), and back.
__global__ void residual_kernel(const void* x, DType dtype, std::size_t n, std::uint16_t* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = __half_as_ushort(__float2half_rn(load_element(x, dtype, i)));
  }
}

__global__ void residual_dequant_kernel(const std::uint16_t* in, std::size_t n, float* out) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    out[i] = __half2float(__ushort_as_half(in[i]));
  }
}

enum class Family { Symmetric, Tiered, KvComp };

class GroupDeviceQuantizer final : public DeviceQuantizer {
 public:
  GroupDeviceQuantizer(Family family, const MethodConfig& c) : m_family(family) {
    m_params = method_param_dtype(c);
    switch (family) {
      case Family::Symmetric:
        m_bits = c.kind == MethodKind::Int8 ? 8 : 4;
        break;
      case Family::Tiered:  // tiered_quantizer.cpp's tiers, as make_quantizer builds them
        m_tiers = c.kind == MethodKind::Kivi
                      ? std::vector<detail::AgeTier>{{c.bits, 0}}
                      : std::vector<detail::AgeTier>{{c.old_bits, 0}, {8, c.int8_tokens}};
        m_group = c.group_size;
        m_residual = c.residual;
        break;
      case Family::KvComp:
        m_group = c.block_size;
        m_rel = c.rel_scale;
        break;
    }
  }

  Status quantize(const DeviceTensor& x, TensorRole role, cudaStream_t s) override;
  Status dequantize(float* out, cudaStream_t s) override;
  Result<std::vector<CodeHistogram>> histograms(cudaStream_t s) override;
  ByteBreakdown bytes() const override { return m_bytes; }
  Result<QuantizedTensor> download(cudaStream_t s) override;
  const std::uint8_t* byte_codes() const override {
    return m_family == Family::KvComp ? m_codes.get() : nullptr;
  }

 private:
  // Token boundaries as the CPU's tiered quantizer cuts them (quantizers.h).
  std::vector<int> boundaries(int tokens) const {
    return detail::age_tier_boundaries(m_tiers, m_group, m_residual, tokens);
  }
  // The group spec of a tier (or of KVComp), as the CPU quantizers build it.
  detail::GroupSpec spec(int bits) const {
    return m_family == Family::KvComp ? detail::kvcomp_group_spec(m_group, m_rel, m_params)
                                      : detail::tier_group_spec(bits, m_group, m_params);
  }
  // Its arguments for `tokens` tokens of the tensor, without pointers.
  GroupArgs args(int bits, int tokens) const {
    return group_args(spec(bits), m_x.dtype, tokens, m_x.heads, m_x.dim);
  }
  std::size_t units(const GroupArgs& a) const { return group_units(a, m_role); }
  // Each group pass (KVComp: one; tiers: one per tier) with its token range and pointers.
  struct Pass {
    GroupArgs a;
    int first = 0;
  };
  std::vector<Pass> passes() const;

  Family m_family;
  DType m_params = DType::F32;
  int m_bits = 8;
  std::vector<detail::AgeTier> m_tiers;
  int m_group = 32, m_residual = 0;
  double m_rel = 0.05;

  DeviceTensor m_x;
  TensorRole m_role = TensorRole::Key;
  std::vector<int> m_bounds;
  ByteBreakdown m_bytes;
  std::size_t m_param_floats = 0, m_residual_values = 0;
  DeviceArray<std::uint8_t> m_codes;           // one byte a code, [tokens][heads][dim]
  DeviceArray<float> m_param;                  // symmetric: the scale; groups: CPU order
  DeviceArray<unsigned> m_amax;                // symmetric
  DeviceArray<std::uint16_t> m_residual_fp16;  // tiers: the newest tokens
  DeviceArray<unsigned long long> m_counts;
};

std::vector<GroupDeviceQuantizer::Pass> GroupDeviceQuantizer::passes() const {
  std::vector<Pass> out;
  float* params = m_param.get();
  const std::size_t hd = static_cast<std::size_t>(m_x.heads) * m_x.dim;
  const auto add = [&](int bits, int t0, int t1) {
    Pass p{args(bits, t1 - t0), t0};
    const std::size_t u = units(p.a);
    p.a.x = static_cast<const char*>(m_x.data) +
            static_cast<std::size_t>(t0) * hd * dtype_size(m_x.dtype);
    p.a.codes = m_codes.get() + static_cast<std::size_t>(t0) * hd;
    p.a.steps = params;
    p.a.mins = params + u;
    params += 2 * u;
    out.push_back(p);
  };
  if (m_family == Family::KvComp) {
    add(8, 0, m_x.tokens);
  } else {
    for (std::size_t i = 0; i < m_tiers.size(); ++i)
      add(m_tiers[i].bits, m_bounds[i], m_bounds[i + 1]);
  }
  return out;
}

Status GroupDeviceQuantizer::quantize(const DeviceTensor& x, TensorRole role, cudaStream_t s) {
  KVLAB_TRY_STATUS(check_device_tensor(x, "group device quantizer"));
  m_x = x;
  m_role = role;
  const std::size_t n = x.elements();
  const std::size_t hd = static_cast<std::size_t>(x.heads) * x.dim;
  KVLAB_TRY_STATUS(ensure_size(m_codes, std::max<std::size_t>(n, 1), "GPU quantize: codes"));
  m_bytes = ByteBreakdown{};
  m_bytes.metadata = kHeaderBytes;
  if (m_family == Family::Symmetric) {
    KVLAB_TRY_STATUS(ensure_size(m_amax, 1, "GPU quantize: max"));
    KVLAB_TRY_STATUS(ensure_size(m_param, 1, "GPU quantize: scale"));
    KVLAB_CUDA_TRY(cudaMemsetAsync(m_amax.get(), 0, sizeof(unsigned), s), "GPU quantize: max");
    if (n > 0) {
      amax_kernel<<<stride_grid(n, 256), 256, 0, s>>>(x.data, x.dtype, n, m_amax.get());
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU quantize: max |x|");
    }
    symmetric_codes_kernel<<<stride_grid(n, 256), 256, 0, s>>>(
        x.data, x.dtype, n, m_amax.get(), m_bits, m_codes.get(), m_param.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU quantize: symmetric codes");
    m_param_floats = 1;
    m_bytes.codes = detail::packed_bytes(n, m_bits);
    m_bytes.scales = sizeof(float);
    return Ok{};
  }
  // Groups: sizes first, then one pass per tier (or KVComp's one).
  m_bounds = m_family == Family::Tiered ? boundaries(x.tokens) : std::vector<int>{};
  std::size_t total_units = 0, code_bytes = 0;
  if (m_family == Family::KvComp) {
    total_units = units(args(8, x.tokens));
    code_bytes = n;
  } else {
    for (std::size_t i = 0; i < m_tiers.size(); ++i) {
      const int rows = m_bounds[i + 1] - m_bounds[i];
      total_units += units(args(m_tiers[i].bits, rows));
      code_bytes += detail::packed_bytes(static_cast<std::size_t>(rows) * hd, m_tiers[i].bits);
    }
  }
  m_param_floats = 2 * total_units;
  KVLAB_TRY_STATUS(
      ensure_size(m_param, std::max<std::size_t>(m_param_floats, 1), "GPU quantize: parameters"));
  for (const Pass& p : passes()) {
    KVLAB_CUDA_TRY(launch_group_quantize(p.a, role, s), "GPU quantize: groups");
  }
  m_residual_values = 0;
  if (m_family == Family::Tiered) {
    const int r0 = m_bounds[m_tiers.size()];
    m_residual_values = static_cast<std::size_t>(x.tokens - r0) * hd;
    if (m_residual_values > 0) {
      KVLAB_TRY_STATUS(ensure_size(m_residual_fp16, m_residual_values, "GPU quantize: residual"));
      residual_kernel<<<stride_grid(m_residual_values, 256), 256, 0, s>>>(
          static_cast<const char*>(x.data) +
              static_cast<std::size_t>(r0) * hd * dtype_size(x.dtype),
          x.dtype, m_residual_values, m_residual_fp16.get());
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU quantize: residual");
    }
    m_bytes.residual = m_residual_values * sizeof(std::uint16_t);
    m_bytes.metadata += m_bounds.size() * sizeof(std::uint32_t);
  }
  m_bytes.codes = code_bytes;
  m_bytes.scales = total_units * dtype_size(m_params);
  m_bytes.zero_points = total_units * dtype_size(m_params);
  return Ok{};
}

Status GroupDeviceQuantizer::dequantize(float* out, cudaStream_t s) {
  const std::size_t n = m_x.elements();
  if (n == 0) return Ok{};
  if (m_family == Family::Symmetric) {
    symmetric_dequant_kernel<<<stride_grid(n, 256), 256, 0, s>>>(m_codes.get(), n, m_param.get(),
                                                                 m_bits, out);
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU dequantize: symmetric");
    return Ok{};
  }
  const std::size_t hd = static_cast<std::size_t>(m_x.heads) * m_x.dim;
  for (const Pass& p : passes()) {
    KVLAB_CUDA_TRY(
        launch_group_dequantize(p.a, m_role, out + static_cast<std::size_t>(p.first) * hd, s),
        "GPU dequantize: groups");
  }
  if (m_residual_values > 0) {
    const int r0 = m_bounds[m_tiers.size()];
    residual_dequant_kernel<<<stride_grid(m_residual_values, 256), 256, 0, s>>>(
        m_residual_fp16.get(), m_residual_values, out + static_cast<std::size_t>(r0) * hd);
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU dequantize: residual");
  }
  return Ok{};
}

Result<std::vector<CodeHistogram>> GroupDeviceQuantizer::histograms(cudaStream_t s) {
  std::vector<CodeHistogram> out;
  const std::size_t hd = static_cast<std::size_t>(m_x.heads) * m_x.dim;
  if (m_family != Family::Tiered) {
    const int bits = m_family == Family::Symmetric ? m_bits : 8;
    auto counts = count_byte_codes(m_codes.get(), m_x.elements(), bits, m_counts, s);
    if (!counts) return counts.error();
    out.push_back({m_family == Family::KvComp ? "uint8" : "int" + std::to_string(bits), bits,
                   std::move(*counts)});
    return out;
  }
  const std::size_t tiers = m_tiers.size();
  for (std::size_t i = 0; i < tiers; ++i) {
    const int bits = m_tiers[i].bits;
    const int t0 = m_bounds[i], t1 = m_bounds[i + 1];
    auto counts = count_byte_codes(m_codes.get() + static_cast<std::size_t>(t0) * hd,
                                   static_cast<std::size_t>(t1 - t0) * hd, bits, m_counts, s);
    if (!counts) return counts.error();
    std::string label = "int" + std::to_string(bits);
    if (tiers > 1) label += " (tokens " + std::to_string(t0) + "-" + std::to_string(t1) + ")";
    out.push_back({std::move(label), bits, std::move(*counts)});
  }
  return out;
}

Result<QuantizedTensor> GroupDeviceQuantizer::download(cudaStream_t s) {
  QuantizedTensor q;
  q.role = m_role;
  q.tokens = m_x.tokens;
  q.heads = m_x.heads;
  q.dim = m_x.dim;
  q.bytes = m_bytes;
  q.bounds = m_bounds;
  const std::size_t n = m_x.elements();
  const std::size_t hd = static_cast<std::size_t>(m_x.heads) * m_x.dim;
  std::vector<std::uint8_t> bytes(n);
  q.params.resize(m_param_floats);
  q.residual.resize(m_residual_values);
  if (n)
    KVLAB_CUDA_TRY(cudaMemcpyAsync(bytes.data(), m_codes.get(), n, cudaMemcpyDeviceToHost, s),
                   "GPU download: codes");
  if (m_param_floats) {
    KVLAB_CUDA_TRY(cudaMemcpyAsync(q.params.data(), m_param.get(), m_param_floats * sizeof(float),
                                   cudaMemcpyDeviceToHost, s),
                   "GPU download: parameters");
  }
  if (m_residual_values) {
    KVLAB_CUDA_TRY(
        cudaMemcpyAsync(q.residual.data(), m_residual_fp16.get(),
                        m_residual_values * sizeof(std::uint16_t), cudaMemcpyDeviceToHost, s),
        "GPU download: residual");
  }
  KVLAB_CUDA_TRY(cudaStreamSynchronize(s), "GPU download");
  // Packed as the CPU packs: the symmetric codes b bits each; each tier's rows in its own bits,
  // tier after tier; KVComp's a byte each.
  if (m_family == Family::Symmetric) {
    q.codes.assign(detail::packed_bytes(n, m_bits), 0);
    detail::pack_codes(bytes.data(), n, m_bits, q.codes.data(), 0);
  } else if (m_family == Family::KvComp) {
    q.codes.assign(bytes.begin(), bytes.end());
  } else {
    q.codes.assign(m_bytes.codes, 0);
    std::uint8_t* at = q.codes.data();
    for (std::size_t i = 0; i < m_tiers.size(); ++i) {
      const std::size_t first = static_cast<std::size_t>(m_bounds[i]) * hd;
      const std::size_t count = static_cast<std::size_t>(m_bounds[i + 1] - m_bounds[i]) * hd;
      detail::pack_codes(bytes.data() + first, count, m_tiers[i].bits, at, 0);
      at += detail::packed_bytes(count, m_tiers[i].bits);
    }
  }
  return q;
}

}  // namespace

std::unique_ptr<DeviceQuantizer> make_group_device_quantizer(const MethodConfig& c) {
  if (c.rotation != RotationKind::None) return nullptr;  // rotated_quantizer.cpp runs on the CPU
  switch (c.kind) {
    case MethodKind::Int8:
    case MethodKind::Int4:
      return std::make_unique<GroupDeviceQuantizer>(Family::Symmetric, c);
    case MethodKind::Kivi:
    case MethodKind::Tiered:
      return std::make_unique<GroupDeviceQuantizer>(Family::Tiered, c);
    case MethodKind::KvComp:
      return std::make_unique<GroupDeviceQuantizer>(Family::KvComp, c);
    default:
      return nullptr;
  }
}

Result<std::unique_ptr<DeviceQuantizer>> make_device_quantizer(const MethodConfig& config) {
  if (wraps_rotation(config)) return std::unique_ptr<DeviceQuantizer>();  // the CPU's wrapper
  for (auto family :
       {&make_group_device_quantizer, &make_fp8_device_quantizer, &make_block_device_quantizer,
        &make_turboquant_device_quantizer, &make_kvquant_device_quantizer}) {
    if (auto q = family(config)) return Result<std::unique_ptr<DeviceQuantizer>>(std::move(q));
  }
  return std::unique_ptr<DeviceQuantizer>();
}

Result<std::vector<std::uint64_t>> count_byte_codes(const std::uint8_t* codes, std::size_t n,
                                                    int bits,
                                                    DeviceArray<unsigned long long>& scratch,
                                                    cudaStream_t stream) {
  KVLAB_TRY_STATUS(ensure_size(scratch, 256, "GPU histogram"));
  KVLAB_CUDA_TRY(launch_code_histogram(codes, n, scratch.get(), stream), "GPU histogram");
  unsigned long long c[256];
  KVLAB_CUDA_TRY(cudaMemcpyAsync(c, scratch.get(), sizeof(c), cudaMemcpyDeviceToHost, stream),
                 "GPU histogram: reading back");
  KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "GPU histogram");
  std::vector<std::uint64_t> out(std::size_t{1} << bits, 0);
  for (std::size_t i = 0; i < 256; ++i) {
    if (i < out.size()) {
      out[i] = c[i];
    } else if (c[i] != 0) {
      return make_error("GPU histogram: a code of " + std::to_string(i) + " does not fit " +
                        std::to_string(bits) + " bits");
    }
  }
  return out;
}

}  // namespace kvlab::cuda
