// Fuzz target: llama2.c v0 checkpoints (LlamaModel::load_llama2c, llama2c_loader.cpp). The loader
// takes only a path, so the bytes go to a temporary file it maps; a checkpoint that loads runs one
// forward of two tokens.
#include "fuzz_target.h"
#include "kvlab/engine/model/llama_model.h"

using namespace kvlab;

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  const fuzz::TempFile file("llama2c", ".bin", fuzz::as_bytes(data, size));
  auto model = LlamaModel::load_llama2c(file.path());
  if (!model) {
    FUZZ_REQUIRE(model.message().find(file.path().string()) != std::string::npos, model.message());
    return 0;
  }
  auto state = model->new_state();
  const int vocab = model->config().vocab;
  auto logits = model->forward(state, {LlamaTokenizer::kBos % vocab, vocab - 1});
  if (logits) FUZZ_REQUIRE(static_cast<int>(logits->size()) == vocab, "logits");
  return 0;
}
