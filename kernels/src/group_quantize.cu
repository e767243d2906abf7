// Group quantization kernels (see group_quantize.cuh). Keys: one thread per channel column of a
// token group, reading rows coalesced across the warp; values: one warp per (token, head, group),
// min and max by shuffles. Every floating-point step is group_rules.h's, which the CPU calls too.
#include <cuda_fp16.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_check.cuh"
#include "group_quantize.cuh"
#include "kvlab/engine/quant/group_rules.h"
#include "kvlab/kernels/gpu_kv.h"

namespace kvlab::cuda {

namespace {

__device__ __forceinline__ float load_half(const std::uint16_t* p, std::size_t i) {
  return __half2float(__ushort_as_half(p[i]));
}

// group_rules.h's rules, shared with the CPU (float32 parameters: no rounding to a dtype).
__device__ __forceinline__ float step_of(float range, bool relative, float rel_scale, int bits) {
  return rules::group_step(range, relative, rel_scale, bits);
}

__device__ __forceinline__ std::uint8_t code_of(float x, float mn, float inv, float max_code) {
  return rules::group_code(x, mn, inv, max_code);
}

__global__ void quantize_keys_kernel(GroupQuantArgs a) {
  const int hd = a.heads * a.dim;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= hd) return;
  // Groups strided over grid.y, which holds at most 65535 (a block of one token at 64K tokens).
  const int groups = (a.tokens + a.key_group_tokens - 1) / a.key_group_tokens;
  for (int group = blockIdx.y; group < groups; group += gridDim.y) {
    const int t0 = group * a.key_group_tokens;
    const int rows = min(a.key_group_tokens, a.tokens - t0);
    const std::size_t base = static_cast<std::size_t>(t0) * hd + j;
    float mn = load_half(a.x, base), mx = mn;
    for (int r = 1; r < rows; ++r) {
      const float v = load_half(a.x, base + static_cast<std::size_t>(r) * hd);
      mn = fminf(mn, v);
      mx = fmaxf(mx, v);
    }
    mn = rules::unsigned_zero(mn);
    mx = rules::unsigned_zero(mx);
    const float step = step_of(__fsub_rn(mx, mn), a.relative, a.rel_scale, a.bits);
    const float inv = rules::group_inverse(step);
    const float max_code = static_cast<float>((1 << a.bits) - 1);
    const std::size_t unit = static_cast<std::size_t>(group) * hd + j;
    a.steps[unit] = step;
    a.mins[unit] = mn;
    for (int r = 0; r < rows; ++r) {
      const std::size_t i = base + static_cast<std::size_t>(r) * hd;
      a.codes[i] = code_of(load_half(a.x, i), mn, inv, max_code);
    }
  }
}

// One warp per value unit: (token, head, channel group).
__global__ void quantize_values_kernel(GroupQuantArgs a, int width, int groups_per_head,
                                       std::size_t units) {
  const std::size_t unit = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (unit >= units) return;
  const int g = static_cast<int>(unit % groups_per_head);
  const std::size_t th = unit / groups_per_head;  // token * heads + head
  const int c0 = g * width;
  const int n = min(width, a.dim - c0);
  const std::size_t base = th * a.dim + c0;
  float mn = INFINITY, mx = -INFINITY;
  for (int i = lane; i < n; i += 32) {
    const float v = load_half(a.x, base + i);
    mn = fminf(mn, v);
    mx = fmaxf(mx, v);
  }
  for (int o = 16; o > 0; o >>= 1) {
    mn = fminf(mn, __shfl_xor_sync(0xffffffffu, mn, o));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  }
  mn = rules::unsigned_zero(mn);
  mx = rules::unsigned_zero(mx);
  const float step = step_of(__fsub_rn(mx, mn), a.relative, a.rel_scale, a.bits);
  const float inv = rules::group_inverse(step);
  const float max_code = static_cast<float>((1 << a.bits) - 1);
  if (lane == 0) {
    a.steps[unit] = step;
    a.mins[unit] = mn;
  }
  for (int i = lane; i < n; i += 32)
    a.codes[base + i] = code_of(load_half(a.x, base + i), mn, inv, max_code);
}

int value_width(const GroupQuantArgs& a) {
  return a.value_group_channels > 0 ? std::min(a.value_group_channels, a.dim) : a.dim;
}

}  // namespace

std::size_t gpu_group_units(const GroupQuantArgs& a, bool keys) {
  if (keys) {
    const std::size_t groups =
        (static_cast<std::size_t>(a.tokens) + a.key_group_tokens - 1) / a.key_group_tokens;
    return groups * static_cast<std::size_t>(a.heads) * a.dim;
  }
  const int w = value_width(a);
  return static_cast<std::size_t>(a.tokens) * a.heads * ((a.dim + w - 1) / w);
}

cudaError_t launch_group_quantize_keys(const GroupQuantArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  const int hd = a.heads * a.dim;
  if (hd == 0) return cudaSuccess;
  const int groups = (a.tokens + a.key_group_tokens - 1) / a.key_group_tokens;
  const dim3 grid((hd + 127) / 128, std::min(groups, 65535));
  quantize_keys_kernel<<<grid, 128, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t launch_group_quantize_values(const GroupQuantArgs& a, cudaStream_t stream) {
  if (a.tokens == 0) return cudaSuccess;
  const int w = value_width(a);
  const int per_head = (a.dim + w - 1) / w;
  const std::size_t units = gpu_group_units(a, false);
  if (units == 0) return cudaSuccess;
  const std::size_t blocks = (units * 32 + 255) / 256;
  quantize_values_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(a, w, per_head, units);
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
  GroupQuantArgs a;
  a.tokens = tokens;
  a.heads = heads;
  a.dim = dim;
  a.bits = spec.bits;
  a.key_group_tokens = spec.key_group_tokens;
  a.value_group_channels = spec.value_group_channels;
  a.relative = spec.relative;
  a.rel_scale = static_cast<float>(spec.rel_scale);
  const bool keys = role == TensorRole::Key;
  const std::size_t units = gpu_group_units(a, keys);
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
  KVLAB_CUDA_TRY(
      keys ? launch_group_quantize_keys(a, nullptr) : launch_group_quantize_values(a, nullptr),
      "GPU quantize: launch");
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
