#include "kvlab/store/sweep_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/model/model_quality.h"
#include "kvlab/engine/quant/method_json.h"

namespace kvlab {

namespace {

using json = nlohmann::json;

// The key of an item: 128 bits of its canonical spec (nlohmann::json keeps object keys sorted,
// so the same spec always dumps to the same text), as two 64-bit FNV-1a hashes with different
// offset bases. A key names an item; it guards against no adversary.
std::string spec_key(const json& spec) {
  const std::string text = json_text(spec);
  const auto fnv1a = [&](std::uint64_t h) {
    for (const unsigned char c : text) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    return h;
  };
  return fmt::format("sweep-{:016x}{:016x}", fnv1a(0xcbf29ce484222325ull),
                     fnv1a(0x84222325cbf29ce4ull));
}

Status only_keys(const json& j, std::initializer_list<std::string_view> known,
                 const std::string& where) {
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return make_error(
          fmt::format("{}: unknown key \"{}\" (known: {})", where, key, fmt::join(known, ", ")));
    }
  }
  return Ok{};
}

Result<std::vector<std::string>> string_list(const json& j, const char* key,
                                             const std::string& where) {
  if (!j.contains(key)) return make_error(fmt::format("{}: \"{}\" is missing", where, key));
  const json& list = j[key];
  if (!list.is_array() || list.empty()) {
    return make_error(fmt::format("{}: \"{}\" must be a list of at least one string", where, key));
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string() || list[i].get<std::string>().empty()) {
      return make_error(fmt::format("{}: {}[{}] must be a non-empty string", where, key, i));
    }
    out.push_back(list[i].get<std::string>());
  }
  return out;
}

Result<int> int_field(const json& j, const char* key, int fallback, int least,
                      const std::string& where) {
  if (!j.contains(key)) return fallback;
  if (!j[key].is_number_integer() || j[key].get<std::int64_t>() < least ||
      j[key].get<std::int64_t>() > (1 << 30)) {
    return make_error(
        fmt::format("{}: \"{}\" must be a whole number from {} to 2^30", where, key, least));
  }
  return j[key].get<int>();
}

// A quality text as the run records name it: "file:PATH" or "sampled:N".
Result<std::string> text_id(const std::string& text, const std::string& where) {
  constexpr std::string_view sampled = "sampled:";
  if (text.rfind(sampled, 0) == 0) {
    const std::string_view n(text.data() + sampled.size(), text.size() - sampled.size());
    std::int64_t count = 0;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), count);
    if (ec != std::errc() || end != n.data() + n.size() || count < 2 || count > kMaxSampledTokens) {
      return make_error(
          fmt::format("{}: \"{}\": sampled text needs a token count from 2 to {} (sampled:4096)",
                      where, terminal_text(text), kMaxSampledTokens));
    }
    return text;
  }
  if (text.rfind("file:", 0) == 0) return text;
  return "file:" + text;
}

struct MethodEntry {
  std::optional<MethodConfig> method;
  std::optional<EvictionConfig> eviction;
  json spec;  // the method's and the eviction's parameters, as stored in a run's params
  std::string label;
};

Result<MethodEntry> method_entry(const json& j, SweepKind kind, const std::string& where) {
  if (!j.is_object()) return make_error(fmt::format("{}: must be an object", where));
  // Every parameter method_config_from_json() reads, and the eviction.
  KVLAB_TRY(only_keys(
      j, {"method",       "bits",          "group_size",    "residual",       "int8_tokens",
          "old_bits",     "block_size",    "rel_scale",     "codec",          "per_head_scale",
          "calib_tokens", "levels",        "outliers",      "pre_rope",       "qjl",
          "rotation",     "rotation_seed", "rotate_values", "llama_rotation", "param_dtype",
          "eviction"},
      where));
  MethodEntry e;
  json method = j;
  method.erase("eviction");
  const bool none = !method.contains("method") ||
                    (method["method"].is_string() && method["method"].get<std::string>() == "none");
  if (none) {
    if (method.size() > (method.contains("method") ? 1u : 0u)) {
      return make_error(
          fmt::format("{}: method parameters without a method (name one in \"method\")", where));
    }
    e.spec["method"] = "none";
  } else {
    auto config = method_config_from_json(method);
    if (!config) return make_error(fmt::format("{}: {}", where, config.message()));
    e.method = *config;
    e.spec = method_params_json(*config);
    e.label = method_label(*config);
  }
  if (j.contains("eviction")) {
    if (kind != SweepKind::Quality) {
      return make_error(fmt::format(
          "{}: \"eviction\" belongs to quality sweeps (kvlab evict simulates it)", where));
    }
    json ev = j["eviction"];
    const std::string ev_where = where + ".eviction";
    if (!ev.is_object()) return make_error(fmt::format("{}: must be an object", ev_where));
    // Every parameter eviction_config_from_json() reads but those of the simulation alone.
    KVLAB_TRY(only_keys(
        ev,
        {"policy",           "budget",        "layer_budgets", "sinks",        "recent_fraction",
         "recent",           "threshold",     "w_attention",   "w_recency",    "protected_tokens",
         "merge_similarity", "merge_window",  "window",        "pool",         "pyramid_beta",
         "scorer",           "ada_safeguard", "chunk",         "key_channels", "think_tokens",
         "future",           "covariance",    "value_norm",    "merge_t",      "retain"},
        ev_where));
    if (!ev.contains("policy"))
      return make_error(fmt::format("{}: \"policy\" is missing", ev_where));
    // A budget may be written as a number (0.5) or as `--budget` takes it ("50%", "512").
    if (!ev.contains("budget")) ev["budget"] = "0.5";
    if (ev["budget"].is_number()) ev["budget"] = json_text(ev["budget"]);
    auto config = eviction_config_from_json(ev);
    if (!config) return make_error(fmt::format("{}: {}", ev_where, config.message()));
    if (config->policy == EvictionPolicy::Full) {
      return make_error(
          fmt::format("{}: policy \"full\" keeps every token; leave out \"eviction\"", ev_where));
    }
    e.eviction = *config;
    json stored = eviction_params_json(*config);
    for (const char* simulation_only : {"steps", "needle", "top_k", "quant"})
      stored.erase(simulation_only);
    e.spec["eviction"] = stored;
    e.label = e.label.empty() ? eviction_label(*config) : eviction_label(*config) + " + " + e.label;
  }
  if (!e.method && !e.eviction) {
    return make_error(
        fmt::format("{}: neither a method nor an eviction policy: nothing to measure", where));
  }
  return e;
}

std::string file_name(const std::string& path) {
  const auto name = std::filesystem::path(path).filename().string();
  return name.empty() ? path : name;
}

}  // namespace

Result<SweepShard> SweepShard::parse(std::string_view text) {
  const auto bad = [&] {
    return make_error(fmt::format(
        "--shard {}: expected I/N with 1 <= I <= N (e.g. 3/8: the third of eight parts)", text));
  };
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return bad();
  SweepShard s;
  const auto number = [](std::string_view part, int& out) {
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc() && end == part.data() + part.size();
  };
  if (!number(text.substr(0, slash), s.index) || !number(text.substr(slash + 1), s.count) ||
      s.count < 1 || s.index < 1 || s.index > s.count) {
    return bad();
  }
  return s;
}

Result<SweepPlan> parse_sweep(const json& j, const std::string& where) {
  if (!j.is_object()) return make_error(fmt::format("{}: a sweep is a JSON object", where));
  if (!j.contains("kind") || !j["kind"].is_string()) {
    return make_error(fmt::format("{}: \"kind\" must be \"quality\" or \"compression\"", where));
  }
  SweepPlan plan;
  const std::string kind = j["kind"].get<std::string>();
  if (kind == "quality") {
    plan.kind = SweepKind::Quality;
    KVLAB_TRY(only_keys(j, {"kind", "models", "texts", "max_tokens", "window", "stride", "methods"},
                        where));
  } else if (kind == "compression") {
    plan.kind = SweepKind::Compression;
    KVLAB_TRY(only_keys(j, {"kind", "sources", "context", "layers", "seed", "queries", "methods"},
                        where));
  } else {
    return make_error(fmt::format("{}: kind \"{}\": expected quality or compression", where, kind));
  }
  if (!j.contains("methods") || !j["methods"].is_array() || j["methods"].empty()) {
    return make_error(fmt::format("{}: \"methods\" must be a list of at least one method", where));
  }
  std::vector<MethodEntry> methods;
  for (std::size_t i = 0; i < j["methods"].size(); ++i) {
    auto m = method_entry(j["methods"][i], plan.kind, fmt::format("{}: methods[{}]", where, i));
    if (!m) return m.error();
    methods.push_back(std::move(*m));
  }

  const auto add = [&](SweepItem item, const MethodEntry& m, std::string title) {
    item.index = static_cast<int>(plan.items.size());
    item.kind = plan.kind;
    item.method = m.method;
    item.eviction = m.eviction;
    item.spec["kind"] = kind;
    item.spec["method"] = m.spec;
    item.uid = spec_key(item.spec);
    item.title = title + " × " + m.label;
    plan.items.push_back(std::move(item));
  };

  if (plan.kind == SweepKind::Quality) {
    auto models = string_list(j, "models", where);
    if (!models) return models.error();
    auto texts = string_list(j, "texts", where);
    if (!texts) return texts.error();
    auto max_tokens = int_field(j, "max_tokens", 0, 0, where);
    if (!max_tokens) return max_tokens.error();
    auto window = int_field(j, "window", 0, 0, where);
    if (!window) return window.error();
    if (*window == 1)
      return make_error(fmt::format("{}: \"window\" must be 0 or at least 2", where));
    auto stride = int_field(j, "stride", 0, 0, where);
    if (!stride) return stride.error();
    plan.max_tokens = *max_tokens;
    plan.window = *window;
    plan.stride = *stride;
    for (const auto& model : *models) {
      for (const auto& raw_text : *texts) {
        auto text = text_id(raw_text, where);
        if (!text) return text.error();
        for (const auto& m : methods) {
          SweepItem item;
          item.model = model;
          item.text = *text;
          item.spec = {{"model", model},
                       {"text", *text},
                       {"window", plan.window},
                       {"max_tokens", plan.max_tokens}};
          // Only when set, so that the uids of sweeps written before strides stay as they were.
          if (plan.stride > 0) item.spec["stride"] = plan.stride;
          add(std::move(item), m, fmt::format("{} × {}", file_name(model), file_name(*text)));
        }
      }
    }
    return plan;
  }

  auto sources = string_list(j, "sources", where);
  if (!sources) return sources.error();
  SyntheticConfig knobs;
  auto context = int_field(j, "context", knobs.context, 1, where);
  if (!context) return context.error();
  auto layers = int_field(j, "layers", knobs.layers, 0, where);
  if (!layers) return layers.error();
  auto queries = int_field(j, "queries", knobs.queries, 0, where);
  if (!queries) return queries.error();
  if (j.contains("seed") && !j["seed"].is_number_unsigned()) {
    return make_error(fmt::format("{}: \"seed\" must be a whole number of at least 0", where));
  }
  knobs.context = *context;
  knobs.layers = *layers;
  knobs.queries = *queries;
  knobs.seed = j.value("seed", knobs.seed);
  for (const auto& source : *sources) {
    const auto colon = source.find(':');
    const std::string scheme = source.substr(0, colon);
    const std::string rest = colon == std::string::npos ? "" : source.substr(colon + 1);
    if ((scheme != "synthetic" && scheme != "file") || rest.empty()) {
      return make_error(
          fmt::format("{}: source \"{}\": expected synthetic:PRESET or file:PATH", where, source));
    }
    for (const auto& m : methods) {
      SweepItem item;
      item.source = source;
      item.spec = {{"source", source}};
      if (scheme == "synthetic") {
        SyntheticConfig c = knobs;
        c.preset = rest;
        item.synthetic = c;
        item.spec.update({{"context", c.context},
                          {"layers", c.layers},
                          {"seed", c.seed},
                          {"queries", c.queries}});
      }
      add(std::move(item), m, scheme == "file" ? file_name(rest) : source);
    }
  }
  return plan;
}

Result<SweepPlan> load_sweep_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open the sweep file", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  json j = json::parse(buffer.str(), nullptr, /*allow_exceptions=*/false, /*comments=*/true);
  if (j.is_discarded()) {
    return make_error(
        fmt::format("{}: not a JSON file (a sweep is one JSON object)", path.string()));
  }
  return parse_sweep(j, path.string());
}

std::vector<const SweepItem*> shard_items(const SweepPlan& plan, const SweepShard& shard) {
  std::vector<const SweepItem*> out;
  for (const auto& item : plan.items) {
    if (shard.contains(item)) out.push_back(&item);
  }
  return out;
}

}  // namespace kvlab
