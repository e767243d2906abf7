#include "kvlab/engine/sources/npy.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "io/file_io.h"
#include "sources/cache_readers.h"
#include "sources/kv_layout.h"
#include "sources/zip_reader.h"

namespace kvlab {

namespace {

using detail::checked_mul;

constexpr std::array<unsigned char, 6> kMagic = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// "(2, 3, 4)" as NumPy prints shapes.
std::string tuple_text(std::span<const std::uint64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// The header is a Python dict literal, e.g.
//   {'descr': '<f2', 'fortran_order': False, 'shape': (2, 3, 4), }
// This reads exactly that grammar (strings, True/False, tuples of integers), nothing more.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : m_text(text) {}

  std::optional<std::string> parse(NpyHeader& out, bool& fortran) {
    bool have_descr = false, have_order = false, have_shape = false;
    skip_space();
    if (!eat('{')) return fail("it does not start with '{'");
    for (;;) {
      skip_space();
      if (eat('}')) break;
      std::string key;
      if (!string(key)) return fail("expected a quoted key");
      skip_space();
      if (!eat(':')) return fail(fmt::format("expected ':' after '{}'", key));
      skip_space();
      if (key == "descr") {
        if (have_descr) return fail("'descr' appears twice");
        const bool quoted = at_quote();
        if (!string(out.descr)) {
          return fail(quoted ? "'descr' is an unterminated string"
                             : "'descr' is not a string (structured dtypes are not supported)");
        }
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) return fail("'fortran_order' appears twice");
        if (eat_word("True")) {
          fortran = true;
        } else if (eat_word("False")) {
          fortran = false;
        } else {
          return fail("'fortran_order' is not True or False");
        }
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) return fail("'shape' appears twice");
        if (!tuple(out.shape)) return fail("'shape' is not a tuple of non-negative integers");
        have_shape = true;
      } else {
        return fail(fmt::format("unexpected key '{}'", key));
      }
      skip_space();
      if (eat(',')) continue;
      skip_space();
      if (!eat('}')) return fail("expected ',' or '}'");
      break;
    }
    skip_space();
    if (m_pos != m_text.size()) return fail("text follows the closing '}'");
    if (!have_descr) return fail("'descr' is missing");
    if (!have_order) return fail("'fortran_order' is missing");
    if (!have_shape) return fail("'shape' is missing");
    return std::nullopt;
  }

 private:
  std::optional<std::string> fail(std::string why) {
    return fmt::format("{} (at character {})", why, m_pos);
  }
  void skip_space() {
    while (m_pos < m_text.size() && (m_text[m_pos] == ' ' || m_text[m_pos] == '\n' ||
                                     m_text[m_pos] == '\t' || m_text[m_pos] == '\r')) {
      ++m_pos;
    }
  }
  bool eat(char c) {
    if (m_pos < m_text.size() && m_text[m_pos] == c) {
      ++m_pos;
      return true;
    }
    return false;
  }
  bool eat_word(std::string_view w) {
    if (m_text.substr(m_pos).starts_with(w)) {
      m_pos += w.size();
      return true;
    }
    return false;
  }
  bool at_quote() const {
    return m_pos < m_text.size() && (m_text[m_pos] == '\'' || m_text[m_pos] == '"');
  }
  bool string(std::string& out) {
    if (!at_quote()) return false;
    const char quote = m_text[m_pos++];
    const std::size_t end = m_text.find(quote, m_pos);
    if (end == std::string_view::npos) return false;
    out.assign(m_text.substr(m_pos, end - m_pos));
    if (out.find('\\') != std::string::npos) return false;  // no escapes in real headers
    m_pos = end + 1;
    return true;
  }
  bool integer(std::uint64_t& out) {
    const std::size_t start = m_pos;
    out = 0;
    while (m_pos < m_text.size() && m_text[m_pos] >= '0' && m_text[m_pos] <= '9') {
      if (!checked_mul(out, 10, out)) return false;
      const std::uint64_t digit = static_cast<std::uint64_t>(m_text[m_pos] - '0');
      if (out > UINT64_MAX - digit) return false;
      out += digit;
      ++m_pos;
    }
    if (m_pos == start) return false;
    eat('L');  // Python 2 long literals, found in old files
    return true;
  }
  bool tuple(std::vector<std::uint64_t>& out) {
    if (!eat('(')) return false;
    for (;;) {
      skip_space();
      if (eat(')')) return true;
      std::uint64_t v = 0;
      if (!integer(v)) return false;
      out.push_back(v);
      skip_space();
      if (eat(',')) continue;
      skip_space();
      return eat(')');
    }
  }

  std::string_view m_text;
  std::size_t m_pos = 0;
};

// Reads the next bytes of a .npy, wherever it lives (a file, a zip entry).
using ReadNextFn = std::function<Status(std::span<std::byte>)>;

// Reads and parses the header of a .npy of `available` bytes, and checks the array data fills
// the rest exactly.
Result<NpyHeader> read_npy_header(const ReadNextFn& read_next, std::uint64_t available,
                                  std::string_view label) {
  std::vector<std::byte> bytes(std::min<std::uint64_t>(available, kNpyPrefixBytes));
  KVLAB_TRY(read_next(bytes));
  auto total = npy_header_size(bytes, label);
  if (!total) return total.error();
  if (*total > available) {
    return make_error(fmt::format("{}: the .npy header says it is {} bytes but the file holds {}",
                                  label, *total, available));
  }
  if (*total > bytes.size()) {
    const std::size_t have = bytes.size();
    bytes.resize(*total);
    KVLAB_TRY(read_next(std::span(bytes).subspan(have)));
  }
  auto header = parse_npy_header(bytes, label);
  if (!header) return header;
  const std::uint64_t data = available - header->data_offset;
  if (data < header->data_bytes) {
    return make_error(fmt::format(
        "{}: truncated: shape {} of '{}' needs {} bytes of data but only {} follow the header",
        label, tuple_text(header->shape), header->descr, header->data_bytes, data));
  }
  if (data > header->data_bytes) {
    return make_error(fmt::format(
        "{}: {} bytes follow the array data (shape {} of '{}' takes {}); not a single array", label,
        data - header->data_bytes, tuple_text(header->shape), header->descr, header->data_bytes));
  }
  return header;
}

Result<NpyHeader> read_npy_file_header(const detail::InputFile& file) {
  std::uint64_t pos = 0;
  return read_npy_header(
      [&](std::span<std::byte> out) -> Status {
        KVLAB_TRY(file.read_at(pos, out));
        pos += out.size();
        return Ok{};
      },
      file.size(), file.label());
}

std::string dtype_text(const NpyHeader& h) {
  return h.dtype == DType::BF16 ? h.descr + " (bf16)" : h.descr;
}

detail::TensorDesc make_desc(std::string name, const NpyHeader& h) {
  return {std::move(name), h.dtype, dtype_text(h), h.shape};
}

}  // namespace

Result<std::uint64_t> npy_header_size(std::span<const std::byte> prefix, std::string_view label) {
  if (prefix.empty()) return make_error(fmt::format("{}: the file is empty", label));
  const std::size_t magic_len = std::min(prefix.size(), kMagic.size());
  if (std::memcmp(prefix.data(), kMagic.data(), magic_len) != 0) {
    return make_error(
        fmt::format("{}: not a .npy file (it does not start with \\x93NUMPY)", label));
  }
  if (prefix.size() < 8) {
    return make_error(fmt::format("{}: truncated .npy header ({} bytes)", label, prefix.size()));
  }
  const int major = std::to_integer<int>(prefix[6]), minor = std::to_integer<int>(prefix[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return make_error(
        fmt::format("{}: unsupported .npy format version {}.{} (1.0, 2.0 and 3.0 "
                    "are)",
                    label, major, minor));
  }
  const std::size_t len_size = major == 1 ? 2 : 4;
  if (prefix.size() < 8 + len_size) {
    return make_error(fmt::format("{}: truncated .npy header ({} bytes)", label, prefix.size()));
  }
  std::uint64_t len = 0;
  for (std::size_t i = 0; i < len_size; ++i) {
    len |= static_cast<std::uint64_t>(std::to_integer<unsigned>(prefix[8 + i])) << (8 * i);
  }
  if (len > kMaxNpyHeaderBytes) {
    return make_error(fmt::format("{}: .npy header length {} exceeds the limit of {} bytes", label,
                                  len, kMaxNpyHeaderBytes));
  }
  return 8 + len_size + len;
}

Result<NpyHeader> parse_npy_header(std::span<const std::byte> bytes, std::string_view label) {
  auto total = npy_header_size(bytes.first(std::min(bytes.size(), kNpyPrefixBytes)), label);
  if (!total) return total.error();
  if (bytes.size() < *total) {
    return make_error(fmt::format("{}: truncated .npy header: {} of its {} bytes present", label,
                                  bytes.size(), *total));
  }
  NpyHeader h;
  h.major_version = std::to_integer<int>(bytes[6]);
  h.minor_version = std::to_integer<int>(bytes[7]);
  h.data_offset = *total;
  const std::size_t text_begin = h.major_version == 1 ? 10 : 12;
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + text_begin,
                              static_cast<std::size_t>(*total) - text_begin);
  bool fortran = false;
  if (auto why = HeaderParser(text).parse(h, fortran)) {
    return make_error(fmt::format("{}: bad .npy header dictionary: {}", label, *why));
  }
  if (fortran) {
    return make_error(
        fmt::format("{}: fortran_order arrays are not supported; save a C-order array "
                    "(np.ascontiguousarray)",
                    label));
  }
  if (h.descr == "<f2") {
    h.dtype = DType::F16;
  } else if (h.descr == "<f4") {
    h.dtype = DType::F32;
  } else if (h.descr == "<u2") {
    h.dtype = DType::BF16;
  } else if (h.descr == ">f2" || h.descr == ">f4" || h.descr == ">u2") {
    return make_error(
        fmt::format("{}: big-endian data ('{}') is not supported; convert with arr.astype('<{}')",
                    label, h.descr, h.descr.substr(1)));
  } else {
    return make_error(fmt::format(
        "{}: dtype '{}' is not supported (expected '<f2' float16, '<f4' float32, or '<u2' "
        "holding bfloat16 bits)",
        label, h.descr));
  }
  std::uint64_t n = dtype_size(h.dtype);
  for (const std::uint64_t d : h.shape) {
    if (!checked_mul(n, d, n)) {
      return make_error(fmt::format("{}: shape {} overflows: its byte size does not fit in 64 bits",
                                    label, tuple_text(h.shape)));
    }
  }
  h.data_bytes = n;
  return h;
}

Result<KvCache> load_npy_cache(const std::filesystem::path& path, const ProgressFn& progress) {
  auto file = detail::InputFile::open(path);
  if (!file) return file.error();
  return detail::read_npy_cache(*file, path.stem().string(), "file:" + path.string(), progress);
}

Result<KvCache> detail::read_npy_cache(const InputFile& file, const std::string& model_name,
                                       std::string source, const ProgressFn& progress) {
  const std::string& label = file.label();
  auto header = read_npy_file_header(file);
  if (!header) return header.error();
  const auto& s = header->shape;
  if (s.size() != 5 || s[1] != 2) {
    return make_error(fmt::format(
        "{}: expected a 5-D array [layers, 2, tokens, kv_heads, head_dim] (keys, then values), "
        "got shape {}{}",
        label, tuple_text(s),
        s.size() == 3 ? " (one tensor: use a .npz or a directory of layers.{i}.key.npy files)"
                      : ""));
  }
  if (s[0] == 0 || s[0] > static_cast<std::uint64_t>(detail::kMaxLayers)) {
    return make_error(
        fmt::format("{}: {} layers is out of range (1 to {})", label, s[0], detail::kMaxLayers));
  }
  const std::uint64_t tensor_bytes = header->data_bytes / (s[0] * 2);
  std::vector<detail::TensorDesc> descs;
  std::vector<std::uint64_t> offsets;
  for (std::uint64_t l = 0; l < s[0]; ++l) {
    for (const char* role : {"key", "value"}) {
      descs.push_back({fmt::format("layers.{}.{}", l, role),
                       header->dtype,
                       dtype_text(*header),
                       {s[2], s[3], s[4]}});
      offsets.push_back(header->data_offset + offsets.size() * tensor_bytes);
    }
  }
  auto layout = detail::plan_kv_layout(label, descs, {}, model_name);
  if (!layout) return layout.error();
  const detail::MappedTensors mapped{file.map(), [&](std::size_t i) { return offsets[i]; }};
  return detail::build_kv_cache(
      label, *layout, descs,
      [&](std::size_t i, std::span<std::byte> out) { return file.read_at(offsets[i], out); },
      progress, std::move(source), mapped);
}

Result<KvCache> load_npz_cache(const std::filesystem::path& path, const ProgressFn& progress) {
  auto file = detail::InputFile::open(path);
  if (!file) return file.error();
  return detail::read_npz_cache(*file, path.stem().string(), "file:" + path.string(), progress);
}

Result<KvCache> detail::read_npz_cache(const InputFile& file, const std::string& model_name,
                                       std::string source, const ProgressFn& progress) {
  const std::string& label = file.label();
  auto entries = detail::read_zip_directory(file);
  if (!entries) return entries.error();

  std::vector<detail::TensorDesc> descs;
  std::vector<const detail::ZipEntry*> sources;
  std::vector<std::uint64_t> header_sizes;
  for (const auto& entry : *entries) {
    if (!entry.name.ends_with(".npy")) continue;
    std::string name = entry.name.substr(0, entry.name.size() - 4);
    if (!detail::is_kv_candidate(name)) continue;
    auto reader = detail::ZipEntryReader::open(file, entry);
    if (!reader) return reader.error();
    const std::string where = fmt::format("{}: entry '{}'", label, entry.name);
    auto header = read_npy_header([&](std::span<std::byte> out) { return reader->read(out); },
                                  entry.uncompressed_size, where);
    if (!header) return header.error();
    descs.push_back(make_desc(std::move(name), *header));
    sources.push_back(&entry);
    header_sizes.push_back(header->data_offset);
  }
  auto layout = detail::plan_kv_layout(label, descs, {}, model_name);
  if (!layout) return layout.error();
  const auto read = [&](std::size_t i, std::span<std::byte> out) -> Status {
    auto reader = detail::ZipEntryReader::open(file, *sources[i]);
    if (!reader) return reader.error();
    std::vector<std::byte> header(header_sizes[i]);
    KVLAB_TRY(reader->read(header));
    KVLAB_TRY(reader->read(out));
    return reader->finish();
  };
  return detail::build_kv_cache(label, *layout, descs, read, progress, std::move(source));
}

Result<KvCache> load_npy_directory_cache(const std::filesystem::path& dir,
                                         const ProgressFn& progress) {
  const std::string label = dir.string();
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.ends_with(".npy") && detail::is_kv_candidate(name)) files.push_back(it->path());
  }
  if (ec) return make_error(fmt::format("{}: cannot list the directory: {}", label, ec.message()));
  std::sort(files.begin(), files.end());

  std::vector<detail::TensorDesc> descs;
  std::vector<std::uint64_t> data_offsets, sizes;
  for (const auto& p : files) {
    auto file = detail::InputFile::open(p);
    if (!file) return file.error();
    auto header = read_npy_file_header(*file);
    if (!header) return header.error();
    const std::string name = p.filename().string();
    descs.push_back(make_desc(name.substr(0, name.size() - 4), *header));
    data_offsets.push_back(header->data_offset);
    sizes.push_back(file->size());
  }
  // "caches/run1/" has no filename; its model name is still "run1".
  const std::filesystem::path named = dir.has_filename() ? dir : dir.parent_path();
  auto layout = detail::plan_kv_layout(label, descs, {}, named.filename().string());
  if (!layout) return layout.error();
  const auto read = [&](std::size_t i, std::span<std::byte> out) -> Status {
    auto file = detail::InputFile::open(files[i]);
    if (!file) return file.error();
    if (file->size() != sizes[i]) {
      return make_error(fmt::format("{}: the file changed size while loading", file->label()));
    }
    return file->read_at(data_offsets[i], out);
  };
  return detail::build_kv_cache(label, *layout, descs, read, progress, "file:" + label);
}

}  // namespace kvlab
