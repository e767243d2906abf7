// TurboQuant (Zandieh, Daliri, Hadian, Mirrokni 2025, "TurboQuant: Online Vector Quantization
// with Near-optimal Distortion Rate", arXiv:2504.19874): each head vector x (one token, one KV
// head) is kept as its norm plus b-bit codes of its rotated unit vector.
//  - TurboQuant_mse (Algorithm 1): y = Pi x / ||x|| with Pi a random rotation, so every
//    coordinate of y follows f_d(t) ~ (1 - t^2)^((d-3)/2) (Lemma 1); each coordinate is coded by
//    the b-bit Lloyd-Max codebook of f_d (lloyd_max.h). x_hat = ||x|| Pi^T c[code].
//  - TurboQuant_prod (Algorithm 2): the (b-1)-bit MSE quantizer, then a 1-bit QJL sketch of the
//    residual r = x - x_mse (Zandieh, Daliri, Han 2024, "QJL", arXiv:2406.03482): sign(S r), S a
//    seeded d x d matrix of N(0,1) entries, and gamma = ||r||. x_hat = x_mse +
//    gamma sqrt(pi/2) / d * S^T sign(S r), whose inner product with any query is unbiased
//    (Theorem 2). With b = 1 there is no MSE stage: x_hat is the QJL estimate of x itself.
//
// What is stored, per head vector: d codes of b_mse bits (b_mse = b, or b - 1 with QJL), d sign
// bits with QJL, and the norm ||x|| (and gamma with QJL) in `norm_dtype`. The paper counts only
// the code bits ("b bits per channel"; its 2.5 and 3.5-bit KV results give a subset of outlier
// channels one more bit, Sec. 4.3); the norms are what its reference code (the QJL repository,
// github.com/amirzandieh/QJL, models/llama3_utils_qjl.py: torch.norm of the fp16 keys, read as
// the key dtype by qjl_score_kernel.cu) keeps in the cache's own dtype, fp16 by default here.
// The codebook and the matrices Pi and S are not stored: they follow from (d, b) and the seed,
// which the tensor's metadata counts (8 bytes).
//
// Layout of QuantizedTensor (vector i = token * heads + head, code i * d + j):
//  - codes: the MSE codes, b_mse bits each in codec/bitpack.h's order (code i at bit i * b_mse,
//    low bits first; a 3-bit code may straddle two bytes), packed_bytes(n, b_mse) bytes; then,
//    with QJL, the sign bits (1: (S r)_j >= 0), packed_bytes(n, 1) bytes.
//  - params: tokens * heads norms, then (QJL) tokens * heads residual norms gamma, each exactly
//    representable in norm_dtype (fp16 saturates at +-65504).
// Private to the engine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"
#include "kvlab/engine/quant/rotation.h"
#include "kvlab/engine/quant/turboquant_rules.h"

namespace kvlab::detail {

enum class TurboQuantRotation : std::uint8_t {
  RandomOrthogonal,    // Haar-random Q (the paper's Pi): any head_dim, a d x d GEMM per block
  RandomizedHadamard,  // H D / sqrt(d) (the fast variant): head_dim a power of two, O(d log d)
};
const char* turboquant_rotation_name(TurboQuantRotation r);  // "orthogonal", "hadamard"

struct TurboQuantConfig {
  int bits = 3;      // bits per coordinate, 1 to 4, the QJL bit included (TurboQuant_prod)
  bool qjl = false;  // TurboQuant_prod: (bits - 1)-bit MSE codes + 1-bit QJL residual sketch
  TurboQuantRotation rotation = TurboQuantRotation::RandomOrthogonal;
  std::uint64_t seed = 0;         // of Pi (and of S, drawn from a stream derived from it)
  DType norm_dtype = DType::F16;  // of ||x|| and gamma; the QJL reference keeps the key dtype
};

// Bits of the MSE stage: bits, or bits - 1 with QJL.
inline int turboquant_mse_bits(const TurboQuantConfig& c) {
  return c.qjl ? c.bits - 1 : c.bits;
}

// TurboQuant's settings in a method configuration (its bits, QJL, rotation and seed).
TurboQuantConfig turboquant_config(const MethodConfig& config);

// An error naming the field when the configuration cannot work for any input.
Status check_turboquant_config(const TurboQuantConfig& config);

// Bytes quantize() keeps for a tensor of this shape, by component: codes (MSE codes and QJL
// signs), scales (the norms), metadata (header and seed).
ByteBreakdown turboquant_bytes(const TurboQuantConfig& config, int tokens, int heads, int dim);

// What every vector of a tensor of head_dim `dim` shares (the rotation, the codebook, S), for
// turboquant_rules.h, which the GPU quantizer runs; an error naming the head_dim when the
// configuration cannot take it (as quantize() reports it).
struct TurboQuantTables {
  int dim = 0;
  int mse_bits = 0;
  bool qjl = false;
  DType norm_dtype = DType::F16;
  std::vector<float> rotation;  // Pi, d x d row-major (random orthogonal)
  std::vector<float> signs;     // D (randomized Hadamard)
  float hadamard_scale = 1.f;
  std::vector<float> boundaries, centroids;
  std::vector<float> sketch;  // S (QJL)
  float qjl_scale = 0.f;
  // The rules' view of these tables (pointers into this object).
  turboquant_rules::Tables rules() const;
};
Result<TurboQuantTables> turboquant_tables(const TurboQuantConfig& config, int dim);

// The stored form of `count` codes of `bits` bits (1 to 4) from their bytes: code i at bit
// i * bits, low bits first (codec/bitpack.h's order), packed_bytes(count, bits) bytes at `out`.
void turboquant_pack(const std::uint8_t* codes, std::size_t count, int bits, std::uint8_t* out);

// The quantizer; quantize() reports a bad configuration or head_dim (below 2, or not a power of
// two with the Hadamard rotation) as an error naming it.
std::unique_ptr<Quantizer> make_turboquant_quantizer(const TurboQuantConfig& config);

}  // namespace kvlab::detail
