// Fuzz target: llama2.c tokenizer files (tok*.bin, LlamaTokenizer::load_llama2c). The loader
// takes a path and the model's vocabulary size, so the bytes go to a temporary file read with
// 512 (the size of the seeds, tok512.bin) and 32 tokens; a tokenizer that loads encodes a text
// with multi-byte characters and byte fallbacks and decodes every id back.
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "kvlab/engine/model/llama_model.h"

using namespace kvlab;

namespace {

void run(const std::filesystem::path& path, int vocab) {
  auto tokenizer = LlamaTokenizer::load_llama2c(path, vocab);
  if (!tokenizer) {
    FUZZ_REQUIRE(tokenizer.message().find(path.string()) != std::string::npos, tokenizer.message());
    return;
  }
  FUZZ_REQUIRE(tokenizer->vocab() == vocab, "vocab");
  const std::vector<int> ids = tokenizer->encode(
      "Once upon a time, a caf\xc3\xa9 \xe2\x82\xac"
      "9 <0x41>\x01\xff",
      true, true);
  int previous = LlamaTokenizer::kBos;
  for (const int id : ids) {
    FUZZ_REQUIRE(id >= 0 && id < vocab,
                 "encode gave id " + std::to_string(id) + " of " + std::to_string(vocab));
    (void)tokenizer->decode(previous, id);
    previous = id;
  }
}

}  // namespace

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  const fuzz::TempFile file("tokenizer", ".bin", fuzz::as_bytes(data, size));
  run(file.path(), 512);
  run(file.path(), 32);
  return 0;
}
