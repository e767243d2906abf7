// TurboQuant_mse and TurboQuant_prod (arXiv:2504.19874, Algorithms 1 and 2); see
// turboquant_quantizer.h for the method, the layout and what is counted.
#include "quant/turboquant_quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <numbers>
#include <optional>
#include <random>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <Eigen/Dense>
#if defined(__BMI2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "codec/bitpack.h"
#include "core/row_loader.h"
#include "kvlab/engine/quant/rotation.h"
#include "quant/lloyd_max.h"

namespace kvlab::detail {

namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;

// Head vectors per block: enough rows for the d x d products to run at GEMM speed, few enough
// for the block's buffers to stay in L2.
constexpr int kBlockVectors = 256;
constexpr std::uint64_t kSketchSeedSalt = 0x9e3779b97f4a7c15ull;  // S's stream, apart from Pi's

float stored_norm(float v, DType t) {
  switch (t) {
    case DType::F16:
      // _Float16's conversion rounds to nearest even as float_to_fp16 does (v is not NaN).
      return static_cast<float>(static_cast<_Float16>(std::min(v, 65504.0f)));
    case DType::BF16:
      return bf16_to_float(float_to_bf16(v));
    case DType::F32:
      break;
  }
  return v;
}

// QJL's projection S: d x d, i.i.d. N(0,1), row-major, by Box-Muller over std::mt19937_64 (the
// same numbers on every platform, as rotation.cpp draws its Gaussian matrix).
std::vector<float> gaussian_sketch(int dim, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ kSketchSeedSalt);
  auto uniform = [&rng] { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53; };
  std::vector<float> s(static_cast<std::size_t>(dim) * dim);
  for (std::size_t i = 0; i < s.size(); i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double t = 2.0 * std::numbers::pi * uniform();
    s[i] = static_cast<float>(r * std::cos(t));
    if (i + 1 < s.size()) s[i + 1] = static_cast<float>(r * std::sin(t));
  }
  return s;
}

// Y = X M^T for rows of d floats (row-major), M a d x d row-major matrix packed once: M^T in
// panels of 16 * nv columns (panel p, row k: M[16 nv p + c][k] for c < 16 nv), nv = 4, 2 or 1 as
// d divides. Each output is a sum over k in order by fused multiply-adds (turboquant_rules.h's
// ordered_dot, which the GPU runs), without repacking the matrix for every block: a 6 x 64 tile
// of Y in 24 registers, the panel (32 KiB at d = 128) kept in L1 across the block's rows. Other
// d (or no AVX-512): M^T plainly, and the same sums by a loop the compiler vectorises over the
// outputs.
struct PackedTranspose {
  int dim = 0;
  int nv = 0;  // 0: d is not a multiple of 16 (or no AVX-512): `data` is M^T, row-major
  std::vector<float> data;

  static PackedTranspose pack(const float* m, int d) {
    PackedTranspose p;
    p.dim = d;
    const std::size_t dd = static_cast<std::size_t>(d);
#if defined(__AVX512F__)
    p.nv = d % 64 == 0 ? 4 : d % 32 == 0 ? 2 : d % 16 == 0 ? 1 : 0;
#endif
    if (p.nv == 0) {
      p.data.resize(dd * dd);
      for (std::size_t k = 0; k < dd; ++k) {
        for (std::size_t c = 0; c < dd; ++c) p.data[k * dd + c] = m[c * dd + k];
      }
      return p;
    }
    const int w = 16 * p.nv;
    p.data.resize(dd * dd);
    for (int panel = 0; panel < d / w; ++panel) {
      for (int k = 0; k < d; ++k) {
        for (int c = 0; c < w; ++c) {
          p.data[(panel * dd + k) * w + c] = m[(panel * w + c) * dd + k];
        }
      }
    }
    return p;
  }
};

#if defined(__AVX512F__)
template <int MR, int NV>
inline void tile_nt(const float* x, int d, const float* panel, float* y) {
  const std::size_t dd = static_cast<std::size_t>(d);
  __m512 acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int k = 0; k < d; ++k, panel += 16 * NV) {
    __m512 b[NV];
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(panel + 16 * v);
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(x[r * dd + k]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(y + r * dd + 16 * v, acc[r][v]);
  }
}

template <int NV>
void gemm_nt(const float* x, int rows, const PackedTranspose& p, float* y) {
  constexpr int kRows = NV == 4 ? 6 : 12;
  const int d = p.dim, w = 16 * NV;
  const std::size_t dd = static_cast<std::size_t>(d);
  for (int panel = 0; panel < d / w; ++panel) {
    const float* bp = p.data.data() + panel * dd * w;
    int r = 0;
    for (; r + kRows <= rows; r += kRows) {
      tile_nt<kRows, NV>(x + r * dd, d, bp, y + r * dd + panel * w);
    }
    const auto rest = [&](auto n) {  // the last rows % kRows rows in one tile
      tile_nt<decltype(n)::value, NV>(x + r * dd, d, bp, y + r * dd + panel * w);
    };
    switch (rows - r) {
      case 0:
        break;
      case 1:
        rest(std::integral_constant<int, 1>{});
        break;
      case 2:
        rest(std::integral_constant<int, 2>{});
        break;
      case 3:
        rest(std::integral_constant<int, 3>{});
        break;
      default:
        for (; r + 4 <= rows; r += 4) rest(std::integral_constant<int, 4>{});
        for (; r < rows; ++r) rest(std::integral_constant<int, 1>{});
        break;
    }
  }
}
#endif

// Rows of `y` <- rows of `x` times M^T, M as packed: y[r][c] = sum_k x[r][k] M[c][k] by fmas over
// k ascending from 0, whichever path runs.
void rows_times_transpose(const float* x, int rows, const PackedTranspose& p, float* y) {
#if defined(__AVX512F__)
  switch (p.nv) {
    case 4:
      return gemm_nt<4>(x, rows, p, y);
    case 2:
      return gemm_nt<2>(x, rows, p, y);
    case 1:
      return gemm_nt<1>(x, rows, p, y);
    default:
      break;
  }
#endif
  const std::size_t dd = static_cast<std::size_t>(p.dim);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + r * dd;
    float* yr = y + r * dd;
    std::fill(yr, yr + dd, 0.0f);
    for (std::size_t k = 0; k < dd; ++k) {
      const float xk = xr[k];
      const float* mt = p.data.data() + k * dd;
#pragma omp simd
      for (std::size_t c = 0; c < dd; ++c) yr[c] = std::fma(xk, mt[c], yr[c]);
    }
  }
}

// Everything that depends on head_dim: the rotation, the codebook and S.
struct Prepared {
  int dim = 0;
  std::optional<RandomOrthogonalRotation> orthogonal;
  std::optional<RandomizedHadamard> hadamard;
  const LloydMaxCodebook* codebook = nullptr;  // null when there are no MSE bits
  std::vector<float> sketch;                   // S, with QJL
  PackedTranspose rotation_t, sketch_t;        // Pi^T and S^T packed for rows_times_transpose

  // Rows of `y` (rows x dim) <- Pi rows of `x`.
  void rotate(const float* x, float* y, int rows) const {
    if (orthogonal) {
      rows_times_transpose(x, rows, rotation_t, y);
      return;
    }
    const std::size_t n = static_cast<std::size_t>(rows) * dim;
    if (x != y) std::copy(x, x + n, y);
    hadamard->apply_rows(y, rows, false);
  }
  // Rows of `x` <- Pi^T rows of `y`.
  void unrotate(const float* y, float* x, int rows) const {
    if (orthogonal) {
      MatrixMap(x, rows, dim).noalias() =
          ConstMatrixMap(y, rows, dim) * ConstMatrixMap(orthogonal->matrix().data(), dim, dim);
      return;
    }
    const std::size_t n = static_cast<std::size_t>(rows) * dim;
    if (x != y) std::copy(y, y + n, x);
    hadamard->apply_rows(x, rows, true);
  }
};

// Code streams keep codec/bitpack.h's order (code i at bit i * b, low bits first). 2- and 4-bit
// codes go through pack_codes; bitpack.h has no 3-bit form and packs 1-bit codes one at a time,
// so 1- and 3-bit codes are written here eight codes (b bytes) at a time. `first` is a multiple
// of 8 (blocks hold a multiple of 8 tokens; histograms read 2^16 codes at a time).
void pack_stream(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out,
                 std::size_t first) {
  if (bits == 2 || bits == 4) {
    pack_codes(codes, count, bits, out, first);
    return;
  }
  std::uint8_t* dst = out + first / 8 * bits;
#if defined(__AVX512BW__)
  if (bits == 1) {  // 64 codes (0 or 1) -> the 64 bits of their test mask, in stream order
    for (; count >= 64; count -= 64, codes += 64, dst += 8) {
      const std::uint64_t m = _mm512_test_epi8_mask(_mm512_loadu_si512(codes), _mm512_set1_epi8(1));
      std::memcpy(dst, &m, sizeof m);
    }
  }
#endif
  const std::size_t groups = count / 8;
  for (std::size_t g = 0; g < groups; ++g, codes += 8, dst += bits) {
    std::uint32_t v = 0;
#if defined(__BMI2__)
    // Eight code bytes -> their low `bits` bits side by side, in one instruction.
    std::uint64_t w;
    std::memcpy(&w, codes, 8);
    v = static_cast<std::uint32_t>(
        _pext_u64(w, bits == 1 ? 0x0101010101010101ull : 0x0707070707070707ull));
#else
    for (int i = 0; i < 8; ++i) v |= static_cast<std::uint32_t>(codes[i]) << (bits * i);
#endif
    for (int b = 0; b < bits; ++b) dst[b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
  const std::size_t rest = count % 8;
  if (rest == 0) return;
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < rest; ++i) v |= static_cast<std::uint32_t>(codes[i]) << (bits * i);
  for (std::size_t b = 0; b < packed_bytes(rest, bits); ++b) {
    dst[b] = static_cast<std::uint8_t>(v >> (8 * b));
  }
}

void unpack_stream(const std::uint8_t* packed, std::size_t first, std::size_t count, int bits,
                   std::uint8_t* codes) {
  if (bits == 2 || bits == 4) {
    unpack_codes(packed, first, count, bits, codes);
    return;
  }
  const std::uint8_t* src = packed + first / 8 * bits;
  const std::uint32_t mask = (1u << bits) - 1;
  const std::size_t groups = count / 8;
  for (std::size_t g = 0; g < groups; ++g, codes += 8, src += bits) {
    std::uint32_t v = 0;
    for (int b = 0; b < bits; ++b) v |= static_cast<std::uint32_t>(src[b]) << (8 * b);
#if defined(__BMI2__)
    const std::uint64_t w = _pdep_u64(v, bits == 1 ? 0x0101010101010101ull : 0x0707070707070707ull);
    std::memcpy(codes, &w, 8);
#else
    for (int i = 0; i < 8; ++i) codes[i] = static_cast<std::uint8_t>((v >> (bits * i)) & mask);
#endif
  }
  const std::size_t rest = count % 8;
  std::uint32_t v = 0;
  for (std::size_t b = 0; b < packed_bytes(rest, bits); ++b) {
    v |= static_cast<std::uint32_t>(src[b]) << (8 * b);
  }
  for (std::size_t i = 0; i < rest; ++i) {
    codes[i] = static_cast<std::uint8_t>((v >> (bits * i)) & mask);
  }
}

// out[i] = ||row i|| for `rows` rows of d floats, as turboquant_rules::vector_norm: x_j^2
// accumulated by fused multiply-adds in 16 lanes (x_j in lane j % 16, j ascending), then 0 +
// lane 0 + lane 1 + ... + lane 15. With AVX-512 the lane sums run 16 rows at a time, one row per
// lane.
void vector_norms(const float* x, int rows, int d, float* out) {
  const std::size_t dd = static_cast<std::size_t>(d);
  int i = 0;
#if defined(__AVX512F__)
  alignas(64) float lanes[16 * 16];
  const __m512i column =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(16));
  const auto tail = static_cast<__mmask16>((1u << (d % 16)) - 1);
  for (; i + 16 <= rows; i += 16) {
    for (int r = 0; r < 16; ++r) {
      const float* xr = x + (i + r) * dd;
      __m512 acc = _mm512_setzero_ps();
      int j = 0;
      for (; j + 16 <= d; j += 16) {
        const __m512 v = _mm512_loadu_ps(xr + j);
        acc = _mm512_fmadd_ps(v, v, acc);
      }
      if (tail != 0) {  // zeros in the missing lanes: fma(0, 0, a) = a
        const __m512 v = _mm512_maskz_loadu_ps(tail, xr + j);
        acc = _mm512_fmadd_ps(v, v, acc);
      }
      _mm512_store_ps(lanes + 16 * r, acc);
    }
    __m512 sum = _mm512_setzero_ps();
    for (int l = 0; l < 16; ++l) {
      sum = _mm512_add_ps(sum, _mm512_i32gather_ps(column, lanes + l, 4));
    }
    _mm512_storeu_ps(out + i, _mm512_sqrt_ps(sum));
  }
#endif
  for (; i < rows; ++i) out[i] = turboquant_rules::vector_norm(x + i * dd, d);
}

// MSE codes of `rows` rotated vectors y_i: count_boundaries_below against norms[i] * boundaries
// (coding y / ||x|| against the boundaries is coding y against ||x|| * boundaries); with
// `residual`, also r_i = y_i - stored[i] * centroids[code] (the QJL stage's input).
struct RowCoder {
  const float* norms;   // ||x_i|| as computed
  const float* stored;  // ||x_i|| as stored (for the residual)
  const LloydMaxCodebook* codebook;
  std::uint8_t* codes;
  float* residual;  // null: codes only
};

#if defined(__AVX512F__)
template <int Steps>
void code_rows(const float* y, int rows, int d, const RowCoder& rc) {
  const std::size_t dd = static_cast<std::size_t>(d);
  const int nb = static_cast<int>(rc.codebook->boundaries.size());
  const __m512 table = level_search_table(rc.codebook->boundaries.data(), nb);
  const __m512 centroids = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << (nb + 1)) - 1),
                                                 rc.codebook->centroids.data());
  const auto used = static_cast<__mmask16>((1u << nb) - 1);
  const auto tail = static_cast<__mmask16>((1u << (d % 16)) - 1);
  for (int i = 0; i < rows; ++i) {
    const float* yi = y + i * dd;
    std::uint8_t* ci = rc.codes + i * dd;
    float* ri = rc.residual != nullptr ? rc.residual + i * dd : nullptr;
    const __m512 t = _mm512_mask_mul_ps(table, used, table, _mm512_set1_ps(rc.norms[i]));
    const __m512 c = _mm512_mul_ps(centroids, _mm512_set1_ps(rc.stored[i]));
    for (int j = 0; j < d; j += 16) {
      const __mmask16 m = j + 16 <= d ? static_cast<__mmask16>(0xffff) : tail;
      const __m512 v = _mm512_maskz_loadu_ps(m, yi + j);
      const __m512i code = level_search16<Steps>(v, t);
      _mm512_mask_cvtepi32_storeu_epi8(ci + j, m, code);
      if (ri != nullptr) {
        _mm512_mask_storeu_ps(ri + j, m, _mm512_sub_ps(v, _mm512_permutexvar_ps(code, c)));
      }
    }
  }
}
#endif

void code_rows(const float* y, int rows, int d, const RowCoder& rc) {
  const int nb = static_cast<int>(rc.codebook->boundaries.size());
#if defined(__AVX512F__)
  if (nb >= 1 && nb <= kMaxLevelBoundaries) {
    return with_level_search_steps(
        nb, [&](auto steps) { code_rows<decltype(steps)::value>(y, rows, d, rc); });
  }
#endif
  std::vector<float> t(nb), scaled(nb + 1);
  const std::size_t dd = static_cast<std::size_t>(d);
  for (int i = 0; i < rows; ++i) {
    for (int k = 0; k < nb; ++k) t[k] = rc.norms[i] * rc.codebook->boundaries[k];
    std::uint8_t* ci = rc.codes + i * dd;
    count_boundaries_below(y + i * dd, dd, t.data(), nb, ci);
    if (rc.residual == nullptr) continue;
    for (int k = 0; k <= nb; ++k) scaled[k] = rc.stored[i] * rc.codebook->centroids[k];
    for (std::size_t j = 0; j < dd; ++j) rc.residual[i * dd + j] = y[i * dd + j] - scaled[ci[j]];
  }
}

// out[i] = ||row i|| of `rows` rows of d floats, as turboquant_rules::residual_norm: the squares
// summed in index order, by fused multiply-adds or (fused = false) a product and a sum each
// rounded: the rounding the plain loop `rr += r[j] * r[j]` had, contracted into FMAs where the
// residual came from a table and not where it was the rotated vector itself (no MSE stage). 16 rows
// at a time, one per lane, with AVX-512.
void residual_norms(const float* r, int rows, int d, bool fused, float* out) {
  int i = 0;
#if defined(__AVX512F__)
  const __m512i lane =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(d));
  for (; i < rows; i += 16) {
    const auto m = static_cast<__mmask16>(rows - i >= 16 ? 0xffff : (1u << (rows - i)) - 1);
    const float* base = r + static_cast<std::size_t>(i) * d;
    __m512 acc = _mm512_setzero_ps();
    for (int j = 0; j < d; ++j) {
      const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, lane, base + j, 4);
      // (The explicit rounding keeps the compiler from contracting the unfused form.)
      constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      acc = fused ? _mm512_fmadd_ps(v, v, acc)
                  : _mm512_add_round_ps(acc, _mm512_mul_round_ps(v, v, kRound), kRound);
    }
    _mm512_mask_storeu_ps(out + i, m, _mm512_sqrt_ps(acc));
  }
#endif
  for (; i < rows; ++i) {
    out[i] = turboquant_rules::residual_norm(r + static_cast<std::size_t>(i) * d, d, fused);
  }
}

// Sign bits (1: z >= 0) of m values into the 1-bit stream at code `first` (a multiple of 8):
// with AVX-512 one compare mask is 16 bits of the stream as they lie; `cb` holds m bytes.
void pack_signs(const float* z, std::size_t m, std::uint8_t* cb, std::uint8_t* out,
                std::size_t first) {
  std::size_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= m; i += 16) {
    const std::uint16_t bits =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(z + i), _mm512_setzero_ps(), _CMP_GE_OQ);
    std::memcpy(out + (first + i) / 8, &bits, 2);
  }
#endif
  for (std::size_t j = i; j < m; ++j) cb[j] = z[j] >= 0.0f ? 1 : 0;
  if (i < m) pack_stream(cb + i, m - i, 1, out, first + i);
}

std::size_t mse_plane_bytes(std::size_t n, int bits) {
  return bits == 0 ? 0 : packed_bytes(n, bits);
}

// Tokens per block: a multiple of 8 (so every block starts a whole group of 8 codes) near
// kBlockVectors head vectors.
int block_tokens(int heads) {
  return std::max(8, kBlockVectors / std::max(1, heads) / 8 * 8);
}

Status check_dim(int dim) {
  if (dim >= 2) return Ok{};
  return make_error(fmt::format(
      "turboquant: head_dim {} is below 2 (a coordinate of a point on the sphere S^(d-1) needs "
      "d >= 2)",
      dim));
}

// QJL's sqrt(pi / 2) / d.
float qjl_scale(int d) {
  return std::sqrt(std::numbers::pi_v<float> / 2.0f) / static_cast<float>(d);
}

// The rotation, the codebook and S for head_dim `dim`, with the products' packed transposes.
Result<std::unique_ptr<Prepared>> make_prepared(const TurboQuantConfig& c, int dim) {
  KVLAB_TRY(check_dim(dim));
  auto p = std::make_unique<Prepared>();
  p->dim = dim;
  if (c.rotation == TurboQuantRotation::RandomOrthogonal) {
    auto r = RandomOrthogonalRotation::create(dim, c.seed);
    if (!r) return make_error("turboquant: " + r.message());
    p->orthogonal.emplace(std::move(*r));
    p->rotation_t = PackedTranspose::pack(p->orthogonal->matrix().data(), dim);
  } else {
    auto r = RandomizedHadamard::create(dim, c.seed);
    if (!r) return make_error("turboquant: " + r.message());
    p->hadamard.emplace(std::move(*r));
  }
  const int mse_bits = turboquant_mse_bits(c);
  if (mse_bits > 0) p->codebook = &lloyd_max_codebook(dim, mse_bits);
  if (c.qjl) {
    p->sketch = gaussian_sketch(dim, c.seed);
    p->sketch_t = PackedTranspose::pack(p->sketch.data(), dim);
  }
  return p;
}

class TurboQuantQuantizer final : public Quantizer {
 public:
  explicit TurboQuantQuantizer(const TurboQuantConfig& c) : m_cfg(c) {}

  std::string name() const override {
    return fmt::format("turboquant{}-{} ({}, seed {}, {} norms)", m_cfg.qjl ? "-prod" : "",
                       m_cfg.bits, turboquant_rotation_name(m_cfg.rotation), m_cfg.seed,
                       dtype_name(m_cfg.norm_dtype));
  }

  Result<QuantizedTensor> quantize(const TensorView& x, TensorRole role) const override {
    KVLAB_TRY(check_turboquant_config(m_cfg));
    auto prepared = prepare(x.dim());
    if (!prepared) return prepared.error();
    const Prepared& p = **prepared;
    const int d = x.dim(), mse_bits = turboquant_mse_bits(m_cfg);
    const std::size_t vectors = static_cast<std::size_t>(x.tokens()) * x.heads();
    const std::size_t n = vectors * d;
    QuantizedTensor q{role, x.tokens(), x.heads(), d, {}, {}, {}, {}, {}};
    q.bytes = turboquant_bytes(m_cfg, x.tokens(), x.heads(), d);
    q.codes.assign(q.bytes.codes, 0);
    q.params.assign(vectors * (m_cfg.qjl ? 2 : 1), 0.0f);
    float* const norms = q.params.data();
    float* const gammas = m_cfg.qjl ? norms + vectors : nullptr;
    std::uint8_t* const sign_plane = q.codes.data() + mse_plane_bytes(n, mse_bits);

    const int bt = block_tokens(x.heads());
    const std::size_t block_n = static_cast<std::size_t>(bt) * x.heads() * d;
    // The block's rows, rotated rows and (QJL) residuals in one allocation, each 64-byte aligned
    // (no access of 16 floats splits a cache line when d % 16 == 0), the residuals 2 KiB from
    // the rotated rows modulo 4 KiB: code_rows reads y_i and writes r_i at equal offsets, and on
    // equal addresses modulo 4 KiB each load would wait for the store before it (4K aliasing).
    const std::size_t span = (block_n + 1023) / 1024 * 1024;  // a multiple of 4 KiB
    std::vector<float> buffer(2 * span + (m_cfg.qjl ? span + 512 : 0) + 16);
    float* const xb =
        buffer.data() + (64 - reinterpret_cast<std::uintptr_t>(buffer.data()) % 64) % 64 / 4;
    float* const yb = xb + span;
    float* const rb = m_cfg.qjl ? yb + span + 512 : nullptr;
    std::vector<std::uint8_t> cb(block_n);
    const int levels = mse_bits > 0 ? 1 << mse_bits : 0;
    // ||x|| of the block's rows as computed (the code boundaries scale by it) and as stored.
    std::vector<float> row_norm(static_cast<std::size_t>(bt) * x.heads());
    for (int t0 = 0; t0 < x.tokens(); t0 += bt) {
      const int t1 = std::min(x.tokens(), t0 + bt);
      const int rows = (t1 - t0) * x.heads();
      const std::size_t first = static_cast<std::size_t>(t0) * x.heads() * d;
      const std::size_t m = static_cast<std::size_t>(rows) * d;
      load_rows(x, t0, t1, xb);
      p.rotate(xb, yb, rows);
      float* const block_norms = norms + static_cast<std::size_t>(t0) * x.heads();
      vector_norms(xb, rows, d, row_norm.data());
      for (int i = 0; i < rows; ++i) {
        if (!std::isfinite(row_norm[i])) {
          const std::size_t v = static_cast<std::size_t>(t0) * x.heads() + i;
          return make_error(fmt::format("turboquant: {} vector of token {}, head {} is not finite",
                                        role_name(role), v / x.heads(), v % x.heads()));
        }
        block_norms[i] = stored_norm(row_norm[i], m_cfg.norm_dtype);
      }
      // With QJL, the residual in the rotated frame: S Pi is as Gaussian as S, so sign(S Pi r) is
      // the QJL sketch of r with another draw of S, and ||Pi r|| = ||r||.
      if (levels > 0) {
        code_rows(yb, rows, d, {row_norm.data(), block_norms, p.codebook, cb.data(), rb});
      } else if (m_cfg.qjl) {  // no MSE stage: the residual is the rotated vector itself
        std::copy(yb, yb + m, rb);
      }
      if (m_cfg.qjl) {
        residual_norms(rb, rows, d, levels > 0, gammas + static_cast<std::size_t>(t0) * x.heads());
        for (int i = 0; i < rows; ++i) {
          float& g = gammas[static_cast<std::size_t>(t0) * x.heads() + i];
          g = stored_norm(g, m_cfg.norm_dtype);
        }
      }
      if (levels > 0) pack_stream(cb.data(), m, mse_bits, q.codes.data(), first);
      if (m_cfg.qjl) {
        // Z = R S^T: row i holds S r_i.
        rows_times_transpose(rb, rows, p.sketch_t, yb);
        pack_signs(yb, m, cb.data(), sign_plane, first);
      }
    }
    return q;
  }

  void dequantize(const QuantizedTensor& q, std::span<float> out_span) const override {
    auto prepared = prepare(q.dim);
    if (!prepared) return;  // quantize() gave no tensor of this head_dim
    const Prepared& p = **prepared;
    const int d = q.dim, mse_bits = turboquant_mse_bits(m_cfg);
    const int levels = mse_bits > 0 ? 1 << mse_bits : 0;
    const std::size_t vectors = static_cast<std::size_t>(q.tokens) * q.heads;
    const std::size_t n = vectors * d;
    const float* const norms = q.params.data();
    const float* const gammas = m_cfg.qjl ? norms + vectors : nullptr;
    const std::uint8_t* const sign_plane = q.codes.data() + mse_plane_bytes(n, mse_bits);
    const int bt = block_tokens(q.heads);
    const std::size_t block_n = static_cast<std::size_t>(bt) * q.heads * d;
    std::vector<float> yb(block_n), sb(m_cfg.qjl ? block_n : 0), scaled(levels);
    std::vector<std::uint8_t> cb(block_n);
    // E[S^T sign(S r)] = sqrt(2/pi) d r / ||r|| for d Gaussian rows (QJL, Lemma 3.2).
    const float g_scale = qjl_scale(d);
    for (int t0 = 0; t0 < q.tokens; t0 += bt) {
      const int t1 = std::min(q.tokens, t0 + bt);
      const int rows = (t1 - t0) * q.heads;
      const std::size_t first = static_cast<std::size_t>(t0) * q.heads * d;
      const std::size_t m = static_cast<std::size_t>(rows) * d;
      const std::size_t v0 = static_cast<std::size_t>(t0) * q.heads;
      if (levels > 0) {
        unpack_stream(q.codes.data(), first, m, mse_bits, cb.data());
        for (int i = 0; i < rows; ++i) {
          for (int k = 0; k < levels; ++k) scaled[k] = norms[v0 + i] * p.codebook->centroids[k];
          const std::uint8_t* ci = cb.data() + static_cast<std::size_t>(i) * d;
          float* yi = yb.data() + static_cast<std::size_t>(i) * d;
          for (int j = 0; j < d; ++j) yi[j] = scaled[ci[j]];
        }
      } else {
        std::fill(yb.begin(), yb.begin() + m, 0.0f);
      }
      if (m_cfg.qjl) {
        unpack_stream(sign_plane, first, m, 1, cb.data());
        for (int i = 0; i < rows; ++i) {
          const float g = g_scale * gammas[v0 + i];
          const std::uint8_t* ci = cb.data() + static_cast<std::size_t>(i) * d;
          float* si = sb.data() + static_cast<std::size_t>(i) * d;
#pragma omp simd
          for (int j = 0; j < d; ++j) si[j] = ci[j] ? g : -g;
        }
        // Y += diag(g) Sigma S: row i gains g_i S^T sign_i.
        MatrixMap(yb.data(), rows, d).noalias() +=
            ConstMatrixMap(sb.data(), rows, d) * ConstMatrixMap(p.sketch.data(), d, d);
      }
      p.unrotate(yb.data(), out_span.data() + first, rows);
    }
  }

  std::vector<CodeHistogram> histograms(const QuantizedTensor& q) const override {
    const int mse_bits = turboquant_mse_bits(m_cfg);
    const std::size_t n = static_cast<std::size_t>(q.tokens) * q.heads * q.dim;
    std::vector<CodeHistogram> out;
    std::vector<std::uint8_t> codes(std::min<std::size_t>(n, 1 << 16));
    auto count = [&](CodeHistogram& h, const std::uint8_t* packed, int bits) {
      for (std::size_t first = 0; first < n; first += codes.size()) {
        const std::size_t m = std::min(codes.size(), n - first);
        unpack_stream(packed, first, m, bits, codes.data());
        for (std::size_t i = 0; i < m; ++i) ++h.counts[codes[i]];
      }
    };
    if (mse_bits > 0) {
      CodeHistogram h{fmt::format("turboquant {}-bit Lloyd-Max", mse_bits), mse_bits,
                      std::vector<std::uint64_t>(std::size_t{1} << mse_bits, 0)};
      count(h, q.codes.data(), mse_bits);
      out.push_back(std::move(h));
    }
    if (m_cfg.qjl) {
      CodeHistogram h{"qjl residual signs", 1, std::vector<std::uint64_t>(2, 0)};
      count(h, q.codes.data() + mse_plane_bytes(n, mse_bits), 1);
      out.push_back(std::move(h));
    }
    return out;
  }

 private:
  Result<const Prepared*> prepare(int dim) const {
    const std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_prepared.find(dim);
    if (it != m_prepared.end()) return it->second.get();
    auto made = make_prepared(m_cfg, dim);
    if (!made) return made.error();
    const Prepared* raw = made->get();
    m_prepared.emplace(dim, std::move(*made));
    return raw;
  }

  TurboQuantConfig m_cfg;
  mutable std::mutex m_mutex;
  mutable std::map<int, std::unique_ptr<const Prepared>> m_prepared;
};

}  // namespace

turboquant_rules::Tables TurboQuantTables::rules() const {
  turboquant_rules::Tables t;
  t.dim = dim;
  t.mse_bits = mse_bits;
  t.qjl = qjl;
  t.rotation = rotation.empty() ? nullptr : rotation.data();
  t.signs = signs.empty() ? nullptr : signs.data();
  t.hadamard_scale = hadamard_scale;
  t.boundaries = boundaries.data();
  t.centroids = centroids.data();
  t.sketch = sketch.empty() ? nullptr : sketch.data();
  t.qjl_scale = qjl_scale;
  t.norm_dtype = norm_dtype == DType::F16    ? rules::ParamDtype::F16
                 : norm_dtype == DType::BF16 ? rules::ParamDtype::BF16
                                             : rules::ParamDtype::F32;
  return t;
}

Result<TurboQuantTables> turboquant_tables(const TurboQuantConfig& c, int dim) {
  KVLAB_TRY(check_turboquant_config(c));
  auto made = make_prepared(c, dim);
  if (!made) return made.error();
  Prepared& p = **made;
  TurboQuantTables t;
  t.dim = dim;
  t.mse_bits = turboquant_mse_bits(c);
  t.qjl = c.qjl;
  t.norm_dtype = c.norm_dtype;
  if (p.orthogonal) {
    t.rotation.assign(p.orthogonal->matrix().begin(), p.orthogonal->matrix().end());
  } else {
    t.signs.assign(p.hadamard->signs().begin(), p.hadamard->signs().end());
    t.hadamard_scale = hadamard_scale(dim);
  }
  if (p.codebook != nullptr) {
    t.boundaries = p.codebook->boundaries;
    t.centroids = p.codebook->centroids;
  }
  if (c.qjl) {
    t.sketch = std::move(p.sketch);
    t.qjl_scale = qjl_scale(dim);
  }
  return t;
}

void turboquant_pack(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out) {
  pack_stream(codes, count, bits, out, 0);
}

const char* turboquant_rotation_name(TurboQuantRotation r) {
  return r == TurboQuantRotation::RandomOrthogonal ? "orthogonal" : "hadamard";
}

TurboQuantConfig turboquant_config(const MethodConfig& c) {
  TurboQuantConfig t;
  t.bits = c.bits;
  t.qjl = c.qjl;
  t.rotation = c.rotation == RotationKind::Hadamard ? TurboQuantRotation::RandomizedHadamard
                                                    : TurboQuantRotation::RandomOrthogonal;
  t.seed = c.rotation_seed;
  return t;
}

Status check_turboquant_config(const TurboQuantConfig& c) {
  if (c.bits < 1 || c.bits > kLloydMaxMaxBits) {
    return make_error(
        fmt::format("turboquant: bits {} is outside 1 to {}", c.bits, kLloydMaxMaxBits));
  }
  return Ok{};
}

ByteBreakdown turboquant_bytes(const TurboQuantConfig& c, int tokens, int heads, int dim) {
  const std::size_t vectors = static_cast<std::size_t>(tokens) * heads;
  const std::size_t n = vectors * dim;
  ByteBreakdown b;
  b.codes = mse_plane_bytes(n, turboquant_mse_bits(c)) + (c.qjl ? packed_bytes(n, 1) : 0);
  b.scales = vectors * (c.qjl ? 2 : 1) * dtype_size(c.norm_dtype);
  b.metadata = kTensorHeaderBytes + sizeof(std::uint64_t);  // header, seed
  return b;
}

std::unique_ptr<Quantizer> make_turboquant_quantizer(const TurboQuantConfig& config) {
  return std::make_unique<TurboQuantQuantizer>(config);
}

}  // namespace kvlab::detail
