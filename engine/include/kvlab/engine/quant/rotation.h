// Orthogonal rotations of head vectors before quantization: they spread an outlier channel over
// every channel of the head, so a block scale is no longer set by one large value. Attention is
// unchanged when queries and keys are rotated alike, (Rq)·(Rk) = q·k, and a rotated V is undone
// on the attention output, since that is linear in V.
//
// Three kinds, all applied to one head vector in place:
//  - llama.cpp's attn_rot (llama_attn_rotate): a fixed Sylvester Walsh–Hadamard matrix, applied
//    block-diagonally, that llama.cpp switches on by itself for quantized K/V caches;
//  - a randomized Hadamard, x -> H·D·x with D a seeded diagonal of ±1 (QuaRot, Ashkboos et al.
//    2024, §4; the "random Hadamard" of QJL, Zandieh et al. 2024): power-of-two dims;
//  - a random orthogonal matrix, the Q of a QR factorization of a seeded Gaussian matrix with
//    the signs of R's diagonal folded in, so that it is Haar-distributed (Mezzadri 2007, §5):
//    the random rotation SpinQuant (Liu et al. 2024) starts from and QJL's JL projection.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab {

inline constexpr bool is_power_of_two(std::int64_t n) {
  return n > 0 && (n & (n - 1)) == 0;
}

// The orthonormal Walsh–Hadamard transform's scale, the float 1 / sqrtf(n) (llama.cpp's
// ggml_gen_hadamard holds the same float).
inline float hadamard_scale(int n) {
  return 1.0f / std::sqrt(static_cast<float>(n));
}

// In place: x <- H_n x / sqrt(n), the orthonormal fast Walsh–Hadamard transform, n = x.size(),
// in Sylvester (natural) order: H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]]. Symmetric and
// orthonormal, so it is its own inverse. Precondition: n a power of two (is_power_of_two);
// otherwise x is left as it is. Butterflies in float, O(n log n).
void hadamard_transform(std::span<float> x);

// --- llama.cpp's attention rotation (attn_rot) -------------------------------------------------
// What llama.cpp does (ggml-org/llama.cpp, 2026; src/llama-kv-cache.cpp and src/llama-graph.cpp):
//  - when: llama_kv_cache's constructor sets attn_rot_k when the K cache type is quantized
//    (ggml_is_quantized: every block type, Q8_0 included; not F32/F16/BF16), every cached layer
//    has the same head_dim, and head_dim % 64 == 0; attn_rot_v the same for V (never for MLA,
//    which has no V cache). The environment variable LLAMA_ATTN_ROT_DISABLE=1 turns both off.
//  - what: ggml_gen_hadamard builds the n×n Sylvester Hadamard matrix scaled by 1/sqrt(n)
//    (symmetric, "res^2 == I"). build_input_k_rot picks n for K as the largest power of two that
//    divides head_dim (64 → 64, 128 → 128, 192 → 64, 256 → 256); build_input_v_rot uses n = 64
//    for V always ("smaller rotation matrices for V seem beneficial").
//  - where: ggml_mul_mat_aux reshapes a tensor to rows of n consecutive values of the head
//    vector and multiplies each by the matrix, so a head of head_dim values is head_dim/n
//    independent blocks. llm_graph_context::build_attn rotates Q and K with the K matrix and V
//    with the V matrix before cpy_k/cpy_v store them (the cache holds rotated values), runs
//    attention on them, and multiplies the attention output by the V matrix again (its own
//    inverse) before the output projection wo. Q·K is unchanged; the output is back in the
//    original frame.
// kvlab's llama_attn_rotate computes the same blocks with the fast transform instead of a
// matrix product: equal up to float rounding (llama.cpp's own backends differ as much).

// Whether llama.cpp rotates a K or V cache of this type and head size (LLAMA_ATTN_ROT_DISABLE
// unset; head_dim the same in every layer).
bool llama_attn_rot_enabled(GgmlType cache_type, int head_dim);

// The Hadamard block size llama.cpp uses for this role (Key: also the queries) and head size:
// 64 for values; for keys the largest power of two dividing head_dim. 0 when head_dim is not a
// positive multiple of 64 (llama.cpp does not rotate then).
int llama_attn_rot_size(TensorRole role, int head_dim);

// Applies llama.cpp's rotation to one head vector (head.size() = head_dim) in place, or undoes
// it (`inverse`; the matrix is its own inverse, so both are the same product, kept apart for
// readers). Leaves `head` as it is when llama_attn_rot_size(role, head.size()) is 0.
void llama_attn_rotate(std::span<float> head, TensorRole role, bool inverse);

// --- Seeded random rotations, one matrix shared by every head vector of the tensor --------------
// apply() and inverse() take one head vector of dim() values; another size is left as it is.

// x -> H·D·x / sqrt(n): D a diagonal of ±1 drawn from std::mt19937_64(seed) (bit 63 of each draw
// in turn: the same signs on every platform). QuaRot / QJL's randomized Hadamard.
class RandomizedHadamard {
 public:
  // dim must be a power of two; the error names it.
  static Result<RandomizedHadamard> create(int dim, std::uint64_t seed);

  int dim() const { return static_cast<int>(m_signs.size()); }
  std::span<const float> signs() const { return m_signs; }
  void apply(std::span<float> head) const;    // head <- H D head
  void inverse(std::span<float> head) const;  // head <- D H head (D H H D = I)
  // apply() (or inverse()) of each of `count` head vectors at `rows` (count × dim() floats), bit
  // for bit, in vector code.
  void apply_rows(float* rows, int count, bool inverse) const;

 private:
  explicit RandomizedHadamard(std::vector<float> signs) : m_signs(std::move(signs)) {}
  std::vector<float> m_signs;
};

// x -> Q·x with Q a Haar-random orthogonal dim×dim matrix: Gaussian entries from
// std::mt19937_64(seed) by Box–Muller (not std::normal_distribution, whose draws differ between
// standard libraries), Householder QR in double (Eigen), columns times sign(R_ii).
class RandomOrthogonalRotation {
 public:
  // dim from 1 to 4096; the error names it.
  static Result<RandomOrthogonalRotation> create(int dim, std::uint64_t seed);

  int dim() const { return m_dim; }
  std::span<const float> matrix() const { return m_q; }  // row-major dim×dim
  void apply(std::span<float> head) const;               // head <- Q head
  void inverse(std::span<float> head) const;             // head <- Qᵀ head

 private:
  RandomOrthogonalRotation(int dim, std::vector<float> q) : m_dim(dim), m_q(std::move(q)) {}
  int m_dim;
  std::vector<float> m_q;
};

}  // namespace kvlab
