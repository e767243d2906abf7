#include "kvlab/engine/sources/safetensors.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/file_io.h"
#include "sources/cache_readers.h"
#include "sources/kv_layout.h"

namespace kvlab {

// Tensors hold their elements in host order and the files are little-endian.
static_assert(std::endian::native == std::endian::little,
              "kvlab's file sources assume a "
              "little-endian host");

namespace {

using detail::checked_mul;

struct DTypeInfo {
  SafetensorsDType dtype;
  std::string_view name;
  std::size_t size;
};
constexpr std::array<DTypeInfo, 15> kDTypes = {{
    {SafetensorsDType::Bool, "BOOL", 1},
    {SafetensorsDType::U8, "U8", 1},
    {SafetensorsDType::I8, "I8", 1},
    {SafetensorsDType::F8_E4M3, "F8_E4M3", 1},
    {SafetensorsDType::F8_E5M2, "F8_E5M2", 1},
    {SafetensorsDType::I16, "I16", 2},
    {SafetensorsDType::U16, "U16", 2},
    {SafetensorsDType::F16, "F16", 2},
    {SafetensorsDType::BF16, "BF16", 2},
    {SafetensorsDType::I32, "I32", 4},
    {SafetensorsDType::U32, "U32", 4},
    {SafetensorsDType::F32, "F32", 4},
    {SafetensorsDType::F64, "F64", 8},
    {SafetensorsDType::I64, "I64", 8},
    {SafetensorsDType::U64, "U64", 8},
}};

std::string_view file_dtype_name(DType t) {
  switch (t) {
    case DType::F16:
      return "F16";
    case DType::BF16:
      return "BF16";
    case DType::F32:
      return "F32";
  }
  return "?";
}

// A JSON value for an error message: compact, printable, and short.
std::string brief(const nlohmann::json& j) {
  std::string text = j.dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Replaces bytes that would garble a one-line message (parser messages quote the input).
std::string printable(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return text;
}

Result<std::vector<std::uint64_t>> unsigned_array(const nlohmann::json& j, const std::string& what,
                                                  const std::string& prefix) {
  if (!j.is_array()) {
    return make_error(fmt::format("{}: '{}' is not an array (got {})", prefix, what, brief(j)));
  }
  std::vector<std::uint64_t> out;
  out.reserve(j.size());
  for (const auto& v : j) {
    if (!v.is_number_unsigned()) {
      return make_error(fmt::format("{}: '{}' {} has an element that is not a non-negative integer",
                                    prefix, what, brief(j)));
    }
    out.push_back(v.get<std::uint64_t>());
  }
  return out;
}

Result<SafetensorsEntry> parse_entry(const std::string& name, const nlohmann::json& j,
                                     std::uint64_t data_size, std::string_view label) {
  const std::string prefix = fmt::format("{}: tensor '{}'", label, name);
  if (!j.is_object()) {
    return make_error(fmt::format("{}: entry is not a JSON object (got {})", prefix, brief(j)));
  }
  SafetensorsEntry e;
  e.name = name;
  const auto field = [&](const char* key) -> Result<const nlohmann::json*> {
    const auto it = j.find(key);
    if (it == j.end()) return make_error(fmt::format("{}: missing '{}'", prefix, key));
    return &*it;
  };

  auto dtype = field("dtype");
  if (!dtype) return dtype.error();
  if (!(*dtype)->is_string()) {
    return make_error(fmt::format("{}: 'dtype' is not a string (got {})", prefix, brief(**dtype)));
  }
  const auto parsed = parse_safetensors_dtype((*dtype)->get_ref<const std::string&>());
  if (!parsed) {
    return make_error(fmt::format("{}: unknown dtype {}", prefix, brief(**dtype)));
  }
  e.dtype = *parsed;

  auto shape_json = field("shape");
  if (!shape_json) return shape_json.error();
  auto shape = unsigned_array(**shape_json, "shape", prefix);
  if (!shape) return shape.error();
  e.shape = std::move(*shape);

  auto offsets_json = field("data_offsets");
  if (!offsets_json) return offsets_json.error();
  auto offsets = unsigned_array(**offsets_json, "data_offsets", prefix);
  if (!offsets) return offsets.error();
  if (offsets->size() != 2) {
    return make_error(fmt::format("{}: 'data_offsets' must be [begin, end], got {}", prefix,
                                  brief(**offsets_json)));
  }
  e.begin = (*offsets)[0];
  e.end = (*offsets)[1];
  if (e.begin > e.end) {
    return make_error(
        fmt::format("{}: data range [{}, {}) ends before it begins", prefix, e.begin, e.end));
  }

  std::uint64_t bytes = safetensors_dtype_size(e.dtype);
  for (const std::uint64_t d : e.shape) {
    if (!checked_mul(bytes, d, bytes)) {
      return make_error(fmt::format("{}: shape {} overflows: its byte size does not fit in 64 bits",
                                    prefix, detail::shape_text(e.shape)));
    }
  }
  if (bytes != e.end - e.begin) {
    return make_error(
        fmt::format("{}: shape {} of {} needs {} bytes but data range [{}, {}) holds {} bytes",
                    prefix, detail::shape_text(e.shape), safetensors_dtype_name(e.dtype), bytes,
                    e.begin, e.end, e.end - e.begin));
  }
  if (e.end > data_size) {
    return make_error(fmt::format(
        "{}: data range [{}, {}) is past the end of the file (the data after the header is {} "
        "bytes)",
        prefix, e.begin, e.end, data_size));
  }
  return e;
}

Result<SafetensorsIndex> read_index(const detail::InputFile& file,
                                    const std::filesystem::path& path) {
  const std::string& label = file.label();
  if (file.size() == 0) return make_error(fmt::format("{}: the file is empty", label));
  if (file.size() < 8) {
    return make_error(fmt::format(
        "{}: the file is too short for a safetensors header ({} bytes; the length field alone "
        "takes 8)",
        label, file.size()));
  }
  std::array<std::byte, 8> len_bytes{};
  KVLAB_TRY(file.read_at(0, len_bytes));
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, len_bytes.data(), 8);  // little-endian host (asserted above)
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return make_error(fmt::format(
        "{}: header length {} exceeds the limit of {} bytes (not a safetensors file, or corrupt)",
        label, header_len, kMaxSafetensorsHeaderBytes));
  }
  if (header_len > file.size() - 8) {
    return make_error(fmt::format("{}: header length {} is larger than the file ({} bytes)", label,
                                  header_len, file.size()));
  }
  std::string json(header_len, '\0');
  KVLAB_TRY(file.read_at(8, std::as_writable_bytes(std::span(json))));
  auto index = parse_safetensors_header(json, file.size() - 8 - header_len, label);
  if (!index) return index;
  index->path = path;
  index->file_size = file.size();
  index->data_offset = 8 + header_len;
  return index;
}

}  // namespace

std::string_view safetensors_dtype_name(SafetensorsDType t) {
  for (const auto& d : kDTypes) {
    if (d.dtype == t) return d.name;
  }
  return "?";
}

std::optional<SafetensorsDType> parse_safetensors_dtype(std::string_view name) {
  for (const auto& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  return std::nullopt;
}

std::size_t safetensors_dtype_size(SafetensorsDType t) {
  for (const auto& d : kDTypes) {
    if (d.dtype == t) return d.size;
  }
  return 0;
}

std::optional<DType> kv_dtype(SafetensorsDType t) {
  switch (t) {
    case SafetensorsDType::F16:
      return DType::F16;
    case SafetensorsDType::BF16:
      return DType::BF16;
    case SafetensorsDType::F32:
      return DType::F32;
    default:
      return std::nullopt;
  }
}

const SafetensorsEntry* SafetensorsIndex::find(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<SafetensorsIndex> parse_safetensors_header(std::string_view json, std::uint64_t data_size,
                                                  std::string_view label) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(json.begin(), json.end());
  } catch (const nlohmann::json::exception& e) {
    return make_error(
        fmt::format("{}: the header is not valid JSON: {}", label, printable(e.what())));
  }
  if (!header.is_object()) {
    return make_error(fmt::format("{}: the header is not a JSON object", label));
  }
  SafetensorsIndex index;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (value.is_null()) continue;  // some writers put null for "no metadata"
      if (!value.is_object()) {
        return make_error(fmt::format("{}: __metadata__ is not a JSON object", label));
      }
      for (const auto& [key, v] : value.items()) {
        if (!v.is_string()) {
          return make_error(fmt::format(
              "{}: __metadata__ value for '{}' is not a string (the safetensors format allows "
              "only strings there)",
              label, key));
        }
        index.metadata.emplace(key, v.get<std::string>());
      }
      continue;
    }
    auto entry = parse_entry(name, value, data_size, label);
    if (!entry) return entry.error();
    index.tensors.push_back(std::move(*entry));
  }
  std::sort(index.tensors.begin(), index.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // Empty tensors own no bytes and cannot overlap anything.
  const SafetensorsEntry* last = nullptr;
  for (const auto& t : index.tensors) {
    if (t.begin == t.end) continue;
    if (last != nullptr && t.begin < last->end) {
      return make_error(
          fmt::format("{}: tensor '{}': data range [{}, {}) overlaps tensor '{}' [{}, {})", label,
                      t.name, t.begin, t.end, last->name, last->begin, last->end));
    }
    if (last == nullptr || t.end > last->end) last = &t;
  }
  return index;
}

Result<SafetensorsIndex> read_safetensors_index(const std::filesystem::path& path) {
  auto file = detail::InputFile::open(path);
  if (!file) return file.error();
  return read_index(*file, path);
}

Status read_safetensors_tensor(const SafetensorsIndex& index, const SafetensorsEntry& entry,
                               std::span<std::byte> out) {
  if (out.size() != entry.nbytes()) {
    return make_error(fmt::format("{}: tensor '{}': buffer of {} bytes for {} bytes of data",
                                  index.path.string(), entry.name, out.size(), entry.nbytes()));
  }
  auto file = detail::InputFile::open(index.path);
  if (!file) return file.error();
  if (file->size() != index.file_size) {
    return make_error(
        fmt::format("{}: the file changed size since its header was read ({} -> {} "
                    "bytes)",
                    index.path.string(), index.file_size, file->size()));
  }
  return file->read_at(index.data_offset + entry.begin, out);
}

Result<KvCache> load_safetensors_cache(const std::filesystem::path& path,
                                       const ProgressFn& progress) {
  auto file = detail::InputFile::open(path);
  if (!file) return file.error();
  return detail::read_safetensors_cache(*file, path.stem().string(), "file:" + path.string(),
                                        progress);
}

Result<KvCache> detail::read_safetensors_cache(const InputFile& file, const std::string& model_name,
                                               std::string source, const ProgressFn& progress) {
  auto index = read_index(file, file.label());
  if (!index) return index.error();

  std::vector<TensorDesc> descs;
  descs.reserve(index->tensors.size());
  for (const auto& t : index->tensors) {
    descs.push_back(
        {t.name, kv_dtype(t.dtype), std::string(safetensors_dtype_name(t.dtype)), t.shape});
  }
  const std::string& label = file.label();
  auto layout = plan_kv_layout(label, descs, index->metadata, model_name);
  if (!layout) return layout.error();
  const auto read = [&](std::size_t i, std::span<std::byte> out) -> Status {
    const SafetensorsEntry& t = index->tensors[i];
    if (auto s = file.read_at(index->data_offset + t.begin, out); !s) {
      return make_error(fmt::format("{} (reading tensor '{}')", s.message(), t.name));
    }
    return Ok{};
  };
  // A file on disk is read in place; bytes in memory are copied.
  const MappedTensors mapped{
      file.map(), [&](std::size_t i) { return index->data_offset + index->tensors[i].begin; }};
  auto cache = build_kv_cache(label, *layout, descs, read, progress, std::move(source), mapped);
  if (!cache) return cache;
  // How RoPE turned the keys, when the writer knew (a model capture saved by kvlab).
  if (const auto it = index->metadata.find(std::string(detail::kMetaKeyRope));
      it != index->metadata.end()) {
    auto rope = rope_spec_from_json(it->second);
    if (!rope)
      return make_error(fmt::format("{}: {}: {}", label, detail::kMetaKeyRope, rope.message()));
    cache->key_rope = std::move(*rope);
    const auto pre = index->metadata.find(std::string(detail::kMetaKeysPreRope));
    cache->keys_pre_rope = pre != index->metadata.end() && pre->second == "true";
    if (auto ok = cache->validate(); !ok)
      return make_error(fmt::format("{}: {}", label, ok.message()));
  }
  // A capture's token ids, when present: one I32 per cached token.
  if (const SafetensorsEntry* ids = index->find("tokens")) {
    if (ids->dtype != SafetensorsDType::I32 || ids->shape.size() != 1 ||
        ids->shape[0] != static_cast<std::uint64_t>(cache->tokens())) {
      return make_error(fmt::format(
          "{}: tensor 'tokens' must be I32 [{}] (the cached tokens), "
          "not {} with {} dimensions",
          label, cache->tokens(), safetensors_dtype_name(ids->dtype), ids->shape.size()));
    }
    cache->token_ids.resize(static_cast<std::size_t>(ids->shape[0]));
    if (auto s = file.read_at(index->data_offset + ids->begin,
                              std::as_writable_bytes(std::span(cache->token_ids)));
        !s) {
      return make_error(fmt::format("{} (reading tensor 'tokens')", s.message()));
    }
  }
  return cache;
}

namespace {

// One tensor as the header lists it.
struct HeaderEntry {
  std::string name;
  std::string_view dtype;  // "F16", "I32", ...
  std::vector<std::uint64_t> shape;
  std::uint64_t bytes = 0;
};

// The metadata every cache file carries.
nlohmann::json cache_metadata(const ModelShape& shape, const std::string& source,
                              const RopeSpec& key_rope, bool keys_pre_rope) {
  nlohmann::json meta = {
      {std::string(detail::kMetaFormat), "kv-cache/1"},
      {std::string(detail::kMetaModel), shape.name},
      {std::string(detail::kMetaLayers), std::to_string(shape.layers)},
      {std::string(detail::kMetaQHeads), std::to_string(shape.q_heads)},
      {std::string(detail::kMetaKvHeads), std::to_string(shape.kv_heads)},
      {std::string(detail::kMetaHeadDim), std::to_string(shape.head_dim)},
      {std::string(detail::kMetaSource), source},
  };
  if (key_rope.enabled()) {
    meta[std::string(detail::kMetaKeyRope)] = rope_spec_to_json(key_rope);
    meta[std::string(detail::kMetaKeysPreRope)] = keys_pre_rope ? "true" : "false";
  }
  return meta;
}

// The 8-byte length and the JSON header, padded so the data starts 8-byte aligned (which lets a
// reader map every tensor in place); the tensors follow in the order given.
std::string header_bytes(nlohmann::json metadata, const std::vector<HeaderEntry>& entries) {
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = std::move(metadata);
  std::uint64_t offset = 0;
  for (const HeaderEntry& e : entries) {
    header[e.name] = {
        {"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.bytes}}};
    offset += e.bytes;
  }
  // Names and metadata may hold invalid UTF-8; replace it rather than fail to save.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  const std::uint64_t len = text.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  return out + text;
}

// A tensor's [tokens, heads, dim].
struct Dims {
  int tokens = 0, heads = 0, dim = 0;
  std::uint64_t elements() const {
    return static_cast<std::uint64_t>(tokens) * static_cast<std::uint64_t>(heads) *
           static_cast<std::uint64_t>(dim);
  }
  bool operator==(const Dims&) const = default;
};

HeaderEntry header_entry(std::string name, DType dtype, const Dims& d) {
  return {std::move(name),
          file_dtype_name(dtype),
          {static_cast<std::uint64_t>(d.tokens), static_cast<std::uint64_t>(d.heads),
           static_cast<std::uint64_t>(d.dim)},
          d.elements() * dtype_size(dtype)};
}

Dims dims_of(const Tensor& t) {
  return {t.tokens(), t.heads(), t.dim()};
}

}  // namespace

Status save_safetensors_cache(const KvCache& cache, const std::filesystem::path& path) {
  if (auto s = cache.validate(); !s) {
    return make_error(fmt::format("{}: cannot save: {}", path.string(), s.message()));
  }
  std::vector<HeaderEntry> entries;
  std::vector<std::span<const std::byte>> order;
  for (std::size_t l = 0; l < cache.layers.size(); ++l) {
    const LayerKv& layer = cache.layers[l];
    for (const auto& [role, t] :
         {std::pair{"key", &layer.key}, {"value", &layer.value}, {"query", &layer.query}}) {
      if (t->empty()) continue;  // queries are optional
      entries.push_back(
          header_entry(fmt::format("layers.{}.{}", l, role), t->dtype(), dims_of(*t)));
      order.emplace_back(t->data(), t->nbytes());
    }
  }
  if (!cache.token_ids.empty()) {
    if (cache.token_ids.size() != static_cast<std::size_t>(cache.tokens())) {
      return make_error(fmt::format("{}: cannot save: {} token ids for {} cached tokens",
                                    path.string(), cache.token_ids.size(), cache.tokens()));
    }
    const auto ids = std::as_bytes(std::span(cache.token_ids));
    entries.push_back({"tokens", "I32", {cache.token_ids.size()}, ids.size()});
    order.push_back(ids);
  }
  const std::string head = header_bytes(
      cache_metadata(cache.shape, cache.source, cache.key_rope, cache.keys_pre_rope), entries);
  return detail::write_file_atomically(path, [&](detail::OutputFile& out) -> Status {
    KVLAB_TRY(out.write(std::as_bytes(std::span(head))));
    for (const auto bytes : order) KVLAB_TRY(out.write(bytes));
    return Ok{};
  });
}

Status save_safetensors_cache_by_layer(const CacheFileLayout& layout,
                                       const std::filesystem::path& path, int batch,
                                       const MakeLayersFn& make, const ProgressFn& progress) {
  const ModelShape& s = layout.shape;
  if (auto ok = s.validate(); !ok) {
    return make_error(fmt::format("{}: cannot save: {}", path.string(), ok.message()));
  }
  if (layout.tokens <= 0 || layout.queries < 0 || batch <= 0) {
    return make_error(fmt::format("{}: cannot save: {} tokens, {} queries, {} layers at a time",
                                  path.string(), layout.tokens, layout.queries, batch));
  }
  const Dims kv{layout.tokens, s.kv_heads, s.head_dim},
      query{layout.queries, s.q_heads, s.head_dim};
  const auto entry = [&](int l, const char* role, const Dims& shape) {
    return header_entry(fmt::format("layers.{}.{}", l, role), layout.dtype, shape);
  };
  std::vector<HeaderEntry> entries;
  for (int l = 0; l < s.layers; ++l) {
    entries.push_back(entry(l, "key", kv));
    entries.push_back(entry(l, "value", kv));
    if (layout.queries > 0) entries.push_back(entry(l, "query", query));
  }
  const std::string head = header_bytes(
      cache_metadata(s, layout.source, layout.key_rope, layout.keys_pre_rope), entries);
  return detail::write_file_atomically(path, [&](detail::OutputFile& out) -> Status {
    KVLAB_TRY(out.write(std::as_bytes(std::span(head))));
    std::vector<LayerKv> layers;
    for (int first = 0; first < s.layers; first += batch) {
      if (!report_progress(progress, static_cast<double>(first) / s.layers,
                           fmt::format("layer {} of {}", first + 1, s.layers))) {
        return make_error(std::string(kCancelledMessage));
      }
      layers.assign(static_cast<std::size_t>(std::min(batch, s.layers - first)), LayerKv{});
      KVLAB_TRY(make(first, layers));
      for (std::size_t i = 0; i < layers.size(); ++i) {
        const int l = first + static_cast<int>(i);
        for (const auto& [role, t, want] : {std::tuple{"key", &layers[i].key, kv},
                                            {"value", &layers[i].value, kv},
                                            {"query", &layers[i].query, query}}) {
          if (want.elements() == 0) continue;
          if (t->dtype() != layout.dtype || dims_of(*t) != want) {
            return make_error(
                fmt::format("{}: layers.{}.{} was made with another shape or dtype "
                            "than the file's header says",
                            path.string(), l, role));
          }
          KVLAB_TRY(out.write({t->data(), t->nbytes()}));
        }
      }
    }
    report_progress(progress, 1.0, "written");
    return Ok{};
  });
}

}  // namespace kvlab
