// Hugging Face checkpoints for the Llama runner (llama_model.h): a folder with config.json and
// model.safetensors, or shards listed in model.safetensors.index.json ("weight_map"), as
// `save_pretrained` writes them for LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM.
//
// Weights: F32 tensors are used in place from a read-only memory mapping of their file (no
// copy); F16 and BF16 tensors are converted once to F32 buffers that LlamaWeights::owner keeps
// alive, with the mappings. Any other dtype is refused.
//
// Config fields read: model_type (llama, mistral, qwen2), hidden_size, intermediate_size,
// num_hidden_layers, num_attention_heads, num_key_value_heads (default: the heads), head_dim
// (optional; it must equal hidden_size / heads for this runner), vocab_size,
// max_position_embeddings (the runner's seq_len; Mistral's sliding_window caps it, since the
// runner attends to every position), rope_theta (default 10000), rms_norm_eps,
// tie_word_embeddings (default false), hidden_act (silu only). RoPE uses the half-split layout
// of Hugging Face (LlamaConfig::rope_half_split).
//
// Qwen2 (model_type qwen2) adds a bias after the q, k and v projections
// (model.layers.N.self_attn.{q,k,v}_proj.bias, LlamaConfig::qkv_bias): a qwen2 checkpoint must
// have all three in every layer. Any other bias tensor (o_proj, MLP, or q/k/v biases in a llama
// or mistral checkpoint) is refused naming the tensor, since the forward would not add it.
//
// Scaled RoPE: rope_scaling "linear" and "llama3" (Llama 3.1 and later) are read into
// LlamaConfig::rope_scaling, every field checked.
//
// Not supported, refused with a message naming the field: attention_bias or mlp_bias true
// (Llama's o_proj and MLP biases), the other rope_scaling kinds ("dynamic", YaRN, LongRoPE).
#pragma once

#include <filesystem>
#include <string>

#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/llama_model.h"

namespace kvlab {

// The runner's config from DIR/config.json; errors name the file and the field.
Result<LlamaConfig> read_hf_config(const std::filesystem::path& dir);

// Loads the checkpoint in `dir`. Every missing tensor, wrong shape (expected and found), dtype
// other than F32/F16/BF16, unreadable shard or bad config field is an error naming it and the
// file.
Result<LlamaModel> load_hf_model(const std::filesystem::path& dir);

// Writes a llama2.c v0 checkpoint as a Hugging Face Llama folder: out_dir/config.json and
// out_dir/model.safetensors with tensors in `dtype` (F32, F16 or BF16). The rows of wq and wk are
// permuted per head to [0, 2, 4, ..., hd-2, 1, 3, ..., hd-1] so that the half-split RoPE of the
// Hugging Face layout rotates the pairs llama2.c rotates (the "permute" of transformers'
// convert_llama_weights_to_hf.py). lm_head.weight is written only for an unshared classifier.
// Files are written atomically; out_dir is created when absent.
Status convert_llama2c_to_hf(const std::filesystem::path& llama2c_path,
                             const std::filesystem::path& out_dir, DType dtype = DType::F32);

}  // namespace kvlab
