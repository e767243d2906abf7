// The CPU backend (the engine's reference functions) and the choice of a backend by name.
#include "kvlab/engine/core/backend.h"

#include <array>
#include <atomic>
#include <fstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "kvlab/engine/attention/fused_attention.h"

namespace kvlab {

namespace {

// Set once at start-up by the CUDA library; read by make_backend() from any thread.
std::atomic<BackendFactory> g_cuda_factory{nullptr};

constexpr std::array<std::string_view, 3> kBackendIds{"auto", "cpu", "cuda"};

// "Intel(R) Xeon(R) CPU @ 2.20GHz, 2 threads" from /proc/cpuinfo (Linux); "CPU" elsewhere.
std::string read_cpu_name() {
  std::string model;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto start = line.find_first_not_of(" \t", colon + 1);
    if (start != std::string::npos) model = line.substr(start);
    break;
  }
  if (model.empty()) model = "CPU";
  const unsigned threads = std::thread::hardware_concurrency();
  return threads > 0 ? fmt::format("{}, {} threads", model, threads) : model;
}

class CpuBackend final : public Backend {
 public:
  std::string id() const override { return "cpu"; }

  std::string device_name() const override {
    static const std::string name = read_cpu_name();
    return name;
  }

  Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                    int dim, const CodecConfig& config,
                                    const HuffmanCodebook* book) override {
    return kvlab::encode_codes(codes, tokens, heads, dim, config, book);
  }

  Status fused_attention(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                         std::span<float> out) override {
    return kvlab::fused_attention(cache, q, q_heads, out, m_scratch);
  }

 private:
  std::vector<float> m_scratch;  // the logits, then the probabilities
};

}  // namespace

Backend::~Backend() = default;

std::string_view stage_id(Stage stage) {
  switch (stage) {
    case Stage::Quantize:
      return "quantize";
    case Stage::Code:
      return "code";
    case Stage::Dequantize:
      return "dequantize";
    case Stage::Metrics:
      return "metrics";
  }
  return "?";
}

bool Backend::has_stage(Stage, const MethodConfig&, const KvCache&) const {
  return id() == "cpu";
}

std::string Backend::stage_gap(Stage stage, const MethodConfig& config,
                               const KvCache& cache) const {
  if (has_stage(stage, config, cache)) return {};
  return fmt::format("{} has no {} stage", id(), stage_id(stage));
}

bool Backend::runs_layers(const MethodConfig&, const KvCache&) const {
  return false;
}

Result<std::unique_ptr<RowAttention>> Backend::decode_attention(const RowAttentionShape&) {
  return std::unique_ptr<RowAttention>();
}

Status Backend::run_layers(const LayerRunRequest&, std::span<LayerOutcome>) {
  return make_error(fmt::format("backend '{}' does not run a compression's layers itself", id()));
}

std::span<const std::string_view> backend_ids() {
  return kBackendIds;
}

std::unique_ptr<Backend> make_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

void register_cuda_backend(BackendFactory factory) {
  g_cuda_factory.store(factory);
}

Result<std::unique_ptr<Backend>> make_backend(std::string_view id) {
  if (id == "cpu") return make_cpu_backend();
  const BackendFactory cuda = g_cuda_factory.load();
  if (id == "cuda") {
    if (cuda == nullptr) {
      return make_error(std::string(kBuiltWithoutCuda));
    }
    return cuda();
  }
  if (id == "auto") {
    if (cuda != nullptr) {
      if (auto gpu = cuda()) return gpu;
    }
    return make_cpu_backend();
  }
  return make_error(fmt::format("unknown backend '{}': expected auto, cpu or cuda", id));
}

}  // namespace kvlab
