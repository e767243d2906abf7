// A planner model from a GGUF file (catalog.h, import_gguf_file).
#include <fmt/format.h>

#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/planners/catalog.h"

namespace kvlab::planners {

Result<ModelSpec> import_gguf_file(const std::filesystem::path& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.error();
  const GgufSummary s = summarize_gguf(*file);
  if (!s.runnable) {
    return make_error(fmt::format(
        "{}: architecture '{}': a GGUF file is planned from for the architectures kvlab runs "
        "(llama, qwen2); for another, give its catalogue id or its Hugging Face config.json",
        s.path, s.architecture));
  }
  if (s.experts > 0) {
    return make_error(fmt::format(
        "{}: a mixture of {} experts: the file does not say how many parameters a token uses; "
        "give its catalogue id or its Hugging Face config.json",
        s.path, s.experts));
  }
  ModelSpec m;
  // Text from the file and its path, held as text (valid_utf8). The name is only ever shown, so
  // it is escaped once here as a terminal line escapes it: a control character the file puts in
  // general.name reaches no output of the planner raw.
  m.id = valid_utf8(path.stem().string());
  m.name = s.name.empty() ? m.id : terminal_text(s.name);
  m.family = valid_utf8(s.architecture);
  m.source =
      valid_utf8(fmt::format("{} ({}{})", s.path, s.file_type.empty() ? "" : s.file_type + ", ",
                             "GGUF metadata and tensors"));
  m.layers = s.layers, m.q_heads = s.heads, m.kv_heads = s.kv_heads, m.head_dim = s.head_dim;
  m.max_context = s.context;
  if (s.sliding_window > 0) m.sliding_window = s.sliding_window;
  m.params_billion = static_cast<double>(s.parameters) / 1e9;
  bool all_f32 = true, all_f16 = true;
  for (const GgufTensorInfo& t : file->tensors()) {
    m.weights_bytes += t.bytes;
    all_f32 = all_f32 && t.type == GgmlType::F32;
    all_f16 = all_f16 && (t.type == GgmlType::F16 || t.dims.size() == 1);
  }
  // The products' dtype: a quantized file's blocks are dequantized into them (llama.cpp, and
  // this runner), so bf16 throughput is what is charged.
  m.weights_dtype = all_f32 ? "fp32" : all_f16 ? "fp16" : "bf16";
  if (auto ok = m.validate(); !ok) return make_error(fmt::format("{}: {}", s.path, ok.message()));
  return m;
}

}  // namespace kvlab::planners
