// The JSON of eviction options, reports and maps (eviction_json.h).
#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/quant/method_json.h"

namespace kvlab {
namespace {

constexpr std::string_view kBase64 =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const std::uint8_t* data, std::size_t n) {
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (std::size_t i = 0; i < n; i += 3) {
    const std::uint32_t b0 = data[i], b1 = i + 1 < n ? data[i + 1] : 0,
                        b2 = i + 2 < n ? data[i + 2] : 0;
    const std::uint32_t v = b0 << 16 | b1 << 8 | b2;
    out += kBase64[v >> 18 & 63];
    out += kBase64[v >> 12 & 63];
    out += i + 1 < n ? kBase64[v >> 6 & 63] : '=';
    out += i + 2 < n ? kBase64[v & 63] : '=';
  }
  return out;
}

Result<std::vector<std::uint8_t>> base64_decode(std::string_view s) {
  if (s.size() % 4 != 0) return make_error("base64 text length is not a multiple of 4");
  std::vector<std::uint8_t> out;
  out.reserve(s.size() / 4 * 3);
  for (std::size_t i = 0; i < s.size(); i += 4) {
    std::uint32_t v = 0;
    int pad = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = s[i + k];
      std::uint32_t d = 0;
      if (c == '=' && i + 4 == s.size() && k >= 2) {
        ++pad;
      } else {
        const auto pos = kBase64.find(c);
        if (pos == std::string_view::npos || pad > 0) {
          return make_error(fmt::format("bad base64 character at offset {}", i + k));
        }
        d = static_cast<std::uint32_t>(pos);
      }
      v = v << 6 | d;
    }
    out.push_back(static_cast<std::uint8_t>(v >> 16));
    if (pad < 2) out.push_back(static_cast<std::uint8_t>(v >> 8 & 0xFF));
    if (pad < 1) out.push_back(static_cast<std::uint8_t>(v & 0xFF));
  }
  return out;
}

}  // namespace

nlohmann::json eviction_params_json(const EvictionConfig& c) {
  nlohmann::json j;
  j["policy"] = std::string(eviction_policy_id(c.policy));
  j["budget"] = c.budget.to_string();
  if (!c.layer_budgets.empty()) {
    auto& lb = j["layer_budgets"] = nlohmann::json::array();
    for (const auto& b : c.layer_budgets) lb.push_back(b.to_string());
  }
  j["steps"] = c.steps;
  j["sinks"] = c.sinks;
  j["recent_fraction"] = c.recent_fraction;
  j["recent"] = c.recent;
  j["threshold"] = c.threshold;
  j["w_attention"] = c.w_attention;
  j["w_recency"] = c.w_recency;
  j["protected_tokens"] = c.protected_tokens;
  j["merge_similarity"] = c.merge_similarity;
  j["merge_window"] = c.merge_window;
  j["window"] = c.window;
  j["pool"] = c.pool;
  j["pyramid_beta"] = c.pyramid_beta;
  j["scorer"] = std::string(eviction_policy_id(c.scorer));
  j["think_tokens"] = c.think_tokens;
  j["ada_safeguard"] = c.ada_safeguard;
  j["chunk"] = c.chunk;
  j["key_channels"] = c.key_channels;
  j["future"] = c.future;
  j["covariance"] = c.covariance;
  j["value_norm"] = c.value_norm;
  j["merge_t"] = c.merge_t;
  j["retain"] = c.retain;
  j["schedule"] = std::string(eviction_schedule_id(eviction_schedule(c.policy)));
  j["top_k"] = c.top_k;
  j["needle"] = c.needle ? nlohmann::json(*c.needle) : nlohmann::json();
  j["quant"] = c.quant ? method_params_json(*c.quant) : nlohmann::json();
  return j;
}

namespace {

template <class T>
struct IsIntList : std::false_type {};
template <>
struct IsIntList<std::vector<int>> : std::true_type {};

template <class T>
constexpr const char* kind_of_value() {
  if constexpr (IsIntList<T>::value) {
    return "a list of whole numbers";
  } else if constexpr (std::is_same_v<T, bool>) {
    return "true or false";
  } else if constexpr (std::is_integral_v<T>) {
    return "a whole number";
  } else if constexpr (std::is_floating_point_v<T>) {
    return "a number";
  } else {
    return "a string";
  }
}

// j[key] into `out` when present; a value of another type is an error naming the key, the type
// wanted and the value found (not nlohmann's "[json.exception.type_error.302]").
template <class T>
Status read_field(const nlohmann::json& j, const char* key, T& out) {
  if (!j.contains(key)) return Ok{};
  const nlohmann::json& v = j[key];
  bool fits = false;
  if constexpr (IsIntList<T>::value) {
    fits = v.is_array() && std::all_of(v.begin(), v.end(), [](const nlohmann::json& e) {
             return e.is_number_integer();
           });
  } else {
    fits = std::is_same_v<T, bool>       ? v.is_boolean()
           : std::is_integral_v<T>       ? v.is_number_integer()
           : std::is_floating_point_v<T> ? v.is_number()
                                         : v.is_string();
  }
  if (!fits) {
    return make_error(fmt::format("eviction parameters: \"{}\" must be {}, not {}", key,
                                  kind_of_value<T>(), json_text(v)));
  }
  out = v.get<T>();
  return Ok{};
}

}  // namespace

Result<EvictionConfig> eviction_config_from_json(const nlohmann::json& j) {
  EvictionConfig c;
  if (!j.is_object()) {
    return make_error(
        fmt::format("eviction parameters: an object is needed, not {}", json_text(j)));
  }
  for (const char* key : {"policy", "budget"}) {
    if (!j.contains(key) || !j[key].is_string()) {
      return make_error(fmt::format("eviction parameters: \"{}\" must be a string{}", key,
                                    j.contains(key) ? ", not " + json_text(j[key]) : ""));
    }
  }
  try {
    auto policy = parse_eviction_policy(j.at("policy").get<std::string>());
    if (!policy) return policy.error();
    c.policy = *policy;
    auto budget = Budget::parse(j.at("budget").get<std::string>());
    if (!budget) return budget.error();
    c.budget = *budget;
    if (j.contains("layer_budgets")) {
      for (const auto& b : j["layer_budgets"]) {
        auto lb = Budget::parse(b.get<std::string>());
        if (!lb) return lb.error();
        c.layer_budgets.push_back(*lb);
      }
    }
    KVLAB_TRY(read_field(j, "steps", c.steps));
    KVLAB_TRY(read_field(j, "sinks", c.sinks));
    KVLAB_TRY(read_field(j, "recent_fraction", c.recent_fraction));
    KVLAB_TRY(read_field(j, "recent", c.recent));
    KVLAB_TRY(read_field(j, "threshold", c.threshold));
    KVLAB_TRY(read_field(j, "w_attention", c.w_attention));
    KVLAB_TRY(read_field(j, "w_recency", c.w_recency));
    KVLAB_TRY(read_field(j, "protected_tokens", c.protected_tokens));
    KVLAB_TRY(read_field(j, "merge_similarity", c.merge_similarity));
    KVLAB_TRY(read_field(j, "merge_window", c.merge_window));
    KVLAB_TRY(read_field(j, "window", c.window));
    KVLAB_TRY(read_field(j, "pool", c.pool));
    KVLAB_TRY(read_field(j, "pyramid_beta", c.pyramid_beta));
    if (j.contains("scorer")) {
      auto scorer = parse_eviction_policy(j["scorer"].get<std::string>());
      if (!scorer) return make_error("scorer: " + scorer.message());
      c.scorer = *scorer;
    }
    KVLAB_TRY(read_field(j, "think_tokens", c.think_tokens));
    KVLAB_TRY(read_field(j, "ada_safeguard", c.ada_safeguard));
    KVLAB_TRY(read_field(j, "chunk", c.chunk));
    KVLAB_TRY(read_field(j, "key_channels", c.key_channels));
    KVLAB_TRY(read_field(j, "future", c.future));
    KVLAB_TRY(read_field(j, "covariance", c.covariance));
    KVLAB_TRY(read_field(j, "value_norm", c.value_norm));
    KVLAB_TRY(read_field(j, "merge_t", c.merge_t));
    KVLAB_TRY(read_field(j, "retain", c.retain));
    KVLAB_TRY(read_field(j, "top_k", c.top_k));
    if (j.contains("needle") && !j["needle"].is_null()) c.needle = j["needle"].get<int>();
    if (j.contains("quant") && !j["quant"].is_null()) {
      auto q = method_config_from_json(j["quant"]);
      if (!q) return q.error();
      c.quant = *q;
    }
  } catch (const nlohmann::json::exception&) {
    // What read_field does not cover: the lists and the needle, of another type.
    return make_error(
        "eviction parameters: \"layer_budgets\" must be a list of strings and \"needle\" a whole "
        "number");
  }
  return c;
}

namespace {

nlohmann::json steps_json(const std::vector<EvictionStep>& steps) {
  nlohmann::json j;
  auto column = [&](const char* key, auto field) {
    auto& a = j[key] = nlohmann::json::array();
    for (const auto& s : steps) a.push_back(field(s));
  };
  column("context", [](const EvictionStep& s) { return s.context; });
  column("kept_tokens", [](const EvictionStep& s) { return s.kept; });
  column("memory_bytes", [](const EvictionStep& s) { return s.memory_bytes; });
  column("attention_mass_retained",
         [](const EvictionStep& s) { return s.attention_mass_retained; });
  column("attn_output_rel_error", [](const EvictionStep& s) { return s.attn_output_rel_error; });
  column("attn_output_cosine", [](const EvictionStep& s) { return s.attn_output_cosine; });
  return j;
}

std::vector<EvictionStep> steps_from_json(const nlohmann::json& j) {
  std::vector<EvictionStep> out(j.at("context").size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i].context = j.at("context").at(i).get<int>();
    out[i].kept = j.at("kept_tokens").at(i).get<double>();
    out[i].memory_bytes = j.at("memory_bytes").at(i).get<double>();
    out[i].attention_mass_retained = j.at("attention_mass_retained").at(i).get<double>();
    out[i].attn_output_rel_error = j.at("attn_output_rel_error").at(i).get<double>();
    out[i].attn_output_cosine = j.at("attn_output_cosine").at(i).get<double>();
  }
  return out;
}

nlohmann::json optional_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

nlohmann::json eviction_report_to_json(const EvictionReport& r) {
  nlohmann::json j;
  j["source"] = r.source;
  j["policy"] = r.policy;
  j["label"] = r.label;
  j["model"] = {{"name", r.shape.name},
                {"layers", r.shape.layers},
                {"q_heads", r.shape.q_heads},
                {"kv_heads", r.shape.kv_heads},
                {"head_dim", r.shape.head_dim}};
  j["tokens"] = r.tokens;
  j["prompt"] = r.prompt;
  j["steps"] = r.steps;
  j["kept_tokens"] = r.kept_tokens;
  j["memory_bytes"] = r.memory_bytes;
  j["full_memory_bytes"] = r.full_memory_bytes;
  j["memory_ratio"] = r.memory_bytes > 0 ? r.full_memory_bytes / r.memory_bytes : 0.0;
  j["quant_bytes_per_token"] = r.quant_bytes_per_token;
  j["attention_mass_retained"] = r.attention_mass_retained;
  j["attn_output_rel_error"] = r.attn_output_rel_error;
  j["attn_output_cosine"] = r.attn_output_cosine;
  j["needle_retained"] = optional_json(r.needle_retained);
  j["needle_in_top_k"] = optional_json(r.needle_in_top_k);
  j["attention_mass_retained_without_needle_step"] = optional_json(r.mass_without_needle_step);
  j["attn_output_rel_error_without_needle_step"] = optional_json(r.rel_error_without_needle_step);
  j["schedule"] = std::string(eviction_schedule_id(eviction_schedule(r.config.policy)));
  j["seconds"] = r.seconds;
  j["matmul_gflops"] = r.seconds > 0 ? r.matmul_flops / r.seconds / 1e9 : 0.0;
  j["per_step"] = steps_json(r.steps_total);
  auto& layers = j["per_layer"] = nlohmann::json::array();
  for (const auto& l : r.layers) {
    nlohmann::json lj;
    lj["layer"] = l.layer;
    lj["budget_tokens"] = l.budget_tokens;
    lj["kept_tokens"] = l.kept_tokens;
    lj["memory_bytes"] = l.memory_bytes;
    lj["full_memory_bytes"] = l.full_memory_bytes;
    lj["attention_mass_retained"] = l.attention_mass_retained;
    lj["attn_output_rel_error"] = l.attn_output_rel_error;
    lj["attn_output_cosine"] = l.attn_output_cosine;
    lj["needle_retained"] = l.needle_retained;
    lj["needle_in_top_k"] = l.needle_in_top_k;
    if (l.key_channels > 0) {
      lj["key_channels"] = l.key_channels;
      auto& masks = lj["channel_masks"] = nlohmann::json::array();
      for (const auto& m : l.channel_masks) {
        std::string bits;
        for (const auto b : m) bits += b ? '1' : '0';
        masks.push_back(bits);
      }
    }
    if (l.merged) {
      lj["merged"] = true;
      lj["retained"] = l.retained;
    }
    auto& heads = lj["per_head"] = nlohmann::json::array();
    for (const auto& h : l.heads) {
      heads.push_back({{"kept_tokens", h.kept_tokens},
                       {"prompt_kept", h.prompt_kept},
                       {"attention_mass_retained", h.attention_mass_retained},
                       {"needle_retained", h.needle_retained},
                       {"needle_in_top_k", h.needle_in_top_k}});
    }
    lj["per_step"] = steps_json(l.steps);
    layers.push_back(std::move(lj));
  }
  return j;
}

Result<EvictionReport> eviction_report_from_json(const nlohmann::json& j) {
  EvictionReport r;
  try {
    r.source = j.at("source").get<std::string>();
    r.policy = j.at("policy").get<std::string>();
    r.label = j.at("label").get<std::string>();
    const auto& m = j.at("model");
    r.shape.name = m.at("name").get<std::string>();
    r.shape.layers = m.at("layers").get<int>();
    r.shape.q_heads = m.at("q_heads").get<int>();
    r.shape.kv_heads = m.at("kv_heads").get<int>();
    r.shape.head_dim = m.at("head_dim").get<int>();
    r.tokens = j.at("tokens").get<int>();
    r.prompt = j.at("prompt").get<int>();
    r.steps = j.at("steps").get<int>();
    r.kept_tokens = j.at("kept_tokens").get<double>();
    r.memory_bytes = j.at("memory_bytes").get<double>();
    r.full_memory_bytes = j.at("full_memory_bytes").get<double>();
    r.quant_bytes_per_token = j.value("quant_bytes_per_token", 0.0);
    r.attention_mass_retained = j.at("attention_mass_retained").get<double>();
    r.attn_output_rel_error = j.at("attn_output_rel_error").get<double>();
    r.attn_output_cosine = j.at("attn_output_cosine").get<double>();
    if (!j.at("needle_retained").is_null()) r.needle_retained = j["needle_retained"].get<double>();
    if (!j.at("needle_in_top_k").is_null()) r.needle_in_top_k = j["needle_in_top_k"].get<double>();
    for (auto [key, field] :
         {std::pair{"attention_mass_retained_without_needle_step", &r.mass_without_needle_step},
          std::pair{"attn_output_rel_error_without_needle_step",
                    &r.rel_error_without_needle_step}}) {
      if (j.contains(key) && !j[key].is_null()) *field = j[key].get<double>();
    }
    r.seconds = j.value("seconds", 0.0);
    r.steps_total = steps_from_json(j.at("per_step"));
    for (const auto& lj : j.at("per_layer")) {
      EvictionLayerResult l;
      l.layer = lj.at("layer").get<int>();
      l.budget_tokens = lj.at("budget_tokens").get<int>();
      l.kept_tokens = lj.at("kept_tokens").get<double>();
      l.memory_bytes = lj.at("memory_bytes").get<double>();
      l.full_memory_bytes = lj.at("full_memory_bytes").get<double>();
      l.attention_mass_retained = lj.at("attention_mass_retained").get<double>();
      l.attn_output_rel_error = lj.at("attn_output_rel_error").get<double>();
      l.attn_output_cosine = lj.at("attn_output_cosine").get<double>();
      l.needle_retained = lj.at("needle_retained").get<double>();
      l.needle_in_top_k = lj.at("needle_in_top_k").get<double>();
      l.key_channels = lj.value("key_channels", 0);
      if (lj.contains("channel_masks")) {
        for (const auto& bits : lj["channel_masks"]) {
          auto& m = l.channel_masks.emplace_back();
          for (const char ch : bits.get<std::string>()) m.push_back(ch == '1');
        }
      }
      l.merged = lj.value("merged", false);
      l.retained = lj.value("retained", 0.0);
      for (const auto& hj : lj.at("per_head")) {
        EvictionHeadResult h;
        h.kept_tokens = hj.at("kept_tokens").get<int>();
        h.prompt_kept = hj.value("prompt_kept", 0);
        h.attention_mass_retained = hj.at("attention_mass_retained").get<double>();
        h.needle_retained = hj.at("needle_retained").get<bool>();
        h.needle_in_top_k = hj.at("needle_in_top_k").get<bool>();
        l.heads.push_back(h);
      }
      l.steps = steps_from_json(lj.at("per_step"));
      r.layers.push_back(std::move(l));
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("eviction report: {}", e.what()));
  }
  return r;
}

nlohmann::json eviction_maps_to_json(const EvictionReport& r) {
  nlohmann::json j;
  j["encoding"] =
      "u16le per position: bits 0-13 the step it left (16383 = never), "
      "bits 14-15 how (0 kept, 1 evicted, 2 merged, 3 sink); base64";
  j["steps"] = r.steps;
  j["positions"] = r.tokens;
  j["prompt"] = r.prompt;
  auto& layers = j["layers"] = nlohmann::json::array();
  for (const auto& heads : r.maps) {
    auto hs = nlohmann::json::array();
    for (const auto& m : heads) {
      std::vector<std::uint8_t> bytes(m.cells.size() * 2);
      for (std::size_t i = 0; i < m.cells.size(); ++i) {
        bytes[2 * i] = static_cast<std::uint8_t>(m.cells[i] & 0xFF);
        bytes[2 * i + 1] = static_cast<std::uint8_t>(m.cells[i] >> 8);
      }
      hs.push_back(base64_encode(bytes.data(), bytes.size()));
    }
    layers.push_back(std::move(hs));
  }
  return j;
}

Result<std::vector<std::vector<EvictionMap>>> eviction_maps_from_json(const nlohmann::json& j) {
  std::vector<std::vector<EvictionMap>> out;
  try {
    const int steps = j.at("steps").get<int>();
    const int positions = j.at("positions").get<int>();
    const int prompt = j.at("prompt").get<int>();
    if (steps < 1 || positions < 1 || prompt < 0 || prompt > positions || steps > 16000) {
      return make_error(
          fmt::format("eviction map: impossible shape {} steps × {} positions", steps, positions));
    }
    int l = 0;
    for (const auto& heads : j.at("layers")) {
      auto& row = out.emplace_back();
      int h = 0;
      for (const auto& text : heads) {
        auto bytes = base64_decode(text.get<std::string>());
        if (!bytes)
          return make_error(
              fmt::format("eviction map layer {} head {}: {}", l, h, bytes.message()));
        if (bytes->size() != static_cast<std::size_t>(positions) * 2) {
          return make_error(fmt::format("eviction map layer {} head {}: {} bytes, expected {}", l,
                                        h, bytes->size(), positions * 2));
        }
        EvictionMap m;
        m.steps = steps, m.positions = positions, m.prompt = prompt;
        m.cells.resize(static_cast<std::size_t>(positions));
        for (int i = 0; i < positions; ++i) {
          m.cells[i] = static_cast<std::uint16_t>((*bytes)[2 * i] | (*bytes)[2 * i + 1] << 8);
        }
        row.push_back(std::move(m));
        ++h;
      }
      ++l;
    }
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("eviction map: {}", e.what()));
  }
  return out;
}

}  // namespace kvlab
