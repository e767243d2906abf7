// The KV-cache memory formula, per sequence:
//   bytes = 2 (K and V) x layers x kv_heads x head_dim x tokens x bytes_per_value
// and its explanation with the user's numbers substituted, for the GUI and the CLI.
#pragma once

#include <cstdint>
#include <string>

#include "kvlab/engine/core/model_shape.h"

namespace kvlab::planners {

// Bytes per token of KV for a scheme storing `bits_per_value` bits per element (all metadata
// included, as a measured run reports it).
double kv_bytes_per_token(const ModelShape& shape, double bits_per_value);
double kv_bytes(const ModelShape& shape, std::int64_t tokens, double bits_per_value);

// "2 × 32 layers × 8 kv_heads × 128 head_dim × 4,096 tokens × 2 bytes = 512.0 MiB"
std::string explain_kv_bytes(const ModelShape& shape, std::int64_t tokens, double bits_per_value);

// 1536 -> "1.5 KiB", binary units.
std::string format_bytes(double bytes);

}  // namespace kvlab::planners
