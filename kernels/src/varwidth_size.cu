// VarWidth sizing on the GPU (varwidth_size.cuh): one thread a vector sums its groups' bits
// (a 4-bit header, then each code in the bit width of the group's largest), added into its
// codec block's count; a second launch rounds each block up to bytes and sums them.
#include <cstdint>
#include <limits>
#include <vector>

#include "device_quantizer.cuh"
#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/engine/codec/code_codec.h"
#include "varwidth_size.cuh"

namespace kvlab::cuda {

namespace {

constexpr int kGroup = 16;  // codes a group (codec_streams.h, kVarWidthGroup)

__global__ void vector_bits_kernel(const std::uint8_t* codes, int tokens, int heads, int dim,
                                   int block_size, unsigned long long* block_bits) {
  const std::size_t v = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (v >= static_cast<std::size_t>(tokens) * heads) return;
  const std::uint8_t* c = codes + v * dim;
  unsigned long long bits = 0;
  for (int g = 0; g < dim; g += kGroup) {
    const int n = min(kGroup, dim - g);
    unsigned top = 0;
    for (int i = 0; i < n; ++i) top |= c[g + i];
    bits += 4 + static_cast<unsigned long long>(n) * (32 - __clz(top));
  }
  const int token = static_cast<int>(v / heads), head = static_cast<int>(v % heads);
  atomicAdd(&block_bits[block_layout::block_of(token, head, heads, block_size)], bits);
}

__global__ void block_bytes_kernel(const unsigned long long* block_bits, std::size_t blocks,
                                   unsigned long long* total) {
  unsigned long long sum = 0;
  for (std::size_t b = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; b < blocks;
       b += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    sum += (block_bits[b] + 7) / 8;
  }
  atomicAdd(total, sum);
}

}  // namespace

Result<std::uint64_t> varwidth_bytes(const std::uint8_t* codes, int tokens, int heads, int dim,
                                     int block_size, DeviceArray<unsigned long long>& scratch,
                                     cudaStream_t stream) {
  if (block_size < 1 || tokens < 0 || heads < 1 || dim < 1) {
    return make_error("GPU VarWidth sizing: no valid shape");
  }
  const std::size_t token_blocks = (static_cast<std::size_t>(tokens) + block_size - 1) / block_size;
  const std::size_t blocks = token_blocks * heads;
  const std::size_t vectors = static_cast<std::size_t>(tokens) * heads;
  // A vector past its u16 bit count, or a payload past the u32 block offsets, is an error that
  // the CPU's encoded_bytes() names (the token, the head, the bits). A shape whose worst case could
  // reach either (8-bit codes reach 65,535 bits from about 7,900 codes a vector) is sized by it,
  // from the codes read back: the same answer and the same error as the CPU's, where no real
  // model's shape goes.
  const std::uint64_t worst_vector = 8ull * dim + 4ull * ((dim + kGroup - 1) / kGroup);
  const std::uint64_t worst_payload = (worst_vector * vectors + 7) / 8 + blocks;
  if (worst_vector > std::numeric_limits<std::uint16_t>::max() ||
      worst_payload > std::numeric_limits<std::uint32_t>::max()) {
    std::vector<std::uint8_t> host(vectors * static_cast<std::size_t>(dim));
    KVLAB_CUDA_TRY(cudaMemcpyAsync(host.data(), codes, host.size(), cudaMemcpyDeviceToHost, stream),
                   "GPU VarWidth sizing: reading the codes back");
    KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "GPU VarWidth sizing");
    return encoded_bytes(host, tokens, heads, dim, CodecConfig{CodecKind::VarWidth, block_size, 0},
                         nullptr);
  }
  KVLAB_TRY_STATUS(ensure_size(scratch, blocks + 1, "GPU VarWidth sizing"));
  KVLAB_CUDA_TRY(
      cudaMemsetAsync(scratch.get(), 0, (blocks + 1) * sizeof(unsigned long long), stream),
      "GPU VarWidth sizing");
  if (vectors > 0) {
    vector_bits_kernel<<<static_cast<unsigned>((vectors + 255) / 256), 256, 0, stream>>>(
        codes, tokens, heads, dim, block_size, scratch.get() + 1);
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU VarWidth sizing: vectors");
    const unsigned grid = static_cast<unsigned>(std::min<std::size_t>((blocks + 255) / 256, 1024));
    block_bytes_kernel<<<grid, 256, 0, stream>>>(scratch.get() + 1, blocks, scratch.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU VarWidth sizing: blocks");
  }
  unsigned long long payload = 0;
  KVLAB_CUDA_TRY(
      cudaMemcpyAsync(&payload, scratch.get(), sizeof(payload), cudaMemcpyDeviceToHost, stream),
      "GPU VarWidth sizing: reading back");
  KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "GPU VarWidth sizing");
  return payload + EncodedCodes::kHeaderBytes + blocks * sizeof(std::uint32_t) +
         vectors * sizeof(std::uint16_t);
}

}  // namespace kvlab::cuda
