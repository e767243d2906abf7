// Group quantization kernels (see group_quantize.cuh). Keys: one thread per channel column of a
// token group, reading rows coalesced across the warp; values: one warp per (token, head, channel
// group), min and max by shuffles. Every floating-point step is group_rules.h's, which the CPU's
// quantize_groups() calls too; the public quantize_groups() below is their host entry point.
#include <algorithm>
#include <string>
#include <vector>

#include "cuda_check.cuh"
#include "device_quantizer.cuh"
#include "group_quantize.cuh"
#include "kvlab/kernels/gpu_kv.h"
#include "launch_plan.cuh"

namespace kvlab::cuda {

namespace {

__device__ __forceinline__ float group_step_of(const GroupArgs& a, float mn, float mx) {
  return rules::round_param(rules::group_step(__fsub_rn(mx, mn), a.relative, a.rel_scale, a.bits),
                            a.params);
}

// Groups along y, grid-strided (a grid has at most 65535 rows; groups of one token at 128K are
// more).
__global__ void group_keys_kernel(GroupArgs a) {
  const int hd = a.heads * a.dim;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= hd) return;
  const int groups = (a.tokens + a.key_group - 1) / a.key_group;
  for (int group = blockIdx.y; group < groups; group += gridDim.y) {
    const int t0 = group * a.key_group;
    const int rows = min(a.key_group, a.tokens - t0);
    const std::size_t base = static_cast<std::size_t>(t0) * hd + j;
    float mn = load_element(a.x, a.dtype, base), mx = mn;
    for (int r = 1; r < rows; ++r) {
      const float v = load_element(a.x, a.dtype, base + static_cast<std::size_t>(r) * hd);
      mn = fminf(mn, v);
      mx = fmaxf(mx, v);
    }
    mn = rules::unsigned_zero(mn);
    mx = rules::unsigned_zero(mx);
    const float step = group_step_of(a, mn, mx);
    mn = rules::round_param(mn, a.params);
    const float inv = rules::group_inverse(step);
    const std::size_t unit = static_cast<std::size_t>(group) * hd + j;
    a.steps[unit] = step;
    a.mins[unit] = mn;
    for (int r = 0; r < rows; ++r) {
      const std::size_t i = base + static_cast<std::size_t>(r) * hd;
      a.codes[i] = rules::group_code(load_element(a.x, a.dtype, i), mn, inv, a.max_code);
    }
  }
}

// One warp per value unit (token, head, channel group), units in the CPU's order.
__global__ void group_values_kernel(GroupArgs a, int per_head, std::size_t units) {
  const std::size_t unit = (blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (unit >= units) return;
  const int g = static_cast<int>(unit % per_head);
  const std::size_t th = unit / per_head;  // token * heads + head
  const int c0 = g * a.value_width;
  const int n = min(a.value_width, a.dim - c0);
  const std::size_t base = th * a.dim + c0;
  float mn = INFINITY, mx = -INFINITY;
  for (int i = lane; i < n; i += 32) {
    const float v = load_element(a.x, a.dtype, base + i);
    mn = fminf(mn, v);
    mx = fmaxf(mx, v);
  }
  for (int o = 16; o > 0; o >>= 1) {
    mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  }
  mn = rules::unsigned_zero(mn);
  mx = rules::unsigned_zero(mx);
  const float step = group_step_of(a, mn, mx);
  mn = rules::round_param(mn, a.params);
  const float inv = rules::group_inverse(step);
  if (lane == 0) {
    a.steps[unit] = step;
    a.mins[unit] = mn;
  }
  for (int i = lane; i < n; i += 32) {
    a.codes[base + i] =
        rules::group_code(load_element(a.x, a.dtype, base + i), mn, inv, a.max_code);
  }
}

// x_hat = min + code * step over a pass's tokens (out: its first token).
__global__ void group_dequant_kernel(GroupArgs a, bool keys, int per_head, float* out) {
  const int hd = a.heads * a.dim;
  const std::size_t n = static_cast<std::size_t>(a.tokens) * hd;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    std::size_t unit;
    if (keys) {
      unit = (i / hd) / a.key_group * hd + i % hd;
    } else {
      const std::size_t th = i / a.dim;
      unit = th * per_head + (i % a.dim) / a.value_width;
    }
    out[i] = a.mins[unit] + static_cast<float>(a.codes[i]) * a.steps[unit];
  }
}

int groups_per_head(const GroupArgs& a) {
  return (a.dim + a.value_width - 1) / a.value_width;
}

}  // namespace

GroupArgs group_args(const detail::GroupSpec& spec, DType dtype, int tokens, int heads, int dim) {
  GroupArgs a;
  a.dtype = dtype;
  a.tokens = tokens;
  a.heads = heads;
  a.dim = dim;
  a.bits = spec.bits;
  a.key_group = spec.key_group_tokens;
  a.value_width = detail::value_group_width(spec, dim);
  a.relative = spec.rule == detail::StepRule::Relative;
  a.rel_scale = static_cast<float>(spec.rel_scale);
  a.max_code = static_cast<float>(detail::largest_code(spec));
  a.params = detail::param_dtype(spec.params);
  return a;
}

cudaError_t launch_group_quantize(const GroupArgs& a, TensorRole role, cudaStream_t stream) {
  const int hd = a.heads * a.dim;
  if (a.tokens <= 0 || hd <= 0) return cudaSuccess;  // nothing to code (the CPU's empty tensor)
  if (role == TensorRole::Key) {
    const int groups = (a.tokens + a.key_group - 1) / a.key_group;
    const dim3 grid((hd + 127) / 128, std::min(groups, 65535));
    group_keys_kernel<<<grid, 128, 0, stream>>>(a);
  } else {
    const std::size_t units = group_units(a, role);
    group_values_kernel<<<static_cast<unsigned>((units * 32 + 255) / 256), 256, 0, stream>>>(
        a, groups_per_head(a), units);
  }
  return cudaGetLastError();
}

cudaError_t launch_group_dequantize(const GroupArgs& a, TensorRole role, float* out,
                                    cudaStream_t stream) {
  const std::size_t n = static_cast<std::size_t>(std::max(a.tokens, 0)) * a.heads * a.dim;
  if (n == 0) return cudaSuccess;
  group_dequant_kernel<<<stride_grid(n, 256), 256, 0, stream>>>(a, role == TensorRole::Key,
                                                                groups_per_head(a), out);
  return cudaGetLastError();
}

Result<GroupCodes> quantize_groups(std::span<const std::uint16_t> x_fp16, int tokens, int heads,
                                   int dim, TensorRole role, const GpuGroupSpec& spec) {
  if (tokens < 0 || heads <= 0 || dim <= 0) {
    return make_error("GPU quantize: tokens, heads and dim must be positive");
  }
  if (x_fp16.size() != static_cast<std::size_t>(tokens) * heads * dim) {
    return make_error("GPU quantize: the input holds " + std::to_string(x_fp16.size()) +
                      " values, not tokens*heads*dim");
  }
  if (spec.bits < 1 || spec.bits > 8) return make_error("GPU quantize: bits must be 1..8");
  if (spec.key_group_tokens < 1 || spec.value_group_channels < 0) {
    return make_error("GPU quantize: group sizes must be positive");
  }
  if (spec.relative && !(spec.rel_scale > 0.0)) {
    return make_error("GPU quantize: rel_scale must be positive");
  }
  KVLAB_TRY_STATUS(require_gpu());
  const detail::GroupSpec rule{
      spec.bits,
      spec.key_group_tokens,
      spec.value_group_channels,
      spec.relative ? detail::StepRule::Relative : detail::StepRule::Levels,
      spec.rel_scale,
      DType::F32};
  GroupArgs a = group_args(rule, DType::F16, tokens, heads, dim);
  const std::size_t units = group_units(a, role);
  DeviceArray<std::uint16_t> dx;
  DeviceArray<std::uint8_t> dc;
  DeviceArray<float> ds, dm;
  KVLAB_TRY_STATUS(dx.upload(x_fp16.data(), x_fp16.size(), "GPU quantize: uploading"));
  KVLAB_TRY_STATUS(dc.allocate(x_fp16.size(), "GPU quantize: allocating codes"));
  KVLAB_TRY_STATUS(ds.allocate(units, "GPU quantize: allocating steps"));
  KVLAB_TRY_STATUS(dm.allocate(units, "GPU quantize: allocating minimums"));
  a.x = dx.get();
  a.codes = dc.get();
  a.steps = ds.get();
  a.mins = dm.get();
  KVLAB_CUDA_TRY(launch_group_quantize(a, role, nullptr), "GPU quantize: launch");
  KVLAB_CUDA_TRY(cudaDeviceSynchronize(), "GPU quantize");
  GroupCodes out;
  out.codes.resize(x_fp16.size());
  out.steps.resize(units);
  out.mins.resize(units);
  KVLAB_TRY_STATUS(dc.download(out.codes.data(), out.codes.size(), "GPU quantize: codes"));
  KVLAB_TRY_STATUS(ds.download(out.steps.data(), units, "GPU quantize: steps"));
  KVLAB_TRY_STATUS(dm.download(out.mins.data(), units, "GPU quantize: minimums"));
  return out;
}

}  // namespace kvlab::cuda
