// llama.cpp's KV-cache block types (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl) as a Quantizer.
//
// llama.cpp (src/llama-kv-cache.cpp, llama_kv_cache's constructor) keeps K of a layer as a ggml
// tensor [n_embd_k_gqa, kv_size] of the cache type: one row per token of n_head_kv × head_dim
// values, head after head; cpy_k/cpy_v write new rows with ggml_set_rows, which quantizes each
// row in 32-value blocks (ggml_quantize). Since head_dim is a multiple of 32 no block spans two
// heads, so the blocks of a token row are the blocks of its heads in order, and `codes` here
// holds exactly the bytes of llama.cpp's cache rows.
#include "quant/ggml_block_quantizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/row_loader.h"
#include "kvlab/engine/quant/rotation.h"
#include "quant/hadamard16.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#define KVLAB_GGML_ROT_AVX512 1
#endif

namespace kvlab::detail {

namespace {

constexpr int kBlock = 32;
// Token rows converted, rotated and quantized at a time: about 32 KiB of floats, so that the
// buffer stays in L1 between the three passes.
constexpr std::size_t kGgmlChunkValues = 8192;

#if defined(KVLAB_GGML_ROT_AVX512)
// hadamard_transform of N consecutive floats, N = 64, 128 or 256, in registers.
template <int N>
void hadamard_n(float* x) {
  constexpr int kV = N / 16;
  // Unrolled whole, so that v stays in registers (GCC otherwise keeps it on the stack).
  __m512 v[kV];
#pragma GCC unroll 16
  for (int i = 0; i < kV; ++i) v[i] = hadamard16(_mm512_loadu_ps(x + 16 * i));
#pragma GCC unroll 4
  for (int h = 1; h < kV; h *= 2) {
#pragma GCC unroll 8
    for (int p = 0; p < kV / 2; ++p) {  // the pairs (j, j + h) of this stage
      const int j = p / h * 2 * h + p % h;
      const __m512 a = v[j], b = v[j + h];
      v[j] = _mm512_add_ps(a, b);
      v[j + h] = _mm512_sub_ps(a, b);
    }
  }
  const __m512 scale = _mm512_set1_ps(hadamard_scale(N));
#pragma GCC unroll 16
  for (int i = 0; i < kV; ++i) _mm512_storeu_ps(x + 16 * i, _mm512_mul_ps(v[i], scale));
}

// Whether all n floats (n % 16 == 0) are finite.
inline bool all_finite(const float* x, int n) {
  __mmask16 bad = 0;
  for (int i = 0; i < n; i += 16) bad |= _mm512_fpclass_ps_mask(_mm512_loadu_ps(x + i), 0x99);
  return bad == 0;
}
#endif

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

class GgmlBlockQuantizer final : public Quantizer {
 public:
  GgmlBlockQuantizer(GgmlType type, bool hadamard) : m_type(type), m_hadamard(hadamard) {
    const GgmlTypeInfo* info = ggml_type_info(type);
    m_name = info != nullptr ? lower(info->name) : fmt::format("type {}", static_cast<int>(type));
    m_type_size = info != nullptr ? info->type_size : 0;
    // Bytes of each block: fp16 d, then fp16 m for the "_1" types, the rest are codes.
    m_min_bytes = (type == GgmlType::Q4_1 || type == GgmlType::Q5_1) ? 2 : 0;
  }

  std::string name() const override {
    return fmt::format("llama.cpp {}{}", m_name, m_hadamard ? " + attn_rot Hadamard" : "");
  }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    if (!ggml_quantizable(m_type)) {
      return make_error(
          fmt::format("llama.cpp cache type {}: kvlab quantizes only q8_0, q4_0, "
                      "q4_1, q5_0, q5_1 and iq4_nl",
                      m_name));
    }
    const int heads = x.heads(), dim = x.dim();
    if (dim <= 0 || dim % kBlock != 0) {
      return make_error(fmt::format(
          "llama.cpp {} cache: head_dim {} is not a multiple of the block size {} (llama.cpp "
          "stores each K/V row in whole {}-value blocks)",
          m_name, dim, kBlock, kBlock));
    }
    QuantizedTensor q{role, x.tokens(), heads, dim, {}, {}, {}, {}, {}};
    const std::size_t row = static_cast<std::size_t>(heads) * dim;  // values per token
    const std::size_t row_bytes = row / kBlock * m_type_size;
    q.codes.resize(row_bytes * x.tokens());
    const bool rotate = m_hadamard && llama_attn_rot_enabled(m_type, dim);
    const int chunk = static_cast<int>(std::max<std::size_t>(1, kGgmlChunkValues / row));
    std::vector<float> buf(chunk * row);
    for (int t0 = 0; t0 < x.tokens(); t0 += chunk) {
      const int rows = std::min(chunk, x.tokens() - t0);
      load_rows(x, t0, t0 + rows, buf.data());
      if (rotate) {
        llama_attn_rotate_rows(buf.data(), static_cast<std::size_t>(rows) * heads, dim, role);
      }
      (void)ggml_quantize(m_type, buf.data(), static_cast<std::int64_t>(rows) * row,
                          q.codes.data() + t0 * row_bytes);
    }
    const std::uint64_t blocks = q.codes.size() / m_type_size;
    q.bytes.scales = blocks * 2;
    q.bytes.zero_points = blocks * m_min_bytes;
    q.bytes.codes = blocks * (m_type_size - 2 - m_min_bytes);
    q.bytes.metadata = kTensorHeaderBytes;
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out) const override {
    const std::size_t n = static_cast<std::size_t>(q.tokens) * q.heads * q.dim;
    ggml_dequantize(m_type, q.codes.data(), out.data(), static_cast<std::int64_t>(n));
    if (m_hadamard && llama_attn_rot_enabled(m_type, q.dim)) {
      for (std::size_t r = 0; r < n / q.dim; ++r) {
        llama_attn_rotate(out.subspan(r * q.dim, q.dim), q.role, true);
      }
    }
  }

  // The integer codes as the blocks hold them: Q8_0 int8 shown as code + 128 (8 bits), Q5_x the
  // nibble with its qh bit (5 bits), Q4_x and IQ4_NL the nibble (4 bits; IQ4_NL's are indices
  // into kvalues_iq4nl).
  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    const bool five = m_type == GgmlType::Q5_0 || m_type == GgmlType::Q5_1;
    const int bits = m_type == GgmlType::Q8_0 ? 8 : five ? 5 : 4;
    CodeHistogram h{m_name, bits, std::vector<std::uint64_t>(std::size_t{1} << bits, 0)};
    if (m_type_size == 0) return {h};
    for (std::size_t off = 0; off + m_type_size <= q.codes.size(); off += m_type_size) {
      const std::uint8_t* b = q.codes.data() + off;
      if (m_type == GgmlType::Q8_0) {
        for (int j = 0; j < kBlock; ++j) ++h.counts[static_cast<std::uint8_t>(b[2 + j] ^ 0x80u)];
        continue;
      }
      const std::uint8_t* qs = b + m_type_size - kBlock / 2;
      std::uint32_t qh = 0;
      if (five) std::memcpy(&qh, b + 2 + m_min_bytes, sizeof qh);
      for (int j = 0; j < kBlock / 2; ++j) {
        const unsigned lo = (qs[j] & 0x0Fu) | (five ? ((qh >> j) & 1u) << 4 : 0u);
        const unsigned hi = (qs[j] >> 4) | (five ? ((qh >> (j + 16)) & 1u) << 4 : 0u);
        ++h.counts[lo];
        ++h.counts[hi];
      }
    }
    return {h};
  }

 private:
  GgmlType m_type;
  bool m_hadamard;
  std::string m_name;
  int m_type_size = 0;
  int m_min_bytes = 0;
};

}  // namespace

std::unique_ptr<Quantizer> make_ggml_block_quantizer(GgmlType type, bool hadamard) {
  return std::make_unique<GgmlBlockQuantizer>(type, hadamard);
}

void llama_attn_rotate_rows(float* x, std::size_t rows, int dim, TensorRole role) {
  const int n = llama_attn_rot_size(role, dim);
  if (n == 0) return;
  for (std::size_t r = 0; r < rows; ++r) {
    float* head = x + r * dim;
#if defined(KVLAB_GGML_ROT_AVX512)
    if (n <= 256 && all_finite(head, dim)) {
      for (int i = 0; i < dim; i += n) {
        if (n == 64) {
          hadamard_n<64>(head + i);
        } else if (n == 128) {
          hadamard_n<128>(head + i);
        } else {
          hadamard_n<256>(head + i);
        }
      }
      continue;
    }
#endif
    llama_attn_rotate({head, static_cast<std::size_t>(dim)}, role, false);
  }
}

}  // namespace kvlab::detail
