// Per-channel statistics of a key tensor before and after a rotation, for showing what a rotation
// does to outlier channels: a few channels of a key head are much larger than the rest (KIVI,
// Liu et al. 2024, Sec. 3; KVQuant, Hooper et al. 2024, Sec. 3.1), and an orthogonal rotation
// spreads them over every channel of the head (QuaRot, Ashkboos et al. 2024, Sec. 4).
#pragma once

#include <cstdint>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab {

// The seed of KV head `head`'s rotation matrix, from the seed of a tensor's rotation: distinct
// per head, the same on every platform. The rotation before a quantizer (rotated_quantizer.cpp)
// and key_channel_absmax() both draw their matrices with it, so the chart shows the very
// rotation a run applies.
std::uint64_t rotation_head_seed(std::uint64_t seed, int head);

// max over tokens of |k[t][h][d]|, as [heads][dim] row-major (entry h * dim + d), after rotating
// every head vector with `rotation`: None leaves the values as they are; Hadamard is the
// randomized Hadamard (dim a power of two) and Orthogonal the Haar-random matrix, one per head
// from rotation_head_seed(seed, h), as a run with that rotation applies them. NaNs are skipped;
// no tokens gives zeros. The error names the rotation and the head size it cannot take.
Result<std::vector<float>> key_channel_absmax(const TensorView& keys, RotationKind rotation,
                                              std::uint64_t seed);

}  // namespace kvlab
