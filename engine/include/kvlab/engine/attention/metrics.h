// Error metrics of a reconstruction against the original cache: element-wise and
// attention-level (using the cache's decode-time queries).
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>

namespace kvlab {

// Sums that combine across tensors and layers; finish() turns them into the reported numbers.
struct ElementErrorSums {
  double sum_sq_err = 0;     // sum (x - x_hat)^2
  double sum_sq_signal = 0;  // sum x^2
  double max_abs = 0;
  std::size_t count = 0;
  // `x` and its reconstruction `x_hat`, of the same length.
  void add(std::span<const float> x, std::span<const float> x_hat);
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

// Attention of `queries` [nq, q_heads, dim] over keys/values [tokens, kv_heads, dim], all
// row-major float, once with the original K,V and once with the reconstruction; GQA maps query
// head h to KV head h / (q_heads / kv_heads). Every query attends to every token. nq and tokens
// are the spans' sizes over a row; the four K/V spans have the same size. A stop request is
// seen between KV heads (tens of milliseconds apart at 32K tokens); the sums are then partial,
// for the caller to discard.
AttentionErrorSums attention_errors(std::span<const float> queries, std::span<const float> keys,
                                    std::span<const float> values, std::span<const float> keys_hat,
                                    std::span<const float> values_hat, const AttentionShape& shape,
                                    std::stop_token stop = {});

}  // namespace kvlab
