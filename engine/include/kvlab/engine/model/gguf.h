// GGUF, the file format of llama.cpp, Ollama and LM Studio models (versions 2 and 3), read from a
// memory mapping: the header, the metadata key/values of every type, the tensor infos and their
// data (ggml's docs/gguf.md is the specification; gguf-py's GGUFReader is the independent reader
// the tests compare with).
//
// Layout, little-endian: "GGUF", u32 version, u64 tensor count, u64 key/value count; per key a
// string (u64 length + bytes), a u32 value type and the value (arrays: u32 element type, u64
// count, the elements); per tensor a name, u32 dimension count (≤ 4), u64 sizes (innermost
// first), u32 ggml type and u64 offset into the data section, which starts at the next multiple
// of general.alignment (default 32) after the tensor infos.
//
// Everything is checked before it is used: a count or length that the rest of the file cannot
// hold, a dimension product that overflows, a tensor whose bytes pass the end of the file or
// overlap another's, an unknown type, a duplicate key or tensor name is an error naming the file,
// the key or tensor, and the problem. Nothing is allocated in proportion to a count before the
// bytes for it are known to be there, and arrays are not copied: their elements are read from
// the mapping when asked for.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/ggml_types.h"

namespace kvlab {

enum class GgufValueType : std::uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
std::string_view gguf_value_type_name(GgufValueType t);  // "u32", "string", "array", ...

struct GgufKeyValue {
  std::string key;
  GgufValueType type = GgufValueType::U8;
  // Scalars: the value in the widest matching form (integers and bool in `integer`, unsigned
  // 64-bit values that do not fit in int64 are refused by the integer getters; floats in `real`;
  // strings in `text`).
  std::int64_t integer = 0;
  std::uint64_t unsigned_integer = 0;
  double real = 0;
  std::string_view text;  // a view into the mapping
  // Arrays: the element type, the count and the elements' bytes in the mapping.
  GgufValueType element_type = GgufValueType::U8;
  std::uint64_t count = 0;
  std::span<const std::byte> elements;

  bool is_integer() const;  // u8 … i64 and bool
  bool is_real() const { return type == GgufValueType::F32 || type == GgufValueType::F64; }
  std::string display(std::size_t max_items = 8) const;  // "128", "\"llama\"", "[1, 2, … 4 items]"
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::int64_t> dims;  // innermost first, as ggml's ne[] (a [rows × cols] matrix is
                                   // {cols, rows})
  GgmlType type = GgmlType::F32;
  std::uint64_t offset = 0;  // into the data section
  std::uint64_t bytes = 0;
  std::int64_t elements() const;
  std::int64_t rows() const;  // the product of every dimension but the first
};

class GgufFile {
 public:
  // Maps and parses `path`.
  static Result<GgufFile> open(const std::filesystem::path& path);
  // Parses bytes the caller keeps alive (tests, fuzzing); `label` names them in messages.
  static Result<GgufFile> parse(std::span<const std::byte> bytes, std::string label);

  const std::string& path() const { return m_path; }
  std::uint32_t version() const { return m_version; }
  std::uint64_t alignment() const { return m_alignment; }
  std::uint64_t data_offset() const { return m_data_offset; }  // of the data section
  std::uint64_t file_size() const { return m_bytes.size(); }

  const std::vector<GgufKeyValue>& metadata() const { return m_metadata; }
  const GgufKeyValue* find(std::string_view key) const;  // nullptr when absent

  // Typed getters: an error names the file and the key when it is absent or of another type.
  Result<std::string> get_string(std::string_view key) const;
  Result<std::int64_t> get_integer(std::string_view key) const;  // any integer type or bool
  Result<double> get_real(std::string_view key) const;           // f32, f64 or an integer
  // Array elements; the element type must match (strings; any integer type; any number).
  Result<std::vector<std::string_view>> get_strings(std::string_view key) const;
  Result<std::vector<std::int64_t>> get_integers(std::string_view key) const;
  Result<std::vector<double>> get_reals(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return m_tensors; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr when absent
  // The tensor's bytes in the mapping (checked to lie inside the file when it was parsed).
  std::span<const std::uint8_t> tensor_data(const GgufTensorInfo& t) const;

  // Keeps the mapping alive (weights point into it).
  std::shared_ptr<const void> owner() const { return m_owner; }

 private:
  std::string m_path;
  std::span<const std::byte> m_bytes;
  std::shared_ptr<const void> m_owner;
  std::uint32_t m_version = 0;
  std::uint64_t m_alignment = 32, m_data_offset = 0;
  std::vector<GgufKeyValue> m_metadata;
  std::vector<GgufTensorInfo> m_tensors;
};

}  // namespace kvlab
