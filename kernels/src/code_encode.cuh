// Encoding quantization codes into the docs/FORMAT.md streams on the GPU (Huffman, rANS and
// BitPack), byte for byte what the CPU encoder writes. rANS: one warp a block, twice (sizes, then
// the bytes), with the same block-offset scan as Huffman. Huffman runs in three launches: per 2D
// block, each thread sums its vector's code lengths and a CUB block scan gives the in-block bit
// offsets and the block's size; a CUB device scan turns block sizes into block offsets (blocks stay
// in block order, as the format requires); then each thread writes its vector's bits, plain stores
// for the words it owns and atomicOr for the two it may share with its neighbours.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu_layer.cuh"

namespace kvlab::cuda {

// Tuning: not measured apart (the encoder runs once per tensor, beside a layer's quantization in
// the GPU pipeline: docs/PERFORMANCE.md's gpu_run rows time the whole). 128 threads a block for
// the Huffman and bit-pack kernels (a thread a vector); four warps a block for rANS (a warp a
// codec block).
struct CodeEncodePolicy {
  static constexpr int kThreads = 128;
  static constexpr int kRansWarps = 4;
};

// Counts of each code value (256 u64 bins, zeroed by the launcher).
cudaError_t launch_code_histogram(const std::uint8_t* codes, std::uint64_t n,
                                  unsigned long long* counts, cudaStream_t stream);

// BitPack's width for codes with these counts: the smallest of 2, 4 and 8 bits that holds the
// largest code (the CPU encoder's rule, code_codec.cpp).
int bitpack_width(const CodeCounts& counts);
// BitPack's payload bytes for codes [tokens][heads][dim] in blocks of block_size tokens: each
// block dim * width bits a vector, rounded up to bytes (docs/FORMAT.md). The header not included.
std::uint64_t bitpack_payload_bytes(int tokens, int heads, int dim, int block_size, int width);

// Device scratch the Huffman encoder reuses between calls (grown on demand).
struct EncodeScratch {
  DeviceArray<std::uint32_t> vector_start;  // in-block bit offset of every vector
  DeviceArray<std::uint32_t> block_bytes;
  DeviceArray<std::uint8_t> cub_temp;
  DeviceArray<int> error;  // 0, or 1 + the first block whose vector passed 65535 bits / width
  // [0] the blocks' bytes summed in 64 bits (the u32 offsets' scan wraps past 4 GiB); [1] the
  // first code above 15 under a rANS pair table (~0: none).
  DeviceArray<unsigned long long> checks;
};

// Encodes device codes [tokens][heads][dim] into `out` (allocated here). Huffman needs `book`
// uploaded, rANS its table (GpuBook::upload); BitPack needs out.width set (2, 4 or 8). Synchronises
// once (to size the payload).
Status gpu_encode(const std::uint8_t* d_codes, int tokens, int heads, int dim, int block_size,
                  CodecKind kind, int width, const GpuBook* book, GpuCodes& out,
                  EncodeScratch& scratch, cudaStream_t stream);

}  // namespace kvlab::cuda
