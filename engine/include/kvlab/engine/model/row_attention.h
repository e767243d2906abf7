// A decode step's attention run elsewhere than the store that holds the cache (issue 47 part 1:
// "the fused kernels where they exist, CPU now, CUDA when a GPU is present"). A method store
// (kv_store.h) whose rows are in a format a row-reading decode kernel takes in place
// (row_decode.h: fp16, FP8 E4M3, llama.cpp's q8_0 and q4_0, NVFP4) hands each layer's rows, as it
// writes them, to a RowAttention, which keeps its own copy (on a GPU: device memory, appended a
// token at a time) and attends over it at every decode step. The store keeps its own rows: the
// prompt's attention, a prompt's later chunks and the references read them on the CPU.
//
// The CUDA implementation is kernels/ (cuda::make_row_attention, decode_attention.cuh); the CPU one
// here (make_reference_row_attention) reads the same rows through row_decode.h's arithmetic, the
// same definitions the kernel runs, with double sums: the reference the GPU's output is tested
// against and the check, on machines without a GPU, that a store hands over the rows it stores.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/row_decode.h"

namespace kvlab {

// The shape a RowAttention serves: a model's layers, its query and KV heads, head size, and the
// most tokens a layer will hold (0: not known; storage then grows as rows come).
struct RowAttentionShape {
  int layers = 0, heads = 0, kv_heads = 0, head_dim = 0, max_tokens = 0;
};

// What a layer's rows need beside their bytes, fixed when its prompt is stored.
struct RowParams {
  row_decode::Format format = row_decode::Format::Fp16;
  // FP8 E4M3: x = e4m3(code) * scale of the row's KV head (a per-tensor scale repeated).
  std::vector<float> key_head_scales, value_head_scales;
  // NVFP4: x = e2m1(code) * e4m3(block scale) / global.
  float key_global = 1.f, value_global = 1.f;
};

// Tokens of one layer, in order, each `kv_heads` rows of a KV head's `head_dim` channels:
// row_decode::row_bytes(format, head_dim) bytes a row (fp16: the channels' IEEE half bits;
// NVFP4: only its head_dim / 2 nibble bytes here, its head_dim / 16 E4M3 block scales a row in
// key_scales / value_scales, in the same order).
struct StoredRows {
  int tokens = 0;
  std::span<const std::uint8_t> keys, values;
  std::span<const std::uint8_t> key_scales, value_scales;  // NVFP4
};

class RowAttention {
 public:
  virtual ~RowAttention();
  // "cuda (NVIDIA H200)", "cpu reference".
  virtual std::string name() const = 0;
  // A layer's parameters, before its first rows; a second call for a layer is an error.
  virtual Status begin_layer(int layer, const RowParams& params) = 0;
  // The layer's next tokens, after those it holds.
  virtual Status append(int layer, const StoredRows& rows) = 0;
  // out [heads][head_dim] = softmax(q . k / sqrt(head_dim)) . v over every token the layer holds,
  // for q [heads][head_dim] (query head h reads KV head h / (heads / kv_heads)), in the frame the
  // rows are stored in (a store that rotates rows rotates q before and out after).
  virtual Status attend(int layer, std::span<const float> q, std::span<float> out) = 0;
  // Bytes it holds for the cache: the rows and their parameters.
  virtual std::uint64_t bytes() const = 0;
  virtual int tokens(int layer) const = 0;
};

// The formats a RowAttention takes.
bool row_attention_takes(row_decode::Format format);

// Bytes of one row in StoredRows' data part (NVFP4: its nibbles only) and in its scale part (0
// but for NVFP4).
std::size_t stored_row_bytes(row_decode::Format format, int head_dim);
std::size_t stored_scale_bytes(row_decode::Format format, int head_dim);

// Ok when a RowAttention for `kv_heads` KV heads takes `params` for `layer`: a format it reads,
// FP8's `kv_heads` scales a role, NVFP4's global scales finite and positive (the kernel divides
// by them); otherwise an Error naming the layer and the problem.
Status check_row_params(int layer, int kv_heads, const RowParams& params);

// Ok when `rows` is a whole number of tokens of `kv_heads` rows of `format`, appended after `held`
// tokens (the count stays an int); otherwise an Error naming the layer, the sizes needed and
// given.
Status check_stored_rows(int layer, row_decode::Format format, int kv_heads, int head_dim, int held,
                         const StoredRows& rows);

// The CPU reference described above: head_dim a multiple of 32 up to 256 (the GPU's: 64, 128 or
// 256), at most 8 query heads per KV head. Errors name a shape it cannot serve.
Result<std::unique_ptr<RowAttention>> make_reference_row_attention(const RowAttentionShape& shape);

}  // namespace kvlab
