#include "sources/kv_layout.h"

#include <charconv>
#include <climits>
#include <new>

#include <fmt/format.h>

namespace kvlab::detail {

namespace {

constexpr const char* kRoleNames[] = {"key", "value", "query"};

std::string part_name(std::size_t layer, KvRole role) {
  return fmt::format("layers.{}.{}", layer, kRoleNames[static_cast<int>(role)]);
}

// Parses a metadata value that must be a positive decimal integer; nullopt when absent.
Result<std::optional<int>> metadata_int(std::string_view label,
                                        const std::map<std::string, std::string>& metadata,
                                        std::string_view key) {
  const auto it = metadata.find(std::string(key));
  if (it == metadata.end()) return std::optional<int>{};
  const std::string& text = it->second;
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) {
    return make_error(
        fmt::format("{}: metadata {} = '{}' is not a positive integer", label, key, text));
  }
  return std::optional<int>{value};
}

}  // namespace

std::string shape_text(std::span<const std::uint64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::optional<KvName> parse_kv_name(std::string_view name) {
  constexpr std::string_view prefix = "layers.";
  if (!name.starts_with(prefix)) return std::nullopt;
  name.remove_prefix(prefix.size());
  const std::size_t dot = name.find('.');
  if (dot == std::string_view::npos || dot == 0) return std::nullopt;
  const std::string_view digits = name.substr(0, dot);
  if (digits.size() > 1 && digits.front() == '0') return std::nullopt;  // "layers.01.key"
  int layer = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), layer);
  if (ec != std::errc() || end != digits.data() + digits.size() || layer < 0 ||
      layer >= kMaxLayers) {
    return std::nullopt;
  }
  const std::string_view role = name.substr(dot + 1);
  if (role == "key") return KvName{layer, KvRole::Key};
  if (role == "value") return KvName{layer, KvRole::Value};
  if (role == "query") return KvName{layer, KvRole::Query};
  return std::nullopt;
}

Result<KvLayout> plan_kv_layout(std::string_view label, std::span<const TensorDesc> tensors,
                                const std::map<std::string, std::string>& metadata,
                                const std::string& default_name) {
  struct Found {
    std::optional<std::size_t> part[3];
  };
  std::vector<Found> found;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc& t = tensors[i];
    if (!is_kv_candidate(t.name)) continue;
    const auto kv = parse_kv_name(t.name);
    if (!kv) {
      return make_error(
          fmt::format("{}: tensor '{}': name is not layers.{{i}}.key, layers.{{i}}.value or "
                      "layers.{{i}}.query with 0 <= i < {}",
                      label, t.name, kMaxLayers));
    }
    if (!t.dtype) {
      return make_error(fmt::format(
          "{}: tensor '{}': dtype {} is not supported for KV tensors (expected F16, BF16 or F32)",
          label, t.name, t.dtype_text));
    }
    if (t.shape.size() != 3) {
      return make_error(fmt::format(
          "{}: tensor '{}': expected 3 dimensions [tokens, heads, head_dim], got {} dimensions {}",
          label, t.name, t.shape.size(), shape_text(t.shape)));
    }
    for (const std::uint64_t d : t.shape) {
      if (d > static_cast<std::uint64_t>(INT_MAX)) {
        return make_error(fmt::format("{}: tensor '{}': dimension {} of shape {} is too large",
                                      label, t.name, d, shape_text(t.shape)));
      }
    }
    if (found.size() <= static_cast<std::size_t>(kv->layer)) found.resize(kv->layer + 1);
    auto& slot = found[kv->layer].part[static_cast<int>(kv->role)];
    if (slot) return make_error(fmt::format("{}: tensor '{}' appears twice", label, t.name));
    slot = i;
  }
  if (found.empty()) {
    return make_error(
        fmt::format("{}: no KV tensors found (expected tensors named layers.{{i}}.key and "
                    "layers.{{i}}.value)",
                    label));
  }

  const std::size_t layer_count = found.size();
  for (std::size_t l = 0; l < layer_count; ++l) {
    const auto& f = found[l];
    const bool key = f.part[0].has_value(), value = f.part[1].has_value();
    if (!key && !value) {
      return make_error(fmt::format(
          "{}: layers.{} is missing: no tensor '{}' or '{}' although the file has layers up to "
          "layers.{}",
          label, l, part_name(l, KvRole::Key), part_name(l, KvRole::Value), layer_count - 1));
    }
    if (!key || !value) {
      return make_error(fmt::format("{}: tensor '{}' is missing (layer {} has only its {})", label,
                                    part_name(l, key ? KvRole::Value : KvRole::Key), l,
                                    key ? "key" : "value"));
    }
  }

  const TensorDesc& ref = tensors[*found[0].part[0]];
  const std::uint64_t heads = ref.shape[1], dim = ref.shape[2];
  if (heads == 0 || dim == 0) {
    return make_error(fmt::format("{}: tensor '{}': shape {} has no heads or a zero head_dim",
                                  label, ref.name, shape_text(ref.shape)));
  }
  // Checks one tensor against the reference it must agree with.
  const auto check = [&](const TensorDesc& t, const TensorDesc& like, bool same_shape) -> Status {
    if (t.shape[2] != like.shape[2]) {
      return make_error(fmt::format(
          "{}: tensor '{}': head_dim mismatch: shape {} has head_dim {} but '{}' has {}", label,
          t.name, shape_text(t.shape), t.shape[2], like.name, like.shape[2]));
    }
    if (same_shape && t.shape != like.shape) {
      return make_error(fmt::format("{}: tensor '{}': shape mismatch: {} but '{}' is {}", label,
                                    t.name, shape_text(t.shape), like.name,
                                    shape_text(like.shape)));
    }
    if (*t.dtype != *like.dtype) {
      return make_error(fmt::format("{}: tensor '{}': dtype mismatch: {} but '{}' is {}", label,
                                    t.name, t.dtype_text, like.name, like.dtype_text));
    }
    return Ok{};
  };

  KvLayout layout;
  layout.layers.resize(layer_count);
  const bool queries = found[0].part[2].has_value();
  for (std::size_t l = 0; l < layer_count; ++l) {
    const auto& f = found[l];
    KVLAB_TRY(check(tensors[*f.part[0]], ref, true));
    KVLAB_TRY(check(tensors[*f.part[1]], ref, true));
    layout.layers[l].key = *f.part[0];
    layout.layers[l].value = *f.part[1];
    if (f.part[2].has_value() != queries) {
      return make_error(fmt::format(
          "{}: tensor '{}' is missing (queries must be present for every layer or for none, and "
          "layers.{} has them)",
          label, part_name(queries ? l : 0, KvRole::Query), queries ? 0 : l));
    }
    layout.layers[l].query = f.part[2];
  }

  std::uint64_t q_heads = 0;
  if (queries) {
    const TensorDesc& qref = tensors[*found[0].part[2]];
    q_heads = qref.shape[1];
    if (qref.shape[2] != dim) {
      return make_error(fmt::format(
          "{}: tensor '{}': head_dim mismatch: shape {} has head_dim {} but '{}' has {}", label,
          qref.name, shape_text(qref.shape), qref.shape[2], ref.name, dim));
    }
    for (const auto& layer : layout.layers) {
      KVLAB_TRY(check(tensors[*layer.query], qref, true));
    }
    if (q_heads == 0 || q_heads % heads != 0) {
      return make_error(fmt::format(
          "{}: tensor '{}': {} query heads is not a positive multiple of the {} KV heads", label,
          qref.name, q_heads, heads));
    }
  }

  // Metadata, when present, must agree with the tensors.
  if (const auto it = metadata.find(std::string(kMetaFormat));
      it != metadata.end() && it->second != "kv-cache/1") {
    return make_error(fmt::format("{}: metadata {} = '{}' is not supported (expected 'kv-cache/1')",
                                  label, kMetaFormat, it->second));
  }
  // `actual` 0: nothing in the tensors to compare with.
  const auto agree = [&](std::string_view key, std::uint64_t actual,
                         const std::string& what) -> Result<std::optional<int>> {
    auto v = metadata_int(label, metadata, key);
    if (!v) return v;
    if (*v && actual != 0 && static_cast<std::uint64_t>(**v) != actual) {
      return make_error(fmt::format("{}: metadata {} = {} but {}", label, key, **v, what));
    }
    return v;
  };
  if (auto v = agree(kMetaLayers, layer_count, fmt::format("the file has {} layers", layer_count));
      !v) {
    return v.error();
  }
  if (auto v =
          agree(kMetaKvHeads, heads, fmt::format("tensor '{}' has {} KV heads", ref.name, heads));
      !v) {
    return v.error();
  }
  if (auto v = agree(kMetaHeadDim, dim, fmt::format("tensor '{}' has head_dim {}", ref.name, dim));
      !v) {
    return v.error();
  }
  auto meta_q = agree(kMetaQHeads, q_heads,
                      fmt::format("tensor 'layers.0.query' has {} query heads", q_heads));
  if (!meta_q) return meta_q.error();

  ModelShape& shape = layout.shape;
  const auto model = metadata.find(std::string(kMetaModel));
  shape.name = model != metadata.end() ? model->second : default_name;
  shape.layers = static_cast<int>(layer_count);
  shape.kv_heads = static_cast<int>(heads);
  shape.head_dim = static_cast<int>(dim);
  shape.q_heads = queries ? static_cast<int>(q_heads) : meta_q->value_or(shape.kv_heads);
  if (auto s = shape.validate(); !s) return make_error(fmt::format("{}: {}", label, s.message()));
  return layout;
}

Result<KvCache> build_kv_cache(std::string_view label, const KvLayout& layout,
                               std::span<const TensorDesc> tensors, const ReadTensorFn& read,
                               const ProgressFn& progress, std::string source,
                               const MappedTensors& mapped) {
  const auto bytes_of = [&](std::size_t i) {
    const TensorDesc& t = tensors[i];
    return t.shape[0] * t.shape[1] * t.shape[2] * dtype_size(*t.dtype);
  };
  std::uint64_t total = 0;
  for (const auto& l : layout.layers) {
    total += bytes_of(l.key) + bytes_of(l.value) + (l.query ? bytes_of(*l.query) : 0);
  }
  const auto cancelled = [] { return make_error(std::string(kCancelledMessage)); };
  if (!report_progress(progress, 0.0, "reading tensors")) return cancelled();

  KvCache cache;
  cache.shape = layout.shape;
  cache.source = std::move(source);
  std::uint64_t done = 0;
  try {
    cache.layers.resize(layout.layers.size());
    for (std::size_t l = 0; l < layout.layers.size(); ++l) {
      const auto& parts = layout.layers[l];
      const auto load = [&](std::size_t index, Tensor& out) -> Status {
        const TensorDesc& t = tensors[index];
        const DType dtype = *t.dtype;
        const int tokens = static_cast<int>(t.shape[0]), heads = static_cast<int>(t.shape[1]),
                  dim = static_cast<int>(t.shape[2]);
        const std::uint64_t nbytes = bytes_of(index);
        const std::uint64_t at = mapped.mapping ? mapped.offset(index) : 0;
        if (mapped.mapping && at % dtype_size(dtype) == 0 && at <= mapped.mapping->size() &&
            nbytes <= mapped.mapping->size() - at) {
          out = Tensor::borrowed(mapped.mapping, mapped.mapping->data() + at, dtype, tokens, heads,
                                 dim);
        } else {
          out = Tensor::uninitialized(dtype, tokens, heads, dim);
          KVLAB_TRY(read(index, {out.mutable_data(), out.nbytes()}));
        }
        done += out.nbytes();
        if (!report_progress(progress, total ? static_cast<double>(done) / total : 1.0,
                             "reading tensors")) {
          return cancelled();
        }
        return Ok{};
      };
      KVLAB_TRY(load(parts.key, cache.layers[l].key));
      KVLAB_TRY(load(parts.value, cache.layers[l].value));
      if (parts.query) {
        KVLAB_TRY(load(*parts.query, cache.layers[l].query));
      }
    }
  } catch (const std::bad_alloc&) {
    return make_error(
        fmt::format("{}: not enough memory to load {} bytes of KV tensors", label, total));
  }
  if (auto s = cache.validate(); !s) return make_error(fmt::format("{}: {}", label, s.message()));
  return cache;
}

}  // namespace kvlab::detail
