// rANS frequency tables (docs/FORMAT.md, "rANS streams"). The normalisation to 2^12 follows the
// usual practice of rANS coders (F. Giesen's ryg_rans, J. Collet's FSE): proportional rounding,
// every present symbol kept at one unit at least, then the remainder moved one unit at a time to
// where it costs the fewest bits.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "kvlab/engine/codec/rans_table.h"
#include "kvlab/engine/codec/rans_warp.h"

namespace kvlab {

Result<RansTable> RansTable::build(const std::array<std::uint32_t, kSymbols>& freq, bool pairs) {
  RansTable t;
  t.m_freq = freq;
  t.m_pairs = pairs;
  std::uint32_t sum = 0;
  for (int s = 0; s < kSymbols; ++s) {
    const std::uint32_t f = freq[static_cast<std::size_t>(s)];
    if (f >= kProbScale) {
      return make_error(
          fmt::format("rans table: symbol {} has frequency {} (at most {})", s, f, kProbScale - 1));
    }
    t.m_cum[static_cast<std::size_t>(s)] = sum;
    sum += f;
  }
  t.m_cum[kSymbols] = sum;
  if (sum != kProbScale) {
    return make_error(fmt::format("rans table: frequencies sum to {}, not {}", sum, kProbScale));
  }
  if (freq[kEscape] == 0) return make_error("rans table: the escape has frequency 0");
  t.m_slots.assign(kProbScale, 0);
  for (int s = 0; s < kSymbols; ++s) {
    const std::uint32_t f = freq[static_cast<std::size_t>(s)];
    const std::uint32_t c = t.m_cum[static_cast<std::size_t>(s)];
    const std::uint32_t symbol = s == kEscape ? 0u : static_cast<std::uint32_t>(s);
    for (std::uint32_t k = 0; k < f; ++k) t.m_slots[c + k] = rans_warp::slot_entry(symbol, f, k);
  }
  return t;
}

Result<RansTable> RansTable::from_frequencies(std::span<const std::uint16_t> frequencies,
                                              bool pairs) {
  if (frequencies.size() != static_cast<std::size_t>(kSymbols)) {
    return make_error(
        fmt::format("rans table: {} frequencies, expected {}", frequencies.size(), kSymbols));
  }
  std::array<std::uint32_t, kSymbols> f{};
  std::copy(frequencies.begin(), frequencies.end(), f.begin());
  return build(f, pairs);
}

Result<RansTable> RansTable::from_histogram(std::span<const std::uint64_t> histogram, bool pairs) {
  if (histogram.size() != 256) {
    return make_error(
        fmt::format("rans table: histogram of {} values, expected 256", histogram.size()));
  }
  std::array<double, kSymbols> w{};
  double total = 1.0;  // the escape's weight
  for (int s = 0; s < 256; ++s) {
    w[static_cast<std::size_t>(s)] = static_cast<double>(histogram[static_cast<std::size_t>(s)]);
    total += w[static_cast<std::size_t>(s)];
  }
  w[kEscape] = 1.0;
  std::array<std::uint32_t, kSymbols> f{};
  if (total == 1.0) {  // nothing counted: any table codes an empty stream
    f[0] = 1;
    f[kEscape] = kProbScale - 1;
    return build(f, pairs);
  }
  std::int64_t sum = 0;
  for (int s = 0; s < kSymbols; ++s) {
    const double ws = w[static_cast<std::size_t>(s)];
    if (ws <= 0) continue;
    const auto share = static_cast<std::uint32_t>(std::floor(ws * kProbScale / total));
    f[static_cast<std::size_t>(s)] = std::max<std::uint32_t>(1, share);
    sum += f[static_cast<std::size_t>(s)];
  }
  // Move single units: add where a unit saves the most bits, take where it costs the fewest.
  while (sum != static_cast<std::int64_t>(kProbScale)) {
    const bool add = sum < static_cast<std::int64_t>(kProbScale);
    int best = -1;
    double best_bits = 0;
    for (int s = 0; s < kSymbols; ++s) {
      const double ws = w[static_cast<std::size_t>(s)];
      const double fs = f[static_cast<std::size_t>(s)];
      if (ws <= 0 || (!add && fs <= 1)) continue;
      const double bits = add ? ws * std::log2((fs + 1) / fs) : ws * std::log2(fs / (fs - 1));
      if (best < 0 || (add ? bits > best_bits : bits < best_bits)) {
        best = s;
        best_bits = bits;
      }
    }
    f[static_cast<std::size_t>(best)] += add ? 1u : ~0u;
    sum += add ? 1 : -1;
  }
  return build(f, pairs);
}

Result<RansTable> RansTable::from_lengths(std::span<const std::uint8_t> lengths, bool pairs) {
  if (lengths.size() != static_cast<std::size_t>(kSymbols)) {
    return make_error(
        fmt::format("rans table: {} code lengths, expected {}", lengths.size(), kSymbols));
  }
  std::array<std::uint32_t, kSymbols> f{};
  std::uint32_t sum = 0;
  for (int s = 0; s < kSymbols; ++s) {
    const int l = lengths[static_cast<std::size_t>(s)];
    if (l > kProbBits) {
      return make_error(
          fmt::format("rans table: symbol {} has code length {} > {}", s, l, kProbBits));
    }
    if (l > 0) f[static_cast<std::size_t>(s)] = kProbScale >> l;
    sum += f[static_cast<std::size_t>(s)];
  }
  if (sum > kProbScale) return make_error("rans table: code lengths break Kraft's inequality");
  f[kEscape] += kProbScale - sum;
  if (f[kEscape] == 0) {  // a complete code without an escape: one unit from the largest
    auto largest = std::max_element(f.begin(), f.end());
    --*largest;
    f[kEscape] = 1;
  } else if (f[kEscape] == kProbScale) {  // only the escape: a unit to value 0 (never coded)
    f[0] = 1;
    f[kEscape] = kProbScale - 1;
  }
  return build(f, pairs);
}

std::vector<std::uint8_t> RansTable::serialize() const {
  std::vector<std::uint8_t> out(kSerializedBytes, 0);
  auto put = [&](std::size_t bit, std::uint32_t value, int bits) {
    for (int k = 0; k < bits; ++k, ++bit) {
      if ((value >> k) & 1u) out[bit / 8] |= static_cast<std::uint8_t>(1u << (bit % 8));
    }
  };
  for (int s = 0; s < kSymbols; ++s) put(12 * static_cast<std::size_t>(s), m_freq[s], 12);
  put(12 * kSymbols, m_pairs ? 1u : 0u, 4);
  return out;
}

Result<RansTable> RansTable::deserialize(std::span<const std::uint8_t> bytes) {
  if (bytes.size() != kSerializedBytes) {
    return make_error(
        fmt::format("rans table: {} bytes, expected {}", bytes.size(), kSerializedBytes));
  }
  auto get = [&](std::size_t bit, int bits) {
    std::uint32_t v = 0;
    for (int k = 0; k < bits; ++k, ++bit) v |= ((bytes[bit / 8] >> (bit % 8)) & 1u) << k;
    return v;
  };
  std::array<std::uint32_t, kSymbols> f{};
  for (int s = 0; s < kSymbols; ++s) f[static_cast<std::size_t>(s)] = get(12 * std::size_t(s), 12);
  const std::uint32_t kind = get(12 * kSymbols, 4);
  if (kind > 1) return make_error(fmt::format("rans table: symbol kind {} is not 0 or 1", kind));
  return build(f, kind == 1);
}

double RansTable::coded_bits(std::span<const std::uint64_t> histogram) const {
  double bits = 0;
  const double escape = kProbBits - std::log2(static_cast<double>(m_freq[kEscape])) + 8;
  for (std::size_t s = 0; s < histogram.size() && s < 256; ++s) {
    if (histogram[s] == 0) continue;
    const double n = static_cast<double>(histogram[s]);
    bits +=
        m_freq[s] > 0 ? n * (kProbBits - std::log2(static_cast<double>(m_freq[s]))) : n * escape;
  }
  return bits;
}

}  // namespace kvlab
