// Quantizers turn one K or V tensor [tokens, heads, dim] into codes plus the parameters needed
// to reconstruct it, and account for every byte they keep.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kvlab/engine/core/aligned.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/tensor.h"

namespace kvlab {

enum class TensorRole : std::uint8_t { Key, Value };
inline const char* role_name(TensorRole r) {
  return r == TensorRole::Key ? "key" : "value";
}

// Bytes of the fixed header every quantized tensor carries (shape and method, 4 x u32).
inline constexpr std::uint64_t kTensorHeaderBytes = 16;

// Bytes kept for one tensor, by component. Everything stored counts.
struct ByteBreakdown {
  std::uint64_t codes = 0;        // quantized codes (packed)
  std::uint64_t scales = 0;       // scales / steps
  std::uint64_t zero_points = 0;  // minimums / zero-points
  std::uint64_t residual = 0;     // values kept in fp16 (recent windows)
  std::uint64_t metadata = 0;     // headers, tier bounds, codec offsets, bit counts, codebooks

  std::uint64_t total() const { return codes + scales + zero_points + residual + metadata; }
  ByteBreakdown& operator+=(const ByteBreakdown& o);
};

// Counts of each code value for one group of codes of equal width ("int4 tier", ...).
struct CodeHistogram {
  std::string label;
  int bits = 0;
  std::vector<std::uint64_t> counts;  // 2^bits bins
};

// The compressed form of one tensor. The layout of `codes` and `params` belongs to the
// quantizer that produced it; other code reads only sizes and the histogram.
struct QuantizedTensor {
  TensorRole role = TensorRole::Key;
  int tokens = 0, heads = 0, dim = 0;
  // Huge pages from 4 MiB up (a 32K tensor's are 32 MiB, faulted in once per 2 MiB).
  HugePageBytes codes;
  std::vector<float> params;            // scales, steps and minimums, method-defined order
  std::vector<std::uint16_t> residual;  // fp16 values kept as they are
  std::vector<int> bounds;              // method-defined token boundaries (tiers)
  ByteBreakdown bytes;
};

// The largest code KVComp's quantizer can give at this relative error bound, whatever the data:
// round(1 / rel_scale), at most 255 (codes are bytes). Where it is below 16, the codes fit 4
// bits and a Huffman book may code them in pairs (choose_codebook()).
int kvcomp_max_code(double rel_scale);

class Quantizer {
 public:
  virtual ~Quantizer() = default;
  virtual std::string name() const = 0;  // e.g. "kivi-2 (G=32, R=128)"
  virtual Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const = 0;
  // Writes tokens*heads*dim floats, row-major [token][head][dim]; `out` holds exactly that many.
  virtual void dequantize(const QuantizedTensor& q, std::span<float> out) const = 0;
  // Token rows [first, last) of what dequantize() writes, into `out` ((last - first) * heads *
  // dim floats), so a caller can hold a tile of a reconstruction at a time rather than all of it
  // (compress measures its errors so). Returns false, writing nothing, where this quantizer
  // reconstructs only whole tensors: the caller then calls dequantize(). An empty range asks which
  // it is.
  virtual bool dequantize_tokens(const QuantizedTensor& q, int first, int last,
                                 std::span<float> out) const {
    (void)q, (void)first, (void)last, (void)out;
    return false;
  }
  virtual std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const = 0;
};

}  // namespace kvlab
