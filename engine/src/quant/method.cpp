#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/method_json.h"

#include <array>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "quant/fp4_quantizer.h"
#include "quant/fp8_calibrated.h"
#include "quant/ggml_block_quantizer.h"
#include "quant/kvquant_quantizer.h"
#include "quant/quantizers.h"
#include "quant/rotated_quantizer.h"
#include "quant/turboquant_quantizer.h"

#include "kvlab/engine/core/names.h"

namespace kvlab {

namespace {

constexpr std::array<std::pair<MethodKind, std::string_view>, 17> kMethods{{
    {MethodKind::Int8, "int8"},
    {MethodKind::Int4, "int4"},
    {MethodKind::Kivi, "kivi"},
    {MethodKind::Fp8E4M3, "fp8-e4m3"},
    {MethodKind::Fp8E5M2, "fp8-e5m2"},
    {MethodKind::Tiered, "tiered"},
    {MethodKind::KvComp, "kvcomp"},
    {MethodKind::Q8_0, "q8_0"},
    {MethodKind::Q4_0, "q4_0"},
    {MethodKind::Q4_1, "q4_1"},
    {MethodKind::Q5_0, "q5_0"},
    {MethodKind::Q5_1, "q5_1"},
    {MethodKind::IQ4_NL, "iq4_nl"},
    {MethodKind::Nvfp4, "nvfp4"},
    {MethodKind::Mxfp4, "mxfp4"},
    {MethodKind::KvQuant, "kvquant"},
    {MethodKind::TurboQuant, "turboquant"},
}};

// The ggml type of llama.cpp's KV cache types; nullopt for the other methods.
constexpr std::array<std::pair<MethodKind, GgmlType>, 6> kGgmlMethods{{
    {MethodKind::Q8_0, GgmlType::Q8_0},
    {MethodKind::Q4_0, GgmlType::Q4_0},
    {MethodKind::Q4_1, GgmlType::Q4_1},
    {MethodKind::Q5_0, GgmlType::Q5_0},
    {MethodKind::Q5_1, GgmlType::Q5_1},
    {MethodKind::IQ4_NL, GgmlType::IQ4_NL},
}};

std::optional<GgmlType> ggml_type_of(MethodKind kind) {
  for (const auto& [k, type] : kGgmlMethods) {
    if (k == kind) return type;
  }
  return std::nullopt;
}

constexpr int kMaxGroup = 4096;
constexpr int kMaxWindow = 1 << 24;

Status check_range(std::string_view what, long long value, long long lo, long long hi) {
  if (value < lo || value > hi) {
    return make_error(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, value));
  }
  return Ok{};
}

Status validate(const MethodConfig& c) {
  if (c.param_dtype && !method_has_param_dtype(c.kind)) {
    return make_error(fmt::format(
        "--param-dtype {}: only kivi, tiered and kvcomp store per-group parameters; {} keeps its "
        "scale as its reference does",
        dtype_name(*c.param_dtype), method_id(c.kind)));
  }
  if (c.codec && c.kind != MethodKind::KvComp) {
    return make_error(fmt::format(
        "--codec {}: only kvcomp's byte codes are entropy-coded; {} packs its own codes (use "
        "--codec none)",
        codec_id(*c.codec), method_id(c.kind)));
  }
  if (c.calib_tokens != 0 && !method_takes_calib_tokens(c.kind)) {
    return make_error(
        fmt::format("--calib-tokens: only fp8 and kvquant calibrate on a prefill ({} was chosen)",
                    method_id(c.kind)));
  }
  if (c.calib_tokens < 0 || c.calib_tokens > kMaxWindow) {
    KVLAB_TRY(check_range("--calib-tokens", c.calib_tokens, 0, kMaxWindow));
  }
  if (c.rotate_values && c.rotation == RotationKind::None) {
    return make_error("--rotate-values: choose a --rotation (hadamard or orthogonal) first");
  }
  switch (c.kind) {
    case MethodKind::KvQuant:
      if (c.bits < 2 || c.bits > 4) {
        return make_error(fmt::format("kvquant: --bits must be 2, 3 or 4 (got {})", c.bits));
      }
      if (!(c.outlier_fraction >= 0.0 && c.outlier_fraction <= 0.5)) {
        return make_error(
            fmt::format("kvquant: --outliers must be a fraction between 0 and 0.5 (got {:g})",
                        c.outlier_fraction));
      }
      return detail::check_kvquant_config(detail::kvquant_config(c));
    case MethodKind::TurboQuant:
      if (c.bits < 1 || c.bits > 4) {
        return make_error(fmt::format("turboquant: --bits must be 1 to 4 (got {})", c.bits));
      }
      if (c.qjl && c.bits < 2) {
        return make_error(
            "turboquant: --qjl takes one of the --bits for the residual sketch; use --bits 2 or "
            "more");
      }
      return Ok{};
    case MethodKind::Kivi:
      if (c.bits != 2 && c.bits != 4) {
        return make_error(fmt::format("kivi: --bits must be 2 or 4 (got {})", c.bits));
      }
      [[fallthrough]];
    case MethodKind::Tiered:
      KVLAB_TRY(check_range("--group-size", c.group_size, 1, kMaxGroup));
      KVLAB_TRY(check_range("--residual", c.residual, 0, kMaxWindow));
      if (c.kind == MethodKind::Tiered) {
        KVLAB_TRY(check_range("--int8-tokens", c.int8_tokens, 0, kMaxWindow));
        if (c.old_bits != 2 && c.old_bits != 4) {
          return make_error(fmt::format("tiered: --old-bits must be 2 or 4 (got {})", c.old_bits));
        }
      }
      return Ok{};
    case MethodKind::KvComp:
      KVLAB_TRY(check_range("--block-size", c.block_size, 1, kMaxGroup));
      // Codes are uint8: the range of a unit spans 1/rel_scale steps, at most 255.
      if (!(c.rel_scale >= 1.0 / 255.0 && c.rel_scale <= 1.0)) {
        return make_error(fmt::format(
            "kvcomp: --rel-scale must be between 1/255 (0.00392) and 1 so codes fit in a byte "
            "(got {:g})",
            c.rel_scale));
      }
      return Ok{};
    default:
      return Ok{};
  }
}

}  // namespace

std::optional<GgmlType> method_ggml_type(MethodKind kind) {
  return ggml_type_of(kind);
}

bool method_is_llama_block(MethodKind kind) {
  return ggml_type_of(kind).has_value();
}

bool method_is_fp8(MethodKind kind) {
  return kind == MethodKind::Fp8E4M3 || kind == MethodKind::Fp8E5M2;
}

bool method_takes_calib_tokens(MethodKind kind) {
  return method_is_fp8(kind) || kind == MethodKind::KvQuant;
}

bool method_has_param_dtype(MethodKind kind) {
  return kind == MethodKind::Kivi || kind == MethodKind::Tiered || kind == MethodKind::KvComp;
}

DType method_param_dtype(const MethodConfig& c) {
  if (c.param_dtype) return *c.param_dtype;
  return c.kind == MethodKind::Kivi || c.kind == MethodKind::Tiered ? DType::F16 : DType::F32;
}

std::string_view rotation_id(RotationKind kind) {
  switch (kind) {
    case RotationKind::None:
      return "none";
    case RotationKind::Hadamard:
      return "hadamard";
    case RotationKind::Orthogonal:
      return "orthogonal";
  }
  return "?";
}

Result<RotationKind> parse_rotation(std::string_view id) {
  for (RotationKind k : {RotationKind::None, RotationKind::Hadamard, RotationKind::Orthogonal}) {
    if (rotation_id(k) == id) return k;
  }
  return make_error(unknown_name_message("rotation", id, {"none", "hadamard", "orthogonal"}));
}

std::string_view method_reference(MethodKind kind) {
  switch (kind) {
    case MethodKind::Int8:
    case MethodKind::Int4:
      return "per-tensor symmetric, the naive baseline";
    case MethodKind::Kivi:
      return "KIVI (Liu et al. 2024, arXiv:2402.02750; github.com/jy-yuan/KIVI)";
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      return "vLLM kv_cache_dtype=fp8 (vllm/attention/layer.py, calc_kv_scales)";
    case MethodKind::Tiered:
      return "age-tiered KIVI groups (bits fall with token age)";
    case MethodKind::KvComp:
      return "KVComp (Jiang et al. 2025)";
    case MethodKind::Q8_0:
    case MethodKind::Q4_0:
    case MethodKind::Q4_1:
    case MethodKind::Q5_0:
    case MethodKind::Q5_1:
    case MethodKind::IQ4_NL:
      return "llama.cpp -ctk/-ctv (ggml-quants.c quantize_row_*_ref; attn_rot in "
             "llama-kv-cache.cpp)";
    case MethodKind::Nvfp4:
      return "NVFP4 (NVIDIA TensorRT-LLM / vLLM nvfp4 quantization)";
    case MethodKind::Mxfp4:
      return "MXFP4 (OCP Microscaling v1.0; llama.cpp block_mxfp4)";
    case MethodKind::KvQuant:
      return "KVQuant (Hooper et al. 2024, arXiv:2401.18079; github.com/SqueezeAILab/KVQuant)";
    case MethodKind::TurboQuant:
      return "TurboQuant (Zandieh et al. 2025, arXiv:2504.19874; QJL, github.com/amirzandieh/QJL)";
  }
  return "";
}

std::string_view method_id(MethodKind kind) {
  for (const auto& [k, id] : kMethods) {
    if (k == kind) return id;
  }
  return "?";
}

std::vector<std::string_view> method_ids() {
  std::vector<std::string_view> ids;
  for (const auto& m : kMethods) ids.push_back(m.second);
  return ids;
}

Result<std::optional<CodecKind>> parse_codec_option(std::string_view id) {
  if (id == "none") return std::optional<CodecKind>{};
  auto kind = parse_codec(id);
  if (!kind) {
    return make_error(
        unknown_name_message("codec", id, {"none", "bitpack", "varwidth", "huffman", "rans"}));
  }
  return std::optional<CodecKind>{*kind};
}

Result<MethodKind> parse_method(std::string_view id) {
  for (const auto& [k, name] : kMethods) {
    if (name == id) return k;
  }
  const auto ids = method_ids();
  return make_error(unknown_name_message("method", id, {ids.begin(), ids.end()}));
}

nlohmann::json method_params_json(const MethodConfig& c) {
  nlohmann::json j{{"method", std::string(method_id(c.kind))}};
  switch (c.kind) {
    case MethodKind::Kivi:
      j["bits"] = c.bits;
      j["group_size"] = c.group_size;
      j["residual"] = c.residual;
      break;
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      j["per_head_scale"] = c.per_head_scale;
      j["calib_tokens"] = c.calib_tokens;
      break;
    case MethodKind::KvQuant:
      j["bits"] = c.bits;
      j["levels"] = c.normal_float ? "nf" : "kmeans";
      j["outliers"] = c.outlier_fraction;
      j["calib_tokens"] = c.calib_tokens;
      j["pre_rope"] = c.pre_rope;
      break;
    case MethodKind::TurboQuant:
      j["bits"] = c.bits;
      j["qjl"] = c.qjl;
      j["rotation"] = std::string(rotation_id(
          c.rotation == RotationKind::Hadamard ? c.rotation : RotationKind::Orthogonal));
      j["rotation_seed"] = c.rotation_seed;
      break;
    case MethodKind::Tiered:
      j["group_size"] = c.group_size;
      j["residual"] = c.residual;
      j["int8_tokens"] = c.int8_tokens;
      j["old_bits"] = c.old_bits;
      break;
    case MethodKind::KvComp:
      j["block_size"] = c.block_size;
      j["rel_scale"] = c.rel_scale;
      j["codec"] = c.codec ? std::string(codec_id(*c.codec)) : std::string("none");
      break;
    default:
      break;
  }
  if (ggml_type_of(c.kind)) j["llama_rotation"] = c.llama_rotation;
  if (method_has_param_dtype(c.kind)) {
    j["param_dtype"] = std::string(dtype_name(method_param_dtype(c)));
  }
  if (wraps_rotation(c)) {
    j["rotation"] = std::string(rotation_id(c.rotation));
    j["rotation_seed"] = c.rotation_seed;
    j["rotate_values"] = c.rotate_values;
  }
  return j;
}

Result<MethodConfig> method_config_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("method") || !j["method"].is_string()) {
    return make_error("method parameters: missing the string field 'method'");
  }
  auto kind = parse_method(j["method"].get<std::string>());
  if (!kind) return kind.error();
  MethodConfig c;
  c.kind = *kind;
  const auto read_int = [&](const char* key, int& field) -> Status {
    if (!j.contains(key)) return Ok{};
    if (!j[key].is_number_integer()) {
      return make_error(fmt::format("method parameters: '{}' must be an integer", key));
    }
    field = j[key].get<int>();
    return Ok{};
  };
  for (auto [key, field] : {std::pair{"bits", &c.bits},
                            {"group_size", &c.group_size},
                            {"residual", &c.residual},
                            {"int8_tokens", &c.int8_tokens},
                            {"old_bits", &c.old_bits},
                            {"block_size", &c.block_size},
                            {"calib_tokens", &c.calib_tokens}}) {
    KVLAB_TRY(read_int(key, *field));
  }
  for (auto [key, field] : {std::pair{"per_head_scale", &c.per_head_scale},
                            {"llama_rotation", &c.llama_rotation},
                            {"qjl", &c.qjl},
                            {"pre_rope", &c.pre_rope},
                            {"rotate_values", &c.rotate_values}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_boolean()) {
      return make_error(fmt::format("method parameters: '{}' must be true or false", key));
    }
    *field = j[key].get<bool>();
  }
  if (j.contains("outliers")) {
    if (!j["outliers"].is_number())
      return make_error("method parameters: 'outliers' must be a number");
    c.outlier_fraction = j["outliers"].get<double>();
  }
  if (j.contains("levels")) {
    if (!j["levels"].is_string() || (j["levels"] != "nf" && j["levels"] != "kmeans")) {
      return make_error("method parameters: 'levels' must be \"kmeans\" or \"nf\"");
    }
    c.normal_float = j["levels"] == "nf";
  }
  if (j.contains("rotation")) {
    if (!j["rotation"].is_string())
      return make_error("method parameters: 'rotation' must be a string");
    auto r = parse_rotation(j["rotation"].get<std::string>());
    if (!r) return make_error("method parameters: " + r.message());
    c.rotation = *r;
  }
  if (j.contains("rotation_seed")) {
    if (!j["rotation_seed"].is_number_unsigned() && !j["rotation_seed"].is_number_integer()) {
      return make_error("method parameters: 'rotation_seed' must be an integer");
    }
    c.rotation_seed = j["rotation_seed"].get<std::uint64_t>();
  }
  if (j.contains("rel_scale")) {
    if (!j["rel_scale"].is_number())
      return make_error("method parameters: 'rel_scale' must be a number");
    c.rel_scale = j["rel_scale"].get<double>();
  }
  if (j.contains("codec")) {
    if (!j["codec"].is_string()) return make_error("method parameters: 'codec' must be a string");
    auto codec = parse_codec_option(j["codec"].get<std::string>());
    if (!codec) return codec.error();
    c.codec = *codec;
  }
  if (j.contains("param_dtype")) {
    const auto bad =
        make_error("method parameters: 'param_dtype' must be \"f16\", \"bf16\" or \"f32\"");
    if (!j["param_dtype"].is_string()) return bad;
    auto dt = parse_dtype(j["param_dtype"].get<std::string>());
    if (!dt) return bad;
    c.param_dtype = *dt;
  }
  KVLAB_TRY(validate(c));
  return c;
}

namespace {

std::string method_label_base(const MethodConfig& c) {
  switch (c.kind) {
    case MethodKind::Int8:
      return "int8 per-tensor";
    case MethodKind::Int4:
      return "int4 per-tensor";
    case MethodKind::Kivi:
      return fmt::format("kivi-{} G={} R={}", c.bits, c.group_size, c.residual);
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      return fmt::format(
          "{} {}{}", method_id(c.kind), c.per_head_scale ? "per-head" : "per-tensor",
          c.calib_tokens > 0 ? fmt::format(" calibrated:{}", c.calib_tokens) : std::string());
    case MethodKind::Q8_0:
    case MethodKind::Q4_0:
    case MethodKind::Q4_1:
    case MethodKind::Q5_0:
    case MethodKind::Q5_1:
    case MethodKind::IQ4_NL:
      return fmt::format("{}{}", method_id(c.kind), c.llama_rotation ? "" : " no-rot");
    case MethodKind::Nvfp4:
    case MethodKind::Mxfp4:
      return std::string(method_id(c.kind));
    case MethodKind::KvQuant:
      return fmt::format(
          "kvquant-{} {} {:g}% outliers{}{}", c.bits, c.normal_float ? "nf" : "nuq",
          c.outlier_fraction * 100,
          c.calib_tokens > 0 ? fmt::format(" calibrated:{}", c.calib_tokens) : std::string(),
          !c.pre_rope            ? " post-RoPE"
          : c.key_rope.enabled() ? " pre-RoPE"
                                 : "");
    case MethodKind::TurboQuant:
      return fmt::format("turboquant-{}{}{}", c.bits, c.qjl ? " qjl" : "",
                         c.rotation == RotationKind::Hadamard ? " hadamard" : "");
    case MethodKind::Tiered:
      return fmt::format("tiered fp16:{} int8:{} int{} G={}", c.residual, c.int8_tokens, c.old_bits,
                         c.group_size);
    case MethodKind::KvComp:
      return fmt::format("kvcomp B={} rel={:g}{}", c.block_size, c.rel_scale,
                         c.codec ? fmt::format(" + {}", codec_id(*c.codec)) : std::string());
  }
  return "?";
}

}  // namespace

std::string method_label(const MethodConfig& c) {
  // The parameter dtype is named only where it is not the reference's.
  std::string params;
  MethodConfig reference;
  reference.kind = c.kind;
  if (c.param_dtype && *c.param_dtype != method_param_dtype(reference)) {
    params = fmt::format(" params={}", dtype_name(*c.param_dtype));
  }
  std::string rotation;
  if (wraps_rotation(c)) {
    rotation = fmt::format(" + {}{}", rotation_id(c.rotation), c.rotate_values ? " K,V" : " K");
  }
  return method_label_base(c) + params + rotation;
}

namespace {

Result<std::unique_ptr<Quantizer>> make_base_quantizer(const MethodConfig& c) {
  switch (c.kind) {
    case MethodKind::Int8:
      return detail::make_symmetric_quantizer(8);
    case MethodKind::Int4:
      return detail::make_symmetric_quantizer(4);
    case MethodKind::Kivi:
      return detail::make_kivi_quantizer(method_label(c), c.bits, c.group_size, c.residual,
                                         method_param_dtype(c));
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2: {
      const Fp8Format format = c.kind == MethodKind::Fp8E4M3 ? Fp8Format::E4M3 : Fp8Format::E5M2;
      if (c.calib_tokens == 0) return detail::make_fp8_quantizer(format, c.per_head_scale);
      detail::Fp8CalibratedConfig f;
      f.format = format;
      f.per_head = c.per_head_scale;
      f.calib_tokens = c.calib_tokens;
      return detail::make_fp8_calibrated_quantizer(f);
    }
    case MethodKind::Q8_0:
    case MethodKind::Q4_0:
    case MethodKind::Q4_1:
    case MethodKind::Q5_0:
    case MethodKind::Q5_1:
    case MethodKind::IQ4_NL:
      return detail::make_ggml_block_quantizer(*ggml_type_of(c.kind), c.llama_rotation);
    case MethodKind::Nvfp4:
      return detail::make_nvfp4_quantizer();
    case MethodKind::Mxfp4:
      return detail::make_mxfp4_quantizer();
    case MethodKind::KvQuant:
      return std::unique_ptr<Quantizer>(detail::make_kvquant_quantizer(detail::kvquant_config(c)));
    case MethodKind::TurboQuant:
      return detail::make_turboquant_quantizer(detail::turboquant_config(c));
    case MethodKind::Tiered:
      return detail::make_tiered_quantizer(method_label(c), {{c.old_bits, 0}, {8, c.int8_tokens}},
                                           c.group_size, c.residual, method_param_dtype(c));
    case MethodKind::KvComp:
      return detail::make_kvcomp_quantizer(c.block_size, c.rel_scale, method_param_dtype(c));
  }
  return make_error("unknown method");
}

}  // namespace

MethodConfig method_for_cache(MethodConfig config, const KvCache& cache) {
  config.key_rope = cache.keys_pre_rope ? RopeSpec{} : cache.key_rope;
  return config;
}

Result<std::unique_ptr<Quantizer>> make_quantizer(const MethodConfig& c) {
  KVLAB_TRY(validate(c));
  auto q = make_base_quantizer(c);
  if (!q || !wraps_rotation(c)) return q;
  return detail::make_rotated_quantizer(std::move(*q),
                                        {c.rotation, c.rotation_seed, c.rotate_values});
}

}  // namespace kvlab
