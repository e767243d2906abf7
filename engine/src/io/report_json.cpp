#include "kvlab/engine/io/report_json.h"

#include <fmt/format.h>

#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/quant/method_json.h"

namespace kvlab {

namespace {

using nlohmann::json;

json bytes_json(const ByteBreakdown& b) {
  return {{"codes", b.codes},       {"scales", b.scales},     {"zero_points", b.zero_points},
          {"residual", b.residual}, {"metadata", b.metadata}, {"total", b.total()}};
}

json error_json(const ErrorMetrics& e) {
  return {{"mse", e.mse},
          {"max_abs", e.max_abs},
          {"snr_db", e.snr_db},
          {"logit_rmse", e.logit_rmse},
          {"softmax_kl", e.softmax_kl},
          {"attn_output_rel_error", e.attn_output_rel_error},
          {"attn_output_cosine", e.attn_output_cosine}};
}

json codec_json(const CodecStats& c) {
  json sizes = json::object();
  for (CodecKind k : kCodecKinds) {
    sizes[std::string(codec_id(k))] = c.codec_bytes[static_cast<std::size_t>(k)];
  }
  return {{"codes", c.codes},
          {"entropy_bits_per_code", c.entropy_bits_per_code},
          {"payload_bits_per_code", c.payload_bits_per_code},
          {"payload_bytes", c.payload_bytes},
          {"metadata_bytes", c.metadata_bytes},
          {"codebook_bytes", c.codebook_bytes},
          {"codec_bytes", std::move(sizes)},
          {"entropy_bound_bytes", c.entropy_bound_bytes}};
}

// The codec's numbers at the top level of a report or layer, as the CLI documents them.
void add_codec_fields(json& j, const CodecStats& c) {
  const json fields = codec_json(c);  // items() refers into it: keep it alive
  for (const auto& [key, value] : fields.items()) j[key] = value;
}

json histogram_list_json(const std::vector<CodeHistogram>& hs) {
  json out = json::array();
  for (const auto& h : hs)
    out.push_back({{"label", h.label}, {"bits", h.bits}, {"counts", h.counts}});
  return out;
}

// Reads a required field, naming it (with its path) when it is absent or of the wrong type.
template <class T>
Status get(const json& j, const char* key, T& out, std::string_view where) {
  if (!j.is_object() || !j.contains(key)) {
    return make_error(fmt::format("run record: missing '{}{}'", where, key));
  }
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception&) {
    return make_error(fmt::format("run record: '{}{}' has the wrong type", where, key));
  }
  return Ok{};
}

Status bytes_from(const json& j, ByteBreakdown& b, const std::string& where) {
  KVLAB_TRY(get(j, "codes", b.codes, where));
  KVLAB_TRY(get(j, "scales", b.scales, where));
  KVLAB_TRY(get(j, "zero_points", b.zero_points, where));
  KVLAB_TRY(get(j, "residual", b.residual, where));
  KVLAB_TRY(get(j, "metadata", b.metadata, where));
  return Ok{};
}

Status error_from(const json& j, ErrorMetrics& e, const std::string& where) {
  KVLAB_TRY(get(j, "mse", e.mse, where));
  KVLAB_TRY(get(j, "max_abs", e.max_abs, where));
  KVLAB_TRY(get(j, "snr_db", e.snr_db, where));
  KVLAB_TRY(get(j, "logit_rmse", e.logit_rmse, where));
  KVLAB_TRY(get(j, "softmax_kl", e.softmax_kl, where));
  KVLAB_TRY(get(j, "attn_output_rel_error", e.attn_output_rel_error, where));
  KVLAB_TRY(get(j, "attn_output_cosine", e.attn_output_cosine, where));
  return Ok{};
}

Status codec_from(const json& j, CodecStats& c, const std::string& where) {
  KVLAB_TRY(get(j, "codes", c.codes, where));
  KVLAB_TRY(get(j, "entropy_bits_per_code", c.entropy_bits_per_code, where));
  KVLAB_TRY(get(j, "payload_bits_per_code", c.payload_bits_per_code, where));
  KVLAB_TRY(get(j, "payload_bytes", c.payload_bytes, where));
  KVLAB_TRY(get(j, "metadata_bytes", c.metadata_bytes, where));
  KVLAB_TRY(get(j, "codebook_bytes", c.codebook_bytes, where));
  KVLAB_TRY(get(j, "entropy_bound_bytes", c.entropy_bound_bytes, where));
  if (!j.contains("codec_bytes")) {
    return make_error(fmt::format("run record: missing '{}codec_bytes'", where));
  }
  const std::string inner = where + "codec_bytes.";
  for (CodecKind k : kCodecKinds) {
    const std::string id(codec_id(k));
    // Records from before the rANS codec have no size for it: 0, which the charts leave out.
    if (k == CodecKind::Rans && !j["codec_bytes"].contains(id)) continue;
    KVLAB_TRY(get(j["codec_bytes"], id.c_str(), c.codec_bytes[static_cast<std::size_t>(k)], inner));
  }
  return Ok{};
}

Status histograms_from(const json& j, std::vector<CodeHistogram>& out, const std::string& where) {
  if (!j.is_array()) return make_error(fmt::format("run record: '{}' is not a list", where));
  for (const auto& h : j) {
    CodeHistogram c;
    KVLAB_TRY(get(h, "label", c.label, where + "."));
    KVLAB_TRY(get(h, "bits", c.bits, where + "."));
    KVLAB_TRY(get(h, "counts", c.counts, where + "."));
    out.push_back(std::move(c));
  }
  return Ok{};
}

}  // namespace

json report_to_json(const CompressionReport& r) {
  json layers = json::array();
  for (const auto& l : r.layers) {
    ByteBreakdown both = l.key_bytes;
    both += l.value_bytes;
    json lj = {{"layer", l.layer},
               {"ratio", l.ratio},
               {"bits_per_value", l.bits_per_value},
               {"bytes", bytes_json(both)},
               {"key_bytes", bytes_json(l.key_bytes)},
               {"value_bytes", bytes_json(l.value_bytes)},
               {"error", error_json(l.error)},
               {"key_error", error_json(l.key_error)},
               {"value_error", error_json(l.value_error)}};
    if (r.config.codec) {
      CodecStats both = l.key_codec;
      both += l.value_codec;
      add_codec_fields(lj, both);
      lj["key_codec"] = codec_json(l.key_codec);
      lj["value_codec"] = codec_json(l.value_codec);
    }
    layers.push_back(std::move(lj));
  }
  json out = {{"source", r.source},
              {"method", r.method},
              {"method_label", r.method_label},
              {"params", method_params_json(r.config)},
              {"shape",
               {{"name", r.shape.name},
                {"layers", r.shape.layers},
                {"q_heads", r.shape.q_heads},
                {"kv_heads", r.shape.kv_heads},
                {"head_dim", r.shape.head_dim}}},
              {"tokens", r.tokens},
              {"values", r.values},
              {"fp16_bytes", r.fp16_bytes},
              {"ratio", r.ratio},
              {"bits_per_value", r.bits_per_value},
              {"bytes", bytes_json(r.bytes)},
              {"error", error_json(r.error)},
              {"timings",
               {{"source_s", r.source_seconds},
                {"quantize_s", r.quantize_seconds},
                {"code_s", r.code_seconds},
                {"dequantize_s", r.dequantize_seconds},
                {"metrics_s", r.metrics_seconds},
                {"total_s", r.total_seconds},
                {"wall_s", r.wall_seconds},
                {"threads", r.threads}}},
              {"memory",
               {{"start_bytes", r.memory_start_bytes},
                {"peak_bytes", r.memory_peak_bytes},
                {"device_peak_bytes", r.device_memory_peak_bytes}}},
              {"per_layer", layers}};
  if (r.config.codec) {
    out["codec"] = std::string(codec_id(*r.config.codec));
    add_codec_fields(out, r.codec);
  }
  if (!r.backend.empty()) out["backend"] = {{"id", r.backend}, {"device", r.device}};
  json stages = json::object();
  for (Stage stage : kStages) {
    const std::string& where = r.stage_backends[static_cast<std::size_t>(stage)];
    if (!where.empty()) stages[std::string(stage_id(stage))] = where;
  }
  if (!stages.empty()) out["stage_backends"] = std::move(stages);
  if (!r.backend_fallback.empty()) out["backend_fallback"] = r.backend_fallback;
  return out;
}

json histograms_to_json(const CompressionReport& r) {
  json out = json::array();
  for (const auto& l : r.layers) {
    json lj = {{"layer", l.layer},
               {"key", histogram_list_json(l.key_histograms)},
               {"value", histogram_list_json(l.value_histograms)}};
    if (!l.key_code_lengths.empty()) {
      lj["key_code_lengths"] = l.key_code_lengths;
      lj["value_code_lengths"] = l.value_code_lengths;
      lj["key_code_pairs"] = l.key_code_pairs;
      lj["value_code_pairs"] = l.value_code_pairs;
      lj["key_code_bits"] = l.key_code_bits;
      lj["value_code_bits"] = l.value_code_bits;
    }
    out.push_back(std::move(lj));
  }
  return out;
}

Result<CompressionReport> report_from_json(const json& j, const json* histograms) {
  CompressionReport r;
  KVLAB_TRY(get(j, "source", r.source, ""));
  KVLAB_TRY(get(j, "method", r.method, ""));
  KVLAB_TRY(get(j, "method_label", r.method_label, ""));
  if (!j.contains("params")) return make_error("run record: missing 'params'");
  auto config = method_config_from_json(j["params"]);
  if (!config) return make_error("run record: " + config.message());
  r.config = *config;
  if (!j.contains("shape")) return make_error("run record: missing 'shape'");
  const json& s = j["shape"];
  KVLAB_TRY(get(s, "name", r.shape.name, "shape."));
  KVLAB_TRY(get(s, "layers", r.shape.layers, "shape."));
  KVLAB_TRY(get(s, "q_heads", r.shape.q_heads, "shape."));
  KVLAB_TRY(get(s, "kv_heads", r.shape.kv_heads, "shape."));
  KVLAB_TRY(get(s, "head_dim", r.shape.head_dim, "shape."));
  KVLAB_TRY(get(j, "tokens", r.tokens, ""));
  KVLAB_TRY(get(j, "values", r.values, ""));
  KVLAB_TRY(get(j, "fp16_bytes", r.fp16_bytes, ""));
  KVLAB_TRY(get(j, "ratio", r.ratio, ""));
  KVLAB_TRY(get(j, "bits_per_value", r.bits_per_value, ""));
  if (!j.contains("bytes") || !j.contains("error") || !j.contains("per_layer")) {
    return make_error("run record: missing 'bytes', 'error' or 'per_layer'");
  }
  KVLAB_TRY(bytes_from(j["bytes"], r.bytes, "bytes."));
  KVLAB_TRY(error_from(j["error"], r.error, "error."));
  if (j.contains("timings")) {
    const json& t = j["timings"];
    KVLAB_TRY(get(t, "quantize_s", r.quantize_seconds, "timings."));
    KVLAB_TRY(get(t, "dequantize_s", r.dequantize_seconds, "timings."));
    KVLAB_TRY(get(t, "total_s", r.total_seconds, "timings."));
    r.wall_seconds = r.total_seconds;  // runs saved before the parts were timed: total only
    for (auto [key, out] : {std::pair{"source_s", &r.source_seconds},
                            {"code_s", &r.code_seconds},
                            {"metrics_s", &r.metrics_seconds},
                            {"wall_s", &r.wall_seconds}}) {
      if (t.contains(key)) KVLAB_TRY(get(t, key, *out, "timings."));
    }
    if (t.contains("threads")) KVLAB_TRY(get(t, "threads", r.threads, "timings."));
  }
  if (j.contains("stage_backends") && j["stage_backends"].is_object()) {
    for (Stage stage : kStages) {  // absent from runs saved before stages were recorded
      const std::string key(stage_id(stage));
      if (j["stage_backends"].contains(key)) {
        KVLAB_TRY(get(j["stage_backends"], key.c_str(),
                      r.stage_backends[static_cast<std::size_t>(stage)], "stage_backends."));
      }
    }
  }
  if (j.contains("backend_fallback")) {  // only where a device backend left the run to the CPU
    KVLAB_TRY(get(j, "backend_fallback", r.backend_fallback, ""));
  }
  if (j.contains("memory")) {  // absent from runs saved before memory was measured
    KVLAB_TRY(get(j["memory"], "start_bytes", r.memory_start_bytes, "memory."));
    KVLAB_TRY(get(j["memory"], "peak_bytes", r.memory_peak_bytes, "memory."));
    if (j["memory"].contains("device_peak_bytes")) {
      KVLAB_TRY(get(j["memory"], "device_peak_bytes", r.device_memory_peak_bytes, "memory."));
    }
  }
  if (j.contains("backend")) {  // absent from runs saved before backends existed
    KVLAB_TRY(get(j["backend"], "id", r.backend, "backend."));
    KVLAB_TRY(get(j["backend"], "device", r.device, "backend."));
  }
  if (!j["per_layer"].is_array()) return make_error("run record: 'per_layer' is not a list");
  for (const auto& lj : j["per_layer"]) {
    LayerReport l;
    const std::string where = fmt::format("per_layer[{}].", r.layers.size());
    KVLAB_TRY(get(lj, "layer", l.layer, where));
    KVLAB_TRY(get(lj, "ratio", l.ratio, where));
    KVLAB_TRY(get(lj, "bits_per_value", l.bits_per_value, where));
    if (!lj.contains("key_bytes") || !lj.contains("value_bytes") || !lj.contains("error")) {
      return make_error(fmt::format("run record: {} lacks bytes or error", where));
    }
    KVLAB_TRY(bytes_from(lj["key_bytes"], l.key_bytes, where + "key_bytes."));
    KVLAB_TRY(bytes_from(lj["value_bytes"], l.value_bytes, where + "value_bytes."));
    KVLAB_TRY(error_from(lj["error"], l.error, where + "error."));
    if (lj.contains("key_error"))
      KVLAB_TRY(error_from(lj["key_error"], l.key_error, where + "key_error."));
    if (lj.contains("value_error"))
      KVLAB_TRY(error_from(lj["value_error"], l.value_error, where + "value_error."));
    if (r.config.codec) {
      if (!lj.contains("key_codec") || !lj.contains("value_codec")) {
        return make_error(fmt::format("run record: {} lacks key_codec or value_codec", where));
      }
      KVLAB_TRY(codec_from(lj["key_codec"], l.key_codec, where + "key_codec."));
      KVLAB_TRY(codec_from(lj["value_codec"], l.value_codec, where + "value_codec."));
      r.codec += l.key_codec;
      r.codec += l.value_codec;
    }
    r.layers.push_back(std::move(l));
  }
  if (histograms) {
    if (!histograms->is_array()) return make_error("run record: histograms are not a list");
    for (const auto& hj : *histograms) {
      int layer = -1;
      KVLAB_TRY(get(hj, "layer", layer, "histograms."));
      if (layer < 0 || layer >= static_cast<int>(r.layers.size())) {
        return make_error(
            fmt::format("run record: histogram for layer {} of {}", layer, r.layers.size()));
      }
      const std::string where = fmt::format("histograms[{}]", layer);
      if (!hj.contains("key") || !hj.contains("value")) {
        return make_error(fmt::format("run record: {} lacks key or value", where));
      }
      KVLAB_TRY(histograms_from(hj["key"], r.layers[layer].key_histograms, where + ".key"));
      KVLAB_TRY(histograms_from(hj["value"], r.layers[layer].value_histograms, where + ".value"));
      if (hj.contains("key_code_lengths")) {
        KVLAB_TRY(get(hj, "key_code_lengths", r.layers[layer].key_code_lengths, where + "."));
        KVLAB_TRY(get(hj, "value_code_lengths", r.layers[layer].value_code_lengths, where + "."));
      }
      if (hj.contains("key_code_bits")) {  // runs saved before pair codebooks lack these
        KVLAB_TRY(get(hj, "key_code_pairs", r.layers[layer].key_code_pairs, where + "."));
        KVLAB_TRY(get(hj, "value_code_pairs", r.layers[layer].value_code_pairs, where + "."));
        KVLAB_TRY(get(hj, "key_code_bits", r.layers[layer].key_code_bits, where + "."));
        KVLAB_TRY(get(hj, "value_code_bits", r.layers[layer].value_code_bits, where + "."));
      }
    }
  }
  return r;
}

}  // namespace kvlab
