// Where a block and a vector sit in a code stream (docs/FORMAT.md, "Blocks" and "Sizes"), in one
// place for the CPU and the CUDA code: the CPU encoder, decoder and fused kernels, and the GPU
// encoder and attention kernels all place blocks through these functions, so they cannot
// disagree. Every function is constexpr and, under nvcc, __host__ __device__.
//
//   block b = tb * heads + h: token block tb (block_size tokens, the last one shorter), head h.
//   Its vectors are its tokens in order; vector i is token tb * block_size + i of head h.
//   BitPack: every block is ceil(tokens * dim * width / 8) bytes, laid end to end in block
//   order, and vector i starts at bit i * dim * width of its block.
//   VarWidth, Huffman: a block starts at its byte offset (block_offsets[b]) and vector i at the
//   sum of the bit counts of the vectors before it; vector_bits holds a count per vector in block
//   order.
#pragma once

#include <cstdint>

#include "kvlab/engine/core/host_device.h"

namespace kvlab::block_layout {

// Block b of a tensor of `tokens` tokens and `heads` heads in blocks of `block_size` tokens.
struct Place {
  int token_block = 0, head = 0;
  int first_token = 0;  // token_block * block_size
  int tokens = 0;       // block_size, or fewer in the last token block
  // Index of the block's first vector among all vectors in block order (vector_bits[]).
  std::uint64_t first_vector = 0;
};

// Tokens in token block tb.
KVLAB_HOST_DEVICE constexpr inline int block_tokens(int tb, int tokens, int block_size) {
  const int rest = tokens - tb * block_size;
  return rest < block_size ? rest : block_size;
}

// The first vector of block (tb, h) among all vectors, `n` the block's tokens: the full token
// blocks before it, then the heads before h in this token block.
KVLAB_HOST_DEVICE constexpr inline std::uint64_t first_vector(int tb, int h, int heads,
                                                              int block_size, int n) {
  return static_cast<std::uint64_t>(tb) * static_cast<std::uint64_t>(heads) *
             static_cast<std::uint64_t>(block_size) +
         static_cast<std::uint64_t>(h) * static_cast<std::uint64_t>(n);
}

KVLAB_HOST_DEVICE constexpr inline Place place_of(int b, int heads, int tokens, int block_size) {
  Place p;
  p.token_block = b / heads;
  p.head = b % heads;
  p.first_token = p.token_block * block_size;
  p.tokens = block_tokens(p.token_block, tokens, block_size);
  p.first_vector = first_vector(p.token_block, p.head, heads, block_size, p.tokens);
  return p;
}

// Bytes of `n` vectors of `dim` codes packed at `width` bits (a BitPack block).
KVLAB_HOST_DEVICE constexpr inline std::uint64_t packed_bytes(int n, int dim, int width) {
  return (static_cast<std::uint64_t>(n) * static_cast<std::uint64_t>(dim) *
              static_cast<std::uint64_t>(width) +
          7) /
         8;
}

// Byte offset of BitPack block (tb, h) of `n` tokens: the full token blocks before it, then the
// heads before h in this token block.
KVLAB_HOST_DEVICE constexpr inline std::uint64_t bitpack_block_offset(int tb, int h, int heads,
                                                                      int block_size, int n,
                                                                      int dim, int width) {
  return static_cast<std::uint64_t>(tb) * static_cast<std::uint64_t>(heads) *
             packed_bytes(block_size, dim, width) +
         static_cast<std::uint64_t>(h) * packed_bytes(n, dim, width);
}

// Bytes of a whole BitPack payload: every block of every head.
KVLAB_HOST_DEVICE constexpr inline std::uint64_t bitpack_payload_bytes(int tokens, int heads,
                                                                       int dim, int block_size,
                                                                       int width) {
  return static_cast<std::uint64_t>(heads) *
         (static_cast<std::uint64_t>(tokens / block_size) * packed_bytes(block_size, dim, width) +
          packed_bytes(tokens % block_size, dim, width));
}

// The block of token t, head h (the inverse of place_of).
KVLAB_HOST_DEVICE constexpr inline std::uint64_t block_of(int t, int h, int heads, int block_size) {
  return static_cast<std::uint64_t>(t / block_size) * static_cast<std::uint64_t>(heads) +
         static_cast<std::uint64_t>(h);
}

// First bit of vector i of a BitPack block, counted from the block's first byte.
KVLAB_HOST_DEVICE constexpr inline std::uint64_t bitpack_vector_bit(int i, int dim, int width) {
  return static_cast<std::uint64_t>(i) * static_cast<std::uint64_t>(dim) *
         static_cast<std::uint64_t>(width);
}

}  // namespace kvlab::block_layout
