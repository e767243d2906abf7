// Error metrics of a reconstruction against the original cache: element-wise and
// attention-level (using the cache's decode-time queries).
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>

#include "kvlab/engine/core/tensor.h"

namespace kvlab {

// Sums that combine across tensors and layers; finish() turns them into the reported numbers.
struct ElementErrorSums {
  double sum_sq_err = 0;     // sum (x - x_hat)^2
  double sum_sq_signal = 0;  // sum x^2
  double max_abs = 0;
  std::size_t count = 0;
  // `x` and its reconstruction `x_hat`, of the same length.
  void add(std::span<const float> x, std::span<const float> x_hat);
  // The same with `x` in its own dtype (a cache's tensor as stored), converted a slice at a time.
  void add(const TensorView& x, std::span<const float> x_hat);
  ElementErrorSums& operator+=(const ElementErrorSums& o);
  double mse() const;
  double snr_db() const;  // 10 log10(signal / error); +inf reported as 999 when error is 0
};

struct AttentionErrorSums {
  double sum_sq_logit_err = 0;  // over every (query, head, token) logit q.k/sqrt(d)
  std::size_t logit_count = 0;
  double sum_kl = 0;          // KL(p || p_hat) summed over (query, head)
  double sum_sq_out_err = 0;  // |o - o_hat|^2 summed
  double sum_sq_out = 0;      // |o|^2 summed
  double sum_cosine = 0;      // cos(o, o_hat) summed
  std::size_t rows = 0;       // (query, head) pairs
  AttentionErrorSums& operator+=(const AttentionErrorSums& o);
  double logit_rmse() const;
  double softmax_kl() const;
  double output_rel_error() const;
  double output_cosine() const;
};

struct AttentionShape {
  int q_heads = 0, kv_heads = 0, dim = 0;
};

// Attention of `queries` [nq, q_heads, dim] (row-major floats) over `keys`/`values` [tokens,
// kv_heads, dim] as stored (any dtype: rows are read in place when they are floats, else
// converted as they are used), once with them and once with the reconstructions `keys_hat`/
// `values_hat` (row-major floats of the same shape); GQA maps query head h to KV head
// h / (q_heads / kv_heads). Every query attends to every token. nq is the queries' size over a
// row; tokens the fewest any of the four holds. The softmax is taken online, a tile of tokens at
// a time for every KV head (Milakov and Gimelshein 2018): the rows are read once, in the order they
// lie in memory, and no logit is kept past its tile. A stop request is seen between tiles (a
// fraction of a millisecond apart); the sums are then partial, for the caller to discard.
AttentionErrorSums attention_errors(std::span<const float> queries, const TensorView& keys,
                                    const TensorView& values, std::span<const float> keys_hat,
                                    std::span<const float> values_hat, const AttentionShape& shape,
                                    std::stop_token stop = {});

}  // namespace kvlab
