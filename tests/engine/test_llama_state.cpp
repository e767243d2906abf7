// llama.cpp sequence-state files (llama_state.h): files built here byte by byte in the layout of
// llama.cpp's llama_kv_cache::state_write (f32, f16, q8_0; V as rows or transposed; K and V
// rotated as llama.cpp rotates a quantized cache), read back; every malformed header an error
// naming the file and the problem; every truncation and seeded bit flips never a crash.
// tests/python/llama_state_reference.py checks files written by llama.cpp itself.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "file_test_util.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/quant/rotation.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/llama_state.h"

namespace kvlab {
namespace {

using file_test::Bytes;
using file_test::put32;
using file_test::put64;

constexpr int kHeads = 2, kDim = 64, kEmbd = kHeads * kDim;

// Values [cells][kEmbd] that look like keys: smooth, with one large channel per head.
std::vector<float> make_values(int cells, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(cells) * kEmbd);
  for (int t = 0; t < cells; ++t) {
    for (int j = 0; j < kEmbd; ++j) {
      v[t * kEmbd + j] = n(rng) + (j % kDim == 5 ? 12.0f : 0.0f);
    }
  }
  return v;
}

// One row of `values` as `type` (F32, F16 or Q8_0: d = amax / 127 as f16, q = round(x / d), the
// rule of ggml's quantize_row_q8_0_ref).
void put_row(Bytes& out, GgmlType type, std::span<const float> row) {
  if (type == GgmlType::F32) {
    file_test::append(out, row.data(), row.size() * 4);
  } else if (type == GgmlType::F16) {
    for (float x : row) file_test::put16(out, float_to_fp16(x));
  } else {
    for (std::size_t b = 0; b < row.size(); b += 32) {
      float amax = 0;
      for (std::size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(row[b + i]));
      const float d = amax / 127.0f;
      const float id = d != 0 ? 1.0f / d : 0.0f;
      file_test::put16(out, float_to_fp16(d));
      for (std::size_t i = 0; i < 32; ++i) {
        out.push_back(
            static_cast<std::uint8_t>(static_cast<std::int8_t>(std::lround(row[b + i] * id))));
      }
    }
  }
}

std::uint64_t row_bytes(GgmlType type, int n) {
  return *ggml_row_bytes(type, n);
}

struct StateSpec {
  int cells = 5;
  GgmlType k_type = GgmlType::F16, v_type = GgmlType::F16;
  bool v_trans = false;
  int layers = 2;
  bool rotate = false;  // as llama.cpp stores a quantized cache: K and V rotated
  std::uint32_t version = 3;
};

// A state file of `spec` whose cache holds keys[l] and values[l] ([cells][kEmbd] each).
Bytes write_state(const StateSpec& spec, const std::vector<std::vector<float>>& keys,
                  const std::vector<std::vector<float>>& values) {
  Bytes b;
  put32(b, kLlamaStateSeqMagic);
  put32(b, spec.version);
  put32(b, static_cast<std::uint32_t>(spec.cells));  // tokens
  for (int t = 0; t < spec.cells; ++t) put32(b, static_cast<std::uint32_t>(100 + t));
  put32(b, 1);  // n_stream
  put32(b, static_cast<std::uint32_t>(spec.cells));
  for (int t = 0; t < spec.cells; ++t) {
    put32(b, static_cast<std::uint32_t>(t));  // pos
    put32(b, 1);                              // n_seq_id
    put32(b, 0);                              // seq_id
  }
  put32(b, spec.v_trans ? 1 : 0);
  put32(b, static_cast<std::uint32_t>(spec.layers));
  const auto stored = [&](std::vector<float> v, TensorRole role) {
    if (spec.rotate) {
      for (std::size_t r = 0; r < v.size() / kDim; ++r) {
        llama_attn_rotate(std::span(v).subspan(r * kDim, kDim), role, false);
      }
    }
    return v;
  };
  for (int l = 0; l < spec.layers; ++l) {
    put32(b, static_cast<std::uint32_t>(spec.k_type));
    put64(b, row_bytes(spec.k_type, kEmbd));
    const auto k = stored(keys[l], TensorRole::Key);
    for (int t = 0; t < spec.cells; ++t) {
      put_row(b, spec.k_type, std::span(k).subspan(static_cast<std::size_t>(t) * kEmbd, kEmbd));
    }
  }
  for (int l = 0; l < spec.layers; ++l) {
    const auto v = stored(values[l], TensorRole::Value);
    put32(b, static_cast<std::uint32_t>(spec.v_type));
    if (!spec.v_trans) {
      put64(b, row_bytes(spec.v_type, kEmbd));
      for (int t = 0; t < spec.cells; ++t) {
        put_row(b, spec.v_type, std::span(v).subspan(static_cast<std::size_t>(t) * kEmbd, kEmbd));
      }
    } else {
      put32(b, static_cast<std::uint32_t>(row_bytes(spec.v_type, 1)));
      put32(b, kEmbd);
      for (int j = 0; j < kEmbd; ++j) {
        for (int t = 0; t < spec.cells; ++t) {
          const float x = v[static_cast<std::size_t>(t) * kEmbd + j];
          put_row(b, spec.v_type, std::span(&x, 1));
        }
      }
    }
  }
  return b;
}

struct Fixture {
  StateSpec spec;
  std::vector<std::vector<float>> keys, values;
  Bytes bytes;
};

Fixture make_fixture(const StateSpec& spec) {
  Fixture f{spec, {}, {}, {}};
  for (int l = 0; l < spec.layers; ++l) {
    f.keys.push_back(make_values(spec.cells, 1 + l));
    f.values.push_back(make_values(spec.cells, 100 + l));
  }
  f.bytes = write_state(spec, f.keys, f.values);
  return f;
}

LlamaStateOptions heads_given() {
  LlamaStateOptions o;
  o.kv_heads = kHeads;
  o.head_dim = kDim;
  return o;
}

Result<KvCache> load(const Bytes& bytes, const LlamaStateOptions& options = heads_given(),
                     std::string_view name = "slot.bin") {
  return load_llama_state_bytes(std::as_bytes(std::span(bytes)), name, options);
}

// The largest |a - b| between a tensor [cells, heads, dim] and values [cells][heads * dim].
float max_error(const Tensor& t, const std::vector<float>& ref) {
  const auto v = t.view().to_float();
  float e = 0;
  for (std::size_t i = 0; i < v.size(); ++i) e = std::max(e, std::fabs(v[i] - ref[i]));
  return e;
}

TEST(LlamaState, F16RowsAndTransposedVReadExactly) {
  for (const bool v_trans : {false, true}) {
    SCOPED_TRACE(v_trans ? "transposed V" : "V rows");
    StateSpec spec;
    spec.v_trans = v_trans;
    const Fixture f = make_fixture(spec);
    auto cache = load(f.bytes);
    ASSERT_TRUE(cache) << cache.message();
    EXPECT_EQ(cache->shape.layers, 2);
    EXPECT_EQ(cache->shape.kv_heads, kHeads);
    EXPECT_EQ(cache->shape.head_dim, kDim);
    EXPECT_EQ(cache->tokens(), spec.cells);
    EXPECT_EQ(cache->token_ids, (std::vector<std::int32_t>{100, 101, 102, 103, 104}));
    EXPECT_EQ(cache->source, "memory:slot.bin");
    for (int l = 0; l < spec.layers; ++l) {
      EXPECT_EQ(cache->layers[l].key.dtype(), DType::F16);
      // f16 holds these values to half an ulp of 16: 2^-7.
      EXPECT_LE(max_error(cache->layers[l].key, f.keys[l]), 1.0f / 128);
      EXPECT_LE(max_error(cache->layers[l].value, f.values[l]), 1.0f / 128);
    }
  }
}

TEST(LlamaState, F32TransposedV) {
  StateSpec spec;
  spec.k_type = spec.v_type = GgmlType::F32;
  spec.v_trans = true;
  const Fixture f = make_fixture(spec);
  auto cache = load(f.bytes);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->layers[1].value.dtype(), DType::F32);
  EXPECT_EQ(max_error(cache->layers[1].key, f.keys[1]), 0.0f);
  EXPECT_EQ(max_error(cache->layers[1].value, f.values[1]), 0.0f);
}

TEST(LlamaState, QuantizedCacheRotationIsUndone) {
  StateSpec spec;
  spec.k_type = spec.v_type = GgmlType::Q8_0;
  spec.rotate = true;
  const Fixture f = make_fixture(spec);
  auto cache = load(f.bytes);  // Auto: llama.cpp rotates q8_0 with head_dim 64
  ASSERT_TRUE(cache) << cache.message();
  // q8_0's error is at most half a step, amax / 254, per value in the rotated frame; the rotation
  // is orthonormal, so a head's error vector keeps its length: at most sqrt(64) half-steps.
  for (int l = 0; l < spec.layers; ++l) {
    EXPECT_EQ(cache->layers[l].key.dtype(), DType::F32);
    EXPECT_LT(max_error(cache->layers[l].key, f.keys[l]), 0.25f);
    EXPECT_LT(max_error(cache->layers[l].value, f.values[l]), 0.25f);
  }
  // Read without undoing it, the keys stay rotated: far from the model's frame.
  LlamaStateOptions off = heads_given();
  off.rotation = LlamaStateRotation::Off;
  auto rotated = load(f.bytes, off);
  ASSERT_TRUE(rotated) << rotated.message();
  EXPECT_GT(max_error(rotated->layers[0].key, f.keys[0]), 5.0f);
  // A file written with LLAMA_ATTN_ROT_DISABLE=1 is read right with Off.
  StateSpec plain = spec;
  plain.rotate = false;
  const Fixture g = make_fixture(plain);
  auto unrotated = load(g.bytes, off);
  ASSERT_TRUE(unrotated) << unrotated.message();
  EXPECT_LT(max_error(unrotated->layers[0].key, g.keys[0]), 0.1f);
}

TEST(LlamaState, ShapeComesFromTheOptions) {
  const Fixture f = make_fixture(StateSpec{});
  auto none = load(f.bytes, LlamaStateOptions{});
  ASSERT_FALSE(none);
  EXPECT_NE(none.message().find("slot.bin"), std::string::npos) << none.message();
  EXPECT_NE(none.message().find("--model"), std::string::npos) << none.message();
  LlamaStateOptions one;
  one.head_dim = kDim;
  auto derived = load(f.bytes, one);
  ASSERT_TRUE(derived) << derived.message();
  EXPECT_EQ(derived->shape.kv_heads, kHeads);
  LlamaStateOptions wrong;
  wrong.kv_heads = 3;
  wrong.head_dim = 64;
  auto bad = load(f.bytes, wrong);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.message().find("128"), std::string::npos) << bad.message();
  LlamaStateOptions not_gguf = heads_given();
  not_gguf.model = "/nonexistent/model.gguf";
  EXPECT_FALSE(load(f.bytes, not_gguf));
  // One number given that does not divide the row names that number, not "give --kv-heads".
  LlamaStateOptions odd_dim;
  odd_dim.head_dim = 7;
  auto dim7 = load(f.bytes, odd_dim);
  ASSERT_FALSE(dim7);
  EXPECT_NE(dim7.message().find("head_dim 7 does not divide"), std::string::npos)
      << dim7.message();
  LlamaStateOptions odd_heads;
  odd_heads.kv_heads = 5;
  auto heads5 = load(f.bytes, odd_heads);
  ASSERT_FALSE(heads5);
  EXPECT_NE(heads5.message().find("5 KV heads do not divide"), std::string::npos)
      << heads5.message();
}

TEST(LlamaState, LayoutDescribesTheFile) {
  StateSpec spec;
  spec.k_type = GgmlType::Q8_0;
  spec.v_trans = true;
  const Fixture f = make_fixture(spec);
  auto l = read_llama_state_layout_bytes(std::as_bytes(std::span(f.bytes)), "slot.bin");
  ASSERT_TRUE(l) << l.message();
  EXPECT_EQ(l->version, 3u);
  EXPECT_EQ(l->cells, 5u);
  EXPECT_TRUE(l->v_transposed);
  ASSERT_EQ(l->layers.size(), 2u);
  EXPECT_EQ(l->layers[0].k_type, GgmlType::Q8_0);
  EXPECT_EQ(l->layers[0].k_row_bytes, 136u);  // 4 blocks of 34 bytes
  EXPECT_EQ(l->layers[0].k_embd, kEmbd);
  EXPECT_EQ(l->layers[0].v_embd, kEmbd);
}

// Patches the u32 at `offset`.
Bytes with_u32(Bytes b, std::size_t offset, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b[offset + i] = static_cast<std::uint8_t>(v >> (8 * i));
  return b;
}

TEST(LlamaState, MalformedFilesAreErrorsNamingTheProblem) {
  const Fixture f = make_fixture(StateSpec{});
  const Bytes& ok = f.bytes;
  // Offsets: magic 0, version 4, n_tokens 8, tokens 12..32, n_stream 32, cells 36, cell meta
  // 40..100, v_trans 100, n_layer 104, K type of layer 0 at 108, its row size at 112.
  const std::size_t k_type = 108, k_row = 112;
  struct Case {
    const char* what;
    Bytes bytes;
    const char* expect;
  };
  Bytes trailing = ok;
  trailing.push_back(0);
  std::vector<Case> cases = {
      {"bad magic", with_u32(ok, 0, 0x12345678), "not a llama.cpp sequence-state file"},
      {"session file", with_u32(ok, 0, kLlamaSessionMagic), "whole-context session file"},
      {"old version", with_u32(ok, 4, 1), "version 1"},
      {"future version", with_u32(ok, 4, 4), "version 4"},
      {"absurd token count", with_u32(ok, 8, 0xFFFFFFF0u), "token count"},
      {"no streams", with_u32(ok, 32, 0), "stream count 0"},
      {"absurd cell count", with_u32(ok, 36, 0x7FFFFFFFu), "cell count"},
      {"v_trans 2", with_u32(ok, 100, 2), "v_trans"},
      {"no layers", with_u32(ok, 104, 0), "layer count 0"},
      {"absurd layers", with_u32(ok, 104, 100000), "layer count 100000"},
      {"removed type id", with_u32(ok, k_type, 4), "unknown K type id 4"},
      {"unknown type id", with_u32(ok, k_type, 99), "unknown K type id 99"},
      {"negative type id", with_u32(ok, k_type, 0xFFFFFFFFu), "unknown K type id -1"},
      {"unreadable type", with_u32(ok, k_type, 16), "cannot be read"},
      {"odd row size", with_u32(ok, k_row, 255), "row size 255"},
      {"row size past the end", with_u32(ok, k_row, 0x10000), "truncated"},
      {"type and row disagree", with_u32(ok, k_type, 8), "row size 256"},  // q8_0: 34-byte blocks
      {"truncated", Bytes(ok.begin(), ok.end() - 1), "truncated"},
      {"after the tokens", Bytes(ok.begin(), ok.begin() + 32), "no KV cache"},
      {"trailing bytes", trailing, "1 bytes follow"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto r = load(c.bytes);
    ASSERT_FALSE(r);
    EXPECT_NE(r.message().find("slot.bin"), std::string::npos) << r.message();
    EXPECT_NE(r.message().find(c.expect), std::string::npos) << r.message();
  }
  // A quantized V cannot be transposed (llama.cpp needs flash attention for it).
  Bytes tq = make_fixture(StateSpec{.v_trans = true}).bytes;
  auto l = read_llama_state_layout_bytes(std::as_bytes(std::span(tq)), "slot.bin");
  ASSERT_TRUE(l) << l.message();
  const std::size_t v_type_at = l->layers[0].v_offset - 12;
  auto r = load(with_u32(tq, v_type_at, static_cast<std::uint32_t>(GgmlType::Q8_0)));
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("transposed V"), std::string::npos) << r.message();
}

TEST(LlamaState, CacheFileDispatchesOnTheMagic) {
  const auto dir = file_test::scratch_dir("llama_state_dispatch");
  const Fixture f = make_fixture(StateSpec{});
  const auto path = dir / "slot.bin";
  file_test::write_bytes(path, f.bytes);
  EXPECT_TRUE(is_llama_state_file(path));
  auto plain = load_cache_file(path);
  ASSERT_FALSE(plain);
  EXPECT_NE(plain.message().find("--model"), std::string::npos) << plain.message();
  auto cache = load_cache_file(path, heads_given());
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->source, "file:" + path.string());
  auto from_memory = load(f.bytes);
  ASSERT_TRUE(from_memory);
  EXPECT_TRUE(file_test::same_bytes(cache->layers[1].value, from_memory->layers[1].value));
  const auto other = dir / "other.bin";
  file_test::write_bytes(other, Bytes{1, 2, 3, 4, 5});
  EXPECT_FALSE(is_llama_state_file(other));
  auto r = load_cache_file(other);
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("unsupported file type"), std::string::npos) << r.message();
}

// Every truncation and seeded bit flips of small files (f16 with transposed V, q8_0 rotated):
// a cache that validates, or an error naming the file; never a crash (run under ASan too).
TEST(LlamaState, FuzzedFilesGiveACacheOrAnError) {
  StateSpec a;
  a.cells = 3;
  a.v_trans = true;
  StateSpec b;
  b.cells = 2;
  b.k_type = b.v_type = GgmlType::Q8_0;
  b.rotate = true;
  for (const StateSpec& spec : {a, b}) {
    const Bytes valid = make_fixture(spec).bytes;
    int loaded = 0, errors = 0;
    const auto check = [&](const Bytes& bytes) {
      auto cache = load(bytes, heads_given(), "fuzz.bin");
      if (cache) {
        EXPECT_TRUE(cache->validate());
        ++loaded;
      } else {
        EXPECT_NE(cache.message().find("fuzz.bin"), std::string::npos) << cache.message();
        ++errors;
      }
    };
    for (std::size_t len = 0; len < valid.size(); ++len) {
      check(Bytes(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(len)));
    }
    std::mt19937 rng(1234);
    std::uniform_int_distribution<std::size_t> bit(0, valid.size() * 8 - 1);
    for (int i = 0; i < 3000; ++i) {
      Bytes f = valid;
      for (int k = 0; k < 1 + i % 3; ++k) {
        const std::size_t at = bit(rng);
        f[at / 8] ^= static_cast<std::uint8_t>(1u << (at % 8));
      }
      check(f);
    }
    EXPECT_GT(loaded, 0);  // flips in the data still read
    EXPECT_GT(errors, static_cast<int>(valid.size()));
  }
}

}  // namespace
}  // namespace kvlab
