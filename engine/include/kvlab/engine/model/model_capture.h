// Capturing the KV cache of a real model, shared by `kvlab capture` and the GUI's model source.
//
// load_model() takes what a user points at: a GGUF file (gguf_model.h, its tokenizer inside), a
// llama2.c checkpoint (a .bin file, its tokenizer the one tok*.bin next to it, e.g. tok512.bin or
// tokenizer.bin) or a Hugging Face folder (config.json, safetensors, tokenizer.json), and pairs the
// runner (llama_model.h, hf_model.h) with its tokenizer. capture_kv_cache() runs a prompt,
// continues it greedily, and returns the K, V and queries of every layer with the token ids, as the
// KvCache the rest of kvlab reads.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/llama_model.h"

namespace kvlab {

struct LoadedModel {
  LlamaModel model;
  std::function<Result<std::vector<int>>(const std::string&)> encode;  // BOS first
  std::function<std::string(const std::vector<int>&)> decode;          // text of the ids
  int bos = LlamaTokenizer::kBos, eos = LlamaTokenizer::kEos;
  std::string chat_template;  // Jinja text, when the model file carries one (GGUF)
};

// The tokenizer next to a llama2.c checkpoint: the one tok*.bin in its folder (tokenizer.bin
// when there are several). An error says how many were found, and where.
Result<std::string> find_llama2c_tokenizer(const std::string& model);

// A folder is a Hugging Face checkpoint, a file a llama2.c checkpoint. `tokenizer` overrides the
// tokenizer found next to the model: a tok*.bin (llama2.c) or a tokenizer.json. Errors name the
// file and what is wrong with it (missing tokenizer, no config.json, a tensor of the wrong
// shape, ...).
Result<LoadedModel> load_model(const std::filesystem::path& path,
                               const std::filesystem::path& tokenizer = {});

// `user` as one user turn of the model's chat template, ready for the assistant's answer. The
// Jinja templates are not run: the formats they write are recognised by their markers and
// written here: ChatML (<|im_start|>role\n…<|im_end|>: SmolLM2, Qwen2), Llama 3
// (<|start_header_id|>role<|end_header_id|>\n\n…<|eot_id|>) and Llama 2 / Mistral
// ([INST] … [/INST]). An error when the model has no template or another format. BOS is not
// included (encode adds it).
Result<std::string> chat_prompt(const LoadedModel& model, const std::string& user);

struct CaptureConfig {
  int max_tokens = 64;    // greedy continuation after the prompt; stops early at EOS or seq_len
  bool pre_rope = false;  // keys before RoPE instead of after
};

struct ModelCapture {
  KvCache cache;          // K, V, queries per layer and token_ids, tokens() of them
  int prompt_tokens = 0;  // of cache.tokens(), BOS included
  std::string generated;  // the text of the continuation
};

// Encodes `prompt` (BOS first), runs it through the model in chunks, then generates up to
// config.max_tokens tokens greedily. The cache holds every token that went through the model
// (a last sampled one did not). Progress covers prefill and generation; cancelling returns the
// error kCancelledMessage.
Result<ModelCapture> capture_kv_cache(const LoadedModel& model, const std::string& prompt,
                                      const CaptureConfig& config, const ProgressFn& progress = {});

}  // namespace kvlab
