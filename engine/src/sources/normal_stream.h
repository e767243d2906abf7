// Standard normal variates fast enough for gigabytes of synthetic cache (issue 24: the
// generator at >= 1 GB/s of fp16 per core). Private to the engine.
//
// Eight xoshiro256** streams run side by side (one AVX-512 register of 64-bit lanes, which the
// compiler vectorises), and each 32-bit half of an output becomes a normal through the inverse
// CDF: a table of the normal's quantiles at 2^16 + 1 equal-probability points, interpolated
// linearly with the half's low 16 bits. Each of the 65,536 bins therefore holds exactly its normal
// probability (2^-16), and values are uniform within a bin; the two outer bins end at the quantile
// of 2^-24 (±5.29). A bin's quantile and width sit side by side in 8 bytes, so 16 values take two
// 8-lane gathers of a bin each, not two 16-lane gathers of a float each: half the elements
// gathered and half the cache lines touched, the gathers being most of the time. Box-Muller in
// double (detail::Rng::normal) costs about 40 ns a pair; this, under 1 ns a value.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "core/random.h"

namespace kvlab::detail {

// The normal's quantile function at i / 2^16 for i in [0, 2^16], ends at ±Φ^{-1}(2^-24).
const std::array<float, 65537>& normal_quantile_table();

// Bin i of the inverse CDF: its quantile table[i] and its width table[i + 1] - table[i].
struct NormalBin {
  float quantile, width;
};
const std::array<NormalBin, 65536>& normal_bin_table();

class NormalStream {
 public:
  explicit NormalStream(std::uint64_t seed);

  // Fills `out` with standard normal variates (the same sequence however it is split).
  void fill(std::span<float> out);
  float next();

 private:
  static constexpr int kLanes = 8, kBlock = 2 * kLanes;
  void generate(float* out);  // kBlock values

  alignas(64) std::uint64_t m_s[4][kLanes];
  const NormalBin* m_bins;  // normal_bin_table()
  std::array<float, kBlock> m_block{};
  int m_next = kBlock;
};

}  // namespace kvlab::detail
