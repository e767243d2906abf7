// The offline half of KVQuant (Hooper et al. 2024, "KVQuant: Towards 10 Million Context Length
// LLM Inference with KV Cache Quantization", arXiv:2401.18079): the per-layer non-uniform levels
// (Sec. 3.3, "nuq") and the NormalFloat levels the reference offers beside them, the per-channel
// key thresholds (Sec. 3.4, dense-and-sparse), and the per-token tail selection the values use
// online. Private to the engine; kvquant_quantizer.h puts them together.
//
// Reference code read (not copied): github.com/SqueezeAILab/KVQuant,
// quant/kvquant/simquant_module_quantizer.py (SimQuant.quantize: percentile thresholds, k-means
// over the normalised values without outliers; QuantLinearSim.__init__: the NF signposts;
// get_outliers / get_outliers_dynamic) and deployment/.../modeling_llama.py (QuantK, QuantV).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kvlab::detail {

// Φ⁻¹(p), the standard normal quantile, for 0 < p < 1: bisection on Φ(x) = erfc(−x/√2) / 2 to
// the last bit of a double (it is called for a few dozen points, never in a hot loop).
double normal_quantile(double p);

// NormalFloat levels of `bits` bits in [-1, 1], ascending, 2^bits of them (Dettmers et al. 2023,
// QLoRA, Sec. 3 "4-bit NormalFloat"; generalised to b bits as KVQuant's QuantLinearSim does):
// with δ = (1/32 + 1/30) / 2, the negative half is Φ⁻¹ of 2^(b-1) points evenly spaced in
// [δ, 1/2], divided by |Φ⁻¹(δ)| (it ends at 0); the positive half is Φ⁻¹ of 2^(b-1) + 1 points
// evenly spaced in [1/2, 1 - δ] without the first, divided by Φ⁻¹(1 - δ). At b = 4 these are
// QLoRA's NF4 table.
std::vector<float> normal_float_levels(int bits);

// Weighted 1-D k-means: `k` centroids, ascending, minimising Σ w·(x − c(x))². The optimum over a
// 4096-bin histogram of x is found exactly (dynamic programming over bins, divide and conquer on
// the monotone split points: Wu 1991, Grønlund et al. 2017), then refined by Lloyd iterations on
// the exact samples, so clusters of very different weight are not missed as a random or
// k-means++ start can miss them (the reference uses sklearn's KMeans, random_state=0,
// max_iter=50). A cluster left empty keeps the centre of its bins; no samples (or no weight)
// gives k evenly spaced levels over [-1, 1]. `w` empty: every sample weighs 1.
std::vector<float> weighted_kmeans_1d(std::span<const float> x, std::span<const float> w, int k);

// The q-th percentile (0 ≤ q ≤ 1) of the first n values of `sorted` (ascending), interpolated
// linearly between closest ranks as numpy.percentile does by default (what SimQuant.quantize
// calls for the key thresholds).
double percentile_sorted(std::span<const float> sorted, double q);
// The same percentile of `values` in any order, by selection (values are reordered): O(n) where
// a sort is O(n log n).
double percentile_selected(std::span<float> values, double q);

// Per-token dense-and-sparse split of one token's vector `x` (all heads, as the reference's
// QuantV treats the whole value projection of a token): the `k` largest and the `k` smallest
// entries are outliers (ties: the lower index first); `upper` and `lower` are the largest and
// smallest entries left, which set the token's range (deployment QuantV.forward_fused_sparse:
// torch.topk of k + 1, the last one the threshold). `outliers` receives the 2k indices,
// ascending. k is cut to (n - 1) / 2 so the two tails never meet. Reuses `scratch`.
struct TailScratch {
  std::vector<float> hi_v, lo_v, bmax, bmin, sel;
  std::vector<int> hi_i, lo_i, cand_hi, cand_lo;
};
void select_token_tails(const float* x, int n, int k, TailScratch& scratch, float& lower,
                        float& upper, std::vector<int>& outliers);

// Outliers kept per side of a token of n entries at `fraction` of them in all: round(fraction ·
// n / 2), at most (n - 1) / 2. The reference's int(fraction / 2 · n) gives none below 200 entries
// (SmolLM2's 3 heads × 64), so this rounds.
int outliers_per_side(double fraction, int n);

}  // namespace kvlab::detail
