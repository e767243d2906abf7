// Registration of the optional backends. KVLAB_WITH_CUDA (0 or 1) comes from
// app/common/CMakeLists.txt: 1 exactly when kvlab_kernels was built and is linked here. This is
// the one #if a caller of the backends needs.
#include "kvlab/app/backends.h"

#include <string>

#include "kvlab/engine/core/backend.h"

#if KVLAB_WITH_CUDA
#include "kvlab/kernels/cuda_backend.h"
#include "kvlab/kernels/gpu_bench.h"
#include "kvlab/kernels/gpu_kv.h"
#endif

namespace kvlab {

#if KVLAB_WITH_CUDA

void register_backends() {
  cuda::register_backend();
}

Result<nlohmann::json> run_gpu_bench_json(const GpuBenchRequest& request) {
  KVLAB_TRY(cuda::require_gpu());
  cuda::GpuBenchOptions options;
  options.contexts = request.contexts;
  options.repeats = request.repeats;
  if (!request.batches.empty()) options.batches = request.batches;
  auto report = cuda::run_gpu_bench(options);
  if (!report) return report.error();
  nlohmann::json rows = nlohmann::json::array();
  for (const cuda::GpuBenchRow& r : report->rows) {
    rows.push_back({{"kernel", r.kernel},
                    {"context", r.context},
                    {"batch", r.batch},
                    {"microseconds", r.microseconds},
                    {"bytes_read", r.bytes_read},
                    {"fp16_bytes", r.fp16_bytes},
                    {"gb_s_read", r.gbps_read},
                    {"gb_s_fp16_equiv", r.gbps_fp16_equiv},
                    {"speedup_vs_cublas_fp16", r.speedup_vs_fp16},
                    {"speedup_vs_fp16_fused", r.speedup_vs_fused},
                    {"copy_fraction", r.copy_fraction}});
  }
  nlohmann::json encode = nlohmann::json::array();
  for (const auto& [context, gbps] : report->encode_gbps) {
    encode.push_back({{"context", context}, {"gb_s", gbps}});
  }
  return nlohmann::json{{"device", report->device},
                        {"copy_gb_s", report->copy_gbps},
                        {"rows", std::move(rows)},
                        {"encode", std::move(encode)},
                        {"skipped", report->skipped}};
}

#else

void register_backends() {}

Result<nlohmann::json> run_gpu_bench_json(const GpuBenchRequest&) {
  return make_error(std::string(kBuiltWithoutCuda));
}

#endif

}  // namespace kvlab
