// Tensors of a KV cache: [tokens, heads, head_dim], stored in their source dtype.
// Tensor owns (or borrows) its bytes; TensorView looks at a tensor (or part of one) without
// copying.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
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

  // Floats in memory as a contiguous [x.size() / (heads * dim), heads, dim] view.
  static TensorView of_floats(std::span<const float> x, int heads, int dim) {
    const std::size_t row = static_cast<std::size_t>(heads) * static_cast<std::size_t>(dim);
    return TensorView(reinterpret_cast<const std::byte*>(x.data()), DType::F32,
                      row > 0 ? static_cast<int>(x.size() / row) : 0, heads, dim,
                      static_cast<std::ptrdiff_t>(row), dim);
  }

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

namespace detail {
// Frees a Tensor's own storage: malloc'd for small tensors, a mapping of its own with huge pages
// for large ones.
struct ReleaseTensorBytes {
  std::size_t mapped_bytes = 0;  // 0: malloc'd; else a huge-page mapping (aligned.h)
  void operator()(std::byte* p) const noexcept;
};
}  // namespace detail

// Owns its bytes, or borrows them from memory something else keeps alive (a mapped file: see
// borrowed()). A borrowed tensor is read in place; the first write (mutable_data(), set,
// store_row) copies its bytes into storage of its own, so writing never touches the file.
class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, int tokens, int heads, int dim);  // zero-filled
  // Storage whose bytes the caller overwrites at once: no zero-fill for small tensors. (Large
  // ones, in either constructor, get huge pages that read as zeros until written.)
  static Tensor uninitialized(DType dtype, int tokens, int heads, int dim);
  static Tensor from_float(std::span<const float> values, DType dtype, int tokens, int heads,
                           int dim);
  // Bytes at `data` (contiguous [tokens, heads, dim], aligned to the dtype) that `owner` keeps
  // alive; copies of the tensor share them.
  static Tensor borrowed(std::shared_ptr<const void> owner, const std::byte* data, DType dtype,
                         int tokens, int heads, int dim);

  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&& other) noexcept;  // leaves `other` empty
  Tensor& operator=(Tensor&& other) noexcept;
  ~Tensor() = default;

  DType dtype() const { return m_dtype; }
  int tokens() const { return m_tokens; }
  int heads() const { return m_heads; }
  int dim() const { return m_dim; }
  std::size_t elements() const { return static_cast<std::size_t>(m_tokens) * m_heads * m_dim; }
  std::size_t nbytes() const { return m_nbytes; }
  const std::byte* data() const { return m_data; }
  // The bytes to write; a borrowed tensor first copies them into storage of its own.
  std::byte* mutable_data();
  bool empty() const { return elements() == 0; }
  bool is_borrowed() const { return m_borrowed_from != nullptr; }
  // A borrowed tensor read through: its pages leave this process's resident memory (the kernel
  // reads them from the file again if they are touched). No effect on a tensor that owns its
  // bytes. For runs that stream a mapped cache layer by layer.
  void release_pages() const;

  TensorView view() const {
    return TensorView(m_data, m_dtype, m_tokens, m_heads, m_dim,
                      static_cast<std::ptrdiff_t>(m_heads) * m_dim, m_dim);
  }
  void set(int token, int head, int d, float value);
  float at(int token, int head, int d) const { return view().at(token, head, d); }
  // Writes one row: the first dim() floats of `values`.
  void store_row(int token, int head, std::span<const float> values);
  // Writes whole tokens from `first` on: `values` holds a multiple of heads() * dim() floats.
  void store_tokens(int first, std::span<const float> values);

 private:
  void allocate(bool zero);

  DType m_dtype = DType::F16;
  int m_tokens = 0, m_heads = 0, m_dim = 0;
  std::size_t m_nbytes = 0;
  std::unique_ptr<std::byte, detail::ReleaseTensorBytes> m_owned;
  std::shared_ptr<const void> m_borrowed_from;
  const std::byte* m_data = nullptr;  // m_owned's start, or the borrowed bytes
};

}  // namespace kvlab
