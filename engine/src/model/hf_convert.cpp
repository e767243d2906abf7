// A llama2.c checkpoint written out as a Hugging Face folder (config.json + model.safetensors),
// for tests and for users who want the stories models in the tools they know. The q and k
// projections' rows are permuted from llama2.c's interleaved RoPE pairs to Hugging Face's
// half-split pairs, as transformers' convert script does in the other direction.
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/model/hf_model.h"
#include "kvlab/engine/model/llama_model.h"

namespace kvlab {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// One tensor of the converted checkpoint: where its floats start in the llama2.c file, and the
// number of heads whose rows are permuted (0: none).
struct ConvertedTensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::uint64_t from = 0;
  int permute_heads = 0;
  std::uint64_t count() const {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

// Rows of head h in the llama2.c order (x[2i], x[2i+1] rotate together) to the Hugging Face
// order (x[i], x[i + hd/2] rotate together): new row h*hd + j*hd/2 + i = old row h*hd + 2i + j.
void permute_rows(const float* in, float* out, int heads, std::uint64_t head_dim,
                  std::uint64_t cols) {
  const std::uint64_t half = head_dim / 2;
  for (std::uint64_t h = 0; h < static_cast<std::uint64_t>(heads); ++h) {
    for (std::uint64_t r = 0; r < head_dim; ++r) {
      const std::uint64_t old_row = r < half ? 2 * r : 2 * (r - half) + 1;
      std::memcpy(out + (h * head_dim + r) * cols, in + (h * head_dim + old_row) * cols,
                  cols * sizeof(float));
    }
  }
}

}  // namespace

Status convert_llama2c_to_hf(const std::filesystem::path& llama2c_file,
                             const std::filesystem::path& out_folder, DType dtype) {
  const std::string llama2c_path = llama2c_file.string(), out_dir = out_folder.string();
  auto model = LlamaModel::load_llama2c(llama2c_path);  // validates the header and the size
  if (!model) return model.error();
  const LlamaConfig& c = model->config();
  const std::uint64_t L = c.layers, D = c.dim, F = c.hidden_dim, KV = c.kv_dim(), V = c.vocab;
  const std::uint64_t hd = c.head_dim();

  // The llama2.c v0 layout: each kind of weight for all layers, one after the other.
  std::vector<ConvertedTensor> tensors;
  std::uint64_t at = 0;
  tensors.push_back({"model.embed_tokens.weight", {V, D}, at});
  at += V * D;
  const auto per_layer = [&](const char* suffix, std::vector<std::uint64_t> shape, int heads) {
    for (std::uint64_t l = 0; l < L; ++l) {
      tensors.push_back({fmt::format("model.layers.{}.{}", l, suffix), shape, at, heads});
      at += tensors.back().count();
    }
  };
  per_layer("input_layernorm.weight", {D}, 0);
  per_layer("self_attn.q_proj.weight", {D, D}, c.heads);
  per_layer("self_attn.k_proj.weight", {KV, D}, c.kv_heads);
  per_layer("self_attn.v_proj.weight", {KV, D}, 0);
  per_layer("self_attn.o_proj.weight", {D, D}, 0);
  per_layer("post_attention_layernorm.weight", {D}, 0);
  per_layer("mlp.gate_proj.weight", {F, D}, 0);
  per_layer("mlp.down_proj.weight", {D, F}, 0);
  per_layer("mlp.up_proj.weight", {F, D}, 0);
  tensors.push_back({"model.norm.weight", {D}, at});
  at += D + static_cast<std::uint64_t>(c.seq_len) * hd;  // skip the two RoPE tables
  if (!c.shared_classifier) tensors.push_back({"lm_head.weight", {V, D}, at});

  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}, {"kvlab.source", llama2c_path}};
  std::uint64_t offset = 0;
  const std::string_view dtype_text = dtype == DType::F32   ? "F32"
                                      : dtype == DType::F16 ? "F16"
                                                            : "BF16";
  for (const auto& t : tensors) {
    const std::uint64_t bytes = t.count() * dtype_size(dtype);
    header[t.name] = {
        {"dtype", dtype_text}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump(-1, ' ', false, json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned

  json config = {{"architectures", {"LlamaForCausalLM"}},
                 {"model_type", "llama"},
                 {"hidden_size", c.dim},
                 {"intermediate_size", c.hidden_dim},
                 {"num_hidden_layers", c.layers},
                 {"num_attention_heads", c.heads},
                 {"num_key_value_heads", c.kv_heads},
                 {"vocab_size", c.vocab},
                 {"max_position_embeddings", c.seq_len},
                 {"rope_theta", c.rope_theta},
                 {"rms_norm_eps", std::stod(fmt::format("{}", c.norm_eps))},  // 1e-05, not 9.99e-06
                 {"hidden_act", "silu"},
                 {"tie_word_embeddings", c.shared_classifier},
                 {"bos_token_id", LlamaTokenizer::kBos},
                 {"eos_token_id", LlamaTokenizer::kEos},
                 {"torch_dtype", dtype == DType::F32   ? "float32"
                                 : dtype == DType::F16 ? "float16"
                                                       : "bfloat16"}};

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return make_error(fmt::format("{}: cannot create the folder: {}", out_dir, ec.message()));
  auto in = detail::InputFile::open(llama2c_path);
  if (!in) return in.error();
  const fs::path weights_path = fs::path(out_dir) / "model.safetensors";
  auto written =
      detail::write_file_atomically(weights_path, [&](detail::OutputFile& out) -> Status {
        const std::uint64_t len = text.size();
        std::byte len_bytes[8];
        std::memcpy(len_bytes, &len, 8);
        KVLAB_TRY(out.write(len_bytes));
        KVLAB_TRY(out.write(std::as_bytes(std::span(text))));
        std::vector<float> raw, permuted;
        std::vector<std::byte> encoded;
        constexpr std::uint64_t kHeader = 7 * sizeof(std::int32_t);
        for (const auto& t : tensors) {
          raw.resize(t.count());
          if (auto s = in->read_at(kHeader + t.from * sizeof(float),
                                   std::as_writable_bytes(std::span(raw)));
              !s) {
            return s;
          }
          const float* values = raw.data();
          if (t.permute_heads > 0) {
            permuted.resize(raw.size());
            permute_rows(raw.data(), permuted.data(), t.permute_heads, hd, D);
            values = permuted.data();
          }
          encoded.resize(t.count() * dtype_size(dtype));
          convert_from_float(dtype, {values, t.count()}, std::span(encoded));
          KVLAB_TRY(out.write(encoded));
        }
        return Ok{};
      });
  if (!written) return written;
  const std::string config_text = json_text(config, 2) + "\n";
  return detail::write_file_atomically(
      fs::path(out_dir) / "config.json",
      [&](detail::OutputFile& out) { return out.write(std::as_bytes(std::span(config_text))); });
}

}  // namespace kvlab
