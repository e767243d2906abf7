// llama.cpp's saved KV state as a KV source: the sequence-state files of
// llama_state_seq_save_file, which llama-server's slot save (POST /slots/ID?action=save, with
// --slot-save-path) also writes. The layout, from ggml-org/llama.cpp src/llama-context.cpp
// (llama_context::state_seq_save_file) and src/llama-kv-cache.cpp (llama_kv_cache::state_write,
// state_write_meta, state_write_data), little-endian, no padding:
//
//   u32 magic 'ggsq' (LLAMA_FILE_MAGIC_GGSQ 0x67677371), u32 version (LLAMA_STATE_SEQ_VERSION)
//   u32 n_token_count, i32 tokens[n_token_count]             the prompt the sequence holds
//   u32 n_stream                                             llama_kv_cache::state_write
//   per stream: u32 cell_count; when it is not 0:
//     per cell: i32 pos, u32 n_seq_id, i32 seq_id[n_seq_id]  state_write_meta
//     u32 v_trans, u32 n_layer                               state_write_data
//     per layer: i32 k_type (ggml_type), u64 k_row_bytes, k_row_bytes x cell_count bytes
//     v_trans == 0, per layer: i32 v_type, u64 v_row_bytes, v_row_bytes x cell_count bytes
//     v_trans == 1, per layer: i32 v_type, u32 v_element_bytes, u32 n_embd_v_gqa, then for each
//                              of the n_embd_v_gqa channels cell_count elements
//
// A K row of a cell is the n_embd_k_gqa = kv_heads x head_dim values of that token, head after
// head, in the cache's ggml type (f32, f16, bf16 or a block type: q8_0, q4_0, q4_1, q5_0, q5_1,
// iq4_nl, ...). V is transposed (one row per channel) when llama.cpp ran without flash attention.
//
// What the file does not say, and where kvlab gets it:
//  - the KV heads and head_dim (only their product n_embd_k_gqa is there): from the GGUF model
//    that wrote the file (LlamaStateOptions::model), or given as numbers; when neither is known
//    the error says so;
//  - llama.cpp's Hadamard rotation (attn_rot_k / attn_rot_v, llama-kv-cache.cpp): llama.cpp
//    rotates K (and Q) and V with a Walsh-Hadamard matrix before storing them whenever the cache
//    type is quantized and head_dim % 64 == 0, unless LLAMA_ATTN_ROT_DISABLE was set when it ran.
//    The file records neither the rotation nor the variable, so kvlab applies llama.cpp's rule
//    (LlamaStateRotation::Auto) and undoes the rotation, so that keys and values come back in the
//    model's frame (keys after RoPE); On / Off override it for files written with the variable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/ggml_types.h"

namespace kvlab {

inline constexpr std::uint32_t kLlamaStateSeqMagic = 0x67677371u;  // 'ggsq'
inline constexpr std::uint32_t kLlamaSessionMagic = 0x6767736eu;   // 'ggsn' (whole context)
// The sequence-state versions whose KV layout is the one above (2: n_stream added, mid-2025;
// 3: llama.cpp 2026, llama-cpp-python 0.3.36).
inline constexpr std::uint32_t kLlamaStateSeqMinVersion = 2;
inline constexpr std::uint32_t kLlamaStateSeqMaxVersion = 3;

// How kvlab treats llama.cpp's Hadamard rotation of a quantized cache.
enum class LlamaStateRotation {
  Auto,  // llama.cpp's default rule: rotated when the type is quantized and head_dim % 64 == 0
  On,    // rotated wherever llama.cpp's rule allows a rotation (head_dim % 64 == 0)
  Off,   // never rotated (the file was written with LLAMA_ATTN_ROT_DISABLE=1)
};
std::string_view llama_state_rotation_name(LlamaStateRotation r);  // "auto", "on", "off"
Result<LlamaStateRotation> parse_llama_state_rotation(std::string_view text);

// The part of a layer's record before its data.
struct LlamaStateLayer {
  GgmlType k_type{};
  std::uint64_t k_row_bytes = 0;
  int k_embd = 0;  // n_embd_k_gqa: values per K row
  GgmlType v_type{};
  std::uint64_t v_row_bytes = 0;  // bytes of one token's V (v_trans: element bytes x v_embd)
  int v_embd = 0;                 // n_embd_v_gqa
  std::uint64_t k_offset = 0, v_offset = 0;  // where the data start in the file
};

// Everything the file says, without decoding the data.
struct LlamaStateLayout {
  std::uint32_t version = 0;
  std::uint64_t file_bytes = 0;
  std::vector<std::int32_t> tokens;     // the token list saved with the state
  std::uint32_t streams = 0;            // n_stream
  std::uint32_t stream = 0;             // the stream that holds the cells
  std::uint32_t cells = 0;              // cell_count: the tokens of the KV cache
  std::vector<std::int32_t> positions;  // per cell
  bool v_transposed = false;
  std::vector<LlamaStateLayer> layers;
};

// Reads and checks the layout: magic, version, counts, types and row sizes, and that every byte
// of data is there and nothing follows. Errors name the file and the problem.
Result<LlamaStateLayout> read_llama_state_layout(const std::filesystem::path& path);
Result<LlamaStateLayout> read_llama_state_layout_bytes(std::span<const std::byte> bytes,
                                                       std::string_view name);

struct LlamaStateOptions {
  // A GGUF model (the one that wrote the file): its KV heads, head_dim, query heads and name.
  std::filesystem::path model;
  // Or the numbers themselves (0: unknown). Given with a model, they must agree with it; one of
  // the two is enough when the other follows from the row size.
  int kv_heads = 0;
  int head_dim = 0;
  LlamaStateRotation rotation = LlamaStateRotation::Auto;
};

// Whether llama.cpp's rotation is undone for a cache of this type and head_dim.
bool llama_state_rotated(LlamaStateRotation rotation, GgmlType type, int head_dim);

// The shape of the cache in the file: the layout's row sizes with the heads from `options`.
// The error says what is missing or inconsistent.
Result<ModelShape> llama_state_shape(const LlamaStateLayout& layout,
                                     const LlamaStateOptions& options, std::string_view name);

// Reads the cache: keys and values [cells, kv_heads, head_dim] per layer in the model's frame
// (rotation undone; f16/bf16/f32 caches keep their type, block types become f32), the saved
// tokens as token_ids when there is one per cell. The source is "file:" + path.
Result<KvCache> load_llama_state(const std::filesystem::path& path,
                                 const LlamaStateOptions& options, const ProgressFn& progress = {});
// The same from bytes in memory; `name` stands for the file in messages, the source is
// "memory:" + name.
Result<KvCache> load_llama_state_bytes(std::span<const std::byte> bytes, std::string_view name,
                                       const LlamaStateOptions& options,
                                       const ProgressFn& progress = {});

// True when the file starts with the sequence-state magic.
bool is_llama_state_file(const std::filesystem::path& path);

}  // namespace kvlab
