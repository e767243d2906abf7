// Hugging Face config.json → ModelSpec, for the families whose KV layout kvlab knows.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "kvlab/planners/catalog.h"

namespace kvlab::planners {
namespace {

const std::set<std::string> kFamilies = {"llama",     "mistral", "mixtral",     "qwen2",
                                         "qwen2_moe", "gemma2",  "deepseek_v2", "deepseek_v3"};

// An optional positive integer field; null counts as absent.
Result<std::optional<long long>> opt_int(const nlohmann::json& c, const char* key) {
  if (!c.contains(key) || c[key].is_null()) return std::optional<long long>{};
  if (!c[key].is_number_integer() || c[key].get<long long>() <= 0) {
    return make_error(
        fmt::format("config.json: '{}' must be a positive integer, not {}", key, c[key].dump()));
  }
  return std::optional<long long>{c[key].get<long long>()};
}

Result<long long> req_int(const nlohmann::json& c, const char* key) {
  auto v = opt_int(c, key);
  if (!v) return v.error();
  if (!*v) return make_error(fmt::format("config.json: the field '{}' is missing", key));
  return **v;
}

// Weights held in memory, estimated from the shapes (embeddings, attention, MLP or experts).
double estimate_params(const nlohmann::json& c, const ModelSpec& m, long long hidden,
                       long long vocab) {
  const double h = static_cast<double>(hidden);
  const bool tied = c.value("tie_word_embeddings", false);
  double total = vocab * h * (tied ? 1.0 : 2.0);
  const double inter = c.value("intermediate_size", 0ll);
  for (int l = 0; l < m.layers; ++l) {
    double attn = 0;
    if (m.is_mla()) {
      const double q_rank = c.value("q_lora_rank", 0ll);
      const double nope = c.value("qk_nope_head_dim", 128ll), v_dim = c.value("v_head_dim", 128ll);
      const double qk = nope + m.qk_rope_head_dim;
      attn = (q_rank > 0 ? h * q_rank + q_rank * m.q_heads * qk : h * m.q_heads * qk) +
             h * (m.kv_lora_rank + m.qk_rope_head_dim) +
             m.kv_lora_rank * m.q_heads * (nope + v_dim) + m.q_heads * v_dim * h;
    } else {
      attn = 2.0 * h * m.q_heads * m.head_dim + 2.0 * h * m.kv_heads * m.head_dim;
    }
    double mlp = 3.0 * h * inter;
    const double experts = c.value("num_local_experts", c.value("n_routed_experts", 0ll));
    const double first_dense = c.value("first_k_dense_replace", 0ll);
    if (experts > 0 && l >= first_dense) {
      const double moe_inter = c.value("moe_intermediate_size", static_cast<long long>(inter));
      const double shared = c.value("n_shared_experts", 0ll);
      mlp = 3.0 * h * moe_inter * (experts + shared) + h * experts;  // experts + router
    }
    total += attn + mlp;
  }
  return total / 1e9;
}

}  // namespace

Result<ModelSpec> import_hf_config(const nlohmann::json& c, std::string id) {
  if (!c.is_object()) return make_error("config.json: not a JSON object");
  if (!c.contains("model_type") || !c["model_type"].is_string()) {
    return make_error("config.json: the field 'model_type' is missing");
  }
  const std::string type = c["model_type"].get<std::string>();
  if (!kFamilies.count(type)) {
    return make_error(fmt::format("config.json: model_type '{}' is not supported (supported: {})",
                                  type, fmt::join(kFamilies, ", ")));
  }
  ModelSpec m;
  m.id = std::move(id);
  m.name = m.id;
  m.family = type;
  m.source = "imported config.json";
  auto layers = req_int(c, "num_hidden_layers");
  auto heads = req_int(c, "num_attention_heads");
  auto hidden = req_int(c, "hidden_size");
  if (!layers) return layers.error();
  if (!heads) return heads.error();
  if (!hidden) return hidden.error();
  m.layers = static_cast<int>(*layers);
  m.q_heads = static_cast<int>(*heads);
  auto max_pos = req_int(c, "max_position_embeddings");
  if (!max_pos) return max_pos.error();
  m.max_context = static_cast<int>(*max_pos);

  if (type == "deepseek_v2" || type == "deepseek_v3") {
    auto rank = req_int(c, "kv_lora_rank");
    auto rope = req_int(c, "qk_rope_head_dim");
    if (!rank) return rank.error();
    if (!rope) return rope.error();
    m.kv_lora_rank = static_cast<int>(*rank);
    m.qk_rope_head_dim = static_cast<int>(*rope);
    m.kv_heads = 1;
    m.head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
  } else {
    auto kv = opt_int(c, "num_key_value_heads");
    if (!kv) return kv.error();
    m.kv_heads = static_cast<int>(kv->value_or(*heads));
    if (m.q_heads % m.kv_heads != 0) {
      return make_error(fmt::format(
          "config.json: num_attention_heads {} is not a multiple of num_key_value_heads {}",
          m.q_heads, m.kv_heads));
    }
    auto hd = opt_int(c, "head_dim");
    if (!hd) return hd.error();
    if (*hd) {
      m.head_dim = static_cast<int>(**hd);
    } else if (*hidden % *heads == 0) {
      m.head_dim = static_cast<int>(*hidden / *heads);
    } else {
      return make_error(
          fmt::format("config.json: no 'head_dim', and hidden_size {} is not a multiple of "
                      "num_attention_heads {}",
                      *hidden, *heads));
    }
  }

  // Sliding windows: explicit per-layer types win; Qwen only when use_sliding_window is true
  // (its configs carry a sliding_window even when it is off), from max_window_layers on; Gemma-2
  // alternates starting with a sliding layer 0; Mistral's window covers every layer.
  auto window = opt_int(c, "sliding_window");
  if (!window) return window.error();
  const bool qwen = type.rfind("qwen", 0) == 0;
  const bool window_on = *window && (!qwen || c.value("use_sliding_window", false));
  if (c.contains("layer_types") && c["layer_types"].is_array()) {
    const auto& types = c["layer_types"];
    if (types.size() != static_cast<std::size_t>(m.layers)) {
      return make_error(fmt::format("config.json: layer_types has {} entries for {} layers",
                                    types.size(), m.layers));
    }
    bool any = false;
    for (const auto& t : types) {
      const bool s = t.is_string() && t.get<std::string>() == "sliding_attention";
      m.layer_kinds.push_back(s ? LayerKind::Sliding : LayerKind::Full);
      any = any || s;
    }
    if (any && !window_on) {
      return make_error("config.json: layer_types has sliding layers but no sliding_window");
    }
    if (!any) m.layer_kinds.clear();
    if (any) m.sliding_window = static_cast<int>(**window);
  } else if (window_on) {
    m.sliding_window = static_cast<int>(**window);
    if (type == "gemma2") {
      for (int l = 0; l < m.layers; ++l) {
        m.layer_kinds.push_back(l % 2 == 0 ? LayerKind::Sliding : LayerKind::Full);
      }
    } else if (qwen && c.contains("max_window_layers")) {
      auto first = req_int(c, "max_window_layers");
      if (!first) return first.error();
      for (int l = 0; l < m.layers; ++l) {
        m.layer_kinds.push_back(l >= *first ? LayerKind::Sliding : LayerKind::Full);
      }
      if (m.layers_of(LayerKind::Sliding) == 0) {
        m.layer_kinds.clear();
        m.sliding_window.reset();
      }
    }
  }

  auto vocab = req_int(c, "vocab_size");
  if (!vocab) return vocab.error();
  m.params_billion = estimate_params(c, m, *hidden, *vocab);
  m.weights_dtype = "bf16";
  if (c.contains("torch_dtype") && c["torch_dtype"].is_string()) {
    const std::string d = c["torch_dtype"].get<std::string>();
    if (d == "float16") m.weights_dtype = "fp16";
    if (d == "float32") m.weights_dtype = "fp32";
  }
  if (c.contains("quantization_config") && c["quantization_config"].is_object() &&
      c["quantization_config"].value("quant_method", "") == "fp8") {
    m.weights_dtype = "fp8";
  }
  if (auto v = m.validate(); !v) return make_error("config.json: " + v.message());
  return m;
}

Result<ModelSpec> import_hf_config_file(const std::filesystem::path& file) {
  const std::string path = file.string();
  std::ifstream in(path);
  if (!in) return make_error(fmt::format("{}: cannot open the file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  // The model's id: the folder holding config.json, else the file's own name.
  std::string id = path;
  const auto slash = id.find_last_of('/');
  if (id.size() > 12 && id.substr(id.size() - 12) == "/config.json" && slash != std::string::npos) {
    const auto prev = id.find_last_of('/', slash - 1);
    id = id.substr(prev == std::string::npos ? 0 : prev + 1,
                   slash - (prev == std::string::npos ? 0 : prev + 1));
  } else if (slash != std::string::npos) {
    id = id.substr(slash + 1);
  }
  if (id.size() > 5 && id.substr(id.size() - 5) == ".json") id.resize(id.size() - 5);
  auto m = import_hf_config(j, id);
  if (!m) return make_error(fmt::format("{}: {}", path, m.message()));
  m->source = path;
  return m;
}

}  // namespace kvlab::planners
