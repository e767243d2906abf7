#include "kvlab/engine/model/model_capture.h"

#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "kvlab/engine/model/generate.h"
#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/engine/model/hf_model.h"
#include "kvlab/engine/model/hf_tokenizer.h"

namespace kvlab {
namespace {

namespace fs = std::filesystem;

// Prefill chunk: long prompts report progress and can be cancelled between chunks, and the
// batched forward keeps its matrix products large enough to be efficient.
constexpr std::size_t kCapturePrefillChunk = 128;

Result<LoadedModel> with_llama2c_tokenizer(LlamaModel model, const std::string& tok_path) {
  auto tok = LlamaTokenizer::load_llama2c(tok_path, model.config().vocab);
  if (!tok) return tok.error();
  auto shared = std::make_shared<LlamaTokenizer>(std::move(*tok));
  LoadedModel m{std::move(model), {}, {}, LlamaTokenizer::kBos, LlamaTokenizer::kEos, {}};
  m.encode = [shared](const std::string& text) -> Result<std::vector<int>> {
    return shared->encode(text, true, false);
  };
  m.decode = [shared](const std::vector<int>& ids) {
    std::string out;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      out += shared->decode(i == 0 ? LlamaTokenizer::kBos : ids[i - 1], ids[i]);
    }
    return out;
  };
  return m;
}

Result<LoadedModel> with_hf_tokenizer(LlamaModel model, const std::string& tok_path) {
  auto tok = HfTokenizer::load(tok_path);
  if (!tok) return tok.error();
  auto shared = std::make_shared<HfTokenizer>(std::move(*tok));
  LoadedModel m{std::move(model), {}, {}, shared->bos(), shared->eos(), {}};
  if (m.bos < 0) {
    return make_error(fmt::format("{}: no BOS token found among the added tokens", tok_path));
  }
  m.encode = [shared](const std::string& text) { return shared->encode(text, true, false); };
  m.decode = [shared](const std::vector<int>& ids) { return shared->decode(ids, true); };
  return m;
}

bool is_llama2c_tokenizer(const std::string& path) {
  return fs::path(path).extension() == ".bin";
}

}  // namespace

Result<std::string> find_llama2c_tokenizer(const std::string& model) {
  const fs::path dir =
      fs::path(model).parent_path().empty() ? fs::path(".") : fs::path(model).parent_path();
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".bin" && name.rfind("tok", 0) == 0) found.push_back(e.path());
  }
  if (ec)
    return make_error(fmt::format("{}: cannot list the folder: {}", dir.string(), ec.message()));
  std::sort(found.begin(), found.end());
  if (found.size() == 1) return found.front();
  for (const auto& f : found) {
    if (fs::path(f).filename() == "tokenizer.bin") return f;
  }
  if (found.empty()) {
    return make_error(fmt::format(
        "{}: no llama2.c tokenizer (tok*.bin, e.g. tok512.bin or tokenizer.bin) next to it in {}",
        model, dir.string()));
  }
  return make_error(
      fmt::format("{}: {} tokenizer files (tok*.bin) next to it in {}; expected one, or one named "
                  "tokenizer.bin",
                  model, found.size(), dir.string()));
}

Result<LoadedModel> load_model(const std::filesystem::path& file,
                               const std::filesystem::path& tokenizer_file) {
  const std::string path = file.string(), tokenizer = tokenizer_file.string();
  std::error_code ec;
  if (path.empty()) {
    return make_error(
        "no model given: name a GGUF file, a llama2.c checkpoint (.bin) or a Hugging Face folder");
  }
  if (!fs::exists(path, ec)) return make_error(fmt::format("{}: no such file or folder", path));
  if (!fs::is_directory(path, ec) && (file.extension() == ".gguf" || is_gguf_file(file))) {
    if (!tokenizer.empty()) {
      return make_error(
          fmt::format("{}: a GGUF file carries its own tokenizer; --tokenizer {} "
                      "is not used with it",
                      path, tokenizer));
    }
    return load_gguf(file);
  }
  if (fs::is_directory(path, ec)) {  // a Hugging Face checkpoint folder
    auto model = load_hf_model(path);
    if (!model) return model.error();
    if (is_llama2c_tokenizer(tokenizer))
      return with_llama2c_tokenizer(std::move(*model), tokenizer);
    return with_hf_tokenizer(std::move(*model), tokenizer.empty()
                                                    ? (fs::path(path) / "tokenizer.json").string()
                                                    : tokenizer);
  }
  auto model = LlamaModel::load_llama2c(path);
  if (!model) return model.error();
  std::string tok_path = tokenizer;
  if (tok_path.empty()) {
    auto found = find_llama2c_tokenizer(path);
    if (!found) return found.error();
    tok_path = *found;
  }
  if (!is_llama2c_tokenizer(tok_path)) return with_hf_tokenizer(std::move(*model), tok_path);
  return with_llama2c_tokenizer(std::move(*model), tok_path);
}

Result<std::string> chat_prompt(const LoadedModel& model, const std::string& user) {
  const std::string& t = model.chat_template;
  if (t.empty()) return make_error("the model has no chat template");
  if (t.find("<|im_start|>") != std::string::npos) {
    // ChatML; SmolLM2's and Qwen2's templates add a default system turn when none is given.
    std::string system;
    if (const auto at = t.find("<|im_start|>system\n"); at != std::string::npos) {
      const auto from = at + std::string_view("<|im_start|>system\n").size();
      const auto end = t.find("<|im_end|>", from);
      if (end != std::string::npos && t.find('{', from) > end) system = t.substr(from, end - from);
    }
    std::string out;
    if (!system.empty()) out += "<|im_start|>system\n" + system + "<|im_end|>\n";
    return out + "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n";
  }
  if (t.find("<|start_header_id|>") != std::string::npos) {
    return "<|start_header_id|>user<|end_header_id|>\n\n" + user +
           "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n";
  }
  if (t.find("[INST]") != std::string::npos) return "[INST] " + user + " [/INST]";
  return make_error(
      "the model's chat template is of a format kvlab does not know (ChatML, "
      "Llama 3 and [INST] are known)");
}

Result<ModelCapture> capture_kv_cache(const LoadedModel& loaded, const std::string& prompt,
                                      const CaptureConfig& config, const ProgressFn& progress) {
  if (config.max_tokens < 0) {
    return make_error(fmt::format("max tokens {}: must not be negative", config.max_tokens));
  }
  const LlamaModel& model = loaded.model;
  auto encoded = loaded.encode(prompt);
  if (!encoded) return encoded.error();
  std::vector<int> ids = std::move(*encoded);
  const int limit = model.config().seq_len;
  if (ids.empty()) return make_error("the prompt encodes to no tokens");
  if (static_cast<int>(ids.size()) > limit) {
    return make_error(fmt::format("the prompt is {} tokens, more than the model's {} positions",
                                  ids.size(), limit));
  }
  const std::size_t prompt_tokens = ids.size();
  const int to_generate = std::min(config.max_tokens, limit - static_cast<int>(prompt_tokens));
  const double total = static_cast<double>(prompt_tokens) + std::max(to_generate, 0);

  auto state = model.new_state(true, config.pre_rope);
  GreedyConfig greedy;
  greedy.tokens = to_generate + 1;  // the last one picked is not run: the cache ends before it
  greedy.prefill_chunk = static_cast<int>(kCapturePrefillChunk);
  greedy.eos = loaded.eos;
  GreedyHooks hooks;
  hooks.on_prefill = [&](int done, const std::vector<float>&) {
    return report_progress(progress, done / total, "prefill");
  };
  hooks.on_token = [&](int step, int) {
    return report_progress(progress, (static_cast<double>(prompt_tokens) + step) / total,
                           "generating");
  };
  auto run = generate_greedy(model, state, ids, greedy, hooks);
  if (!run) return run.error();
  // The text holds what was generated before the extra pick (EOS included, when it came).
  if (static_cast<int>(run->generated.size()) > to_generate)
    run->generated.resize(static_cast<std::size_t>(to_generate));
  ids.insert(ids.end(), run->generated.begin(), run->generated.end());
  report_progress(progress, 1.0, "captured");

  ModelCapture capture;
  capture.prompt_tokens = static_cast<int>(prompt_tokens);
  // The continuation's text: decoded after the prompt's last token, so that a leading space or
  // a byte sequence split across the boundary comes out as it would in the whole text.
  const std::vector<int> tail(ids.begin() + static_cast<std::ptrdiff_t>(prompt_tokens) - 1,
                              ids.end());
  const std::string head = loaded.decode({tail.front()}), text = loaded.decode(tail);
  capture.generated = text.rfind(head, 0) == 0 ? text.substr(head.size()) : text;
  // The cache holds the tokens that went through the model (a last sampled one did not).
  ids.resize(static_cast<std::size_t>(state.pos));
  capture.cache = state_to_cache(model, state, config.pre_rope);
  capture.cache.token_ids.assign(ids.begin(), ids.end());
  return capture;
}

}  // namespace kvlab
