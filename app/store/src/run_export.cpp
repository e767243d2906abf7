#include "kvlab/store/run_export.h"

#include <string_view>
#include <utility>
#include <vector>

namespace kvlab {

namespace {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

std::string scalar_text(const nlohmann::json& value) {
  if (value.is_null()) return {};
  if (value.is_string()) return value.get<std::string>();
  // error_handler_t::replace: an invalid UTF-8 sequence must not make an export throw.
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Objects by key, arrays by index: {"error": {"mse": 1}} -> error.mse; per_layer[3].ratio ->
// per_layer.3.ratio. Empty containers stay visible as {} or [].
void flatten(const nlohmann::json& value, const std::string& key, KeyValues& out) {
  const bool container = value.is_object() || value.is_array();
  if (!container || value.empty()) {
    out.emplace_back(key, scalar_text(value));
    return;
  }
  const std::string prefix = key.empty() ? key : key + ".";
  if (value.is_object()) {
    for (const auto& [name, child] : value.items()) flatten(child, prefix + name, out);
  } else {
    for (std::size_t i = 0; i < value.size(); ++i) {
      flatten(value[i], prefix + std::to_string(i), out);
    }
  }
}

// RFC 4180 section 2: fields with a comma, a double quote or a line break are enclosed in
// double quotes, and a double quote inside is escaped by doubling it.
void append_field(std::string& csv, std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) {
    csv += field;
    return;
  }
  csv += '"';
  for (char c : field) {
    if (c == '"') csv += '"';
    csv += c;
  }
  csv += '"';
}

}  // namespace

nlohmann::json run_to_json(const RunRecord& run) {
  nlohmann::json artifacts = nlohmann::json::object();
  for (const auto& [name, data] : run.artifacts) artifacts[name] = data;
  nlohmann::json out = {{"id", run.id},           {"created_at", run.created_at},
                        {"kind", run.kind},       {"source", run.source},
                        {"method", run.method},   {"label", run.label},
                        {"notes", run.notes},     {"tags", run.tags},
                        {"uid", run.uid},         {"params", run.params},
                        {"metrics", run.metrics}, {"artifacts", std::move(artifacts)}};
  if (!run.damage.empty()) out["damage"] = run.damage;
  return out;
}

std::string run_to_csv(const RunRecord& run) {
  KeyValues rows = {{"id", std::to_string(run.id)},
                    {"created_at", run.created_at},
                    {"kind", run.kind},
                    {"source", run.source},
                    {"method", run.method},
                    {"label", run.label},
                    {"notes", run.notes},
                    {"tags", run.tags},
                    {"uid", run.uid}};
  flatten(run.params, "params", rows);
  flatten(run.metrics, "metrics", rows);

  std::string csv = "key,value\r\n";  // RFC 4180 line breaks are CRLF
  for (const auto& [key, value] : rows) {
    append_field(csv, key);
    csv += ',';
    append_field(csv, value);
    csv += "\r\n";
  }
  return csv;
}

}  // namespace kvlab
