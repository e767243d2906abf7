// Lloyd-Max (MSE-optimal) scalar codebooks for one coordinate of a uniformly random point on the
// unit sphere S^(d-1), the codebooks of TurboQuant (Zandieh, Daliri, Hadian, Mirrokni 2025,
// "TurboQuant: Online Vector Quantization with Near-optimal Distortion Rate", arXiv:2504.19874,
// Sec. 3.1). After a random rotation each coordinate of a unit vector has the density (Lemma 1)
//   f_d(x) = Gamma(d/2) / (sqrt(pi) Gamma((d-1)/2)) * (1 - x^2)^((d-3)/2),  x in [-1, 1],
// which tends to N(0, 1/d) as d grows. The b-bit codebook minimises E[(x - c(x))^2] under f_d:
// Lloyd's iteration (centroid = conditional mean of its cell, boundary = midpoint of adjacent
// centroids, Max 1960 / Lloyd 1982) on a fine grid. Private to the engine.
#pragma once

#include <vector>

namespace kvlab::detail {

inline constexpr int kLloydMaxMaxBits = 4;

struct LloydMaxCodebook {
  int dim = 0;
  int bits = 0;
  std::vector<float> centroids;   // 2^bits levels, ascending, symmetric about 0
  std::vector<float> boundaries;  // 2^bits - 1 midpoints between adjacent centroids, ascending
  // Expected squared error of one coordinate under f_d (so d * mse is TurboQuant's D_mse for a
  // unit vector, Theorem 1), and the Lloyd iterations it took.
  double mse = 0.0;
  int iterations = 0;
};

// Computes the codebook from scratch (about a millisecond). dim >= 2, 1 <= bits <= 4; other
// values give an empty codebook.
LloydMaxCodebook compute_lloyd_max_codebook(int dim, int bits);

// The codebook for (dim, bits), computed once per process and kept (thread-safe). The reference
// stays valid for the life of the process.
const LloydMaxCodebook& lloyd_max_codebook(int dim, int bits);

}  // namespace kvlab::detail
