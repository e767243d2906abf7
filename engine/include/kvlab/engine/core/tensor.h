// Tensors of a KV cache: [tokens, heads, head_dim], stored in their source dtype.
// Tensor owns its bytes; TensorView looks at a tensor (or part of one) without copying.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kvlab/engine/core/dtype.h"

namespace kvlab {

// A read-only view of [tokens, heads, dim] elements. The last axis is contiguous; tokens and
// heads are strided, so a view of one head or of a token range shares the tensor's memory.
class TensorView {
 public:
  TensorView() = default;
  TensorView(const std::byte* data, DType dtype, int tokens, int heads, int dim,
             std::ptrdiff_t token_stride, std::ptrdiff_t head_stride)
      : m_data(data),
        m_dtype(dtype),
        m_tokens(tokens),
        m_heads(heads),
        m_dim(dim),
        m_token_stride(token_stride),
        m_head_stride(head_stride) {}

  DType dtype() const { return m_dtype; }
  int tokens() const { return m_tokens; }
  int heads() const { return m_heads; }
  int dim() const { return m_dim; }
  std::size_t elements() const { return static_cast<std::size_t>(m_tokens) * m_heads * m_dim; }
  std::ptrdiff_t token_stride() const { return m_token_stride; }  // in elements
  std::ptrdiff_t head_stride() const { return m_head_stride; }    // in elements
  bool contiguous() const {
    return m_head_stride == m_dim && m_token_stride == static_cast<std::ptrdiff_t>(m_heads) * m_dim;
  }

  // Pointer to the first element of row (token, head).
  const std::byte* row_ptr(int token, int head) const {
    return m_data + (token * m_token_stride + head * m_head_stride) *
                        static_cast<std::ptrdiff_t>(dtype_size(m_dtype));
  }
  float at(int token, int head, int d) const;
  // Converts one row of `dim` elements to float, into the first dim() floats of `out`.
  void load_row(int token, int head, std::span<float> out) const;
  // Converts the whole view to float, row-major [tokens][heads][dim].
  std::vector<float> to_float() const;
  // The same into `out` (elements() floats), for callers that reuse one buffer.
  void to_float(std::span<float> out) const;

  TensorView head(int h) const;                      // [tokens, 1, dim]
  TensorView token_range(int begin, int end) const;  // [end-begin, heads, dim]

 private:
  const std::byte* m_data = nullptr;
  DType m_dtype = DType::F16;
  int m_tokens = 0, m_heads = 0, m_dim = 0;
  std::ptrdiff_t m_token_stride = 0, m_head_stride = 0;
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, int tokens, int heads, int dim);  // zero-filled
  static Tensor from_float(std::span<const float> values, DType dtype, int tokens, int heads,
                           int dim);

  DType dtype() const { return m_dtype; }
  int tokens() const { return m_tokens; }
  int heads() const { return m_heads; }
  int dim() const { return m_dim; }
  std::size_t elements() const { return static_cast<std::size_t>(m_tokens) * m_heads * m_dim; }
  std::size_t nbytes() const { return m_bytes.size(); }
  std::byte* data() { return m_bytes.data(); }
  const std::byte* data() const { return m_bytes.data(); }
  bool empty() const { return elements() == 0; }

  TensorView view() const {
    return TensorView(m_bytes.data(), m_dtype, m_tokens, m_heads, m_dim,
                      static_cast<std::ptrdiff_t>(m_heads) * m_dim, m_dim);
  }
  void set(int token, int head, int d, float value);
  float at(int token, int head, int d) const { return view().at(token, head, d); }
  // Writes one row: the first dim() floats of `values`.
  void store_row(int token, int head, std::span<const float> values);

 private:
  DType m_dtype = DType::F16;
  int m_tokens = 0, m_heads = 0, m_dim = 0;
  std::vector<std::byte> m_bytes;
};

}  // namespace kvlab
