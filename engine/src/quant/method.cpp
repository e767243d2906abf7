#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/method_json.h"

#include <array>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "quant/quantizers.h"

#include "kvlab/engine/core/names.h"

namespace kvlab {

namespace {

constexpr std::array<std::pair<MethodKind, std::string_view>, 7> kMethods{{
    {MethodKind::Int8, "int8"},
    {MethodKind::Int4, "int4"},
    {MethodKind::Kivi, "kivi"},
    {MethodKind::Fp8E4M3, "fp8-e4m3"},
    {MethodKind::Fp8E5M2, "fp8-e5m2"},
    {MethodKind::Tiered, "tiered"},
    {MethodKind::KvComp, "kvcomp"},
}};

constexpr int kMaxGroup = 4096;
constexpr int kMaxWindow = 1 << 24;

Status check_range(std::string_view what, long long value, long long lo, long long hi) {
  if (value < lo || value > hi) {
    return make_error(fmt::format("{} must be between {} and {} (got {})", what, lo, hi, value));
  }
  return Ok{};
}

Status validate(const MethodConfig& c) {
  if (c.codec && c.kind != MethodKind::KvComp) {
    return make_error(fmt::format(
        "--codec {}: only kvcomp's byte codes are entropy-coded; {} packs its own codes (use "
        "--codec none)",
        codec_id(*c.codec), method_id(c.kind)));
  }
  switch (c.kind) {
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
        unknown_name_message("codec", id, {"none", "bitpack", "varwidth", "huffman"}));
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
                            {"block_size", &c.block_size}}) {
    KVLAB_TRY(read_int(key, *field));
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
  if (j.contains("per_head_scale")) {
    if (!j["per_head_scale"].is_boolean()) {
      return make_error("method parameters: 'per_head_scale' must be true or false");
    }
    c.per_head_scale = j["per_head_scale"].get<bool>();
  }
  KVLAB_TRY(validate(c));
  return c;
}

std::string method_label(const MethodConfig& c) {
  switch (c.kind) {
    case MethodKind::Int8:
      return "int8 per-tensor";
    case MethodKind::Int4:
      return "int4 per-tensor";
    case MethodKind::Kivi:
      return fmt::format("kivi-{} G={} R={}", c.bits, c.group_size, c.residual);
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      return fmt::format("{} {}", method_id(c.kind), c.per_head_scale ? "per-head" : "per-tensor");
    case MethodKind::Tiered:
      return fmt::format("tiered fp16:{} int8:{} int{} G={}", c.residual, c.int8_tokens, c.old_bits,
                         c.group_size);
    case MethodKind::KvComp:
      return fmt::format("kvcomp B={} rel={:g}{}", c.block_size, c.rel_scale,
                         c.codec ? fmt::format(" + {}", codec_id(*c.codec)) : std::string());
  }
  return "?";
}

Result<std::unique_ptr<Quantizer>> make_quantizer(const MethodConfig& c) {
  KVLAB_TRY(validate(c));
  switch (c.kind) {
    case MethodKind::Int8:
      return detail::make_symmetric_quantizer(8);
    case MethodKind::Int4:
      return detail::make_symmetric_quantizer(4);
    case MethodKind::Kivi:
      return detail::make_kivi_quantizer(method_label(c), c.bits, c.group_size, c.residual);
    case MethodKind::Fp8E4M3:
      return detail::make_fp8_quantizer(Fp8Format::E4M3, c.per_head_scale);
    case MethodKind::Fp8E5M2:
      return detail::make_fp8_quantizer(Fp8Format::E5M2, c.per_head_scale);
    case MethodKind::Tiered:
      return detail::make_tiered_quantizer(method_label(c), {{c.old_bits, 0}, {8, c.int8_tokens}},
                                           c.group_size, c.residual);
    case MethodKind::KvComp:
      return detail::make_kvcomp_quantizer(c.block_size, c.rel_scale);
  }
  return make_error("unknown method");
}

}  // namespace kvlab
