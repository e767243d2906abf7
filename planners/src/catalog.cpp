// Model and GPU catalogues: the compiled-in assets, their JSON, and config.json import.
#include "kvlab/planners/catalog.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kvlab/engine/core/names.h"

namespace kvlab::planners {
namespace detail {
extern const char* const kModelsJson;
extern const char* const kGpusJson;
}  // namespace detail

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Reads an integer field that must be present (or is given a default) and positive.
Result<int> positive_int(const nlohmann::json& j, const char* key, const std::string& where,
                         std::optional<int> fallback = std::nullopt) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback) return *fallback;
    return make_error(fmt::format("{}: the field '{}' is missing", where, key));
  }
  if (!j[key].is_number_integer() || j[key].get<long long>() <= 0 ||
      j[key].get<long long>() > (1ll << 30)) {
    return make_error(
        fmt::format("{}: '{}' must be a positive integer, not {}", where, key, j[key].dump()));
  }
  return j[key].get<int>();
}

}  // namespace

bool ModelSpec::layer_is_sliding(int layer) const {
  if (!sliding_window) return false;
  if (sliding_layers.empty()) return true;
  return layer >= 0 && layer < static_cast<int>(sliding_layers.size()) &&
         sliding_layers[static_cast<std::size_t>(layer)];
}

ModelShape ModelSpec::shape() const {
  if (is_mla()) return ModelShape{name, layers, q_heads, 1, kv_lora_rank + qk_rope_head_dim};
  return ModelShape{name, layers, q_heads, kv_heads, head_dim};
}

Status ModelSpec::validate() const {
  const std::string where = fmt::format("model '{}'", id);
  if (layers <= 0) return make_error(where + ": layers must be positive");
  if (q_heads <= 0) return make_error(where + ": q_heads must be positive");
  if (!is_mla()) {
    if (kv_heads <= 0) return make_error(where + ": kv_heads must be positive");
    if (head_dim <= 0) return make_error(where + ": head_dim must be positive");
    if (q_heads % kv_heads != 0) {
      return make_error(
          fmt::format("{}: q_heads {} is not a multiple of kv_heads {}", where, q_heads, kv_heads));
    }
  } else if (qk_rope_head_dim < 0) {
    return make_error(where + ": qk_rope_head_dim must not be negative");
  }
  if (!(params_billion > 0)) return make_error(where + ": params_billion must be positive");
  if (max_context <= 0) return make_error(where + ": max_context must be positive");
  if (sliding_window && *sliding_window <= 0) {
    return make_error(where + ": sliding_window must be positive");
  }
  if (!sliding_layers.empty() && static_cast<int>(sliding_layers.size()) != layers) {
    return make_error(
        fmt::format("{}: {} layer types for {} layers", where, sliding_layers.size(), layers));
  }
  if (auto b = dtype_bytes(weights_dtype); !b) return make_error(where + ": " + b.message());
  return Ok{};
}

Status GpuSpec::validate() const {
  const std::string where = fmt::format("GPU '{}'", id);
  if (id.empty()) return make_error("GPU: the id is empty");
  if (memory_bytes == 0) return make_error(where + ": memory must be positive");
  if (!(bandwidth_gbs > 0)) return make_error(where + ": bandwidth must be positive");
  return Ok{};
}

Result<double> dtype_bytes(std::string_view dtype) {
  const std::string d = lower(dtype);
  if (d == "fp32" || d == "float32") return 4.0;
  if (d == "fp16" || d == "float16" || d == "bf16" || d == "bfloat16") return 2.0;
  if (d == "fp8" || d == "int8") return 1.0;
  if (d == "int4" || d == "fp4") return 0.5;
  return make_error(fmt::format(
      "unknown weights dtype '{}' (expected fp32, fp16, bf16, fp8, int8 or int4)", dtype));
}

Result<ModelSpec> model_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return make_error("model entry: not a JSON object");
  ModelSpec m;
  try {
    m.id = j.at("id").get<std::string>();
    const std::string where = fmt::format("model '{}'", m.id);
    m.name = j.value("name", m.id);
    m.family = j.value("family", "");
    m.source = j.value("source", "");
    m.params_billion = j.at("params_billion").get<double>();
    m.weights_dtype = j.value("weights_dtype", "bf16");
    for (auto [key, field] : {std::pair{"layers", &m.layers},
                              {"q_heads", &m.q_heads},
                              {"max_context", &m.max_context}}) {
      auto v = positive_int(j, key, where);
      if (!v) return v.error();
      *field = *v;
    }
    if (j.contains("mla")) {
      auto r = positive_int(j["mla"], "kv_lora_rank", where + " mla");
      if (!r) return r.error();
      m.kv_lora_rank = *r;
      m.qk_rope_head_dim = j["mla"].value("qk_rope_head_dim", 0);
      m.kv_heads = 1;
      m.head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
    } else {
      for (auto [key, field] : {std::pair{"kv_heads", &m.kv_heads}, {"head_dim", &m.head_dim}}) {
        auto v = positive_int(j, key, where);
        if (!v) return v.error();
        *field = *v;
      }
    }
    if (j.contains("sliding_window") && !j["sliding_window"].is_null()) {
      m.sliding_window = j["sliding_window"].get<int>();
      const std::string pattern = j.value("sliding_pattern", "all");
      if (pattern == "even" || pattern == "odd") {
        m.sliding_layers.resize(static_cast<std::size_t>(m.layers));
        for (int l = 0; l < m.layers; ++l)
          m.sliding_layers[l] = (l % 2 == 0) == (pattern == "even");
      } else if (pattern != "all") {
        return make_error(
            fmt::format("{}: sliding_pattern '{}' (expected all, even or odd)", where, pattern));
      }
      if (j.contains("sliding_layers"))
        m.sliding_layers = j["sliding_layers"].get<std::vector<bool>>();
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("model entry '{}': {}", m.id, e.what()));
  }
  KVLAB_TRY(m.validate());
  return m;
}

nlohmann::json model_to_json(const ModelSpec& m) {
  nlohmann::json j{{"id", m.id},
                   {"name", m.name},
                   {"family", m.family},
                   {"layers", m.layers},
                   {"q_heads", m.q_heads},
                   {"kv_heads", m.kv_heads},
                   {"head_dim", m.head_dim},
                   {"params_billion", m.params_billion},
                   {"max_context", m.max_context},
                   {"weights_dtype", m.weights_dtype},
                   {"source", m.source}};
  if (m.is_mla()) {
    j["mla"] = {{"kv_lora_rank", m.kv_lora_rank}, {"qk_rope_head_dim", m.qk_rope_head_dim}};
  }
  if (m.sliding_window) {
    j["sliding_window"] = *m.sliding_window;
    if (!m.sliding_layers.empty()) j["sliding_layers"] = m.sliding_layers;
  }
  return j;
}

Result<GpuSpec> gpu_from_json(const nlohmann::json& j) {
  GpuSpec g;
  try {
    g.id = j.at("id").get<std::string>();
    g.name = j.value("name", g.id);
    g.source = j.value("source", "");
    g.memory_stated = j.value("memory_stated", "");
    if (j.contains("memory_bytes")) {
      g.memory_bytes = j.at("memory_bytes").get<std::uint64_t>();
    } else {
      g.memory_bytes = static_cast<std::uint64_t>(j.at("memory_gib").get<double>() * (1ull << 30));
    }
    g.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
    g.user = j.value("user", false);
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("GPU entry '{}': {}", g.id, e.what()));
  }
  KVLAB_TRY(g.validate());
  return g;
}

nlohmann::json gpu_to_json(const GpuSpec& g) {
  return {{"id", g.id},
          {"name", g.name},
          {"memory_bytes", g.memory_bytes},
          {"memory_stated", g.memory_stated},
          {"bandwidth_gbs", g.bandwidth_gbs},
          {"source", g.source},
          {"user", g.user}};
}

namespace {

template <class T, class Parse>
std::vector<T> load_builtin(const char* text, const char* list, Parse parse) {
  std::vector<T> out;
  const auto j = nlohmann::json::parse(text);  // compiled-in and tested: cannot fail at run time
  for (const auto& e : j.at(list)) {
    auto v = parse(e);
    if (v) out.push_back(std::move(*v));
  }
  return out;
}

template <class T>
Result<T> find_by_id(std::string_view id, const std::vector<T>& builtin,
                     const std::vector<T>& extra, const char* what) {
  // "llama-3-8b", "Llama-3-8B" and the synthetic presets' "llama3-8b" name one model.
  const std::string want = canonical_id(id);
  for (const auto* list : {&extra, &builtin}) {
    for (const auto& e : *list) {
      if (canonical_id(e.id) == want) return e;
    }
  }
  std::vector<std::string> ids;
  for (const auto* list : {&builtin, &extra}) {
    for (const auto& e : *list) ids.push_back(e.id);
  }
  return make_error(unknown_name_message(what, id, ids));
}

}  // namespace

const std::vector<ModelSpec>& builtin_models() {
  static const auto models =
      load_builtin<ModelSpec>(detail::kModelsJson, "models", model_from_json);
  return models;
}

const std::vector<GpuSpec>& builtin_gpus() {
  static const auto gpus = load_builtin<GpuSpec>(detail::kGpusJson, "gpus", gpu_from_json);
  return gpus;
}

Result<ModelSpec> find_model(std::string_view id, const std::vector<ModelSpec>& extra) {
  return find_by_id(id, builtin_models(), extra, "model");
}

Result<GpuSpec> find_gpu(std::string_view id, const std::vector<GpuSpec>& extra) {
  return find_by_id(id, builtin_gpus(), extra, "GPU");
}

}  // namespace kvlab::planners
