// kvlab capture: run a real model on a prompt and write its KV cache, queries and token ids.
#include <filesystem>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/model/model_capture.h"
#include "kvlab/engine/sources/cache_file.h"

namespace kvlab::cli {
namespace {

struct CaptureOptions {
  std::string model, tokenizer, prompt, prompt_file, out;
  int max_tokens = 64;
  bool pre_rope = false, json = false;
};

int run_capture(const CaptureOptions& o) {
  if (o.prompt.empty() == o.prompt_file.empty()) {
    return fail("give the prompt with exactly one of --prompt TEXT or --prompt-file FILE");
  }
  if (o.max_tokens < 0)
    return fail(fmt::format("--max-tokens {}: must not be negative", o.max_tokens));
  if (o.out.empty()) return fail("--out: name the .safetensors file to write");
  if (std::filesystem::path(o.out).extension() != ".safetensors") {
    return fail(fmt::format("--out {}: captures are written as .safetensors", o.out));
  }
  std::string prompt = o.prompt;
  if (!o.prompt_file.empty()) {
    auto read = read_text_file("--prompt-file", o.prompt_file);
    if (!read) return fail(read.message());
    prompt = std::move(*read);
  }
  auto loaded = load_model(o.model, o.tokenizer);
  if (!loaded) return fail(loaded.message());
  auto captured =
      capture_kv_cache(*loaded, prompt, {o.max_tokens, o.pre_rope}, terminal_progress());
  if (!captured) return fail(captured.message());
  const KvCache& cache = captured->cache;
  const std::string& generated = captured->generated;
  if (auto s = save_cache_file(cache, o.out); !s) return fail(s.message());
  if (o.json) {
    nlohmann::json j = {{"out", o.out},
                        {"model", o.model},
                        {"tokens", cache.tokens()},
                        {"layers", cache.shape.layers},
                        {"kv_heads", cache.shape.kv_heads},
                        {"head_dim", cache.shape.head_dim},
                        {"pre_rope", o.pre_rope},
                        {"generated", generated}};
    fmt::print("{}\n", json_text(j, 2));
  } else {
    // The prompt as the user knows it: a file by its name, not echoed whole (issue 43); a long
    // inline prompt by its end, where the generated text goes on from.
    constexpr std::size_t kShown = 240;
    std::string shown;
    if (!o.prompt_file.empty()) {
      shown = fmt::format("[the prompt of {}, {} bytes] ", o.prompt_file, prompt.size());
    } else if (prompt.size() > kShown) {
      std::size_t from = prompt.size() - kShown;
      while (from < prompt.size() && (static_cast<unsigned char>(prompt[from]) & 0xC0) == 0x80) {
        ++from;  // not in the middle of a UTF-8 character
      }
      shown = "…" + prompt.substr(from);
    } else {
      shown = prompt;
    }
    fmt::print(
        "{}{}\n\nwrote {} tokens × {} layers × {} KV heads × {} ({} keys, queries, token "
        "ids) to {}\n",
        terminal_lines(shown), terminal_lines(generated), cache.tokens(), cache.shape.layers,
        cache.shape.kv_heads, cache.shape.head_dim, o.pre_rope ? "pre-RoPE" : "post-RoPE", o.out);
  }
  return 0;
}

}  // namespace

void add_capture_command(CLI::App& app) {
  auto o = std::make_shared<CaptureOptions>();
  auto* cmd = app.add_subcommand(
      "capture",
      "Run a real model (GGUF file, llama2.c checkpoint or Hugging Face folder) on a prompt, "
      "continue it "
      "greedily, and write the "
      "K, V, queries and token ids of every layer to a .safetensors file that every kvlab "
      "command reads (--source file:PATH)");
  cmd->add_option("--model", o->model,
                  "a .gguf file (llama, qwen2), a llama2.c checkpoint (.bin) or a Hugging Face "
                  "folder (config.json, safetensors)")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer (default: the tok*.bin next to a llama2.c model, or the folder's "
                  "tokenizer.json; a GGUF file has its own)");
  cmd->add_option("--prompt", o->prompt, "the prompt text");
  cmd->add_option("--prompt-file", o->prompt_file, "a file holding the prompt");
  cmd->add_option("--max-tokens", o->max_tokens, "tokens to generate after the prompt")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_flag("--pre-rope", o->pre_rope, "write keys before RoPE instead of after");
  cmd->add_option("--out", o->out, "the .safetensors file to write")->required();
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->callback([o] { exit_code() = run_capture(*o); });
}

}  // namespace kvlab::cli
