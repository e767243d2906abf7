// A small, fast, portable random generator (xoshiro256** seeded by splitmix64), so synthetic
// data is identical on every platform and standard library. Private to the engine.
#pragma once

#include <cmath>
#include <cstdint>

namespace kvlab::detail {

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed) {
    for (auto& s : m_s) s = splitmix64(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(m_s[1] * 5, 7) * 9;
    const std::uint64_t t = m_s[1] << 17;
    m_s[2] ^= m_s[0];
    m_s[3] ^= m_s[1];
    m_s[1] ^= m_s[2];
    m_s[0] ^= m_s[3];
    m_s[2] ^= t;
    m_s[3] = rotl(m_s[3], 45);
    return result;
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }
  // Uniform integer in [0, n).
  std::uint64_t below(std::uint64_t n) { return n ? next() % n : 0; }
  // Standard normal (Box-Muller, caching the second value).
  double normal() {
    if (m_has_spare) {
      m_has_spare = false;
      return m_spare;
    }
    double u1 = uniform();
    while (u1 <= 0.0) u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    m_spare = r * std::sin(6.283185307179586 * u2);
    m_has_spare = true;
    return r * std::cos(6.283185307179586 * u2);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::uint64_t m_s[4];
  double m_spare = 0;
  bool m_has_spare = false;
};

// An independent stream for (seed, a, b): mixes the indices into the seed.
inline std::uint64_t stream_seed(std::uint64_t seed, std::uint64_t a, std::uint64_t b) {
  std::uint64_t s = seed ^ (a * 0x9e3779b97f4a7c15ull) ^ (b * 0xc2b2ae3d27d4eb4full);
  return splitmix64(s);
}

}  // namespace kvlab::detail
