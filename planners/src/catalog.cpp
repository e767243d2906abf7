// Model and GPU catalogues: the compiled-in assets, their JSON, and config.json import.
#include "kvlab/planners/catalog.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kvlab/engine/core/names.h"
#include "kvlab/engine/io/json_text.h"

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
        fmt::format("{}: '{}' must be a positive integer, not {}", where, key, json_text(j[key])));
  }
  return j[key].get<int>();
}

}  // namespace

std::string_view layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::Full:
      return "full";
    case LayerKind::Sliding:
      return "sliding";
    case LayerKind::Chunked:
      return "chunked";
    case LayerKind::Linear:
      return "linear";
  }
  return "full";
}

namespace {

std::optional<LayerKind> parse_layer_kind(std::string_view t) {
  // The names Hugging Face configs use too ("full_attention", "sliding_attention",
  // "chunked_attention", "linear_attention").
  for (LayerKind k : {LayerKind::Full, LayerKind::Sliding, LayerKind::Chunked, LayerKind::Linear}) {
    const std::string_view n = layer_kind_name(k);
    if (t == n || t == std::string(n) + "_attention") return k;
  }
  return std::nullopt;
}

}  // namespace

LayerKind ModelSpec::layer_kind(int layer) const {
  if (layer_kinds.empty()) return sliding_window ? LayerKind::Sliding : LayerKind::Full;
  if (layer < 0 || layer >= static_cast<int>(layer_kinds.size())) return LayerKind::Full;
  return layer_kinds[static_cast<std::size_t>(layer)];
}

int ModelSpec::layers_of(LayerKind k) const {
  int n = 0;
  for (int l = 0; l < layers; ++l) n += layer_kind(l) == k;
  return n;
}

std::int64_t ModelSpec::kind_tokens(LayerKind k, std::int64_t context) const {
  switch (k) {
    case LayerKind::Full:
      return context;
    case LayerKind::Sliding:
      return sliding_window ? std::min<std::int64_t>(context, *sliding_window) : context;
    case LayerKind::Chunked:
      return chunk_size > 0 ? std::min<std::int64_t>(context, chunk_size) : context;
    case LayerKind::Linear:
      return 0;
  }
  return context;
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
  if (active_params_billion < 0 || active_params_billion > params_billion) {
    return make_error(
        fmt::format("{}: active_params_billion {} must be between 0 and the {} "
                    "params_billion",
                    where, active_params_billion, params_billion));
  }
  if (sliding_window && *sliding_window <= 0) {
    return make_error(where + ": sliding_window must be positive");
  }
  if (chunk_size < 0) return make_error(where + ": chunk_size must be positive");
  if (experts < 0 || experts_per_token < 0 || experts_per_token > experts ||
      (experts > 0 && experts_per_token == 0)) {
    return make_error(
        fmt::format("{}: moe experts_per_token {} must be between 1 and the {} "
                    "experts",
                    where, experts_per_token, experts));
  }
  if (experts > 0 && !is_moe()) {
    return make_error(where +
                      ": moe experts given, but active_params_billion is not below "
                      "params_billion");
  }
  if (!layer_kinds.empty() && static_cast<int>(layer_kinds.size()) != layers) {
    return make_error(
        fmt::format("{}: {} layer types for {} layers", where, layer_kinds.size(), layers));
  }
  if (layers_of(LayerKind::Sliding) > 0 && !sliding_window) {
    return make_error(where + ": sliding layers but no sliding_window");
  }
  if (layers_of(LayerKind::Chunked) > 0 && chunk_size <= 0) {
    return make_error(where + ": chunked layers but no chunk_size");
  }
  if (layers_of(LayerKind::Linear) == layers) {
    return make_error(where + ": every layer is linear attention, so there is no KV cache");
  }
  if (auto b = dtype_bytes(weights_dtype); !b) return make_error(where + ": " + b.message());
  return Ok{};
}

Status GpuSpec::validate() const {
  const std::string where = fmt::format("GPU '{}'", id);
  if (id.empty()) return make_error("GPU: the id is empty");
  if (memory_bytes == 0) return make_error(where + ": memory must be positive");
  if (!(bandwidth_gbs > 0)) return make_error(where + ": bandwidth must be positive");
  for (auto [name, v] : {std::pair{"bf16", tflops.bf16},
                         {"fp8", tflops.fp8},
                         {"int8", tflops.int8},
                         {"fp4", tflops.fp4},
                         {"fp32", tflops.fp32}}) {
    if (!(v >= 0 && v < 1e6)) {
      return make_error(
          fmt::format("{}: tflops.{} {} must be a non-negative number", where, name, v));
    }
  }
  if (!(host_link_gbs >= 0 && host_link_gbs < 1e6)) {
    return make_error(
        fmt::format("{}: host_link_gbs {} must be non-negative", where, host_link_gbs));
  }
  return Ok{};
}

double GpuSpec::dense_tflops(std::string_view weights_dtype) const {
  const std::string d = lower(weights_dtype);
  if ((d == "fp8") && tflops.fp8 > 0) return tflops.fp8;
  if (d == "fp4" && tflops.fp4 > 0) return tflops.fp4;
  return tflops.bf16;
}

Result<ModelSpec> import_model_file(const std::filesystem::path& path) {
  return lower(path.extension().string()) == ".gguf" ? import_gguf_file(path)
                                                     : import_hf_config_file(path);
}

Result<double> dtype_bytes(std::string_view dtype) {
  const std::string d = lower(dtype);
  if (d == "fp32" || d == "float32") return 4.0;
  if (d == "fp16" || d == "float16" || d == "bf16" || d == "bfloat16") return 2.0;
  if (d == "fp8" || d == "int8") return 1.0;
  if (d == "int4" || d == "fp4" || d == "mxfp4" || d == "nvfp4") return 0.5;
  return make_error(fmt::format(
      "unknown weights dtype '{}' (expected fp32, fp16, bf16, fp8, int8, int4 or fp4)", dtype));
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
    m.hf_id = j.value("hf_id", "");
    m.aliases = j.value("aliases", std::vector<std::string>{});
    m.params_billion = j.at("params_billion").get<double>();
    m.active_params_billion = j.value("active_params_billion", 0.0);
    if (j.contains("moe")) {
      auto e = positive_int(j["moe"], "experts", where + " moe");
      if (!e) return e.error();
      auto k = positive_int(j["moe"], "experts_per_token", where + " moe");
      if (!k) return k.error();
      m.experts = *e;
      m.experts_per_token = *k;
    }
    m.weights_dtype = j.value("weights_dtype", "bf16");
    if (j.contains("weights_bytes")) {
      const auto& b = j["weights_bytes"];
      if (!b.is_number_unsigned() || b.get<std::uint64_t>() == 0) {
        return make_error(where + ": weights_bytes must be a positive whole number");
      }
      m.weights_bytes = b.get<std::uint64_t>();
    }
    m.attention_sinks = j.value("attention_sinks", false);
    for (auto [key, field] : {std::pair{"layers", &m.layers},
                              {"q_heads", &m.q_heads},
                              {"max_context", &m.max_context}}) {
      auto v = positive_int(j, key, where);
      if (!v) return v.error();
      *field = *v;
    }
    if (m.layers > kMaxLayers) {
      return make_error(fmt::format("{}: {} layers is more than any model has (at most {})", where,
                                    m.layers, kMaxLayers));
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
    }
    m.chunk_size = j.value("chunk_size", 0);
    // Layer kinds: an explicit list, a pattern repeated from layer 0 ("layer_pattern":
    // ["sliding", "sliding", "sliding", "full"]), or the older even/odd sliding pattern.
    const auto kinds_from = [&](const nlohmann::json& list, const char* key,
                                std::size_t n) -> Status {
      if (!list.is_array() || list.empty()) {
        return make_error(fmt::format("{}: '{}' must be a non-empty list", where, key));
      }
      std::vector<LayerKind> kinds;
      for (const auto& e : list) {
        const auto k = e.is_string() ? parse_layer_kind(e.get<std::string>()) : std::nullopt;
        if (!k) {
          return make_error(
              fmt::format("{}: '{}' has {} (expected full, sliding, chunked or "
                          "linear)",
                          where, key, json_text(e)));
        }
        kinds.push_back(*k);
      }
      m.layer_kinds.resize(n);
      for (std::size_t l = 0; l < n; ++l) m.layer_kinds[l] = kinds[l % kinds.size()];
      if (std::string_view(key) == "layer_types" && kinds.size() != n) {
        return make_error(
            fmt::format("{}: layer_types has {} entries for {} layers", where, kinds.size(), n));
      }
      return Ok{};
    };
    const auto n = static_cast<std::size_t>(m.layers);
    if (j.contains("layer_types")) {
      KVLAB_TRY(kinds_from(j["layer_types"], "layer_types", n));
    } else if (j.contains("layer_pattern")) {
      KVLAB_TRY(kinds_from(j["layer_pattern"], "layer_pattern", n));
    } else if (j.contains("sliding_pattern")) {
      const std::string pattern = j["sliding_pattern"].get<std::string>();
      if (pattern == "even" || pattern == "odd") {
        m.layer_kinds.resize(n);
        for (std::size_t l = 0; l < n; ++l) {
          m.layer_kinds[l] =
              (l % 2 == 0) == (pattern == "even") ? LayerKind::Sliding : LayerKind::Full;
        }
      } else if (pattern != "all") {
        return make_error(
            fmt::format("{}: sliding_pattern '{}' (expected all, even or odd)", where, pattern));
      }
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
  if (!m.hf_id.empty()) j["hf_id"] = m.hf_id;
  if (!m.aliases.empty()) j["aliases"] = m.aliases;
  if (m.active_params_billion > 0) j["active_params_billion"] = m.active_params_billion;
  if (m.weights_bytes > 0) j["weights_bytes"] = m.weights_bytes;
  if (m.experts > 0) {
    j["moe"] = {{"experts", m.experts}, {"experts_per_token", m.experts_per_token}};
  }
  if (m.is_mla()) {
    j["mla"] = {{"kv_lora_rank", m.kv_lora_rank}, {"qk_rope_head_dim", m.qk_rope_head_dim}};
  }
  if (m.sliding_window) j["sliding_window"] = *m.sliding_window;
  if (m.chunk_size > 0) j["chunk_size"] = m.chunk_size;
  if (m.attention_sinks) j["attention_sinks"] = true;
  if (!m.layer_kinds.empty()) {
    auto& types = j["layer_types"] = nlohmann::json::array();
    for (LayerKind k : m.layer_kinds) types.push_back(std::string(layer_kind_name(k)));
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
    g.aliases = j.value("aliases", std::vector<std::string>{});
    if (j.contains("tflops")) {
      const auto& t = j["tflops"];
      g.tflops.bf16 = t.value("bf16", 0.0);
      g.tflops.fp8 = t.value("fp8", 0.0);
      g.tflops.int8 = t.value("int8", 0.0);
      g.tflops.fp4 = t.value("fp4", 0.0);
      g.tflops.fp32 = t.value("fp32", 0.0);
    }
    if (j.contains("host_link")) {
      g.host_link = j["host_link"].value("name", "");
      g.host_link_gbs = j["host_link"].at("gbs").get<double>();
    }
    g.compute_source = j.value("compute_source", "");
    g.user = j.value("user", false);
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("GPU entry '{}': {}", g.id, e.what()));
  }
  KVLAB_TRY(g.validate());
  return g;
}

nlohmann::json gpu_to_json(const GpuSpec& g) {
  nlohmann::json j{{"id", g.id},
                   {"name", g.name},
                   {"memory_bytes", g.memory_bytes},
                   {"memory_stated", g.memory_stated},
                   {"bandwidth_gbs", g.bandwidth_gbs},
                   {"tflops",
                    {{"bf16", g.tflops.bf16},
                     {"fp8", g.tflops.fp8},
                     {"int8", g.tflops.int8},
                     {"fp4", g.tflops.fp4},
                     {"fp32", g.tflops.fp32}}},
                   {"source", g.source},
                   {"compute_source", g.compute_source},
                   {"user", g.user}};
  if (!g.aliases.empty()) j["aliases"] = g.aliases;
  if (g.host_link_gbs > 0) j["host_link"] = {{"name", g.host_link}, {"gbs", g.host_link_gbs}};
  return j;
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

// Every name an entry answers to: its id, its aliases and, for models, its Hugging Face name with
// and without the organisation.
std::vector<std::string> names_of(const ModelSpec& m) {
  std::vector<std::string> n{m.id};
  n.insert(n.end(), m.aliases.begin(), m.aliases.end());
  if (!m.hf_id.empty()) {
    n.push_back(m.hf_id);
    if (const auto slash = m.hf_id.find('/'); slash != std::string::npos) {
      n.push_back(m.hf_id.substr(slash + 1));
    }
  }
  return n;
}

std::vector<std::string> names_of(const GpuSpec& g) {
  std::vector<std::string> n{g.id};
  n.insert(n.end(), g.aliases.begin(), g.aliases.end());
  return n;
}

template <class T>
Result<T> find_by_id(std::string_view id, const std::vector<T>& builtin,
                     const std::vector<T>& extra, const char* what) {
  // "llama-3-8b", "Llama-3-8B" and the synthetic presets' "llama3-8b" name one model.
  const std::string want = canonical_id(id);
  for (const auto* list : {&extra, &builtin}) {
    for (const auto& e : *list) {
      for (const auto& n : names_of(e)) {
        if (canonical_id(n) == want) return e;
      }
    }
  }
  // The suggestions come from every name; the list of known ids from the ids alone.
  std::vector<std::string> names, ids;
  for (const auto* list : {&builtin, &extra}) {
    for (const auto& e : *list) {
      ids.push_back(e.id);
      for (auto& n : names_of(e)) names.push_back(std::move(n));
    }
  }
  const auto near = nearest_names(id, names);
  std::string msg = fmt::format("unknown {} '{}'", what, id);
  if (!near.empty()) {
    // Suggest ids, not aliases: the id is what the lists print.
    std::vector<std::string> near_ids;
    for (const auto& n : near) {
      for (const auto* list : {&builtin, &extra}) {
        for (const auto& e : *list) {
          const auto all = names_of(e);
          if (std::find(all.begin(), all.end(), n) != all.end() &&
              std::find(near_ids.begin(), near_ids.end(), e.id) == near_ids.end()) {
            near_ids.push_back(e.id);
          }
        }
      }
    }
    std::string list;
    for (std::size_t i = 0; i < near_ids.size(); ++i) {
      if (i > 0) list += i + 1 == near_ids.size() ? " or " : ", ";
      list += "'" + near_ids[i] + "'";
    }
    msg += fmt::format("; did you mean {}?", list);
  }
  msg += fmt::format(" (known: {})", fmt::join(ids, ", "));
  return make_error(msg);
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
