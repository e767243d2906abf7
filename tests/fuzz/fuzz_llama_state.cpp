// Fuzz target: llama.cpp sequence-state files (llama_state.h). Reads the layout from memory, then
// loads the cache with the heads given three ways (head_dim 64 with llama.cpp's rotation rule,
// one KV head with the rotation forced on, two KV heads with it off) so that f16/f32 rows,
// transposed V, block types and the Hadamard rotation all run on fuzzed data.
#include "fuzz_target.h"
#include "kvlab/engine/sources/llama_state.h"

namespace {

using namespace kvlab;

constexpr std::string_view kName = "fuzz-slot.bin";

LlamaStateOptions heads(int kv_heads, int head_dim, LlamaStateRotation rotation) {
  LlamaStateOptions o;
  o.kv_heads = kv_heads;
  o.head_dim = head_dim;
  o.rotation = rotation;
  return o;
}

void load_with(std::span<const std::byte> bytes, const LlamaStateLayout& layout,
               const LlamaStateOptions& options) {
  const auto shape = llama_state_shape(layout, options, kName);
  auto cache = load_llama_state_bytes(bytes, kName, options);
  if (!cache) {
    FUZZ_REQUIRE(cache.message().find(kName) != std::string::npos, cache.message());
    return;
  }
  FUZZ_REQUIRE(shape.ok(), shape.message());
  const Status valid = cache->validate();
  FUZZ_REQUIRE(valid.ok(), valid.message());
  FUZZ_REQUIRE(cache->layers.size() == layout.layers.size(), cache->source);
  FUZZ_REQUIRE(cache->tokens() == static_cast<int>(layout.cells), cache->source);
}

}  // namespace

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  const auto bytes = fuzz::as_bytes(data, size);
  auto layout = read_llama_state_layout_bytes(bytes, kName);
  if (!layout) {
    FUZZ_REQUIRE(layout.message().find(kName) != std::string::npos, layout.message());
    // What the layout refuses, the loader refuses too.
    FUZZ_REQUIRE(!load_llama_state_bytes(bytes, kName, heads(1, 0, LlamaStateRotation::Auto)).ok(),
                 layout.message());
    return 0;
  }
  FUZZ_REQUIRE(layout->file_bytes == size, "file_bytes");
  load_with(bytes, *layout, heads(0, 64, LlamaStateRotation::Auto));
  load_with(bytes, *layout, heads(1, 0, LlamaStateRotation::On));
  load_with(bytes, *layout, heads(2, 0, LlamaStateRotation::Off));
  return 0;
}
