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

// How a layer attends, which decides the KV it keeps per sequence.
//   Full: every token so far. Sliding: at most `sliding_window` tokens (Mistral, Gemma's local
//   layers, GPT-OSS's banded layers). Chunked: the tokens of the current chunk of `chunk_size`,
//   so at most that many (Llama 4's local layers). Linear: no KV at all, a fixed-size recurrent
//   state instead (Qwen3-Next's Gated DeltaNet layers).
enum class LayerKind : std::uint8_t { Full, Sliding, Chunked, Linear };
std::string_view layer_kind_name(LayerKind k);  // "full", "sliding", "chunked", "linear"

// No model has more layers; a file saying otherwise is refused before anything is sized by it.
inline constexpr int kMaxLayers = 4096;

// What decides a model's KV cache, weights and compute.
struct ModelSpec {
  std::string id, name, family, source;
  std::string hf_id;                 // "meta-llama/Llama-3.1-70B"; also accepted as --model
  std::vector<std::string> aliases;  // other names people use ("llama3.1-70b")
  int layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  // Every weight held in GPU memory (all experts), and the weights one token multiplies with
  // (mixture of experts: the routed experts it uses, plus the shared parts). 0: dense, the same.
  double params_billion = 0, active_params_billion = 0;
  // Mixture of experts: routed experts per MoE layer, and how many each token uses (0: dense or
  // unknown). A decode step reads only the experts its tokens route to (kv_memory.h).
  int experts = 0, experts_per_token = 0;
  int max_context = 0;
  std::string weights_dtype = "bf16";  // fp32, fp16, bf16, fp8, int8, int4, fp4
  // The weights' bytes as a file stores them (a GGUF's quantized tensors, whose blocks carry
  // scales: Q4_1 is 5 bits a value), charged instead of params × weights_dtype unless --weights
  // asks for another dtype; 0: not known. weights_dtype then names the products' dtype.
  std::uint64_t weights_bytes = 0;
  // Layer kinds. Empty: every layer Full, or every layer Sliding when a window is set (Mistral).
  std::optional<int> sliding_window;
  int chunk_size = 0;
  std::vector<LayerKind> layer_kinds;
  // Learned per-head sink logits (GPT-OSS): they add no KV, but keep a sliding layer's softmax
  // from losing its sink tokens.
  bool attention_sinks = false;
  // MLA (DeepSeek-V2/V3, Kimi K2): each layer caches one latent of kv_lora_rank +
  // qk_rope_head_dim values per token, shared by every head and not split by tensor parallelism.
  int kv_lora_rank = 0, qk_rope_head_dim = 0;

  bool is_mla() const { return kv_lora_rank > 0; }
  bool is_moe() const {
    return active_params_billion > 0 && active_params_billion < params_billion;
  }
  double active_params() const {  // billions
    return active_params_billion > 0 ? active_params_billion : params_billion;
  }
  LayerKind layer_kind(int layer) const;
  bool layer_is_sliding(int layer) const { return layer_kind(layer) == LayerKind::Sliding; }
  int layers_of(LayerKind k) const;
  // The most tokens a layer of this kind keeps at `context` (0 for Linear).
  std::int64_t kind_tokens(LayerKind k, std::int64_t context) const;
  ModelShape shape() const;  // for the engine's formula helpers (MLA: kv_heads 1, head_dim latent)
  Status validate() const;   // names the field that is wrong
};

// Dense tensor-core throughput per dtype, TFLOP/s (TOP/s for int8); 0 where the GPU has none.
struct GpuCompute {
  double bf16 = 0, fp8 = 0, int8 = 0, fp4 = 0;
  double fp32 = 0;  // non-tensor (CUDA core / vector) FP32, for decompression work
};

struct GpuSpec {
  std::string id, name, source;
  std::vector<std::string> aliases;
  std::uint64_t memory_bytes = 0;  // what the driver reports as total memory
  std::string memory_stated;       // the vendor's figure, GB or GiB as stated
  double bandwidth_gbs = 0;        // peak memory bandwidth, decimal GB/s
  GpuCompute tflops;               // dense, no sparsity
  std::string host_link;           // "PCIe 5.0 x16", "NVLink-C2C"
  double host_link_gbs = 0;        // host-link bandwidth, one direction, decimal GB/s
  std::string compute_source;      // where tflops and the host link come from
  bool user = false;               // added by the user (stored), not built in
  // The dense throughput for weights of `dtype` (fp8 weights on fp8 tensor cores where the GPU
  // has them; int8/int4 weight-only quantization computes in bf16), TFLOP/s.
  double dense_tflops(std::string_view weights_dtype) const;
  Status validate() const;
};
const std::vector<ModelSpec>& builtin_models();
const std::vector<GpuSpec>& builtin_gpus();

// Looks up by id, Hugging Face name ("meta-llama/Llama-3.1-70B", or without the organisation) or
// alias, compared as canonical ids; the error suggests the nearest known ids.
Result<ModelSpec> find_model(std::string_view id, const std::vector<ModelSpec>& extra = {});
Result<GpuSpec> find_gpu(std::string_view id, const std::vector<GpuSpec>& extra = {});

// Catalogue JSON (the assets' entry format) both ways.
Result<ModelSpec> model_from_json(const nlohmann::json& j);
nlohmann::json model_to_json(const ModelSpec& m);
Result<GpuSpec> gpu_from_json(const nlohmann::json& j);
nlohmann::json gpu_to_json(const GpuSpec& g);

// A Hugging Face config.json. model_type: llama, llama4 / llama4_text, mistral, mixtral, phi3,
// qwen2, qwen2_moe, qwen3, qwen3_moe, qwen3_next, gemma2, gemma3 / gemma3_text, gpt_oss,
// deepseek_v2, deepseek_v3, kimi_k2. `id` names the result (the file's folder name, say).
//  - The multimodal llama4 and gemma3 files keep the model under "text_config"; it is read there.
//  - KV heads come from num_key_value_heads (num_attention_heads only when absent), head_dim
//    from head_dim when present, never from hidden / heads when the config says otherwise; MLA
//    (DeepSeek, Kimi K2) caches kv_lora_rank + qk_rope_head_dim per layer.
//  - Layer kinds: an explicit "layer_types" list wins (full_attention, sliding_attention,
//    chunked_attention, linear_attention); else the family's pattern as transformers derives
//    it: Gemma 3 every sliding_window_pattern-th layer global (6), GPT-OSS sliding and full
//    alternating, Llama 4 chunked except the NoPE layers (no_rope_layers, else every
//    no_rope_layer_interval-th, 4), Qwen3-Next linear except every full_attention_interval-th
//    (4), Gemma 2 alternating; Qwen's sliding_window counts only with use_sliding_window true.
//    Sliding layers take sliding_window, chunked ones attention_chunk_size; GPT-OSS has sinks.
//  - Parameters are estimated from the shapes, all experts included; for mixture-of-experts
//    models the active parameters count num_experts_per_tok routed experts and the shared
//    experts per MoE layer (num_local_experts / n_routed_experts / num_experts;
//    first_k_dense_replace, moe_layer_freq, decoder_sparse_step, mlp_only_layers, moe_layers,
//    interleave_moe_layer_step decide which layers are MoE) plus everything else, embeddings
//    included.
// Errors name the field they cannot read.
Result<ModelSpec> import_hf_config(const nlohmann::json& config, std::string id);
Result<ModelSpec> import_hf_config_file(const std::filesystem::path& path);

// A GGUF file of an architecture kvlab runs ("llama", "qwen2"), read by the engine's parser
// (model/gguf_model.h): the shape from its metadata, the parameters counted from its tensors and
// the weights' bytes as stored (weights_bytes). Other architectures and mixtures of experts are
// an error naming the file, since the KV formula or the active parameters would be guessed.
Result<ModelSpec> import_gguf_file(const std::filesystem::path& path);

// A model from a file, by its extension (case-insensitive): a .gguf file (import_gguf_file),
// else a Hugging Face config.json (import_hf_config_file).
Result<ModelSpec> import_model_file(const std::filesystem::path& path);

// Bytes per value of a weights dtype name ("bf16" → 2); an error for unknown names.
Result<double> dtype_bytes(std::string_view dtype);

}  // namespace kvlab::planners
