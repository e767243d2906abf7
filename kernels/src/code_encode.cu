// GPU encoders for the code streams (see code_encode.cuh), and the host entry points that
// compress a layer or a tensor of codes on the GPU.
#include <cuda_fp16.h>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "code_encode.cuh"
#include "group_quantize.cuh"
#include "kvlab/engine/codec/block_layout.h"
#include "kvlab/engine/codec/rans_warp.h"

namespace kvlab::cuda {

namespace {

constexpr int kThreads = CodeEncodePolicy::kThreads;

__global__ void histogram_kernel(const std::uint8_t* codes, std::uint64_t n,
                                 unsigned long long* counts) {
  __shared__ unsigned int local[256];
  for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
  __syncthreads();
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    atomicAdd(&local[codes[i]], 1u);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < 256; i += blockDim.x) {
    if (local[i]) atomicAdd(&counts[i], static_cast<unsigned long long>(local[i]));
  }
}

// Where block b sits: block_layout.h, shared with the CPU encoder.
using block_layout::Place;
using block_layout::place_of;

struct EncodeArgs {
  const std::uint8_t* codes;
  int tokens, heads, dim, block_size;
  const std::uint32_t* enc_bits;  // Huffman tables (null for BitPack)
  const std::uint8_t* enc_len;
  int width;                   // BitPack
  std::uint16_t* vector_bits;  // Huffman outputs
  std::uint32_t* vector_start;
  std::uint32_t* block_bytes;
  const std::uint32_t* block_offsets;
  std::uint32_t* payload;
  int* error;
};

// Huffman pass 1: one CUDA block per codec block.
__global__ void huffman_sizes_kernel(EncodeArgs a) {
  using Scan = cub::BlockScan<std::uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage scan;
  __shared__ std::uint8_t len[256];
  for (int i = threadIdx.x; i < 256; i += kThreads) len[i] = a.enc_len[i];
  __syncthreads();
  const int b = blockIdx.x;
  const Place p = place_of(b, a.heads, a.tokens, a.block_size);
  std::uint32_t carry = 0;
  for (int i0 = 0; i0 < p.tokens; i0 += kThreads) {
    const int i = i0 + threadIdx.x;
    std::uint32_t bits = 0;
    if (i < p.tokens) {
      const std::uint8_t* v =
          a.codes + (static_cast<std::size_t>(p.first_token + i) * a.heads + p.head) * a.dim;
      for (int c = 0; c < a.dim; ++c) bits += len[v[c]];
      if (bits > 65535u) atomicMin(a.error, b + 1);
      a.vector_bits[p.first_vector + i] = static_cast<std::uint16_t>(min(bits, 65535u));
    }
    std::uint32_t start = 0, total = 0;
    Scan(scan).ExclusiveSum(bits, start, total);
    if (i < p.tokens) a.vector_start[p.first_vector + i] = carry + start;
    carry += total;
    __syncthreads();
  }
  if (threadIdx.x == 0) a.block_bytes[b] = (carry + 7) / 8;
}

// Writes `len` bits (LSB-first) into the payload words; the first and last word may be shared.
struct BitWriter {
  std::uint32_t* out;
  std::uint64_t word;
  std::uint64_t acc;
  int n;  // valid bits in acc
  bool first;
  __device__ BitWriter(std::uint32_t* o, std::uint64_t bitpos)
      : out(o), word(bitpos >> 5), acc(0), n(static_cast<int>(bitpos & 31)), first(true) {}
  __device__ __forceinline__ void put(std::uint32_t bits, int len) {
    acc |= static_cast<std::uint64_t>(bits) << n;
    n += len;
    if (n >= 32) {
      const std::uint32_t w = static_cast<std::uint32_t>(acc);
      if (first) {
        atomicOr(out + word, w);
        first = false;
      } else {
        out[word] = w;
      }
      ++word;
      acc >>= 32;
      n -= 32;
    }
  }
  __device__ __forceinline__ void finish() {
    if (n > 0) atomicOr(out + word, static_cast<std::uint32_t>(acc));
  }
};

// Pass 2 (Huffman) or the only pass (BitPack): one thread per vector.
template <bool kHuffman>
__global__ void write_kernel(EncodeArgs a) {
  __shared__ std::uint32_t bits_of[256];
  __shared__ std::uint8_t len_of[256];
  if (kHuffman) {
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
      bits_of[i] = a.enc_bits[i];
      len_of[i] = a.enc_len[i];
    }
  }
  __syncthreads();
  // Blocks along y, grid-strided: a grid has at most 65535 rows, a layer more blocks than that
  // (32 heads x 2048 token blocks at 128K).
  const int blocks = (a.tokens + a.block_size - 1) / a.block_size * a.heads;
  for (int b = blockIdx.y; b < blocks; b += gridDim.y) {
    const Place p = place_of(b, a.heads, a.tokens, a.block_size);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= p.tokens) continue;
    const std::uint8_t* v =
        a.codes + (static_cast<std::size_t>(p.first_token + i) * a.heads + p.head) * a.dim;
    std::uint64_t bitpos;
    if (kHuffman) {
      bitpos =
          static_cast<std::uint64_t>(a.block_offsets[b]) * 8 + a.vector_start[p.first_vector + i];
    } else {
      bitpos = 8 * block_layout::bitpack_block_offset(p.token_block, p.head, a.heads, a.block_size,
                                                      p.tokens, a.dim, a.width) +
               block_layout::bitpack_vector_bit(i, a.dim, a.width);
    }
    BitWriter w(a.payload, bitpos);
    for (int c = 0; c < a.dim; ++c) {
      const std::uint8_t code = v[c];
      if (kHuffman) {
        w.put(bits_of[code], len_of[code]);
      } else {
        if (code >> a.width) atomicMin(a.error, b + 1);
        w.put(code & ((1u << a.width) - 1u), a.width);
      }
    }
    w.finish();
  }
}

// rANS (docs/FORMAT.md, "rANS streams"): one warp a codec block, rans_warp::encode_block's
// encoder. Pass 1 counts each block's words (its size: 128 bytes of states and 2 a word); pass 2,
// with the blocks' offsets scanned, runs it again and writes the states and the words, each word
// at the place the decoder reads it (the last emitted first).
struct RansEncodeArgs {
  const std::uint8_t* codes;
  int tokens, heads, dim, block_size, blocks;
  bool pairs;
  const std::uint32_t* table;  // GpuBook::rans_enc
  std::uint32_t* block_bytes;
  const std::uint32_t* block_offsets;
  std::uint16_t* payload;  // the payload's words as 16-bit halves
};

struct EncodeWarp {
  __device__ __forceinline__ int lane() const { return static_cast<int>(threadIdx.x & 31u); }
  __device__ __forceinline__ std::uint32_t ballot(bool p) const {
    return __ballot_sync(0xffffffffu, p);
  }
};

template <bool kWrite>
__global__ void rans_encode_kernel(RansEncodeArgs a) {
  __shared__ std::uint32_t table[257];
  for (int i = threadIdx.x; i < 257; i += blockDim.x) table[i] = a.table[i];
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x >> 5);
  EncodeWarp w;
  for (int b = blockIdx.x * warps + static_cast<int>(threadIdx.x >> 5); b < a.blocks;
       b += gridDim.x * warps) {
    const Place p = place_of(b, a.heads, a.tokens, a.block_size);
    rans_warp::BlockCodes src;
    src.codes = a.codes + (static_cast<std::size_t>(p.first_token) * a.heads + p.head) * a.dim;
    src.token_stride = static_cast<std::uint64_t>(a.heads) * a.dim;
    src.dim = a.dim;
    src.pairs = a.pairs;
    std::uint32_t x = 0;
    if constexpr (!kWrite) {
      const std::uint32_t words = rans_warp::encode_block(
          w, src, p.tokens, table, [](std::uint32_t, std::uint32_t) {}, x);
      if (w.lane() == 0)
        a.block_bytes[b] = static_cast<std::uint32_t>(rans_warp::kStateBytes) + 2 * words;
    } else {
      std::uint16_t* block = a.payload + a.block_offsets[b] / 2;
      std::uint16_t* words = block + rans_warp::kStateBytes / 2;
      const std::uint32_t n =
          (a.block_bytes[b] - static_cast<std::uint32_t>(rans_warp::kStateBytes)) / 2;
      rans_warp::encode_block(
          w, src, p.tokens, table,
          [&](std::uint32_t e, std::uint32_t word) {
            words[n - 1 - e] = static_cast<std::uint16_t>(word);
          },
          x);
      block[2 * w.lane()] = static_cast<std::uint16_t>(x);
      block[2 * w.lane() + 1] = static_cast<std::uint16_t>(x >> 16);
    }
  }
}

constexpr int kRansWarps = CodeEncodePolicy::kRansWarps;

__global__ void set_int_kernel(int* p, int v) {
  *p = v;
}

// checks[0] += the blocks' byte counts, in 64 bits.
__global__ void sum_bytes_kernel(const std::uint32_t* bytes, int n, unsigned long long* checks) {
  unsigned long long s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    s += bytes[i];
  }
  if (s) atomicAdd(&checks[0], s);
}

// checks[1] = the first index of a code above 15 (a rANS pair table's symbols hold two 4-bit
// codes).
__global__ void first_wide_code_kernel(const std::uint8_t* codes, std::uint64_t n,
                                       unsigned long long* checks) {
  const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if (codes[i] > 15) {
      atomicMin(&checks[1], static_cast<unsigned long long>(i));
      return;  // this thread's later indices are larger
    }
  }
}

}  // namespace

cudaError_t launch_code_histogram(const std::uint8_t* codes, std::uint64_t n,
                                  unsigned long long* counts, cudaStream_t stream) {
  if (cudaError_t e = cudaMemsetAsync(counts, 0, 256 * sizeof(unsigned long long), stream)) {
    return e;
  }
  if (n == 0) return cudaSuccess;
  const std::uint64_t blocks = std::min<std::uint64_t>((n + 255) / 256, 1024);
  histogram_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(codes, n, counts);
  return cudaGetLastError();
}

int bitpack_width(const CodeCounts& counts) {
  int top = 0;
  for (int i = 0; i < 256; ++i) {
    if (counts[static_cast<std::size_t>(i)]) top = i;
  }
  return top < 4 ? 2 : top < 16 ? 4 : 8;
}

std::uint64_t bitpack_payload_bytes(int tokens, int heads, int dim, int block_size, int width) {
  return block_layout::bitpack_payload_bytes(tokens, heads, dim, block_size, width);
}

Status gpu_encode(const std::uint8_t* d_codes, int tokens, int heads, int dim, int block_size,
                  CodecKind kind, int width, const GpuBook* book, GpuCodes& out,
                  EncodeScratch& scratch, cudaStream_t stream) {
  if (kind == CodecKind::VarWidth) {
    return make_error("GPU encode: varwidth streams are not encoded on the GPU");
  }
  if (kind == CodecKind::Huffman && !book)
    return make_error("GPU encode: Huffman needs a codebook");
  const bool rans = kind == CodecKind::Rans;
  if (rans && (!book || book->rans_enc.size() != RansTable::kSymbols)) {
    return make_error("GPU encode: rANS needs a codebook with its rANS table (GpuBook::upload)");
  }
  if (kind == CodecKind::BitPack && width != 2 && width != 4 && width != 8) {
    return make_error("GPU encode: bitpack width must be 2, 4 or 8");
  }
  if (block_size < 1 || block_size > 65535) {
    return make_error("GPU encode: block size " + std::to_string(block_size) + " outside 1..65535");
  }
  out.kind = kind;
  out.tokens = tokens;
  out.heads = heads;
  out.dim = dim;
  out.block_size = block_size;
  out.width = kind == CodecKind::BitPack ? width : 0;
  const int blocks = out.blocks();
  const std::uint64_t vectors = static_cast<std::uint64_t>(tokens) * heads;
  if (scratch.error.size() == 0) KVLAB_TRY_STATUS(scratch.error.allocate(1, "GPU encode: flag"));
  set_int_kernel<<<1, 1, 0, stream>>>(scratch.error.get(), 0x7fffffff);
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU encode: reset");
  if (scratch.checks.size() == 0) {
    KVLAB_TRY_STATUS(scratch.checks.allocate(2, "GPU encode: checks"));
  }
  const unsigned long long unchecked[2] = {0, ~0ull};
  KVLAB_CUDA_TRY(cudaMemcpyAsync(scratch.checks.get(), unchecked, sizeof unchecked,
                                 cudaMemcpyHostToDevice, stream),
                 "GPU encode: reset");
  const std::uint64_t values = vectors * static_cast<std::uint64_t>(dim);
  if (rans && book->rans_pairs && values > 0) {
    // The CPU refuses such codes (check_append); the encoder would index past the table.
    const std::uint64_t grid = std::min<std::uint64_t>((values + 255) / 256, 1024);
    first_wide_code_kernel<<<static_cast<unsigned>(grid), 256, 0, stream>>>(d_codes, values,
                                                                            scratch.checks.get());
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU encode: pair symbols");
    unsigned long long first = 0;
    KVLAB_CUDA_TRY(cudaMemcpyAsync(&first, scratch.checks.get() + 1, sizeof first,
                                   cudaMemcpyDeviceToHost, stream),
                   "GPU encode: pair symbols");
    std::uint8_t code = 0;
    KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "GPU encode: pair symbols");
    if (first != ~0ull) {
      KVLAB_CUDA_TRY(cudaMemcpy(&code, d_codes + first, 1, cudaMemcpyDeviceToHost),
                     "GPU encode: pair symbols");
      const std::uint64_t row = static_cast<std::uint64_t>(heads) * dim;
      return make_error("rans codes: code " + std::to_string(code) + " at token " +
                        std::to_string(first / row) +
                        " does not fit the codebook's 4-bit pair symbols (it was built from "
                        "codes below 16)");
    }
  }

  EncodeArgs a{};
  a.codes = d_codes;
  a.tokens = tokens;
  a.heads = heads;
  a.dim = dim;
  a.block_size = block_size;
  a.width = width;
  a.error = scratch.error.get();
  RansEncodeArgs ra{};
  const int rans_grid = std::max(1, std::min((blocks + kRansWarps - 1) / kRansWarps, 65535));
  if (kind == CodecKind::Huffman || rans) {
    KVLAB_TRY_STATUS(out.block_offsets.allocate(blocks, "GPU encode: block offsets"));
    if (rans) {
      out.vector_bits.reset();
    } else {
      KVLAB_TRY_STATUS(out.vector_bits.allocate(vectors, "GPU encode: bit counts"));
      if (scratch.vector_start.size() < vectors) {
        KVLAB_TRY_STATUS(scratch.vector_start.allocate(vectors, "GPU encode: scratch"));
      }
    }
    if (scratch.block_bytes.size() < static_cast<std::size_t>(blocks)) {
      KVLAB_TRY_STATUS(scratch.block_bytes.allocate(blocks, "GPU encode: scratch"));
    }
    if (rans) {
      ra.codes = d_codes;
      ra.tokens = tokens;
      ra.heads = heads;
      ra.dim = dim;
      ra.block_size = block_size;
      ra.blocks = blocks;
      ra.pairs = book->rans_pairs;
      ra.table = book->rans_enc.get();
      ra.block_bytes = scratch.block_bytes.get();
      ra.block_offsets = out.block_offsets.get();
    } else {
      a.enc_bits = book->enc_bits.get();
      a.enc_len = book->enc_len.get();
      a.vector_bits = out.vector_bits.get();
      a.vector_start = scratch.vector_start.get();
    }
    a.block_bytes = scratch.block_bytes.get();
    a.block_offsets = out.block_offsets.get();
    if (blocks > 0) {
      if (rans) {
        rans_encode_kernel<false><<<rans_grid, 32 * kRansWarps, 0, stream>>>(ra);
      } else {
        huffman_sizes_kernel<<<blocks, kThreads, 0, stream>>>(a);
      }
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU encode: sizes");
      std::size_t temp = 0;
      KVLAB_CUDA_TRY(cub::DeviceScan::ExclusiveSum(nullptr, temp, a.block_bytes,
                                                   out.block_offsets.get(), blocks, stream),
                     "GPU encode: scan");
      if (scratch.cub_temp.size() < temp) {
        KVLAB_TRY_STATUS(scratch.cub_temp.allocate(temp, "GPU encode: scan scratch"));
      }
      KVLAB_CUDA_TRY(cub::DeviceScan::ExclusiveSum(scratch.cub_temp.get(), temp, a.block_bytes,
                                                   out.block_offsets.get(), blocks, stream),
                     "GPU encode: scan");
      // The payload's size summed in 64 bits: the last offset plus the last block's bytes would
      // be the same below 4 GiB, but the u32 scan wraps above it, where the check below fires.
      sum_bytes_kernel<<<std::min((blocks + 255) / 256, 1024), 256, 0, stream>>>(
          a.block_bytes, blocks, scratch.checks.get());
      KVLAB_CUDA_TRY(cudaGetLastError(), "GPU encode: payload size");
      unsigned long long total = 0;
      KVLAB_CUDA_TRY(cudaMemcpyAsync(&total, scratch.checks.get(), sizeof total,
                                     cudaMemcpyDeviceToHost, stream),
                     "GPU encode: payload size");
      int err = 0;
      KVLAB_CUDA_TRY(
          cudaMemcpyAsync(&err, scratch.error.get(), sizeof(int), cudaMemcpyDeviceToHost, stream),
          "GPU encode: flag");
      KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "GPU encode: sizes");
      if (err != 0x7fffffff) {
        return make_error("GPU encode: huffman codes: a vector of block " +
                          std::to_string(err - 1) + " takes more than 65535 bits");
      }
      out.payload_bytes = total;
    } else {
      out.payload_bytes = 0;
    }
  } else {
    out.payload_bytes = bitpack_payload_bytes(tokens, heads, dim, block_size, width);
    out.block_offsets.reset();
    out.vector_bits.reset();
  }
  if (out.payload_bytes > 0xffffffffull) {
    return make_error("GPU encode: the payload passes 2^32 - 1 bytes (u32 block offsets)");
  }
  KVLAB_TRY_STATUS(out.payload.allocate(word_stream::payload_words_for(out.payload_bytes),
                                        "GPU encode: payload"));
  KVLAB_CUDA_TRY(cudaMemsetAsync(out.payload.get(), 0, out.payload.bytes(), stream),
                 "GPU encode: clearing the payload");
  a.payload = out.payload.get();
  ra.payload = reinterpret_cast<std::uint16_t*>(out.payload.get());
  if (blocks > 0 && rans) {
    rans_encode_kernel<true><<<rans_grid, 32 * kRansWarps, 0, stream>>>(ra);
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU encode: write");
  } else if (blocks > 0) {
    const dim3 grid((block_size + kThreads - 1) / kThreads, std::min(blocks, 65535));
    if (kind == CodecKind::Huffman) {
      write_kernel<true><<<grid, kThreads, 0, stream>>>(a);
    } else {
      write_kernel<false><<<grid, kThreads, 0, stream>>>(a);
    }
    KVLAB_CUDA_TRY(cudaGetLastError(), "GPU encode: write");
  }
  int err = 0;
  KVLAB_CUDA_TRY(
      cudaMemcpyAsync(&err, scratch.error.get(), sizeof(int), cudaMemcpyDeviceToHost, stream),
      "GPU encode: flag");
  KVLAB_CUDA_TRY(cudaStreamSynchronize(stream), "GPU encode: write");
  if (err != 0x7fffffff) {
    return make_error("GPU encode: bitpack codes: block " + std::to_string(err - 1) +
                      " holds a code wider than " + std::to_string(width) + " bits");
  }
  return Ok{};
}

namespace {

Status check_codes_shape(std::size_t n, int tokens, int heads, int dim) {
  if (tokens < 0 || heads <= 0 || dim <= 0) {
    return make_error("GPU encode: tokens must be >= 0 and heads, dim positive");
  }
  if (n != static_cast<std::size_t>(tokens) * heads * dim) {
    return make_error("GPU encode: " + std::to_string(n) + " codes for a [" +
                      std::to_string(tokens) + ", " + std::to_string(heads) + ", " +
                      std::to_string(dim) + "] tensor");
  }
  return Ok{};
}

Result<CodeCounts> histogram_of(const std::uint8_t* d_codes, std::uint64_t n) {
  DeviceArray<unsigned long long> d_counts;
  KVLAB_TRY_STATUS(d_counts.allocate(256, "GPU histogram"));
  KVLAB_CUDA_TRY(launch_code_histogram(d_codes, n, d_counts.get(), nullptr), "GPU histogram");
  unsigned long long c[256];
  KVLAB_TRY_STATUS(d_counts.download(c, 256, "GPU histogram"));
  CodeCounts counts{};
  for (int i = 0; i < 256; ++i) counts[static_cast<std::size_t>(i)] = c[i];
  return counts;
}

}  // namespace

Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                  int dim, const CodecConfig& config, const HuffmanCodebook* book) {
  KVLAB_TRY_STATUS(check_codes_shape(codes.size(), tokens, heads, dim));
  if (needs_book(config.kind) && !book) {
    return make_error(std::string("GPU encode: ") + std::string(codec_id(config.kind)) +
                      " needs a codebook");
  }
  KVLAB_TRY_STATUS(require_gpu());
  DeviceArray<std::uint8_t> d_codes;
  KVLAB_TRY_STATUS(d_codes.upload(codes.data(), codes.size(), "GPU encode: uploading codes"));
  int width = config.bitpack_width;
  if (config.kind == CodecKind::BitPack && width == 0) {
    auto counts = histogram_of(d_codes.get(), codes.size());
    if (!counts) return counts.error();
    width = bitpack_width(*counts);
  }
  GpuBook gbook;
  if (needs_book(config.kind)) KVLAB_TRY_STATUS(gbook.upload(*book, {config.kind}));
  GpuCodes out;
  EncodeScratch scratch;
  KVLAB_TRY_STATUS(gpu_encode(d_codes.get(), tokens, heads, dim, config.block_size, config.kind,
                              width, &gbook, out, scratch, nullptr));
  return out.download();
}

Result<GpuLayer> compress_layer(std::span<const std::uint16_t> keys,
                                std::span<const std::uint16_t> values, int tokens, int kv_heads,
                                int head_dim, const GpuCompressOptions& options) {
  KVLAB_TRY_STATUS(check_codes_shape(keys.size(), tokens, kv_heads, head_dim));
  KVLAB_TRY_STATUS(check_codes_shape(values.size(), tokens, kv_heads, head_dim));
  if (tokens == 0) return make_error("GPU compress: no tokens to compress");
  if (!(options.rel_scale > 0.0) || options.rel_scale > 1.0) {
    return make_error("GPU compress: rel_scale must be in (0, 1]");
  }
  if (options.block_size < 1 || options.block_size > 65535) {
    return make_error("GPU compress: block size outside 1..65535");
  }
  KVLAB_TRY_STATUS(require_gpu());
  auto impl = std::make_unique<GpuLayer::Impl>();
  GpuLayer::Impl& g = *impl;
  g.kv_heads = kv_heads;
  g.head_dim = head_dim;
  g.block_size = options.block_size;
  g.tokens = tokens;
  g.codec = options.codec;
  const std::size_t n = keys.size();
  DeviceArray<std::uint16_t> dx;
  DeviceArray<std::uint8_t> dk, dv;
  KVLAB_TRY_STATUS(dk.allocate(n, "GPU compress: key codes"));
  KVLAB_TRY_STATUS(dv.allocate(n, "GPU compress: value codes"));
  GroupArgs qa = group_args(detail::kvcomp_group_spec(options.block_size, options.rel_scale),
                            DType::F16, tokens, kv_heads, head_dim);
  for (int r = 0; r < 2; ++r) {
    const TensorRole role = r == 0 ? TensorRole::Key : TensorRole::Value;
    KVLAB_TRY_STATUS(dx.upload(r == 0 ? keys.data() : values.data(), n, "GPU compress: upload"));
    const std::size_t units = group_units(qa, role);
    DeviceArray<float>& steps = r == 0 ? g.key_steps : g.value_steps;
    DeviceArray<float>& mins = r == 0 ? g.key_mins : g.value_mins;
    KVLAB_TRY_STATUS(steps.allocate(units, "GPU compress: steps"));
    KVLAB_TRY_STATUS(mins.allocate(units, "GPU compress: minimums"));
    qa.x = dx.get();
    qa.codes = r == 0 ? dk.get() : dv.get();
    qa.steps = steps.get();
    qa.mins = mins.get();
    KVLAB_CUDA_TRY(launch_group_quantize(qa, role, nullptr), "GPU compress: quantize");
  }
  int width = options.bitpack_width;
  for (int r = 0; r < 2; ++r) {
    const bool is_key = r == 0;
    const std::uint8_t* codes = is_key ? dk.get() : dv.get();
    GpuBook& book = is_key ? g.key_book : g.value_book;
    if (needs_book(options.codec)) {
      const bool rans = options.codec == CodecKind::Rans;
      const HuffmanCodebook* given = is_key ? options.key_book : options.value_book;
      std::optional<HuffmanCodebook> built;
      if (!given) {
        auto counts = histogram_of(codes, n);
        if (!counts) return counts.error();
        auto b = HuffmanCodebook::from_histogram(*counts, false, rans);
        if (!b) return make_error(std::string("GPU compress: codebook: ") + b.message());
        built = std::move(*b);
        given = &*built;
      }
      KVLAB_TRY_STATUS(book.upload(*given, {rans ? CodecKind::Rans : CodecKind::Huffman}));
    } else if (width == 0) {
      // The keys' codes fix the width, as the CPU cache does; values must fit it.
      auto counts = histogram_of(codes, n);
      if (!counts) return counts.error();
      width = bitpack_width(*counts);
    }
    EncodeScratch scratch;
    if (Status st = gpu_encode(codes, tokens, kv_heads, head_dim, options.block_size, options.codec,
                               width, &book, is_key ? g.keys : g.values, scratch, nullptr);
        !st) {
      return make_error(std::string("GPU compress: ") + (is_key ? "keys: " : "values: ") +
                        st.message());
    }
  }
  return GpuLayer(std::move(impl));
}

}  // namespace kvlab::cuda
