#include "kvlab/planners/memory_formula.h"

#include <array>
#include <cmath>

#include <fmt/format.h>

namespace kvlab::planners {

double kv_bytes_per_token(const ModelShape& s, double bits_per_value) {
  return 2.0 * s.layers * s.kv_heads * s.head_dim * bits_per_value / 8.0;
}

double kv_bytes(const ModelShape& s, std::int64_t tokens, double bits_per_value) {
  return kv_bytes_per_token(s, bits_per_value) * static_cast<double>(tokens);
}

std::string format_bytes(double bytes) {
  static constexpr std::array<const char*, 6> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  std::size_t u = 0;
  while (std::fabs(bytes) >= 1024.0 && u + 1 < kUnits.size()) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, kUnits[u]);
}

std::string explain_kv_bytes(const ModelShape& s, std::int64_t tokens, double bits_per_value) {
  const double bytes_per_value = bits_per_value / 8.0;
  return fmt::format("2 × {} layers × {} kv_heads × {} head_dim × {:L} tokens × {:.4g} bytes = {}",
                     s.layers, s.kv_heads, s.head_dim, tokens, bytes_per_value,
                     format_bytes(kv_bytes(s, tokens, bits_per_value)));
}

}  // namespace kvlab::planners
