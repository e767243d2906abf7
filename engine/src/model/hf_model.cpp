// Hugging Face checkpoints for the Llama runner (see hf_model.h).
#include "kvlab/engine/model/hf_model.h"

#include "io/file_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "kvlab/engine/sources/safetensors.h"

namespace kvlab {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is used in place");

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct Shard {
  SafetensorsIndex index;
  std::unique_ptr<detail::FileMapping> map;
  std::unordered_map<std::string, const SafetensorsEntry*> by_name;
};

// What LlamaWeights::owner keeps alive: the shard mappings and the converted F16/BF16 tensors.
struct WeightStore {
  std::map<std::string, std::unique_ptr<Shard>> shards;  // by file name
  std::vector<std::vector<float>> converted;
};

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

Result<json> read_json(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", file.string()));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    return make_error(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
}

// Finds a tensor by name across the shards, maps shards on first use, checks shape and dtype.
class TensorSource {
 public:
  static Result<TensorSource> open(const fs::path& dir) {
    TensorSource s;
    s.m_dir = dir;
    s.m_store = std::make_shared<WeightStore>();
    const fs::path single = dir / "model.safetensors",
                   listed = dir / "model.safetensors.index.json";
    if (fs::exists(single)) {
      s.m_single = "model.safetensors";
      return s;
    }
    if (!fs::exists(listed)) {
      return make_error(fmt::format("{}: neither model.safetensors nor {} is there", dir.string(),
                                    listed.filename().string()));
    }
    auto index = read_json(listed);
    if (!index) return index.error();
    const auto map = index->find("weight_map");
    if (map == index->end() || !map->is_object()) {
      return make_error(fmt::format("{}: no \"weight_map\" object", listed.string()));
    }
    for (const auto& [name, file] : map->items()) {
      // Shards are files of this folder: no path separators, so the map cannot point outside.
      if (!file.is_string() || file.get_ref<const std::string&>().empty() ||
          file.get_ref<const std::string&>().find('/') != std::string::npos ||
          file.get_ref<const std::string&>() == "..") {
        return make_error(fmt::format("{}: weight_map entry for '{}' is not a shard file name",
                                      listed.string(), name));
      }
      s.m_weight_map.emplace(name, file.get<std::string>());
    }
    return s;
  }

  bool has(const std::string& name) {
    const std::string file = shard_of(name);
    if (file.empty()) return false;
    auto shard = open_shard(file);
    return shard && (*shard)->by_name.count(name) > 0;
  }

  // The tensor as F32 [shape], checked.
  Result<const float*> get(const std::string& name, const std::vector<std::uint64_t>& shape) {
    const std::string file = shard_of(name);
    if (file.empty()) {
      return make_error(fmt::format("{}: tensor '{}' is missing", where(), name));
    }
    auto shard = open_shard(file);
    if (!shard) return shard.error();
    const Shard& sh = **shard;
    const std::string label = (m_dir / file).string();
    const auto it = sh.by_name.find(name);
    if (it == sh.by_name.end()) {
      return make_error(fmt::format("{}: tensor '{}' is missing", label, name));
    }
    const SafetensorsEntry& e = *it->second;
    if (e.shape != shape) {
      return make_error(fmt::format("{}: tensor '{}' has shape {}, expected {}", label, name,
                                    shape_text(e.shape), shape_text(shape)));
    }
    const auto dtype = kv_dtype(e.dtype);
    if (!dtype) {
      return make_error(fmt::format("{}: tensor '{}' is {}; only F32, F16 and BF16 are supported",
                                    label, name, safetensors_dtype_name(e.dtype)));
    }
    const std::byte* bytes = sh.map->data() + sh.index.data_offset + e.begin;
    const std::size_t count = e.nbytes() / dtype_size(*dtype);
    if (*dtype == DType::F32 && reinterpret_cast<std::uintptr_t>(bytes) % alignof(float) == 0) {
      return reinterpret_cast<const float*>(bytes);  // in place
    }
    std::vector<std::uint16_t> aligned;  // convert_to_float reads 16-bit words
    if (*dtype != DType::F32 && reinterpret_cast<std::uintptr_t>(bytes) % 2 != 0) {
      aligned.resize(count);
      std::memcpy(aligned.data(), bytes, e.nbytes());
      bytes = reinterpret_cast<const std::byte*>(aligned.data());
    }
    std::vector<float> out(count);
    convert_to_float(*dtype, {bytes, e.nbytes()}, out);
    m_store->converted.push_back(std::move(out));
    return m_store->converted.back().data();
  }

  std::shared_ptr<WeightStore> store() const { return m_store; }

 private:
  std::string where() const {
    return (m_dir / (m_single.empty() ? "model.safetensors.index.json" : m_single)).string();
  }
  std::string shard_of(const std::string& name) const {
    if (!m_single.empty()) return m_single;
    const auto it = m_weight_map.find(name);
    return it == m_weight_map.end() ? std::string() : it->second;
  }
  Result<Shard*> open_shard(const std::string& file) {
    auto& slot = m_store->shards[file];
    if (slot) return slot.get();
    const fs::path path = m_dir / file;
    auto index = read_safetensors_index(path);
    if (!index) return index.error();
    auto map = detail::FileMapping::open(path.string());
    if (!map) return map.error();
    if ((*map)->size() != index->file_size) {
      return make_error(fmt::format("{}: the file changed while it was opened", path.string()));
    }
    auto shard = std::make_unique<Shard>();
    shard->index = std::move(*index);
    shard->map = std::move(*map);
    for (const auto& e : shard->index.tensors) shard->by_name.emplace(e.name, &e);
    slot = std::move(shard);
    return slot.get();
  }

  fs::path m_dir;
  std::string m_single;                                       // "model.safetensors", or sharded
  std::unordered_map<std::string, std::string> m_weight_map;  // tensor -> shard file
  std::shared_ptr<WeightStore> m_store;
};

// Reads config fields, keeping the first error (naming the file and the key) for the caller.
struct ConfigReader {
  const json& j;
  std::string label;
  std::optional<Error> error;

  const json* find(const char* key) const {
    const auto it = j.find(key);
    return it == j.end() || it->is_null() ? nullptr : &*it;
  }
  void fail(const char* key, const char* what, const json* v) {
    if (!error)
      error = make_error(fmt::format("{}: '{}' {}{}", label, key, what,
                                     v ? fmt::format(" (got {})", v->dump()) : ""));
  }
  int positive(const char* key, std::optional<int> fallback = std::nullopt) {
    const json* v = find(key);
    if (!v) return fallback ? *fallback : (fail(key, "is missing", nullptr), 0);
    if (v->is_number_integer() && v->get<std::int64_t>() > 0 && v->get<std::int64_t>() <= 1 << 30)
      return static_cast<int>(v->get<std::int64_t>());
    return fail(key, "is not a positive integer", v), 0;
  }
  double number(const char* key, std::optional<double> fallback = std::nullopt) {
    const json* v = find(key);
    if (!v) return fallback ? *fallback : (fail(key, "is missing", nullptr), 0.0);
    if (v->is_number() && v->get<double>() > 0) return v->get<double>();
    return fail(key, "is not a positive number", v), 0.0;
  }
  bool boolean(const char* key, bool fallback) {
    const json* v = find(key);
    if (!v) return fallback;
    if (v->is_boolean()) return v->get<bool>();
    return fail(key, "is not true or false", v), fallback;
  }
};

}  // namespace

Result<LlamaConfig> read_hf_config(const std::filesystem::path& folder) {
  const std::string dir = folder.string();
  const fs::path file = fs::path(dir) / "config.json";
  auto j = read_json(file);
  if (!j) return j.error();
  if (!j->is_object()) return make_error(fmt::format("{}: not a JSON object", file.string()));
  ConfigReader r{*j, file.string(), std::nullopt};
  const json* type = r.find("model_type");
  if (!type || !type->is_string()) r.fail("model_type", "is missing or not a string", type);
  if (type && *type != "llama" && *type != "mistral" && *type != "qwen2") {
    r.fail("model_type", "is not llama, mistral or qwen2", type);
  }
  if (const json* act = r.find("hidden_act"); act && *act != "silu") {
    r.fail("hidden_act", "is not silu, the only activation of this runner", act);
  }
  // Scaled RoPE changes the angles, and getting it wrong gives wrong logits silently: the kinds
  // the runner implements ("linear", "llama3") are read with every field checked; any other
  // (dynamic NTK, YaRN, LongRoPE) is refused by name.
  RopeScaling scaling;
  if (const json* s = r.find("rope_scaling"); s) {
    const json* kind = nullptr;
    if (s->is_object()) {
      for (const char* key : {"rope_type", "type"}) {
        if (const auto it = s->find(key); kind == nullptr && it != s->end()) kind = &*it;
      }
    }
    ConfigReader sr{*s, file.string() + " rope_scaling", std::nullopt};
    if (kind && *kind == "linear") {
      scaling.kind = RopeScaling::Kind::Linear;
      scaling.factor = sr.number("factor");
    } else if (kind && *kind == "llama3") {
      scaling.kind = RopeScaling::Kind::Llama3;
      scaling.factor = sr.number("factor");
      scaling.low_freq_factor = sr.number("low_freq_factor");
      scaling.high_freq_factor = sr.number("high_freq_factor");
      scaling.original_max_positions = sr.positive("original_max_position_embeddings");
      if (!sr.error && scaling.high_freq_factor <= scaling.low_freq_factor) {
        sr.fail("high_freq_factor", "must be larger than low_freq_factor", nullptr);
      }
    } else if (!kind || *kind != "default") {
      r.fail("rope_scaling",
             kind ? "names a RoPE scaling this runner does not implement (it implements none, "
                    "\"default\", \"linear\" and \"llama3\")"
                  : "is not an object with a rope_type",
             kind ? kind : s);
    }
    if (sr.error && !r.error) r.error = sr.error;
  }
  // Llama's attention_bias also puts a bias on o_proj; Qwen2 has q/k/v biases without the key.
  for (const char* key : {"attention_bias", "mlp_bias"}) {
    if (r.boolean(key, false))
      r.fail(key, "is true; this runner supports only Qwen2's q/k/v projection biases", nullptr);
  }
  LlamaConfig c;
  c.rope_half_split = true;
  c.qkv_bias = type && *type == "qwen2";
  c.dim = r.positive("hidden_size");
  c.hidden_dim = r.positive("intermediate_size");
  c.layers = r.positive("num_hidden_layers");
  c.heads = r.positive("num_attention_heads");
  c.kv_heads = r.positive("num_key_value_heads", c.heads);
  c.vocab = r.positive("vocab_size");
  c.seq_len = r.positive("max_position_embeddings");
  c.rope_theta = r.number("rope_theta", 10000.0);
  c.rope_scaling = scaling;
  c.norm_eps = static_cast<float>(r.number("rms_norm_eps"));
  c.shared_classifier = r.boolean("tie_word_embeddings", false);
  if (r.error) return *r.error;
  if (c.dim % c.heads != 0 || c.heads % c.kv_heads != 0 || c.head_dim() % 2 != 0) {
    return make_error(fmt::format(
        "{}: hidden_size {}, num_attention_heads {} and num_key_value_heads {} do not divide into "
        "even heads",
        r.label, c.dim, c.heads, c.kv_heads));
  }
  if (const int head_dim = r.positive("head_dim", c.head_dim()); head_dim != c.head_dim()) {
    r.fail("head_dim",
           "differs from hidden_size / num_attention_heads; this runner needs them equal",
           r.find("head_dim"));
  }
  // Mistral's sliding window: within it, full attention is exact, so cap the positions there.
  if (r.boolean("use_sliding_window", true) && r.find("sliding_window")) {
    c.seq_len = std::min(c.seq_len, r.positive("sliding_window"));
  }
  if (r.error) return *r.error;
  return c;
}

Result<LlamaModel> load_hf_model(const std::filesystem::path& folder) {
  const std::string dir = folder.string();
  auto config = read_hf_config(dir);
  if (!config) return config.error();
  const LlamaConfig& c = *config;
  auto source = TensorSource::open(dir);
  if (!source) return source.error();
  TensorSource& src = *source;
  const std::uint64_t D = c.dim, F = c.hidden_dim, KV = c.kv_dim(), V = c.vocab;
  std::optional<Error> error;  // the first one
  const auto get = [&](const std::string& name, std::vector<std::uint64_t> shape) -> const float* {
    if (error) return nullptr;
    auto t = src.get(name, shape);
    if (t) return *t;
    error = t.error();
    return nullptr;
  };
  LlamaWeights w;
  w.embedding = get("model.embed_tokens.weight", {V, D});
  w.layers.resize(static_cast<std::size_t>(c.layers));
  for (int i = 0; i < c.layers && !error; ++i) {
    const std::string p = fmt::format("model.layers.{}.", i);
    // Biases the forward would not add are refused rather than ignored (wrong logits otherwise):
    // o_proj and MLP biases always, q/k/v biases unless the model type has them (Qwen2).
    for (const auto& [bias, added] : {std::pair{"self_attn.q_proj.bias", c.qkv_bias},
                                      {"self_attn.k_proj.bias", c.qkv_bias},
                                      {"self_attn.v_proj.bias", c.qkv_bias},
                                      {"self_attn.o_proj.bias", false},
                                      {"mlp.gate_proj.bias", false},
                                      {"mlp.up_proj.bias", false},
                                      {"mlp.down_proj.bias", false}}) {
      if (!added && src.has(p + bias)) {
        return make_error(
            fmt::format("{}: tensor '{}{}' is a bias this runner would not add: only model_type "
                        "qwen2 has projection biases, on q, k and v",
                        dir, p, bias));
      }
    }
    LlamaLayerWeights& l = w.layers[static_cast<std::size_t>(i)];
    l.attn_norm = get(p + "input_layernorm.weight", {D});
    l.wq = get(p + "self_attn.q_proj.weight", {D, D});
    l.wk = get(p + "self_attn.k_proj.weight", {KV, D});
    l.wv = get(p + "self_attn.v_proj.weight", {KV, D});
    if (c.qkv_bias) {  // Qwen2: a checkpoint without them is broken, not bias-free
      l.bq = get(p + "self_attn.q_proj.bias", {D});
      l.bk = get(p + "self_attn.k_proj.bias", {KV});
      l.bv = get(p + "self_attn.v_proj.bias", {KV});
    }
    l.wo = get(p + "self_attn.o_proj.weight", {D, D});
    l.ffn_norm = get(p + "post_attention_layernorm.weight", {D});
    l.w1 = get(p + "mlp.gate_proj.weight", {F, D});
    l.w2 = get(p + "mlp.down_proj.weight", {D, F});
    l.w3 = get(p + "mlp.up_proj.weight", {F, D});
  }
  w.final_norm = get("model.norm.weight", {D});
  // Tied: transformers ignores a stored lm_head as well.
  w.classifier = c.shared_classifier ? w.embedding : get("lm_head.weight", {V, D});
  if (error) return *error;
  w.owner = src.store();
  return LlamaModel::from_weights(dir, c, std::move(w));
}

}  // namespace kvlab
