// How RoPE turns a cache's keys, so a method that quantizes keys before RoPE (KVQuant) can turn
// stored post-RoPE keys back, quantize them, and turn the result forward again; and so a cache of
// pre-RoPE keys can be compared with post-RoPE queries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"

namespace kvlab {

// Token t of a tensor sits at positions[t] (or first_position + t when positions is empty); pair
// i of the first `rotary_dims` dims of each head turns by position · frequencies[i] (RoFormer,
// Su et al. 2021, eq. 34), computed as LlamaModel does (angle in double, cos and sin in float).
struct RopeSpec {
  std::vector<double> frequencies;  // radians per position, [rotary_dims / 2]
  int rotary_dims = 0;              // 0: no RoPE known
  bool half_split = false;  // pairs (x[i], x[i + rotary_dims/2]) (Hugging Face, NeoX); false:
                            // adjacent (x[2i], x[2i+1]) (llama2.c, ggml's normal mode)
  int first_position = 0;
  std::vector<std::int32_t> positions;

  bool enabled() const { return rotary_dims > 0; }
  int position(int token) const {
    return positions.empty() ? first_position + token : positions[static_cast<std::size_t>(token)];
  }
  // An error naming what does not fit: odd or negative rotary_dims, too few frequencies, more
  // rotary dims than `head_dim`, fewer positions than `tokens` (when positions are given), or
  // positions past INT_MAX. check(0, rotary_dims) checks the spec on its own.
  Status check(int tokens, int head_dim) const;
};

// Turns rows [t0, t1) of a [tokens][heads][dim] buffer (`rows` points at row t0) by RoPE, or
// back by the opposite angles (inverse: the exact inverse rotation, up to float rounding).
// Angles are computed exactly at t0 and every kRopeAnchor tokens after it, and stepped in
// between; so rows turned in pieces that start at multiples of kRopeAnchor come out bit for bit
// as in one call.
inline constexpr int kRopeAnchor = 64;
void apply_rope_rows(float* rows, int t0, int t1, int heads, int dim, const RopeSpec& rope,
                     bool inverse = false);
// The float cos and sin apply_rope_rows(t0, t1, ...) turns token t's pair i by (sin negated when
// inverse): [t1 - t0][rotary_dims / 2] each, exact at t0 and every kRopeAnchor tokens after it.
// For a device that turns the rows itself (rope_rules.h) to turn them as the CPU does.
void rope_angles(int t0, int t1, const RopeSpec& rope, bool inverse, float* cos_out,
                 float* sin_out);

// The spec as a JSON object string (for file metadata) and back; the error names the field.
std::string rope_spec_to_json(const RopeSpec& rope);
Result<RopeSpec> rope_spec_from_json(std::string_view json);

}  // namespace kvlab
