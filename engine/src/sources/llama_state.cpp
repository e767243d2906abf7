// llama.cpp sequence-state files (llama_state_seq_save_file, llama-server slot saves) as a KV
// source. The layout and where it comes from are in llama_state.h. The reader is written from
// that description (ggml-org/llama.cpp src/llama-kv-cache.cpp state_write / state_write_meta /
// state_write_data, src/llama-context.cpp state_seq_save_file) and checked against files written
// by llama-cpp-python 0.3.36 (tests/python/llama_state_reference.py).
#include "kvlab/engine/sources/llama_state.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "io/file_io.h"
#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/engine/quant/rotation.h"
#include "sources/cache_readers.h"

namespace kvlab {

namespace {

using detail::InputFile;

// Bounds on counts, far above anything llama.cpp writes, so that a corrupt count is an error
// before it becomes an allocation: LLAMA_MAX_SEQ is 256; contexts stay below 2^24 tokens.
constexpr std::uint32_t kMaxStreams = 256;
constexpr std::uint32_t kMaxSeqIdsPerCell = 256;
constexpr std::uint32_t kMaxLayers = 4096;
constexpr std::uint32_t kMaxTokens = 1u << 24;
constexpr int kMaxEmbd = 1 << 20;

// A cursor over the file: each read names what it expected, so a short file says where it ends.
class Cursor {
 public:
  explicit Cursor(const InputFile& file) : m_file(file) {}
  std::uint64_t offset() const { return m_offset; }
  std::uint64_t left() const { return m_file.size() - m_offset; }

  template <typename T>
  Result<T> read(std::string_view what) {
    std::array<std::byte, sizeof(T)> b{};
    if (left() < sizeof(T)) return truncated(what);
    KVLAB_TRY(m_file.read_at(m_offset, b));
    m_offset += sizeof(T);
    T v;
    std::memcpy(&v, b.data(), sizeof(T));  // little-endian hosts only, as llama.cpp writes
    return v;
  }
  // Skips `bytes` of data, which must all be in the file.
  Status skip(std::uint64_t bytes, std::string_view what) {
    if (left() < bytes) return truncated(what);
    m_offset += bytes;
    return Ok{};
  }
  Error truncated(std::string_view what) const {
    return make_error(fmt::format("{}: truncated at byte {} of {}: {} is missing", m_file.label(),
                                  m_offset, m_file.size(), what));
  }

 private:
  const InputFile& m_file;
  std::uint64_t m_offset = 0;
};

// The ggml type with id `id`, known to kvlab and dequantizable; `what` is "K" or "V".
Result<GgmlType> cache_type(const InputFile& file, std::int32_t id, std::string_view what,
                            std::uint32_t layer) {
  const GgmlTypeInfo* info = id >= 0 ? ggml_type_info(static_cast<std::uint32_t>(id)) : nullptr;
  if (info == nullptr) {
    return make_error(
        fmt::format("{}: layer {}: unknown {} type id {}", file.label(), layer, what, id));
  }
  if (!info->dequantizable) {
    return make_error(fmt::format("{}: layer {}: {} type {} cannot be read by kvlab", file.label(),
                                  layer, what, info->name));
  }
  return static_cast<GgmlType>(id);
}

// The values of a row of `row_bytes` bytes of `type`, when that is a whole number of blocks.
Result<int> row_values(const InputFile& file, GgmlType type, std::uint64_t row_bytes,
                       std::string_view what, std::uint32_t layer) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  const auto ts = static_cast<std::uint64_t>(info->type_size);
  if (row_bytes == 0 || row_bytes % ts != 0 ||
      row_bytes / ts * static_cast<std::uint64_t>(info->block_size) >
          static_cast<std::uint64_t>(kMaxEmbd)) {
    return make_error(fmt::format(
        "{}: layer {}: {} row size {} bytes is not a whole number of {} blocks ({} bytes each) "
        "of at most {} values",
        file.label(), layer, what, row_bytes, info->name, ts, kMaxEmbd));
  }
  return static_cast<int>(row_bytes / ts) * info->block_size;
}

Result<LlamaStateLayout> parse_layout(const InputFile& file) {
  Cursor c(file);
  LlamaStateLayout l;
  l.file_bytes = file.size();
  auto magic_read = c.read<std::uint32_t>("the magic");
  if (!magic_read) return magic_read.error();
  auto& magic = *magic_read;
  if (magic == kLlamaSessionMagic) {
    return make_error(fmt::format(
        "{}: a llama.cpp whole-context session file (magic 'ggsn', llama_state_save_file), not a "
        "sequence state; save one sequence with llama_state_seq_save_file or llama-server's "
        "slot save",
        file.label()));
  }
  if (magic != kLlamaStateSeqMagic) {
    return make_error(fmt::format(
        "{}: not a llama.cpp sequence-state file (magic {:#010x}, expected 'ggsq' {:#010x})",
        file.label(), magic, kLlamaStateSeqMagic));
  }
  auto version_read = c.read<std::uint32_t>("the version");
  if (!version_read) return version_read.error();
  auto& version = *version_read;
  if (version < kLlamaStateSeqMinVersion || version > kLlamaStateSeqMaxVersion) {
    return make_error(
        fmt::format("{}: llama.cpp sequence-state version {}; kvlab reads versions {} to {}",
                    file.label(), version, kLlamaStateSeqMinVersion, kLlamaStateSeqMaxVersion));
  }
  l.version = version;
  auto n_tokens_read = c.read<std::uint32_t>("the token count");
  if (!n_tokens_read) return n_tokens_read.error();
  auto& n_tokens = *n_tokens_read;
  if (n_tokens > kMaxTokens || std::uint64_t{n_tokens} * 4 > c.left()) {
    return make_error(fmt::format("{}: token count {} does not fit in the file ({} bytes left)",
                                  file.label(), n_tokens, c.left()));
  }
  l.tokens.resize(n_tokens);
  for (auto& t : l.tokens) {
    auto v_read = c.read<std::int32_t>("a token");
    if (!v_read) return v_read.error();
    auto& v = *v_read;
    t = v;
  }
  if (c.left() == 0) {
    return make_error(fmt::format(
        "{}: the file ends after the tokens: the context had no KV cache (a model without one, "
        "or an empty sequence)",
        file.label()));
  }
  auto streams_read = c.read<std::uint32_t>("the stream count");
  if (!streams_read) return streams_read.error();
  auto& streams = *streams_read;
  if (streams == 0 || streams > kMaxStreams) {
    return make_error(
        fmt::format("{}: stream count {} (expected 1 to {})", file.label(), streams, kMaxStreams));
  }
  l.streams = streams;
  bool found = false;
  for (std::uint32_t s = 0; s < streams; ++s) {
    auto cells_read = c.read<std::uint32_t>(fmt::format("the cell count of stream {}", s));
    if (!cells_read) return cells_read.error();
    auto& cells = *cells_read;
    if (cells == 0) continue;
    if (found) {
      return make_error(
          fmt::format("{}: streams {} and {} both hold cells; kvlab reads one sequence (a file of "
                      "llama_state_seq_save_file)",
                      file.label(), l.stream, s));
    }
    found = true;
    l.stream = s;
    // Every cell takes at least 8 bytes of metadata: a count past that is corrupt.
    if (cells > kMaxTokens || std::uint64_t{cells} * 8 > c.left()) {
      return make_error(fmt::format("{}: cell count {} does not fit in the file ({} bytes left)",
                                    file.label(), cells, c.left()));
    }
    l.cells = cells;
    l.positions.resize(cells);
    for (std::uint32_t i = 0; i < cells; ++i) {
      auto pos_read = c.read<std::int32_t>(fmt::format("the position of cell {}", i));
      if (!pos_read) return pos_read.error();
      auto& pos = *pos_read;
      auto n_seq_read = c.read<std::uint32_t>(fmt::format("the seq count of cell {}", i));
      if (!n_seq_read) return n_seq_read.error();
      auto& n_seq = *n_seq_read;
      if (n_seq > kMaxSeqIdsPerCell) {
        return make_error(fmt::format("{}: cell {} belongs to {} sequences (at most {})",
                                      file.label(), i, n_seq, kMaxSeqIdsPerCell));
      }
      KVLAB_TRY(c.skip(std::uint64_t{n_seq} * 4, fmt::format("the sequence ids of cell {}", i)));
      if (pos < 0) {
        return make_error(
            fmt::format("{}: cell {} has the negative position {}", file.label(), i, pos));
      }
      l.positions[i] = pos;
    }
    auto v_trans_read = c.read<std::uint32_t>("the V layout flag (v_trans)");
    if (!v_trans_read) return v_trans_read.error();
    auto& v_trans = *v_trans_read;
    if (v_trans > 1) {
      return make_error(
          fmt::format("{}: V layout flag (v_trans) is {}, expected 0 or 1", file.label(), v_trans));
    }
    l.v_transposed = v_trans == 1;
    auto n_layer_read = c.read<std::uint32_t>("the layer count");
    if (!n_layer_read) return n_layer_read.error();
    auto& n_layer = *n_layer_read;
    if (n_layer == 0 || n_layer > kMaxLayers) {
      return make_error(
          fmt::format("{}: layer count {} (expected 1 to {})", file.label(), n_layer, kMaxLayers));
    }
    l.layers.resize(n_layer);
    for (std::uint32_t il = 0; il < n_layer; ++il) {
      LlamaStateLayer& layer = l.layers[il];
      auto type_id_read = c.read<std::int32_t>(fmt::format("the K type of layer {}", il));
      if (!type_id_read) return type_id_read.error();
      auto& type_id = *type_id_read;
      auto type_read = cache_type(file, type_id, "K", il);
      if (!type_read) return type_read.error();
      auto& type = *type_read;
      auto row_read = c.read<std::uint64_t>(fmt::format("the K row size of layer {}", il));
      if (!row_read) return row_read.error();
      auto& row = *row_read;
      auto embd_read = row_values(file, type, row, "K", il);
      if (!embd_read) return embd_read.error();
      auto& embd = *embd_read;
      layer.k_type = type;
      layer.k_row_bytes = row;
      layer.k_embd = embd;
      layer.k_offset = c.offset();
      std::uint64_t bytes = 0;
      if (!detail::checked_mul(row, cells, bytes)) bytes = std::numeric_limits<uint64_t>::max();
      KVLAB_TRY(
          c.skip(bytes, fmt::format("K data of layer {} ({} cells x {} bytes)", il, cells, row)));
    }
    for (std::uint32_t il = 0; il < n_layer; ++il) {
      LlamaStateLayer& layer = l.layers[il];
      auto type_id_read = c.read<std::int32_t>(fmt::format("the V type of layer {}", il));
      if (!type_id_read) return type_id_read.error();
      auto& type_id = *type_id_read;
      auto type_read = cache_type(file, type_id, "V", il);
      if (!type_read) return type_read.error();
      auto& type = *type_read;
      layer.v_type = type;
      if (!l.v_transposed) {
        auto row_read = c.read<std::uint64_t>(fmt::format("the V row size of layer {}", il));
        if (!row_read) return row_read.error();
        auto& row = *row_read;
        auto embd_read = row_values(file, type, row, "V", il);
        if (!embd_read) return embd_read.error();
        auto& embd = *embd_read;
        layer.v_row_bytes = row;
        layer.v_embd = embd;
      } else {
        auto el_read = c.read<std::uint32_t>(fmt::format("the V element size of layer {}", il));
        if (!el_read) return el_read.error();
        auto& el = *el_read;
        auto embd_read = c.read<std::uint32_t>(fmt::format("the V width of layer {}", il));
        if (!embd_read) return embd_read.error();
        auto& embd = *embd_read;
        const GgmlTypeInfo* info = ggml_type_info(type);
        if (info->block_size != 1) {
          return make_error(fmt::format(
              "{}: layer {}: transposed V of the block type {} (llama.cpp stores a quantized V "
              "only with flash attention, untransposed)",
              file.label(), il, info->name));
        }
        if (el != static_cast<std::uint32_t>(info->type_size)) {
          return make_error(
              fmt::format("{}: layer {}: V element size {} bytes does not match its type {} ({})",
                          file.label(), il, el, info->name, info->type_size));
        }
        if (embd == 0 || embd > static_cast<std::uint32_t>(kMaxEmbd)) {
          return make_error(fmt::format("{}: layer {}: V width {} (expected 1 to {})", file.label(),
                                        il, embd, kMaxEmbd));
        }
        layer.v_row_bytes = std::uint64_t{el} * embd;
        layer.v_embd = static_cast<int>(embd);
      }
      layer.v_offset = c.offset();
      std::uint64_t bytes = 0;
      if (!detail::checked_mul(layer.v_row_bytes, cells, bytes)) {
        bytes = std::numeric_limits<uint64_t>::max();
      }
      KVLAB_TRY(c.skip(bytes, fmt::format("V data of layer {} ({} cells x {} bytes)", il, cells,
                                          layer.v_row_bytes)));
    }
  }
  if (!found) {
    return make_error(
        fmt::format("{}: the sequence holds no KV cells (every stream is empty)", file.label()));
  }
  if (c.left() != 0) {
    return make_error(fmt::format(
        "{}: {} bytes follow the KV cache at byte {}: the file holds more than one cache (a "
        "sliding-window or hybrid model), which kvlab does not read",
        file.label(), c.left(), c.offset()));
  }
  const LlamaStateLayer& first = l.layers.front();
  for (std::size_t il = 1; il < l.layers.size(); ++il) {
    const LlamaStateLayer& layer = l.layers[il];
    if (layer.k_embd != first.k_embd || layer.v_embd != first.v_embd) {
      return make_error(fmt::format(
          "{}: layer {} holds {} K and {} V values per token, layer 0 {} and {}: kvlab needs "
          "the same shape in every layer",
          file.label(), il, layer.k_embd, layer.v_embd, first.k_embd, first.v_embd));
    }
  }
  return l;
}

// Decodes `rows` rows of `n` values of `type` from `bytes` into floats.
void dequantize_rows(GgmlType type, std::span<const std::uint8_t> bytes, std::uint64_t row_bytes,
                     int n, std::span<float> out) {
  const std::size_t rows = out.size() / static_cast<std::size_t>(n);
  for (std::size_t r = 0; r < rows; ++r) {
    ggml_dequantize(type, bytes.data() + r * row_bytes, out.data() + r * n, n);
  }
}

// The tensor's type: the cache's own for f16/bf16/f32 when no rotation is undone, else f32.
DType tensor_type(GgmlType type, bool rotated) {
  if (rotated) return DType::F32;
  if (type == GgmlType::F16) return DType::F16;
  if (type == GgmlType::BF16) return DType::BF16;
  return DType::F32;
}

// How the model that wrote the file turned its keys, at the cells' positions; disabled without
// the model or when its GGUF does not give a llama config.
RopeSpec key_rope_of(const LlamaStateOptions& options, const LlamaStateLayout& layout) {
  if (options.model.empty() || layout.layers.empty()) return {};
  auto gguf = GgufFile::open(options.model);
  if (!gguf) return {};
  auto config = gguf_llama_config(*gguf);
  if (!config) return {};
  RopeSpec rope = model_rope_spec(*config);
  const std::vector<std::int32_t>& pos = layout.positions;
  bool contiguous = true;
  for (std::size_t i = 1; i < pos.size() && contiguous; ++i)
    contiguous = std::int64_t{pos[i]} == std::int64_t{pos[0]} + static_cast<std::int64_t>(i);
  if (contiguous && !pos.empty()) {
    rope.first_position = pos.front();
  } else {
    rope.positions = pos;
  }
  return rope;
}

Result<KvCache> read_cache(const InputFile& file, const LlamaStateOptions& options,
                           std::string source, const ProgressFn& progress) {
  auto layout_read = parse_layout(file);
  if (!layout_read) return layout_read.error();
  auto& layout = *layout_read;
  auto shape_read = llama_state_shape(layout, options, file.label());
  if (!shape_read) return shape_read.error();
  auto& shape = *shape_read;
  const int cells = static_cast<int>(layout.cells);
  const int heads = shape.kv_heads, dim = shape.head_dim;
  const auto n_embd = static_cast<std::size_t>(heads) * dim;
  KvCache cache;
  cache.shape = shape;
  cache.source = std::move(source);
  if (layout.tokens.size() == layout.cells) cache.token_ids = layout.tokens;
  cache.key_rope = key_rope_of(options, layout);
  std::vector<std::uint8_t> raw;
  std::vector<float> values(static_cast<std::size_t>(cells) * n_embd);
  std::vector<float> column(static_cast<std::size_t>(cells));
  for (std::size_t il = 0; il < layout.layers.size(); ++il) {
    const LlamaStateLayer& layer = layout.layers[il];
    LayerKv kv;
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const bool is_key = role == TensorRole::Key;
      const GgmlType type = is_key ? layer.k_type : layer.v_type;
      const std::uint64_t row_bytes = is_key ? layer.k_row_bytes : layer.v_row_bytes;
      raw.resize(row_bytes * layout.cells);
      KVLAB_TRY(file.read_at(is_key ? layer.k_offset : layer.v_offset,
                             std::as_writable_bytes(std::span(raw))));
      if (is_key || !layout.v_transposed) {
        dequantize_rows(type, raw, row_bytes, static_cast<int>(n_embd), values);
      } else {
        // One row per channel j holding that channel of every cell: transpose back.
        const auto el = static_cast<std::uint64_t>(ggml_type_info(type)->type_size);
        for (std::size_t j = 0; j < n_embd; ++j) {
          ggml_dequantize(type, raw.data() + j * layout.cells * el, column.data(), cells);
          for (int t = 0; t < cells; ++t) values[t * n_embd + j] = column[t];
        }
      }
      const bool rotated = llama_state_rotated(options.rotation, type, dim);
      if (rotated) {
        for (std::size_t row = 0; row < values.size() / dim; ++row) {
          llama_attn_rotate(std::span(values).subspan(row * dim, dim), role, /*inverse=*/true);
        }
      }
      Tensor t = Tensor::from_float(values, tensor_type(type, rotated), cells, heads, dim);
      (is_key ? kv.key : kv.value) = std::move(t);
    }
    cache.layers.push_back(std::move(kv));
    if (!report_progress(progress, static_cast<double>(il + 1) / layout.layers.size(),
                         fmt::format("layer {} of {}", il + 1, layout.layers.size()))) {
      return make_error(std::string(kCancelledMessage));
    }
  }
  KVLAB_TRY(cache.validate());
  return cache;
}

}  // namespace

std::string_view llama_state_rotation_name(LlamaStateRotation r) {
  switch (r) {
    case LlamaStateRotation::Auto:
      return "auto";
    case LlamaStateRotation::On:
      return "on";
    case LlamaStateRotation::Off:
      return "off";
  }
  return "?";
}

Result<LlamaStateRotation> parse_llama_state_rotation(std::string_view text) {
  for (const auto r : {LlamaStateRotation::Auto, LlamaStateRotation::On, LlamaStateRotation::Off}) {
    if (text == llama_state_rotation_name(r)) return r;
  }
  return make_error(fmt::format("'{}': expected auto, on or off", text));
}

bool llama_state_rotated(LlamaStateRotation rotation, GgmlType type, int head_dim) {
  switch (rotation) {
    case LlamaStateRotation::Auto:
      return llama_attn_rot_enabled(type, head_dim);
    case LlamaStateRotation::On:
      return head_dim > 0 && head_dim % 64 == 0;
    case LlamaStateRotation::Off:
      return false;
  }
  return false;
}

Result<ModelShape> llama_state_shape(const LlamaStateLayout& layout,
                                     const LlamaStateOptions& options, std::string_view name) {
  if (layout.layers.empty()) return make_error(fmt::format("{}: no layers", name));
  const int k_embd = layout.layers.front().k_embd;
  const int v_embd = layout.layers.front().v_embd;
  ModelShape s;
  s.layers = static_cast<int>(layout.layers.size());
  int kv_heads = options.kv_heads, head_dim = options.head_dim;
  if (kv_heads < 0 || head_dim < 0) {
    return make_error(fmt::format("{}: KV heads {} and head_dim {} must not be negative", name,
                                  kv_heads, head_dim));
  }
  if (!options.model.empty()) {
    const std::string model = options.model.string();
    if (!is_gguf_file(options.model)) {
      return make_error(fmt::format(
          "{}: the model {} is not a GGUF file (the llama.cpp model that wrote the state)", name,
          model));
    }
    auto gguf_read = GgufFile::open(options.model);
    if (!gguf_read) return gguf_read.error();
    auto& gguf = *gguf_read;
    const GgufSummary m = summarize_gguf(gguf);
    if (m.kv_heads <= 0 || m.head_dim <= 0) {
      return make_error(
          fmt::format("{}: the model {} does not give its KV heads and head_dim", name, model));
    }
    if ((kv_heads != 0 && kv_heads != m.kv_heads) || (head_dim != 0 && head_dim != m.head_dim)) {
      return make_error(
          fmt::format("{}: KV heads {} and head_dim {} given, but the model {} has {} and {}", name,
                      kv_heads, head_dim, model, m.kv_heads, m.head_dim));
    }
    if (m.layers > 0 && s.layers > m.layers) {
      return make_error(fmt::format(
          "{}: the file has {} layers, the model {} only {}: not the model that wrote it", name,
          s.layers, model, m.layers));
    }
    kv_heads = m.kv_heads;
    head_dim = m.head_dim;
    s.name = m.name.empty() ? options.model.stem().string() : m.name;
    s.q_heads = m.heads;
  }
  if (kv_heads == 0 && head_dim > 0) {
    if (k_embd % head_dim != 0) {
      return make_error(fmt::format(
          "{}: head_dim {} does not divide the {} values the file stores per token and layer", name,
          head_dim, k_embd));
    }
    kv_heads = k_embd / head_dim;
  }
  if (head_dim == 0 && kv_heads > 0) {
    if (k_embd % kv_heads != 0) {
      return make_error(fmt::format(
          "{}: {} KV heads do not divide the {} values the file stores per token and layer", name,
          kv_heads, k_embd));
    }
    head_dim = k_embd / kv_heads;
  }
  if (kv_heads == 0 || head_dim == 0) {
    return make_error(fmt::format(
        "{}: a llama.cpp state file stores {} values per token and layer but not how they "
        "split into KV heads x head_dim; give the GGUF model that wrote it (--model "
        "MODEL.gguf) or --kv-heads / --head-dim",
        name, k_embd));
  }
  if (static_cast<std::int64_t>(kv_heads) * head_dim != k_embd) {
    return make_error(fmt::format(
        "{}: {} KV heads x head_dim {} = {} values, but the file's K rows hold {}{}", name,
        kv_heads, head_dim, static_cast<std::int64_t>(kv_heads) * head_dim, k_embd,
        options.model.empty()
            ? ""
            : fmt::format(" (is {} the model that wrote it?)", options.model.string())));
  }
  if (v_embd != k_embd) {
    return make_error(fmt::format(
        "{}: K rows hold {} values and V rows {}; kvlab needs keys and values of one head size",
        name, k_embd, v_embd));
  }
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  if (s.q_heads <= 0 || s.q_heads % kv_heads != 0) s.q_heads = kv_heads;
  if (s.name.empty()) s.name = "llama.cpp state";
  KVLAB_TRY(s.validate());
  return s;
}

Result<LlamaStateLayout> read_llama_state_layout(const std::filesystem::path& path) {
  auto file_read = InputFile::open(path);
  if (!file_read) return file_read.error();
  auto& file = *file_read;
  return parse_layout(file);
}

Result<LlamaStateLayout> read_llama_state_layout_bytes(std::span<const std::byte> bytes,
                                                       std::string_view name) {
  const auto file = InputFile::from_memory(bytes, std::string(name));
  return parse_layout(file);
}

Result<KvCache> load_llama_state(const std::filesystem::path& path,
                                 const LlamaStateOptions& options, const ProgressFn& progress) {
  auto file_read = InputFile::open(path);
  if (!file_read) return file_read.error();
  auto& file = *file_read;
  return read_cache(file, options, "file:" + path.string(), progress);
}

Result<KvCache> load_llama_state_bytes(std::span<const std::byte> bytes, std::string_view name,
                                       const LlamaStateOptions& options,
                                       const ProgressFn& progress) {
  const auto file = InputFile::from_memory(bytes, std::string(name));
  return read_cache(file, options, "memory:" + std::string(name), progress);
}

bool is_llama_state_file(const std::filesystem::path& path) {
  auto file = InputFile::open(path);
  if (!file || file->size() < 4) return false;
  std::array<std::byte, 4> b{};
  if (!file->read_at(0, b)) return false;
  std::uint32_t magic = 0;
  std::memcpy(&magic, b.data(), 4);
  return magic == kLlamaStateSeqMagic || magic == kLlamaSessionMagic;
}

}  // namespace kvlab
