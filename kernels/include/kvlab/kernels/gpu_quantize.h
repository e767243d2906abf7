// A method's GPU quantizer seen from plain C++: one tensor quantized on the GPU and everything
// read back, for the backend-equivalence tests (the CPU quantizer gives the same bytes) and for
// tools that want one tensor's codes from the device. Runs and compressions use the pipeline
// (Backend::run_layers), not this.
#pragma once

#include <optional>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::cuda {

struct GpuQuantized {
  QuantizedTensor tensor;                 // as the CPU quantizer stores it
  std::vector<CodeHistogram> histograms;  // Quantizer::histograms()
  std::vector<float> reconstruction;      // Quantizer::dequantize(), [tokens][heads][dim]
};

// `x` quantized with the GPU quantizer of `config`; empty when the GPU has none for it; an Error
// when no GPU is usable or a CUDA call fails.
Result<std::optional<GpuQuantized>> quantize_on_gpu(const Tensor& x, TensorRole role,
                                                    const MethodConfig& config);

}  // namespace kvlab::cuda
