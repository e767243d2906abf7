// Writes the seeds of the formats whose writer is kvlab's own or which no Python package writes
// (make_corpus.py writes the rest with gguf-py and NumPy):
//  - code_codec/: real encode_codes() outputs (codec_fuzz_input.h) of every codec, single-code
//    and pair books (Huffman and rANS), escapes, odd dims, token counts 0, 1, block - 1, block,
//    block + 1;
//  - safetensors/: caches saved by save_cache_file() in f16, bf16 and f32, with queries, token
//    ids, and a capture's RoPE metadata;
//  - llama_state/: llama.cpp sequence-state files laid out byte for byte as llama_state.h says
//    (f16, f32, transposed V, q8_0 / q4_0 rows from ggml_quantize, version 2 and 3).
//
//   kvlab_fuzz_make_corpus tests/fuzz/corpus
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "codec_fuzz_input.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/sources/cache_file.h"

using namespace kvlab;
namespace fs = std::filesystem;

namespace {

using Bytes = std::vector<std::uint8_t>;

// Deterministic values without <random>'s distributions, whose output differs between
// standard libraries: the same seed gives the same files everywhere.
struct Lcg {
  std::uint32_t state;
  std::uint32_t next() { return state = state * 1664525u + 1013904223u; }
  float value() { return static_cast<float>(static_cast<int>(next() >> 16) - 32768) / 8192.0f; }
};

bool write_file(const fs::path& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  std::printf("%s: %zu bytes\n", path.c_str(), bytes.size());
  return out.good();
}

// Skewed codes in 0..top: mostly near the middle, a few at the top (escapes when the book was
// built without them).
std::vector<std::uint8_t> codes(std::size_t n, int top, std::uint32_t seed) {
  Lcg rng{seed};
  std::vector<std::uint8_t> out(n);
  for (auto& c : out) {
    const std::uint32_t r = rng.next();
    const int v = (r >> 8) % 61 == 0 ? top : top / 2 + static_cast<int>(r >> 29) - 3;
    c = static_cast<std::uint8_t>(std::clamp(v, 0, top));
  }
  return out;
}

bool codec_seeds(const fs::path& dir) {
  const int heads = 2, block = 8;
  const auto sample = codes(512, 15, 99);  // the books' sample: not the coded codes
  auto single = HuffmanCodebook::from_histogram(count_codes(sample), false, true);
  auto pairs = HuffmanCodebook::from_histogram(count_code_pairs(sample, 16), true, true);
  if (!single || !pairs) return false;
  const struct {
    const char* name;
    CodecConfig config;
    const HuffmanCodebook* book;
  } kinds[] = {{"bitpack4", {CodecKind::BitPack, block, 4}, nullptr},
               {"varwidth", {CodecKind::VarWidth, block, 0}, nullptr},
               {"huffman", {CodecKind::Huffman, block, 0}, &*single},
               {"huffman-pairs", {CodecKind::Huffman, block, 0}, &*pairs},
               {"rans", {CodecKind::Rans, block, 0}, &*single},
               {"rans-pairs", {CodecKind::Rans, block, 0}, &*pairs}};
  bool ok = true;
  for (const int tokens : {0, 1, block - 1, block, block + 1}) {
    for (const auto& k : kinds) {
      const int dim = tokens % 2 == 0 ? 16 : 15;
      const auto c = codes(static_cast<std::size_t>(tokens) * heads * dim, 15, 7u + tokens);
      auto e = encode_codes(c, tokens, heads, dim, k.config, k.book);
      if (!e) return std::fprintf(stderr, "%s: %s\n", k.name, e.message().c_str()), false;
      const std::string name = std::string(k.name) + "-" + std::to_string(tokens) + "x" +
                               std::to_string(heads) + "x" + std::to_string(dim);
      ok = write_file(dir / name, fuzz::write_codec_fuzz_input(*e, k.book)) && ok;
    }
  }
  // Eight-bit codes with escapes, and two-bit packing in one-token blocks.
  const auto wide = codes(9 * heads * 8, 255, 3);
  auto e8 = encode_codes(wide, 9, heads, 8, {CodecKind::BitPack, block, 8});
  auto h8 = encode_codes(wide, 9, heads, 8, {CodecKind::Huffman, block, 0}, &*single);
  auto r8 = encode_codes(wide, 9, heads, 8, {CodecKind::Rans, block, 0}, &*single);
  auto e2 = encode_codes(codes(5 * heads * 8, 3, 5), 5, heads, 8, {CodecKind::BitPack, 1, 2});
  if (!e8 || !h8 || !r8 || !e2) return false;
  ok = write_file(dir / "rans-escapes-9x2x8", fuzz::write_codec_fuzz_input(*r8, &*single)) && ok;
  ok = write_file(dir / "bitpack8-9x2x8", fuzz::write_codec_fuzz_input(*e8, nullptr)) && ok;
  ok = write_file(dir / "huffman-escapes-9x2x8", fuzz::write_codec_fuzz_input(*h8, &*single)) && ok;
  return write_file(dir / "bitpack2-5x2x8-block1", fuzz::write_codec_fuzz_input(*e2, nullptr)) &&
         ok;
}

KvCache small_cache(DType dtype, int layers, int tokens, int kv_heads, int head_dim, int q_heads,
                    int queries, std::uint32_t seed) {
  Lcg rng{seed};
  const auto values = [&](std::size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = rng.value();
    return v;
  };
  KvCache cache;
  cache.shape = {"fuzz-model", layers, q_heads, kv_heads, head_dim};
  cache.source = "synthetic:fuzz";
  const std::size_t kv = static_cast<std::size_t>(tokens) * kv_heads * head_dim;
  for (int l = 0; l < layers; ++l) {
    LayerKv layer;
    layer.key = Tensor::from_float(values(kv), dtype, tokens, kv_heads, head_dim);
    layer.value = Tensor::from_float(values(kv), dtype, tokens, kv_heads, head_dim);
    if (queries > 0) {
      layer.query = Tensor::from_float(values(std::size_t(queries) * q_heads * head_dim), dtype,
                                       queries, q_heads, head_dim);
    }
    cache.layers.push_back(std::move(layer));
  }
  return cache;
}

bool safetensors_seeds(const fs::path& dir) {
  bool ok = true;
  const auto save = [&](const KvCache& cache, const char* name) {
    const Status st = save_cache_file(cache, dir / name);
    if (!st.ok()) std::fprintf(stderr, "%s: %s\n", name, st.message().c_str());
    if (st.ok()) std::printf("%s: %ju bytes\n", name, std::uintmax_t(fs::file_size(dir / name)));
    ok = st.ok() && ok;
  };
  save(small_cache(DType::F16, 2, 5, 2, 8, 2, 0, 1), "f16-2x5x2x8.safetensors");
  save(small_cache(DType::BF16, 1, 3, 1, 16, 4, 2, 2), "bf16-queries.safetensors");
  KvCache capture = small_cache(DType::F32, 2, 4, 2, 4, 2, 0, 3);
  capture.token_ids = {1, 415, 2936, 9060};
  capture.key_rope.frequencies = {1.0, 0.01};
  capture.key_rope.rotary_dims = 4;
  capture.key_rope.positions = {0, 7, 8, 9};
  save(capture, "f32-capture-rope.safetensors");
  KvCache pre = small_cache(DType::F16, 1, 2, 1, 8, 1, 0, 4);
  pre.key_rope.frequencies = {1.0, 0.1, 0.01, 0.001};
  pre.key_rope.rotary_dims = 8;
  pre.key_rope.half_split = true;
  pre.keys_pre_rope = true;
  save(pre, "f16-pre-rope.safetensors");
  return ok;
}

// llama_state.h's layout, written as llama.cpp's state_write does.
struct StateSpec {
  const char* name;
  GgmlType k_type, v_type;
  bool v_trans;
  int cells, layers, embd;
  std::uint32_t version;
};

void put32(Bytes& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}
void put64(Bytes& b, std::uint64_t v) {
  put32(b, static_cast<std::uint32_t>(v));
  put32(b, static_cast<std::uint32_t>(v >> 32));
}

// `n` values as `type`: f32, f16 or a quantized block type.
bool put_values(Bytes& b, GgmlType type, const std::vector<float>& v) {
  const auto n = static_cast<std::int64_t>(v.size());
  const auto bytes = ggml_row_bytes(type, n);
  if (!bytes) return false;
  const std::size_t at = b.size();
  b.resize(at + *bytes);
  if (type == GgmlType::F32) {
    std::memcpy(b.data() + at, v.data(), *bytes);
  } else if (type == GgmlType::F16) {
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint16_t h = float_to_fp16(v[i]);
      std::memcpy(b.data() + at + 2 * i, &h, 2);
    }
  } else if (!ggml_quantize(type, v.data(), n, b.data() + at)) {
    return false;
  }
  return true;
}

bool state_seed(const fs::path& dir, const StateSpec& s) {
  Lcg rng{static_cast<std::uint32_t>(s.cells * 131 + s.embd)};
  const auto row = [&](int n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = rng.value();
    return v;
  };
  Bytes b;
  put32(b, kLlamaStateSeqMagic);
  put32(b, s.version);
  put32(b, static_cast<std::uint32_t>(s.cells));
  for (int t = 0; t < s.cells; ++t) put32(b, static_cast<std::uint32_t>(100 + t));
  put32(b, 1);  // n_stream
  put32(b, static_cast<std::uint32_t>(s.cells));
  for (int t = 0; t < s.cells; ++t) put32(b, t), put32(b, 1), put32(b, 0);  // pos, 1 seq, seq 0
  put32(b, s.v_trans ? 1 : 0);
  put32(b, static_cast<std::uint32_t>(s.layers));
  for (int l = 0; l < s.layers; ++l) {
    put32(b, static_cast<std::uint32_t>(s.k_type));
    put64(b, *ggml_row_bytes(s.k_type, s.embd));
    for (int t = 0; t < s.cells; ++t) {
      if (!put_values(b, s.k_type, row(s.embd))) return false;
    }
  }
  for (int l = 0; l < s.layers; ++l) {
    put32(b, static_cast<std::uint32_t>(s.v_type));
    if (!s.v_trans) {
      put64(b, *ggml_row_bytes(s.v_type, s.embd));
      for (int t = 0; t < s.cells; ++t) {
        if (!put_values(b, s.v_type, row(s.embd))) return false;
      }
    } else {  // one row of cells values per channel
      put32(b, static_cast<std::uint32_t>(*ggml_row_bytes(s.v_type, 1)));
      put32(b, static_cast<std::uint32_t>(s.embd));
      for (int j = 0; j < s.embd; ++j) {
        if (!put_values(b, s.v_type, row(s.cells))) return false;
      }
    }
  }
  return write_file(dir / s.name, b);
}

bool llama_state_seeds(const fs::path& dir) {
  const StateSpec specs[] = {
      {"f16-5cells-2layers.bin", GgmlType::F16, GgmlType::F16, false, 5, 2, 128, 3},
      {"f32-vtrans.bin", GgmlType::F32, GgmlType::F32, true, 3, 1, 64, 3},
      {"f16-vtrans-v2.bin", GgmlType::F16, GgmlType::F16, true, 2, 2, 32, 2},
      {"q8_0-rotated.bin", GgmlType::Q8_0, GgmlType::Q8_0, false, 4, 2, 128, 3},
      {"q4_0-k-f16-v.bin", GgmlType::Q4_0, GgmlType::F16, false, 3, 1, 64, 3},
      {"iq4_nl-q5_1.bin", GgmlType::IQ4_NL, GgmlType::Q5_1, false, 2, 1, 64, 3},
  };
  bool ok = true;
  for (const auto& s : specs) ok = state_seed(dir, s) && ok;
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: kvlab_fuzz_make_corpus CORPUS_DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* sub : {"code_codec", "safetensors", "llama_state"}) {
    fs::create_directories(root / sub);
  }
  const bool ok = codec_seeds(root / "code_codec") && safetensors_seeds(root / "safetensors") &&
                  llama_state_seeds(root / "llama_state");
  return ok ? 0 : 1;
}
