// Error metrics of a reconstruction against the original cache: element-wise and
// attention-level (using the cache's decode-time queries).
#pragma once

#include <cstddef>
#include <span>
#include <stop_token>
#include <vector>

#include "kvlab/engine/core/aligned.h"
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

// Attention of `queries` [nq, q_heads, dim] (row-major floats) over a cache's keys and values as
// stored, and over their reconstructions, fed a tile of tokens at a time in order: the softmax is
// taken online (Milakov and Gimelshein 2018), each row's largest logit so far kept with sums
// scaled to it, so a caller holds one tile of a reconstruction, never all of it. GQA maps query
// head h to KV head h / (q_heads / kv_heads); every query attends to every token added.
class AttentionErrorAccumulator {
 public:
  // nq is the queries' size over a row. A shape without heads or dim, or no query, adds nothing.
  AttentionErrorAccumulator(std::span<const float> queries, const AttentionShape& shape);
  // The next tokens: `keys`/`values` [n, kv_heads, dim] as stored (any dtype: read in place
  // when they are floats, else converted as they are used), `keys_hat`/`values_hat` their
  // reconstructions as n * kv_heads * dim row-major floats. Views of another shape add nothing.
  void add(const TensorView& keys, const TensorView& values, std::span<const float> keys_hat,
           std::span<const float> values_hat);
  // The sums over every token added so far.
  AttentionErrorSums sums() const;

 private:
  void add_tile(const TensorView& keys, const TensorView& values, const TensorView& keys_hat,
                const TensorView& values_hat);

  int m_kv_heads = 0, m_dim = 0, m_live = 0, m_rows = 0, m_padded = 0;
  std::size_t m_tokens = 0;
  // Each KV head's queries [dim][rows] (scaled by 1/sqrt(d), zero-padded), and per row the
  // largest logit so far and the sums scaled to it.
  std::vector<float> m_qt, m_max, m_max_hat;
  std::vector<double> m_sum, m_sum_hat, m_weighted_diff, m_sq_diff, m_out, m_out_hat;
  // A tile's logits [tokens][rows] and softmax numerators (64-byte aligned), V rows as padded
  // floats where they cannot be read in place, and eight K rows as floats (logits_tokens).
  AlignedFloats m_logits, m_logits_hat, m_weights, m_weights_hat;
  std::vector<float> m_tile_max, m_tile_max_hat, m_tile_values, m_tile_values_hat, m_key_scratch;
};

// The sums of AttentionErrorAccumulator over whole tensors: `keys_hat`/`values_hat` row-major
// floats of the keys' and values' shape; tokens the fewest any of the four holds. A stop request
// is seen between tiles (a fraction of a millisecond apart); the sums are then partial, for the
// caller to discard.
AttentionErrorSums attention_errors(std::span<const float> queries, const TensorView& keys,
                                    const TensorView& values, std::span<const float> keys_hat,
                                    std::span<const float> values_hat, const AttentionShape& shape,
                                    std::stop_token stop = {});

}  // namespace kvlab
