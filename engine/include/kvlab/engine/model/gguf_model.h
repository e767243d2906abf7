// GGUF models for the Llama runner (llama_model.h): llama.cpp's architectures "llama" (Llama 1-3,
// Mistral, SmolLM, TinyLlama, ...) and "qwen2", their weights used where they lie in the mapped
// file, quantized ones dequantized block by block inside the runner's products.
//
// Names and layouts follow llama.cpp (src/llama-arch.cpp, convert_hf_to_gguf.py):
//  - metadata <arch>.block_count, .embedding_length, .feed_forward_length,
//    .attention.head_count(_kv), .attention.layer_norm_rms_epsilon, .context_length,
//    .rope.freq_base, .rope.dimension_count, .rope.scaling.type/.factor, .attention.sliding_window
//    (caps the positions, since the runner attends to every one), .expert_count (refused);
//  - tensors token_embd, output_norm, output (absent: tied to token_embd), blk.N.attn_norm,
//    attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, and for qwen2
//    attn_q/k/v.bias; rope_freqs (Llama 3.1's per-pair frequency divisors) when present;
//  - RoPE: llama.cpp's converter permutes the q and k rows of "llama" models so that ggml's
//    normal RoPE, which turns adjacent pairs (x[2i], x[2i+1]), matches Hugging Face's halves;
//    "qwen2" keeps Hugging Face's rows and uses the NeoX RoPE, on halves.
// A tensor of another name in a layer, a missing one, a wrong shape or a type kvlab cannot
// dequantize is an error naming the file and the tensor.
//
// The tokenizer comes from tokenizer.ggml.*: "gpt2" (byte-level BPE: tokens, token_type, merges;
// tokenizer.ggml.pre picks the digit splitting) through HfTokenizer, "llama" (SentencePiece
// pieces and scores) through LlamaTokenizer; bos/eos ids and add_bos_token as the file says. The
// chat template (tokenizer.chat_template) is kept as text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/gguf.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/model/model_capture.h"

namespace kvlab {

// What `kvlab sources info MODEL.gguf` prints: read from the metadata and tensor infos of any
// architecture (fields the file lacks stay 0 or empty).
struct GgufSummary {
  std::string path, architecture, name, file_type, tokenizer;
  std::uint32_t version = 0;
  std::uint64_t file_bytes = 0, parameters = 0, tensor_count = 0, metadata_count = 0;
  int layers = 0, dim = 0, hidden_dim = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  int context = 0, sliding_window = 0, rope_dims = 0, experts = 0;
  double rope_theta = 0, rope_scaling_factor = 0;
  std::string rope_layout, rope_scaling;    // "adjacent pairs" / "halves"; "linear", "yarn", ...
  std::map<std::string, int> tensor_types;  // ggml type name -> tensors of it
  std::uint64_t kv_bytes_per_token = 0;     // K and V of every layer in fp16
  bool runnable = false;                    // load_gguf_model accepts the architecture
  bool has_chat_template = false;
};
GgufSummary summarize_gguf(const GgufFile& file);

// The runner's config; an error names the file and the key.
Result<LlamaConfig> gguf_llama_config(const GgufFile& file);

// The model in `path`, its weights in the mapping (1-D tensors converted to float).
Result<LlamaModel> load_gguf_model(const std::filesystem::path& path);
// The model with its tokenizer and chat template.
Result<LoadedModel> load_gguf(const std::filesystem::path& path);

// True when `path` starts with the GGUF magic.
bool is_gguf_file(const std::filesystem::path& path);

}  // namespace kvlab
