// RoPE over stored rows (rope.h): forward and inverse, and the spec's JSON form for file metadata.
#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/core/rope_rules.h"
#include "kvlab/engine/io/json_text.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvlab {

namespace {

// Each head's pairs turn by the angle whose cos and sin are c[i] and s[i].
void rope_row(float* row, int heads, int dim, const RopeSpec& rope, const float* c,
              const float* s) {
  const int half = rope.rotary_dims / 2;
  for (int h = 0; h < heads; ++h) {
    float* __restrict x = row + static_cast<std::size_t>(h) * dim;
    for (int i = 0; i < half; ++i) {
      rope_rules::turn_pair(x[rope_rules::pair_first(i, rope.half_split)],
                            x[rope_rules::pair_second(i, rope.rotary_dims, rope.half_split)], c[i],
                            s[i]);
    }
  }
}

}  // namespace

Status RopeSpec::check(int tokens, int head_dim) const {
  if (rotary_dims < 0 || rotary_dims % 2 != 0) {
    return make_error(fmt::format("RoPE: rotary dims must be even and >= 0 (got {})", rotary_dims));
  }
  if (frequencies.size() < static_cast<std::size_t>(rotary_dims / 2)) {
    return make_error(
        fmt::format("RoPE: {} frequencies for {} rotary dims", frequencies.size(), rotary_dims));
  }
  if (rotary_dims > head_dim) {
    return make_error(
        fmt::format("RoPE of {} dims does not fit heads of {} dims", rotary_dims, head_dim));
  }
  if (!positions.empty() && positions.size() < static_cast<std::size_t>(tokens)) {
    return make_error(fmt::format("RoPE: {} positions for {} tokens", positions.size(), tokens));
  }
  // position(t) = first_position + t must not overflow an int (first_position comes from files).
  if (positions.empty() && tokens > 0 &&
      std::int64_t{first_position} + (tokens - 1) > std::numeric_limits<int>::max()) {
    return make_error(fmt::format("RoPE: {} tokens from position {} run past position {}", tokens,
                                  first_position, std::numeric_limits<int>::max()));
  }
  return Ok{};
}

void rope_angles(int t0, int t1, const RopeSpec& rope, bool inverse, float* cos_out,
                 float* sin_out) {
  if (!rope.enabled()) return;
  const auto half = static_cast<std::size_t>(rope.rotary_dims / 2);
  const double sign = inverse ? -1.0 : 1.0;
  // Each pair's (cos, sin) of position · frequency in double: exact every kRopeAnchor tokens, and
  // in between turned one position on by the pair's own step (a rotation by the frequency), which
  // drifts by a few ulp of a double, far below the float rounding of the result; so a cache of
  // thousands of tokens costs a multiply-add per pair and token instead of a sincos.
  std::vector<double> c(half), s(half), step_c(half), step_s(half);
  for (std::size_t i = 0; i < half; ++i) {
    step_c[i] = std::cos(rope.frequencies[i]);
    step_s[i] = std::sin(rope.frequencies[i]);
  }
  for (int t = t0; t < t1; ++t) {
    const bool exact = !rope.positions.empty() || (t - t0) % kRopeAnchor == 0;
    float* cf = cos_out + static_cast<std::size_t>(t - t0) * half;
    float* sf = sin_out + static_cast<std::size_t>(t - t0) * half;
    for (std::size_t i = 0; i < half; ++i) {
      if (exact) {
        const double angle = rope.position(t) * rope.frequencies[i];
        c[i] = std::cos(angle);
        s[i] = std::sin(angle);
      } else {
        const double cn = c[i] * step_c[i] - s[i] * step_s[i];
        s[i] = s[i] * step_c[i] + c[i] * step_s[i];
        c[i] = cn;
      }
      cf[i] = static_cast<float>(c[i]);
      sf[i] = static_cast<float>(sign * s[i]);
    }
  }
}

void apply_rope_rows(float* rows, int t0, int t1, int heads, int dim, const RopeSpec& rope,
                     bool inverse) {
  if (!rope.enabled()) return;
  const auto half = static_cast<std::size_t>(rope.rotary_dims / 2);
  // The angles a piece of kRopeAnchor tokens at a time (each piece starts at an anchor).
  std::vector<float> cf(half * kRopeAnchor), sf(half * kRopeAnchor);
  for (int p0 = t0; p0 < t1; p0 += kRopeAnchor) {
    const int p1 = std::min(t1, p0 + kRopeAnchor);
    rope_angles(p0, p1, rope, inverse, cf.data(), sf.data());
    for (int t = p0; t < p1; ++t) {
      const std::size_t r = static_cast<std::size_t>(t - p0);
      rope_row(rows + static_cast<std::size_t>(t - t0) * heads * dim, heads, dim, rope,
               cf.data() + r * half, sf.data() + r * half);
    }
  }
}

std::string rope_spec_to_json(const RopeSpec& rope) {
  nlohmann::json j = {{"rotary_dims", rope.rotary_dims},
                      {"half_split", rope.half_split},
                      {"first_position", rope.first_position},
                      {"frequencies", rope.frequencies}};
  if (!rope.positions.empty()) j["positions"] = rope.positions;
  return json_text(j);
}

Result<RopeSpec> rope_spec_from_json(std::string_view text) {
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return make_error("RoPE metadata is not a JSON object");
  RopeSpec r;
  const auto field = [&](const char* key) -> const nlohmann::json* {
    const auto it = j.find(key);
    return it == j.end() ? nullptr : &*it;
  };
  const nlohmann::json* dims = field("rotary_dims");
  const nlohmann::json* half = field("half_split");
  const nlohmann::json* first = field("first_position");
  const nlohmann::json* freq = field("frequencies");
  if (!dims || !dims->is_number_integer() || !half || !half->is_boolean() || !first ||
      !first->is_number_integer() || !freq || !freq->is_array()) {
    return make_error(
        "RoPE metadata needs the integer 'rotary_dims' and 'first_position', the boolean "
        "'half_split' and the array 'frequencies'");
  }
  const auto in_int = [](const nlohmann::json& v) {
    return v.is_number_integer() && v.get<std::int64_t>() >= -(std::int64_t{1} << 31) &&
           v.get<std::int64_t>() < (std::int64_t{1} << 31);
  };
  if (!in_int(*dims) || !in_int(*first))
    return make_error("RoPE metadata: an integer is too large");
  r.rotary_dims = dims->get<int>();
  r.half_split = half->get<bool>();
  r.first_position = first->get<int>();
  for (const auto& f : *freq) {
    if (!f.is_number() || !std::isfinite(f.get<double>())) {
      return make_error("RoPE metadata: 'frequencies' must hold finite numbers");
    }
    r.frequencies.push_back(f.get<double>());
  }
  if (const nlohmann::json* pos = field("positions")) {
    if (!pos->is_array()) return make_error("RoPE metadata: 'positions' must be an array");
    for (const auto& p : *pos) {
      if (!in_int(p)) return make_error("RoPE metadata: 'positions' must hold 32-bit integers");
      r.positions.push_back(p.get<std::int32_t>());
    }
  }
  if (auto ok = r.check(0, r.rotary_dims); !ok) return make_error("RoPE metadata: " + ok.message());
  return r;
}

}  // namespace kvlab
