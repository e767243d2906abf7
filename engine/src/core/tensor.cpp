#include "kvlab/engine/core/tensor.h"

#include <cassert>

namespace kvlab {

float TensorView::at(int token, int head, int d) const {
  float v;
  convert_to_float(m_dtype, {row_ptr(token, head) + d * dtype_size(m_dtype), dtype_size(m_dtype)},
                   {&v, 1});
  return v;
}

void TensorView::load_row(int token, int head, std::span<float> out) const {
  assert(out.size() >= static_cast<std::size_t>(m_dim));
  const std::size_t n = static_cast<std::size_t>(m_dim);
  convert_to_float(m_dtype, {row_ptr(token, head), n * dtype_size(m_dtype)}, out.first(n));
}

std::vector<float> TensorView::to_float() const {
  std::vector<float> out(elements());
  to_float(out);
  return out;
}

void TensorView::to_float(std::span<float> out) const {
  assert(out.size() >= elements());
  if (contiguous()) {
    convert_to_float(m_dtype, {m_data, elements() * dtype_size(m_dtype)}, out.first(elements()));
    return;
  }
  std::span<float> dst = out;
  for (int t = 0; t < m_tokens; ++t) {
    for (int h = 0; h < m_heads; ++h, dst = dst.subspan(static_cast<std::size_t>(m_dim))) {
      load_row(t, h, dst);
    }
  }
}

TensorView TensorView::head(int h) const {
  assert(h >= 0 && h < m_heads);
  return TensorView(m_data + h * m_head_stride * static_cast<std::ptrdiff_t>(dtype_size(m_dtype)),
                    m_dtype, m_tokens, 1, m_dim, m_token_stride, m_head_stride);
}

TensorView TensorView::token_range(int begin, int end) const {
  assert(begin >= 0 && begin <= end && end <= m_tokens);
  return TensorView(
      m_data + begin * m_token_stride * static_cast<std::ptrdiff_t>(dtype_size(m_dtype)), m_dtype,
      end - begin, m_heads, m_dim, m_token_stride, m_head_stride);
}

Tensor::Tensor(DType dtype, int tokens, int heads, int dim)
    : m_dtype(dtype),
      m_tokens(tokens),
      m_heads(heads),
      m_dim(dim),
      m_bytes(static_cast<std::size_t>(tokens) * heads * dim * dtype_size(dtype)) {}

Tensor Tensor::from_float(std::span<const float> values, DType dtype, int tokens, int heads,
                          int dim) {
  Tensor t(dtype, tokens, heads, dim);
  assert(values.size() == t.elements());
  convert_from_float(dtype, values, {t.data(), t.elements() * dtype_size(dtype)});
  return t;
}

void Tensor::set(int token, int head, int d, float value) {
  const std::size_t index = (static_cast<std::size_t>(token) * m_heads + head) * m_dim + d;
  convert_from_float(m_dtype, {&value, 1},
                     std::span(m_bytes).subspan(index * dtype_size(m_dtype), dtype_size(m_dtype)));
}

void Tensor::store_row(int token, int head, std::span<const float> values) {
  const std::size_t n = static_cast<std::size_t>(m_dim);
  assert(values.size() >= n);
  const std::size_t index = (static_cast<std::size_t>(token) * m_heads + head) * m_dim;
  convert_from_float(
      m_dtype, values.first(n),
      std::span(m_bytes).subspan(index * dtype_size(m_dtype), n * dtype_size(m_dtype)));
}

}  // namespace kvlab
