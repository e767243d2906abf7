// Fuzz target: GGUF files (gguf.h). Parses the bytes in memory, reads every key through every
// typed getter, every tensor's bytes and its first row dequantized, and summarizes the file.
// When the metadata makes a runnable config, the bytes go through the path loader (load_gguf,
// which maps the file) and one forward of the loaded model.
#include <vector>

#include "fuzz_target.h"
#include "kvlab/engine/model/gguf.h"
#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/engine/model/model_capture.h"

namespace {

using namespace kvlab;

void read_metadata(const GgufFile& file) {
  for (const GgufKeyValue& kv : file.metadata()) {
    (void)kv.display();
    if (kv.type == GgufValueType::Array) {
      (void)file.get_strings(kv.key);
      (void)file.get_integers(kv.key);
      (void)file.get_reals(kv.key);
    } else {
      (void)file.get_string(kv.key);
      (void)file.get_integer(kv.key);
      (void)file.get_real(kv.key);
    }
    FUZZ_REQUIRE(file.find(kv.key) != nullptr, kv.key);
  }
}

void read_tensors(const GgufFile& file) {
  for (const GgufTensorInfo& t : file.tensors()) {
    const auto data = file.tensor_data(t);
    FUZZ_REQUIRE(data.size() == t.bytes, t.name);
    FUZZ_REQUIRE(file.find_tensor(t.name) != nullptr, t.name);
    if (t.dims.empty() || t.dims[0] > (1 << 16)) continue;
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    const auto row_bytes = ggml_row_bytes(t.type, t.dims[0]);
    if (!info || !info->dequantizable || !row_bytes || *row_bytes > data.size()) continue;
    std::vector<float> row(static_cast<std::size_t>(t.dims[0]));
    ggml_dequantize(t.type, data.data(), row.data(), t.dims[0]);
  }
}

void run_model(std::span<const std::byte> bytes) {
  const fuzz::TempFile file("gguf", ".gguf", bytes);
  auto loaded = load_gguf(file.path());
  if (!loaded) return;
  auto ids = loaded->encode("Hi there");
  if (!ids || ids->empty()) return;
  (void)loaded->decode(*ids);
  auto state = loaded->model.new_state();
  (void)loaded->model.forward(state, *ids);
}

}  // namespace

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  const auto bytes = fuzz::as_bytes(data, size);
  auto file = GgufFile::parse(bytes, "fuzz.gguf");
  if (!file) {
    FUZZ_REQUIRE(file.message().find("fuzz.gguf") != std::string::npos, file.message());
    return 0;
  }
  read_metadata(*file);
  read_tensors(*file);
  (void)summarize_gguf(*file);
  if (gguf_llama_config(*file)) run_model(bytes);
  return 0;
}
