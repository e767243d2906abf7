// The GGUF reader (see gguf.h).
#include "kvlab/engine/model/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <unordered_set>

#include <fmt/format.h>

#include "io/file_mapping.h"

namespace kvlab {
namespace {

constexpr std::uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// The size of a scalar of type `t`; 0 for strings and arrays, -1 for an unknown type.
int scalar_size(std::uint32_t t) {
  switch (static_cast<GgufValueType>(t)) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::Bool:
      return 1;
    case GgufValueType::U16:
    case GgufValueType::I16:
      return 2;
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::F32:
      return 4;
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::F64:
      return 8;
    case GgufValueType::String:
    case GgufValueType::Array:
      return 0;
  }
  return -1;
}

// A bounds-checked little-endian cursor over the file. Every read names what it was reading, so
// a truncated file says where it ends.
class Cursor {
 public:
  Cursor(std::span<const std::byte> bytes, const std::string& label)
      : m_bytes(bytes), m_label(label) {}

  std::uint64_t pos() const { return m_pos; }
  std::uint64_t left() const { return m_bytes.size() - m_pos; }

  Status need(std::uint64_t n, std::string_view what) const {
    if (n > left()) {
      return make_error(fmt::format("{}: truncated: {} needs {} bytes at offset {}, {} left",
                                    m_label, what, n, m_pos, left()));
    }
    return Ok{};
  }
  template <class T>
  Result<T> read(std::string_view what) {
    KVLAB_TRY(need(sizeof(T), what));
    T v;
    std::memcpy(&v, m_bytes.data() + m_pos, sizeof(T));
    m_pos += sizeof(T);
    return v;
  }
  Result<std::string_view> string(std::string_view what) {
    auto n = read<std::uint64_t>(what);
    if (!n) return n.error();
    KVLAB_TRY(need(*n, what));
    std::string_view s(reinterpret_cast<const char*>(m_bytes.data() + m_pos),
                       static_cast<std::size_t>(*n));
    m_pos += *n;
    return s;
  }
  Result<std::span<const std::byte>> take(std::uint64_t n, std::string_view what) {
    KVLAB_TRY(need(n, what));
    auto s = m_bytes.subspan(static_cast<std::size_t>(m_pos), static_cast<std::size_t>(n));
    m_pos += n;
    return s;
  }

 private:
  std::span<const std::byte> m_bytes;
  const std::string& m_label;
  std::uint64_t m_pos = 0;
};

// Reads one scalar of type `t` into `kv`.
Status read_scalar(Cursor& c, GgufValueType t, GgufKeyValue& kv, const std::string& what) {
  const auto take = [&]<class T>(T) -> Status {
    auto v = c.read<T>(what);
    if (!v) return v.error();
    if constexpr (std::is_floating_point_v<T>) {
      kv.real = static_cast<double>(*v);
    } else if constexpr (std::is_same_v<T, std::uint64_t>) {
      kv.unsigned_integer = *v;
      kv.integer = static_cast<std::int64_t>(*v);
    } else {
      kv.integer = static_cast<std::int64_t>(*v);
      kv.unsigned_integer = static_cast<std::uint64_t>(kv.integer);
    }
    return Ok{};
  };
  switch (t) {
    case GgufValueType::U8:
      return take(std::uint8_t{});
    case GgufValueType::I8:
      return take(std::int8_t{});
    case GgufValueType::U16:
      return take(std::uint16_t{});
    case GgufValueType::I16:
      return take(std::int16_t{});
    case GgufValueType::U32:
      return take(std::uint32_t{});
    case GgufValueType::I32:
      return take(std::int32_t{});
    case GgufValueType::F32:
      return take(float{});
    case GgufValueType::U64:
      return take(std::uint64_t{});
    case GgufValueType::I64:
      return take(std::int64_t{});
    case GgufValueType::F64:
      return take(double{});
    case GgufValueType::Bool: {
      auto v = c.read<std::uint8_t>(what);
      if (!v) return v.error();
      if (*v > 1) return make_error(fmt::format("{}: a bool of value {}", what, *v));
      kv.integer = *v;
      kv.unsigned_integer = *v;
      return Ok{};
    }
    case GgufValueType::String: {
      auto s = c.string(what);
      if (!s) return s.error();
      kv.text = *s;
      return Ok{};
    }
    case GgufValueType::Array:
      break;
  }
  return make_error(fmt::format("{}: not a scalar type", what));
}

// The i-th integer of an array of integer type `t` at `bytes`.
std::int64_t array_integer(GgufValueType t, std::span<const std::byte> bytes, std::uint64_t i) {
  const auto at = [&]<class T>(T) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    return static_cast<std::int64_t>(v);
  };
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::Bool:
      return at(std::uint8_t{});
    case GgufValueType::I8:
      return at(std::int8_t{});
    case GgufValueType::U16:
      return at(std::uint16_t{});
    case GgufValueType::I16:
      return at(std::int16_t{});
    case GgufValueType::U32:
      return at(std::uint32_t{});
    case GgufValueType::I32:
      return at(std::int32_t{});
    case GgufValueType::U64:
      return at(std::uint64_t{});
    case GgufValueType::I64:
      return at(std::int64_t{});
    default:
      return 0;
  }
}

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
    case GgufValueType::I8:
    case GgufValueType::U16:
    case GgufValueType::I16:
    case GgufValueType::U32:
    case GgufValueType::I32:
    case GgufValueType::U64:
    case GgufValueType::I64:
    case GgufValueType::Bool:
      return true;
    default:
      return false;
  }
}

}  // namespace

std::string_view gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::U8:
      return "u8";
    case GgufValueType::I8:
      return "i8";
    case GgufValueType::U16:
      return "u16";
    case GgufValueType::I16:
      return "i16";
    case GgufValueType::U32:
      return "u32";
    case GgufValueType::I32:
      return "i32";
    case GgufValueType::F32:
      return "f32";
    case GgufValueType::Bool:
      return "bool";
    case GgufValueType::String:
      return "string";
    case GgufValueType::Array:
      return "array";
    case GgufValueType::U64:
      return "u64";
    case GgufValueType::I64:
      return "i64";
    case GgufValueType::F64:
      return "f64";
  }
  return "?";
}

bool GgufKeyValue::is_integer() const {
  return is_integer_type(type);
}

std::string GgufKeyValue::display(std::size_t max_items) const {
  if (type == GgufValueType::String) {
    std::string s(text.substr(0, 60));
    std::replace(s.begin(), s.end(), '\n', ' ');
    return fmt::format("\"{}{}\"", s, text.size() > 60 ? "…" : "");
  }
  if (type == GgufValueType::Bool) return integer ? "true" : "false";
  if (type == GgufValueType::U64) return fmt::format("{}", unsigned_integer);
  if (is_integer()) return fmt::format("{}", integer);
  if (is_real()) return fmt::format("{:g}", real);
  // Arrays: the first few elements.
  std::string out = "[";
  const std::uint64_t shown = std::min<std::uint64_t>(count, max_items);
  if (element_type == GgufValueType::String) {
    std::uint64_t at = 0;
    for (std::uint64_t i = 0; i < shown; ++i) {
      std::uint64_t n;
      std::memcpy(&n, elements.data() + at, 8);
      std::string s(reinterpret_cast<const char*>(elements.data() + at + 8),
                    static_cast<std::size_t>(std::min<std::uint64_t>(n, 24)));
      out += fmt::format("{}\"{}\"", i ? ", " : "", s);
      at += 8 + n;
    }
  } else if (is_integer_type(element_type)) {
    for (std::uint64_t i = 0; i < shown; ++i) {
      out += fmt::format("{}{}", i ? ", " : "", array_integer(element_type, elements, i));
    }
  } else {
    for (std::uint64_t i = 0; i < shown; ++i) {
      double v;
      if (element_type == GgufValueType::F32) {
        float f;
        std::memcpy(&f, elements.data() + i * 4, 4);
        v = f;
      } else {
        std::memcpy(&v, elements.data() + i * 8, 8);
      }
      out += fmt::format("{}{:g}", i ? ", " : "", v);
    }
  }
  if (count > shown) out += fmt::format("{}… {} items", shown ? ", " : "", count);
  return out + "]";
}

std::int64_t GgufTensorInfo::elements() const {
  std::int64_t n = 1;
  for (const auto d : dims) n *= d;
  return n;
}

std::int64_t GgufTensorInfo::rows() const {
  std::int64_t n = 1;
  for (std::size_t i = 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

Result<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  auto mapping = detail::FileMapping::open(path.string());
  if (!mapping) return mapping.error();
  std::shared_ptr<detail::FileMapping> owner = std::move(*mapping);
  auto file = parse({owner->data(), owner->size()}, path.string());
  if (!file) return file.error();
  file->m_owner = std::move(owner);
  return file;
}

Result<GgufFile> GgufFile::parse(std::span<const std::byte> bytes, std::string label) {
  GgufFile f;
  f.m_path = std::move(label);
  f.m_bytes = bytes;
  const std::string& name = f.m_path;
  Cursor c(bytes, name);
  {
    auto magic = c.take(4, "the magic");
    if (!magic || std::memcmp(magic->data(), "GGUF", 4) != 0) {
      return make_error(fmt::format("{}: not a GGUF file (it does not start with \"GGUF\")", name));
    }
  }
  auto version = c.read<std::uint32_t>("the version");
  if (!version) return version.error();
  if (*version == 1) {
    return make_error(
        fmt::format("{}: GGUF version 1 (32-bit counts) is not supported; convert "
                    "it with a current llama.cpp",
                    name));
  }
  if (*version != 2 && *version != 3) {
    // A big-endian file shows its version byte-swapped (0x03000000).
    const bool swapped = *version == 0x02000000u || *version == 0x03000000u;
    return make_error(fmt::format("{}: GGUF version {} is not supported (2 and 3 are){}", name,
                                  *version, swapped ? "; the file is big-endian" : ""));
  }
  f.m_version = *version;
  auto tensor_count = c.read<std::uint64_t>("the tensor count");
  if (!tensor_count) return tensor_count.error();
  auto kv_count = c.read<std::uint64_t>("the key/value count");
  if (!kv_count) return kv_count.error();
  // Each tensor info takes at least 24 bytes and each key/value 13: a count the file cannot hold
  // is refused before anything is reserved for it.
  if (*kv_count > c.left() / 13) {
    return make_error(fmt::format("{}: {} key/values cannot fit in the {} bytes left", name,
                                  *kv_count, c.left()));
  }
  if (*tensor_count > c.left() / 24) {
    return make_error(fmt::format("{}: {} tensors cannot fit in the {} bytes left", name,
                                  *tensor_count, c.left()));
  }

  std::unordered_set<std::string_view> keys;
  f.m_metadata.reserve(static_cast<std::size_t>(*kv_count));
  for (std::uint64_t i = 0; i < *kv_count; ++i) {
    GgufKeyValue kv;
    auto key = c.string(fmt::format("the key of key/value {}", i));
    if (!key) return key.error();
    kv.key = std::string(*key);
    if (!keys.insert(*key).second) {
      return make_error(fmt::format("{}: key {} appears twice", name, kv.key));
    }
    const std::string what = fmt::format("{}: key {}", name, kv.key);
    auto type = c.read<std::uint32_t>(what + " (its type)");
    if (!type) return type.error();
    if (scalar_size(*type) < 0) {
      return make_error(fmt::format("{} has an unknown value type {}", what, *type));
    }
    kv.type = static_cast<GgufValueType>(*type);
    if (kv.type != GgufValueType::Array) {
      KVLAB_TRY(read_scalar(c, kv.type, kv, what));
    } else {
      auto et = c.read<std::uint32_t>(what + " (its element type)");
      if (!et) return et.error();
      const int size = scalar_size(*et);
      if (size < 0) return make_error(fmt::format("{} has an unknown element type {}", what, *et));
      if (static_cast<GgufValueType>(*et) == GgufValueType::Array) {
        return make_error(fmt::format("{} is an array of arrays, which GGUF readers refuse", what));
      }
      kv.element_type = static_cast<GgufValueType>(*et);
      auto count = c.read<std::uint64_t>(what + " (its element count)");
      if (!count) return count.error();
      kv.count = *count;
      const std::uint64_t start = c.pos();
      if (size > 0) {
        if (kv.count > c.left() / static_cast<std::uint64_t>(size)) {
          return make_error(fmt::format("{}: {} elements of {} bytes pass the end of the file",
                                        what, kv.count, size));
        }
        KVLAB_TRY(c.take(kv.count * static_cast<std::uint64_t>(size), what));
      } else {  // strings: each a u64 length and its bytes
        if (kv.count > c.left() / 8) {
          return make_error(fmt::format("{}: {} strings cannot fit in the {} bytes left", what,
                                        kv.count, c.left()));
        }
        for (std::uint64_t s = 0; s < kv.count; ++s) {
          KVLAB_TRY(c.string(fmt::format("{} (string {} of {})", what, s, kv.count)));
        }
      }
      kv.elements =
          bytes.subspan(static_cast<std::size_t>(start), static_cast<std::size_t>(c.pos() - start));
    }
    f.m_metadata.push_back(std::move(kv));
  }

  if (const GgufKeyValue* a = f.find("general.alignment")) {
    if (!a->is_integer() || a->type == GgufValueType::Bool || a->integer <= 0 ||
        a->integer > (1 << 30) || (a->integer & (a->integer - 1)) != 0) {
      return make_error(
          fmt::format("{}: general.alignment {} is not a power of two", name, a->display()));
    }
    f.m_alignment = static_cast<std::uint64_t>(a->integer);
  }

  std::unordered_set<std::string_view> names;
  f.m_tensors.reserve(static_cast<std::size_t>(*tensor_count));
  for (std::uint64_t i = 0; i < *tensor_count; ++i) {
    GgufTensorInfo t;
    auto tname = c.string(fmt::format("the name of tensor {}", i));
    if (!tname) return tname.error();
    t.name = std::string(*tname);
    const std::string what = fmt::format("{}: tensor {}", name, t.name);
    auto n_dims = c.read<std::uint32_t>(what + " (its dimension count)");
    if (!n_dims) return n_dims.error();
    if (*n_dims == 0 || *n_dims > kMaxDims) {
      return make_error(
          fmt::format("{} has {} dimensions (1 to {} are allowed)", what, *n_dims, kMaxDims));
    }
    std::int64_t elements = 1;
    for (std::uint32_t d = 0; d < *n_dims; ++d) {
      auto dim = c.read<std::uint64_t>(what + " (its dimensions)");
      if (!dim) return dim.error();
      if (*dim == 0 ||
          *dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
          static_cast<std::int64_t>(*dim) > std::numeric_limits<std::int64_t>::max() / elements) {
        return make_error(
            fmt::format("{}: dimension {} of size {} is empty or too large", what, d, *dim));
      }
      elements *= static_cast<std::int64_t>(*dim);
      t.dims.push_back(static_cast<std::int64_t>(*dim));
    }
    auto type = c.read<std::uint32_t>(what + " (its type)");
    if (!type) return type.error();
    const GgmlTypeInfo* info = ggml_type_info(*type);
    if (!info) return make_error(fmt::format("{} has an unknown ggml type {}", what, *type));
    t.type = static_cast<GgmlType>(*type);
    auto offset = c.read<std::uint64_t>(what + " (its data offset)");
    if (!offset) return offset.error();
    t.offset = *offset;
    if (t.offset % f.m_alignment != 0) {
      return make_error(fmt::format("{}: data offset {} is not a multiple of the alignment {}",
                                    what, t.offset, f.m_alignment));
    }
    const auto row = ggml_row_bytes(t.type, t.dims[0]);
    if (!row) {
      return make_error(
          fmt::format("{}: a row of {} values is not a whole number of {} blocks "
                      "of {}",
                      what, t.dims[0], info->name, info->block_size));
    }
    const auto rows = static_cast<std::uint64_t>(t.rows());
    if (*row != 0 && rows > std::numeric_limits<std::uint64_t>::max() / *row) {
      return make_error(fmt::format("{}: its size overflows", what));
    }
    t.bytes = *row * rows;
    if (!names.insert(*tname).second) {
      return make_error(fmt::format("{}: tensor {} appears twice", name, t.name));
    }
    f.m_tensors.push_back(std::move(t));
  }
  // The data section starts at the next multiple of the alignment.
  const std::uint64_t end = c.pos();
  f.m_data_offset = (end + f.m_alignment - 1) / f.m_alignment * f.m_alignment;
  const std::uint64_t data_size =
      f.m_data_offset <= bytes.size() ? bytes.size() - f.m_data_offset : 0;
  if (!f.m_tensors.empty() && f.m_data_offset > bytes.size()) {
    return make_error(
        fmt::format("{}: truncated: the data section would start at {}, past the "
                    "end of the file ({} bytes)",
                    name, f.m_data_offset, bytes.size()));
  }
  // Every tensor inside the data section, none overlapping another.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : f.m_tensors) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return make_error(
          fmt::format("{}: tensor {} ({} bytes at data offset {}) passes the end of "
                      "the file ({} bytes of data)",
                      name, t.name, t.bytes, t.offset, data_size));
    }
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const auto* a, const auto* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < by_offset.size(); ++i) {
    const auto* prev = by_offset[i - 1];
    if (prev->offset + prev->bytes > by_offset[i]->offset) {
      return make_error(
          fmt::format("{}: tensors {} and {} overlap", name, prev->name, by_offset[i]->name));
    }
  }
  return f;
}

const GgufKeyValue* GgufFile::find(std::string_view key) const {
  for (const auto& kv : m_metadata) {
    if (kv.key == key) return &kv;
  }
  return nullptr;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : m_tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::span<const std::uint8_t> GgufFile::tensor_data(const GgufTensorInfo& t) const {
  const auto* base = reinterpret_cast<const std::uint8_t*>(m_bytes.data());
  return {base + m_data_offset + t.offset, static_cast<std::size_t>(t.bytes)};
}

Result<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufKeyValue* kv = find(key);
  if (!kv) return make_error(fmt::format("{}: key {} is missing", m_path, key));
  if (kv->type != GgufValueType::String) {
    return make_error(fmt::format("{}: key {} is a {}, not a string", m_path, key,
                                  gguf_value_type_name(kv->type)));
  }
  return std::string(kv->text);
}

Result<std::int64_t> GgufFile::get_integer(std::string_view key) const {
  const GgufKeyValue* kv = find(key);
  if (!kv) return make_error(fmt::format("{}: key {} is missing", m_path, key));
  if (!kv->is_integer()) {
    return make_error(fmt::format("{}: key {} is a {}, not an integer", m_path, key,
                                  gguf_value_type_name(kv->type)));
  }
  if (kv->type == GgufValueType::U64 &&
      kv->unsigned_integer > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return make_error(
        fmt::format("{}: key {} = {} is too large", m_path, key, kv->unsigned_integer));
  }
  return kv->integer;
}

Result<double> GgufFile::get_real(std::string_view key) const {
  const GgufKeyValue* kv = find(key);
  if (!kv) return make_error(fmt::format("{}: key {} is missing", m_path, key));
  if (kv->is_real()) return kv->real;
  if (kv->is_integer() && kv->type != GgufValueType::Bool) {
    return kv->type == GgufValueType::U64 ? static_cast<double>(kv->unsigned_integer)
                                          : static_cast<double>(kv->integer);
  }
  return make_error(
      fmt::format("{}: key {} is a {}, not a number", m_path, key, gguf_value_type_name(kv->type)));
}

Result<std::vector<std::string_view>> GgufFile::get_strings(std::string_view key) const {
  const GgufKeyValue* kv = find(key);
  if (!kv) return make_error(fmt::format("{}: key {} is missing", m_path, key));
  if (kv->type != GgufValueType::Array || kv->element_type != GgufValueType::String) {
    return make_error(fmt::format("{}: key {} is not an array of strings", m_path, key));
  }
  std::vector<std::string_view> out;
  out.reserve(static_cast<std::size_t>(kv->count));  // checked against the file when parsed
  std::size_t at = 0;
  for (std::uint64_t i = 0; i < kv->count; ++i) {
    std::uint64_t n;
    std::memcpy(&n, kv->elements.data() + at, 8);
    out.emplace_back(reinterpret_cast<const char*>(kv->elements.data() + at + 8),
                     static_cast<std::size_t>(n));
    at += 8 + static_cast<std::size_t>(n);
  }
  return out;
}

Result<std::vector<std::int64_t>> GgufFile::get_integers(std::string_view key) const {
  const GgufKeyValue* kv = find(key);
  if (!kv) return make_error(fmt::format("{}: key {} is missing", m_path, key));
  if (kv->type != GgufValueType::Array || !is_integer_type(kv->element_type)) {
    return make_error(fmt::format("{}: key {} is not an array of integers", m_path, key));
  }
  std::vector<std::int64_t> out(static_cast<std::size_t>(kv->count));
  for (std::uint64_t i = 0; i < kv->count; ++i) {
    out[i] = array_integer(kv->element_type, kv->elements, i);
  }
  return out;
}

Result<std::vector<double>> GgufFile::get_reals(std::string_view key) const {
  const GgufKeyValue* kv = find(key);
  if (!kv) return make_error(fmt::format("{}: key {} is missing", m_path, key));
  if (kv->type != GgufValueType::Array || kv->element_type == GgufValueType::String) {
    return make_error(fmt::format("{}: key {} is not an array of numbers", m_path, key));
  }
  std::vector<double> out(static_cast<std::size_t>(kv->count));
  for (std::uint64_t i = 0; i < kv->count; ++i) {
    if (kv->element_type == GgufValueType::F32) {
      float v;
      std::memcpy(&v, kv->elements.data() + i * 4, 4);
      out[i] = v;
    } else if (kv->element_type == GgufValueType::F64) {
      std::memcpy(&out[i], kv->elements.data() + i * 8, 8);
    } else {
      out[i] = static_cast<double>(array_integer(kv->element_type, kv->elements, i));
    }
  }
  return out;
}

}  // namespace kvlab
