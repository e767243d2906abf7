// The apps' one registration point for the optional backends. backends.cpp is the only source
// compiled knowing whether the CUDA library was built (app/common/CMakeLists.txt); the CLI and
// the GUI call register_backends() once in main(), then pick backends by name through
// kvlab::make_backend() (engine/backend.h) and never write #ifdef.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/result.h"

namespace kvlab {

// Offers the CUDA backend to make_backend() when kvlab was built with CUDA; does nothing
// otherwise. Call once, before any other thread starts.
void register_backends();

// What `kvlab bench gpu` measures (the rest as kvlab::cuda::GpuBenchOptions' defaults).
struct GpuBenchRequest {
  std::vector<int> contexts{2048, 8192, 16384, 32768};
  int repeats = 200;               // timed launches per kernel
  std::vector<int> batches{1, 8};  // sequences per launch of the fused fp16 decode kernel
};

// The GPU kernels timed by kvlab::cuda::run_gpu_bench (kernels/gpu_bench.h), as JSON, since the
// report's types exist only where CUDA was built: {device, copy_gb_s, rows: [{kernel, context,
// microseconds, batch, bytes_read, fp16_bytes, gb_s_read, gb_s_fp16_equiv, speedup_vs_cublas_fp16,
// speedup_vs_fp16_fused, copy_fraction}],
// encode: [{context, gb_s}]}. An Error when kvlab was built without CUDA or no GPU is usable.
Result<nlohmann::json> run_gpu_bench_json(const GpuBenchRequest& request);

}  // namespace kvlab
