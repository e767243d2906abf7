// A compression run's error metrics on the GPU, the engine's definitions (metrics.h) computed
// over a layer resident on the device: element errors of a reconstruction against the stored
// tensor, and the attention of the cache's decode-time queries over the stored keys and values
// and over their reconstructions (logit RMSE, softmax KL, output error and cosine). Sums are
// added into one DeviceLayerSums with double atomics; the host reads them once per layer.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.cuh"
#include "device_quantizer.cuh"

namespace kvlab::cuda {

// One layer's sums (zeroed before the layer). Maxima are the bits of non-negative doubles,
// ordered as the doubles are.
struct DeviceLayerSums {
  double sum_sq_err[2];     // K, V: sum (x - x_hat)^2
  double sum_sq_signal[2];  // K, V: sum x^2
  unsigned long long max_abs_bits[2];
  double sum_sq_logit_err, sum_kl, sum_sq_out_err, sum_sq_out, sum_cosine;
  unsigned not_finite[2];  // K, V: 1 when the stored tensor holds a NaN or an infinity
};

// Adds tensor `which` (0: K, 1: V) of the layer into `sums`: x stored, x_hat floats, n values;
// sets sums->not_finite[which] when x holds a NaN or an infinity (the CPU then names where).
cudaError_t launch_element_errors(const DeviceTensor& x, const float* x_hat, int which,
                                  DeviceLayerSums* sums, cudaStream_t stream);

// The attention shape of a layer's metrics.
struct AttentionDims {
  int tokens = 0, queries = 0, q_heads = 0, kv_heads = 0, dim = 0;
  KVLAB_HOST_DEVICE int rows_per_head() const {
    return kv_heads > 0 ? queries * (q_heads / kv_heads) : 0;
  }
  KVLAB_HOST_DEVICE std::size_t rows() const {
    return static_cast<std::size_t>(rows_per_head()) * kv_heads;
  }
};

// Device scratch for the attention metrics, grown on demand and kept between layers.
struct AttentionScratch {
  DeviceArray<float> q;                 // rows x dim, scaled by 1 / sqrt(dim)
  DeviceArray<float> probs, probs_hat;  // rows x tokens: logits, then probabilities
  DeviceArray<double> out, out_hat;     // rows x dim
};

// The largest head_dim the attention kernels take.
inline constexpr int kMaxMetricsDim = 256;

// Adds the attention sums of queries [queries][q_heads][dim] (stored dtype) over keys / values
// as stored and their reconstructions k_hat / v_hat (floats [tokens][kv_heads][dim]) into `sums`.
Status attention_errors(const DeviceTensor& queries, const DeviceTensor& keys,
                        const DeviceTensor& values, const float* k_hat, const float* v_hat,
                        const AttentionDims& dims, AttentionScratch& scratch, DeviceLayerSums* sums,
                        cudaStream_t stream);

}  // namespace kvlab::cuda
