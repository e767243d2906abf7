// Loading a model and its tokenizer for the commands that run one (capture, quality).
#include <filesystem>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/hf_model.h"
#include "kvlab/engine/hf_tokenizer.h"

namespace kvlab::cli {

Result<std::string> find_llama2c_tokenizer(const std::string& model) {
  const auto dir = std::filesystem::path(model).parent_path();
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir.empty() ? "." : dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".bin" && name.rfind("tok", 0) == 0) found.push_back(e.path());
  }
  if (found.size() == 1) return found.front();
  return make_error(fmt::format(
      "--tokenizer: {} tokenizer files (tok*.bin) next to {}; name one with --tokenizer",
      found.size(), model));
}

namespace {

// A llama2.c tokenizer (tok*.bin) for `model`.
Result<LoadedModel> with_llama2c_tokenizer(LlamaModel model, const std::string& tok_path) {
  auto tok = LlamaTokenizer::load_llama2c(tok_path, model.config().vocab);
  if (!tok) return tok.error();
  auto shared = std::make_shared<LlamaTokenizer>(std::move(*tok));
  LoadedModel m{std::move(model), {}, {}, LlamaTokenizer::kBos, LlamaTokenizer::kEos};
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

}  // namespace

Result<LoadedModel> load_model(const std::string& path, const std::string& tokenizer) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const bool llama2c_tokenizer =
      tokenizer.size() > 4 && tokenizer.substr(tokenizer.size() - 4) == ".bin";
  if (fs::is_directory(path, ec)) {  // a Hugging Face checkpoint folder
    auto model = load_hf_model(path);
    if (!model) return model.error();
    if (llama2c_tokenizer) return with_llama2c_tokenizer(std::move(*model), tokenizer);
    const std::string tok_path =
        tokenizer.empty() ? (fs::path(path) / "tokenizer.json").string() : tokenizer;
    auto tok = HfTokenizer::load(tok_path);
    if (!tok) return tok.error();
    auto shared = std::make_shared<HfTokenizer>(std::move(*tok));
    LoadedModel m{std::move(*model), {}, {}, shared->bos(), shared->eos()};
    if (m.bos < 0) {
      return make_error(fmt::format("{}: no BOS token found among the added tokens", tok_path));
    }
    m.encode = [shared](const std::string& text) { return shared->encode(text, true, false); };
    m.decode = [shared](const std::vector<int>& ids) { return shared->decode(ids, true); };
    return m;
  }
  auto model = LlamaModel::load_llama2c(path);
  if (!model) return model.error();
  std::string tok_path = tokenizer;
  if (tok_path.empty()) {
    auto found = find_llama2c_tokenizer(path);
    if (!found) return found.error();
    tok_path = *found;
  }
  return with_llama2c_tokenizer(std::move(*model), tok_path);
}

}  // namespace kvlab::cli
