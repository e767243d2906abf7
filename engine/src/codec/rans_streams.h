// One block of the rANS codec (docs/FORMAT.md, "rANS streams"): 32 interleaved rANS states with
// 32-bit state, 12-bit frequencies and 16-bit renormalisation words (F. Giesen, "Interleaved
// entropy coders", 2014; the word-wise variant of his ryg_rans), symbol k of the block on lane
// k % 32. The block is the 32 decoder start states (u32 LE) followed by the u16 LE words in the
// order the decoder reads them. Private to the engine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvlab/engine/codec/rans_table.h"
#include "kvlab/engine/codec/rans_warp.h"
#include "kvlab/engine/core/aligned.h"

namespace kvlab::detail {

// The format's constants, as rans_warp.h (shared with the CUDA kernels) defines them.
constexpr int kRansLanes = rans_warp::kLanes;
constexpr std::uint32_t kRansLow = rans_warp::kLow;  // states live in [2^16, 2^32)
constexpr std::size_t kRansStateBytes = rans_warp::kStateBytes;
static_assert(RansTable::kProbBits == rans_warp::kProbBits);

// Appends the block coding `count` symbols (one byte each; a symbol with frequency 0 goes as the
// escape and its byte) to `out`. `words` is scratch.
void encode_rans_block(const std::uint8_t* symbols, std::size_t count, const RansTable& table,
                       HugePageBytes& out, std::vector<std::uint16_t>& words);
// Bytes encode_rans_block would append.
std::size_t rans_block_bytes(const std::uint8_t* symbols, std::size_t count, const RansTable& table,
                             std::vector<std::uint16_t>& words);

// Decodes the block block[0, bytes) into `count` symbols at `out`. Returns why it failed, or
// nullptr: the words run out, words are left over, or a lane does not end in its start state.
// AVX-512 (16 lanes a register, two registers) or AVX2 (8 lanes, four registers) where the build
// has it, else the scalar loop.
const char* decode_rans_block(const std::uint8_t* block, std::size_t bytes, std::size_t count,
                              const RansTable& table, std::uint8_t* out);
// Several blocks, decoded side by side (four at a time with AVX-512 or AVX2) to hide each round's
// latency.
// Every job's table must be the same. Sets each job's `problem` (nullptr on success).
struct RansJob {
  const std::uint8_t* block = nullptr;
  std::size_t bytes = 0, count = 0;
  const RansTable* table = nullptr;
  std::uint8_t* out = nullptr;
  const char* problem = nullptr;
};
void decode_rans_blocks(RansJob* jobs, std::size_t n);
const char* decode_rans_block_scalar(const std::uint8_t* block, std::size_t bytes,
                                     std::size_t count, const RansTable& table, std::uint8_t* out);

}  // namespace kvlab::detail
