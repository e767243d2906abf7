#include "kvlab/engine/core/tensor.h"

#include "kvlab/engine/core/aligned.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cassert>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

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

void detail::ReleaseTensorBytes::operator()(std::byte* p) const noexcept {
  if (mapped_bytes == 0) {
    std::free(p);
  } else {
    unmap_huge_buffer(p, mapped_bytes);
  }
}

void Tensor::allocate(bool zero) {
  m_nbytes = elements() * dtype_size(m_dtype);
  m_borrowed_from.reset();
  m_owned.reset();
  m_data = nullptr;
  if (m_nbytes == 0) return;
  if (m_nbytes < detail::kHugeBufferBytes) {
    auto* p = static_cast<std::byte*>(zero ? std::calloc(m_nbytes, 1) : std::malloc(m_nbytes));
    if (p == nullptr) throw std::bad_alloc();
    m_owned = std::unique_ptr<std::byte, detail::ReleaseTensorBytes>(p, {});
  } else {
    // A fresh mapping reads as zeros, so `zero` costs nothing here; huge pages halve the cost
    // of the first write (aligned.h).
    m_owned = std::unique_ptr<std::byte, detail::ReleaseTensorBytes>(
        static_cast<std::byte*>(detail::map_huge_buffer(m_nbytes)), {m_nbytes});
  }
  m_data = m_owned.get();
}

Tensor::Tensor(DType dtype, int tokens, int heads, int dim)
    : m_dtype(dtype), m_tokens(tokens), m_heads(heads), m_dim(dim) {
  allocate(true);
}

Tensor Tensor::uninitialized(DType dtype, int tokens, int heads, int dim) {
  Tensor t;
  t.m_dtype = dtype;
  t.m_tokens = tokens;
  t.m_heads = heads;
  t.m_dim = dim;
  t.allocate(false);
  return t;
}

Tensor Tensor::borrowed(std::shared_ptr<const void> owner, const std::byte* data, DType dtype,
                        int tokens, int heads, int dim) {
  assert(owner != nullptr);
  assert(reinterpret_cast<std::uintptr_t>(data) % dtype_size(dtype) == 0);
  Tensor t;
  t.m_dtype = dtype;
  t.m_tokens = tokens;
  t.m_heads = heads;
  t.m_dim = dim;
  t.m_nbytes = t.elements() * dtype_size(dtype);
  t.m_borrowed_from = std::move(owner);
  t.m_data = data;
  return t;
}

Tensor::Tensor(const Tensor& other)
    : m_dtype(other.m_dtype),
      m_tokens(other.m_tokens),
      m_heads(other.m_heads),
      m_dim(other.m_dim),
      m_nbytes(other.m_nbytes),
      m_borrowed_from(other.m_borrowed_from),
      m_data(other.m_data) {
  if (other.m_owned) {
    allocate(false);
    std::memcpy(m_owned.get(), other.m_data, m_nbytes);
  }
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor::Tensor(Tensor&& other) noexcept
    : m_dtype(other.m_dtype),
      m_tokens(std::exchange(other.m_tokens, 0)),
      m_heads(std::exchange(other.m_heads, 0)),
      m_dim(std::exchange(other.m_dim, 0)),
      m_nbytes(std::exchange(other.m_nbytes, 0)),
      m_owned(std::move(other.m_owned)),
      m_borrowed_from(std::move(other.m_borrowed_from)),
      m_data(std::exchange(other.m_data, nullptr)) {}

Tensor& Tensor::operator=(Tensor&& other) noexcept {
  if (this != &other) {
    m_dtype = other.m_dtype;
    m_tokens = std::exchange(other.m_tokens, 0);
    m_heads = std::exchange(other.m_heads, 0);
    m_dim = std::exchange(other.m_dim, 0);
    m_nbytes = std::exchange(other.m_nbytes, 0);
    m_owned = std::move(other.m_owned);
    m_borrowed_from = std::move(other.m_borrowed_from);
    m_data = std::exchange(other.m_data, nullptr);
  }
  return *this;
}

std::byte* Tensor::mutable_data() {
  if (is_borrowed()) {
    const std::byte* from = m_data;
    const auto keep = std::move(m_borrowed_from);  // alive until the copy is made
    allocate(false);
    std::memcpy(m_owned.get(), from, m_nbytes);
  }
  return m_owned.get();
}

void Tensor::release_pages() const {
  if (!is_borrowed() || m_nbytes == 0) return;
  // Whole pages inside the tensor only: its neighbours in the file may still be in use.
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = (reinterpret_cast<std::uintptr_t>(m_data) + page - 1) & ~(page - 1);
  const auto end = (reinterpret_cast<std::uintptr_t>(m_data) + m_nbytes) & ~(page - 1);
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

Tensor Tensor::from_float(std::span<const float> values, DType dtype, int tokens, int heads,
                          int dim) {
  Tensor t = uninitialized(dtype, tokens, heads, dim);
  assert(values.size() == t.elements());
  convert_from_float(dtype, values, {t.mutable_data(), t.nbytes()});
  return t;
}

void Tensor::set(int token, int head, int d, float value) {
  const std::size_t index = (static_cast<std::size_t>(token) * m_heads + head) * m_dim + d;
  convert_from_float(m_dtype, {&value, 1},
                     std::span(mutable_data(), m_nbytes)
                         .subspan(index * dtype_size(m_dtype), dtype_size(m_dtype)));
}

void Tensor::store_row(int token, int head, std::span<const float> values) {
  const std::size_t n = static_cast<std::size_t>(m_dim);
  assert(values.size() >= n);
  const std::size_t index = (static_cast<std::size_t>(token) * m_heads + head) * m_dim;
  convert_from_float(m_dtype, values.first(n),
                     std::span(mutable_data(), m_nbytes)
                         .subspan(index * dtype_size(m_dtype), n * dtype_size(m_dtype)));
}

void Tensor::store_tokens(int first, std::span<const float> values) {
  const std::size_t token = static_cast<std::size_t>(m_heads) * m_dim;
  assert(token > 0 && values.size() % token == 0);
  assert(static_cast<std::size_t>(first) + values.size() / token <=
         static_cast<std::size_t>(m_tokens));
  const std::size_t bytes = dtype_size(m_dtype);
  convert_from_float(
      m_dtype, values,
      std::span(mutable_data(), m_nbytes)
          .subspan(static_cast<std::size_t>(first) * token * bytes, values.size() * bytes));
}

}  // namespace kvlab
