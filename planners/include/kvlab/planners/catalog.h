// Model and GPU catalogues for the capacity planner: the built-in entries (assets/models.json and
// assets/gpus.json, compiled in), Hugging Face config.json import, and JSON for user entries.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/core/model_shape.h"
#include "kvlab/engine/core/result.h"

namespace kvlab::planners {

// What decides a model's KV cache and weights.
struct ModelSpec {
  std::string id, name, family, source;
  int layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  double params_billion = 0;
  int max_context = 0;
  std::string weights_dtype = "bf16";  // fp32, fp16, bf16, fp8, int8, int4
  // Sliding-window attention: the window, and which layers use it (all when `sliding_layers` is
  // empty and a window is set). Such a layer keeps at most `sliding_window` tokens.
  std::optional<int> sliding_window;
  std::vector<bool> sliding_layers;
  // MLA (DeepSeek-V2/V3): each layer caches one latent of kv_lora_rank + qk_rope_head_dim values
  // per token, shared by every head and not split by tensor parallelism.
  int kv_lora_rank = 0, qk_rope_head_dim = 0;

  bool is_mla() const { return kv_lora_rank > 0; }
  bool layer_is_sliding(int layer) const;
  ModelShape shape() const;  // for the engine's formula helpers (MLA: kv_heads 1, head_dim latent)
  Status validate() const;   // names the field that is wrong
};

struct GpuSpec {
  std::string id, name, source;
  std::uint64_t memory_bytes = 0;  // what the driver reports as total memory
  std::string memory_stated;       // the vendor's figure, GB or GiB as stated
  double bandwidth_gbs = 0;        // peak memory bandwidth, decimal GB/s
  bool user = false;               // added by the user (stored), not built in
  Status validate() const;
};

const std::vector<ModelSpec>& builtin_models();
const std::vector<GpuSpec>& builtin_gpus();

// Looks up by id (case-insensitive); the error lists the known ids.
Result<ModelSpec> find_model(std::string_view id, const std::vector<ModelSpec>& extra = {});
Result<GpuSpec> find_gpu(std::string_view id, const std::vector<GpuSpec>& extra = {});

// Catalogue JSON (the assets' entry format) both ways.
Result<ModelSpec> model_from_json(const nlohmann::json& j);
nlohmann::json model_to_json(const ModelSpec& m);
Result<GpuSpec> gpu_from_json(const nlohmann::json& j);
nlohmann::json gpu_to_json(const GpuSpec& g);

// A Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2, Gemma2, DeepSeek-V2/V3 families).
// `id` names the result (the file's folder name, say). The KV heads come from
// num_key_value_heads (defaulting to num_attention_heads only when absent), head_dim from
// head_dim when present, never from hidden / heads when the config says otherwise; Qwen's
// sliding_window counts only with use_sliding_window true. Errors name the field.
Result<ModelSpec> import_hf_config(const nlohmann::json& config, std::string id);
Result<ModelSpec> import_hf_config_file(const std::filesystem::path& path);

// Bytes per value of a weights dtype name ("bf16" → 2); an error for unknown names.
Result<double> dtype_bytes(std::string_view dtype);

}  // namespace kvlab::planners
