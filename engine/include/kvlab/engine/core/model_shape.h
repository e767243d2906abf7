// The shape of a model's KV cache: what the memory formula multiplies.
#pragma once

#include <string>

#include "kvlab/engine/core/result.h"

namespace kvlab {

struct ModelShape {
  std::string name;
  int layers = 0;
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;

  int group_size() const {
    return kv_heads > 0 ? q_heads / kv_heads : 0;
  }  // GQA: queries per KV head
  // Checks the numbers make sense (positive, q_heads a multiple of kv_heads).
  Status validate() const;
};

}  // namespace kvlab
