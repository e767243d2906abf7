// Safetensors KV caches: round trips, metadata, inference, and every malformed-file error.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "file_test_util.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/safetensors.h"

namespace kvlab {
namespace {

using file_test::Bytes;
using json = nlohmann::json;

void expect_same_cache(const KvCache& a, const KvCache& b) {
  EXPECT_EQ(a.shape.name, b.shape.name);
  EXPECT_EQ(a.shape.layers, b.shape.layers);
  EXPECT_EQ(a.shape.q_heads, b.shape.q_heads);
  EXPECT_EQ(a.shape.kv_heads, b.shape.kv_heads);
  EXPECT_EQ(a.shape.head_dim, b.shape.head_dim);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    EXPECT_TRUE(file_test::same_bytes(a.layers[l].key, b.layers[l].key)) << "layer " << l;
    EXPECT_TRUE(file_test::same_bytes(a.layers[l].value, b.layers[l].value)) << "layer " << l;
    EXPECT_TRUE(file_test::same_bytes(a.layers[l].query, b.layers[l].query)) << "layer " << l;
  }
}

class SafetensorsRoundTrip : public ::testing::TestWithParam<std::tuple<DType, bool>> {};

TEST_P(SafetensorsRoundTrip, WriteThenReadIsBitwiseEqual) {
  const auto [dtype, queries] = GetParam();
  const auto dir = file_test::scratch_dir("safetensors_round_trip");
  const KvCache cache =
      file_test::random_cache(dtype, 3, 5, 2, 8, queries ? 4 : 0, queries ? 3 : 0);
  ASSERT_TRUE(cache.validate());
  const auto path = dir / "cache.safetensors";
  ASSERT_TRUE(save_cache_file(cache, path));
  EXPECT_FALSE(std::filesystem::exists(dir / "cache.safetensors.tmp"));

  auto loaded = load_cache_file(path);
  ASSERT_TRUE(loaded) << loaded.message();
  expect_same_cache(cache, *loaded);
  EXPECT_EQ(loaded->has_queries(), queries);
  EXPECT_EQ(loaded->source, "file:" + path.string());
  EXPECT_EQ(loaded->layers[0].key.dtype(), dtype);
  EXPECT_TRUE(loaded->validate());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SafetensorsRoundTrip,
                         ::testing::Combine(::testing::Values(DType::F16, DType::BF16, DType::F32),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(dtype_name(std::get<0>(info.param))) +
                                  (std::get<1>(info.param) ? "_queries" : "_no_queries");
                         });

TEST(Safetensors, HeaderIsPaddedAndCarriesMetadata) {
  const auto dir = file_test::scratch_dir("safetensors_header");
  const auto path = dir / "cache.safetensors";
  KvCache cache = file_test::random_cache(DType::F16, 2, 3, 1, 4, 2, 1);
  cache.shape.name = "llama-ish";
  ASSERT_TRUE(save_safetensors_cache(cache, path));

  const Bytes bytes = file_test::read_bytes(path);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes[8 + n - 1] == ' ' || bytes[8 + n - 1] == '}', true);

  auto index = read_safetensors_index(path);
  ASSERT_TRUE(index) << index.message();
  EXPECT_EQ(index->data_offset, 8 + n);
  EXPECT_EQ(index->file_size, bytes.size());
  EXPECT_EQ(index->metadata.at("kvlab.format"), "kv-cache/1");
  EXPECT_EQ(index->metadata.at("kvlab.model"), "llama-ish");
  EXPECT_EQ(index->metadata.at("kvlab.layers"), "2");
  EXPECT_EQ(index->metadata.at("kvlab.q_heads"), "2");
  EXPECT_EQ(index->metadata.at("kvlab.kv_heads"), "1");
  EXPECT_EQ(index->metadata.at("kvlab.head_dim"), "4");
  EXPECT_EQ(index->metadata.at("kvlab.source"), "synthetic:test");
  ASSERT_EQ(index->tensors.size(), 6u);
  const SafetensorsEntry* v1 = index->find("layers.1.value");
  ASSERT_NE(v1, nullptr);
  EXPECT_EQ(v1->dtype, SafetensorsDType::F16);
  EXPECT_EQ(v1->shape, (std::vector<std::uint64_t>{3, 1, 4}));
  std::vector<std::byte> raw(v1->nbytes());
  ASSERT_TRUE(read_safetensors_tensor(*index, *v1, raw));
  EXPECT_EQ(std::memcmp(raw.data(), cache.layers[1].value.data(), raw.size()), 0);
}

TEST(Safetensors, CapturedTokenIdsRoundTripAndAreChecked) {
  const auto dir = file_test::scratch_dir("safetensors_tokens");
  KvCache cache = file_test::random_cache(DType::F32, 2, 5, 2, 4, 2, 1);
  cache.token_ids = {1, 403, 7, 99, 2};
  ASSERT_TRUE(save_safetensors_cache(cache, dir / "ids.safetensors"));
  auto back = load_cache_file(dir / "ids.safetensors");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->token_ids, cache.token_ids);
  expect_same_cache(cache, *back);
  // Ids that do not match the tokens are refused on save and on load.
  cache.token_ids.pop_back();
  auto saved = save_safetensors_cache(cache, dir / "bad.safetensors");
  ASSERT_FALSE(saved.ok());
  EXPECT_NE(saved.message().find("4 token ids for 5 cached tokens"), std::string::npos);
  Bytes bytes = file_test::read_bytes(dir / "ids.safetensors");
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, n);
  const auto at = header.find("\"I32\"");
  ASSERT_NE(at, std::string::npos);
  header.replace(at, 5, "\"U32\"");
  std::memcpy(bytes.data() + 8, header.data(), n);
  file_test::write_bytes(dir / "u32.safetensors", bytes);
  auto wrong = load_cache_file(dir / "u32.safetensors");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find("tensor 'tokens' must be I32"), std::string::npos)
      << wrong.message();
}

// The header with `edit` applied to its JSON text, written to `out` (the same length is kept by
// padding with spaces, so the data offsets stay valid).
void write_with_header_edit(const std::filesystem::path& in, const std::filesystem::path& out,
                            const std::function<void(std::string&)>& edit) {
  Bytes bytes = file_test::read_bytes(in);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, n);
  edit(header);
  ASSERT_LE(header.size(), n);
  header.resize(n, ' ');
  std::memcpy(bytes.data() + 8, header.data(), n);
  file_test::write_bytes(out, bytes);
}

TEST(Safetensors, KeyRopeRoundTripsAndBadRopeIsAnError) {
  const auto dir = file_test::scratch_dir("safetensors_rope");
  KvCache cache = file_test::random_cache(DType::F32, 2, 5, 2, 8, 0, 0);
  cache.key_rope.frequencies = {1.0, 0.1, 0.01, 0.001};
  cache.key_rope.rotary_dims = 8;
  cache.key_rope.half_split = true;
  cache.key_rope.first_position = 3;
  cache.keys_pre_rope = true;
  ASSERT_TRUE(save_cache_file(cache, dir / "rope.safetensors"));
  auto back = load_cache_file(dir / "rope.safetensors");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->key_rope.frequencies, cache.key_rope.frequencies);
  EXPECT_EQ(back->key_rope.rotary_dims, 8);
  EXPECT_TRUE(back->key_rope.half_split);
  EXPECT_EQ(back->key_rope.first_position, 3);
  EXPECT_TRUE(back->keys_pre_rope);
  // Positions of their own (a llama.cpp state's cells) round-trip too.
  cache.key_rope.positions = {9, 4, 5, 6, 20};
  cache.keys_pre_rope = false;
  ASSERT_TRUE(save_cache_file(cache, dir / "pos.safetensors"));
  back = load_cache_file(dir / "pos.safetensors");
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->key_rope.positions, cache.key_rope.positions);
  EXPECT_FALSE(back->keys_pre_rope);
  // A cache without RoPE has none after loading.
  ASSERT_TRUE(
      save_cache_file(file_test::random_cache(DType::F32, 1, 2, 1, 4), dir / "no.safetensors"));
  back = load_cache_file(dir / "no.safetensors");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->key_rope.enabled());
  // Odd rotary dims, and metadata that is not JSON: errors naming the file.
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{R"(\"rotary_dims\":8)", R"(\"rotary_dims\":9)"},
        {R"({\"first)", R"([\"first)"}}) {
    write_with_header_edit(dir / "rope.safetensors", dir / "bad.safetensors", [&](std::string& h) {
      const auto at = h.find(from);
      ASSERT_NE(at, std::string::npos) << h;
      h.replace(at, from.size(), to);
    });
    auto bad = load_cache_file(dir / "bad.safetensors");
    ASSERT_FALSE(bad.ok()) << to;
    EXPECT_NE(bad.message().find("bad.safetensors"), std::string::npos) << bad.message();
    EXPECT_NE(bad.message().find("RoPE"), std::string::npos) << bad.message();
  }
}

TEST(Safetensors, SaveIsAtomicAndNeverDamagesAGoodFile) {
  const auto dir = file_test::scratch_dir("safetensors_atomic");
  const auto path = dir / "cache.safetensors";
  ASSERT_TRUE(save_cache_file(file_test::random_cache(DType::F32, 1, 2, 1, 2), path));
  const Bytes before = file_test::read_bytes(path);

  KvCache bad = file_test::random_cache(DType::F32, 2, 2, 1, 2);
  bad.layers[1].value = Tensor(DType::F32, 3, 1, 2);  // invalid: tokens differ
  const Status s = save_cache_file(bad, path);
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("cache.safetensors"), std::string::npos) << s.message();
  EXPECT_EQ(file_test::read_bytes(path), before);
  EXPECT_FALSE(std::filesystem::exists(dir / "cache.safetensors.tmp"));

  // Overwriting with a good cache replaces the file.
  const KvCache other = file_test::random_cache(DType::BF16, 2, 4, 2, 2, 0, 0, 99);
  ASSERT_TRUE(save_cache_file(other, path));
  auto loaded = load_cache_file(path);
  ASSERT_TRUE(loaded) << loaded.message();
  expect_same_cache(other, *loaded);

  const Status missing_dir = save_cache_file(other, dir / "no_such_dir" / "x.safetensors");
  ASSERT_FALSE(missing_dir);
  EXPECT_NE(missing_dir.message().find("x.safetensors"), std::string::npos);
}

// A hand-made header: tensors F32 [tokens, heads, dim] laid out one after another.
struct HandTensor {
  std::string name;
  std::vector<std::uint64_t> shape;
  std::string dtype = "F32";
};

Bytes hand_file(const std::vector<HandTensor>& tensors, const json& metadata = nullptr,
                std::vector<float>* all_values = nullptr) {
  json header = json::object();
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::vector<float> data;
  for (const auto& t : tensors) {
    const std::uint64_t n = t.shape[0] * t.shape[1] * t.shape[2];
    const std::uint64_t begin = data.size() * 4;
    for (std::uint64_t i = 0; i < n; ++i) data.push_back(static_cast<float>(data.size()) * 0.25f);
    header[t.name] = {
        {"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, data.size() * 4}}};
  }
  if (all_values != nullptr) *all_values = data;
  return file_test::safetensors_bytes(header, file_test::as_bytes(data));
}

TEST(Safetensors, MissingMetadataInfersShapeFromTensors) {
  const auto dir = file_test::scratch_dir("safetensors_infer");
  std::vector<float> values;
  const Bytes bytes = hand_file({{"layers.0.key", {3, 2, 4}},
                                 {"layers.0.value", {3, 2, 4}},
                                 {"layers.0.query", {1, 4, 4}},
                                 {"layers.1.key", {3, 2, 4}},
                                 {"layers.1.value", {3, 2, 4}},
                                 {"layers.1.query", {1, 4, 4}},
                                 {"model.norm.weight", {4, 1, 1}}},  // not ours: ignored
                                nullptr, &values);
  const auto path = dir / "my_model.safetensors";
  file_test::write_bytes(path, bytes);
  auto cache = load_cache_file(path);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->shape.name, "my_model");
  EXPECT_EQ(cache->shape.layers, 2);
  EXPECT_EQ(cache->shape.kv_heads, 2);
  EXPECT_EQ(cache->shape.q_heads, 4);
  EXPECT_EQ(cache->shape.head_dim, 4);
  EXPECT_EQ(cache->tokens(), 3);
  // Tensors were laid out in order: layers.1.key starts after 24 + 24 + 16 values.
  EXPECT_EQ(cache->layers[1].key.at(0, 0, 0), values[64]);
  EXPECT_EQ(cache->layers[1].key.at(2, 1, 3), values[64 + 23]);
  EXPECT_EQ(cache->layers[0].query.at(0, 3, 3), values[48 + 15]);

  // Without queries q_heads falls back to kv_heads, or to the metadata when it has it.
  file_test::write_bytes(path,
                         hand_file({{"layers.0.key", {3, 2, 4}}, {"layers.0.value", {3, 2, 4}}}));
  cache = load_cache_file(path);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->shape.q_heads, 2);
  EXPECT_FALSE(cache->has_queries());
  file_test::write_bytes(path,
                         hand_file({{"layers.0.key", {3, 2, 4}}, {"layers.0.value", {3, 2, 4}}},
                                   {{"kvlab.q_heads", "8"}, {"kvlab.model", "named"}}));
  cache = load_cache_file(path);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->shape.q_heads, 8);
  EXPECT_EQ(cache->shape.name, "named");
}

TEST(Safetensors, GenericIndexReadsAnyDtype) {
  const auto dir = file_test::scratch_dir("safetensors_generic");
  json header = {{"__metadata__", {{"format", "pt"}}},
                 {"model.embed_tokens.weight",
                  {{"dtype", "BF16"}, {"shape", {2, 3}}, {"data_offsets", {0, 12}}}},
                 {"step", {{"dtype", "I64"}, {"shape", json::array()}, {"data_offsets", {12, 20}}}},
                 {"empty", {{"dtype", "F8_E4M3"}, {"shape", {0, 5}}, {"data_offsets", {20, 20}}}}};
  Bytes data(20);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i);
  const auto path = dir / "model.safetensors";
  file_test::write_bytes(path, file_test::safetensors_bytes(header, data));
  auto index = read_safetensors_index(path);
  ASSERT_TRUE(index) << index.message();
  ASSERT_EQ(index->tensors.size(), 3u);
  EXPECT_EQ(index->metadata.at("format"), "pt");
  const auto* step = index->find("step");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->dtype, SafetensorsDType::I64);
  EXPECT_TRUE(step->shape.empty());
  std::vector<std::byte> raw(8);
  ASSERT_TRUE(read_safetensors_tensor(*index, *step, raw));
  EXPECT_EQ(std::to_integer<int>(raw[0]), 12);
  EXPECT_EQ(index->find("nope"), nullptr);
  EXPECT_EQ(safetensors_dtype_size(SafetensorsDType::F64), 8u);
  EXPECT_EQ(kv_dtype(SafetensorsDType::BF16), DType::BF16);
  EXPECT_FALSE(kv_dtype(SafetensorsDType::I8).has_value());

  // The KV loader refuses it, naming the file.
  auto cache = load_cache_file(path);
  ASSERT_FALSE(cache);
  EXPECT_NE(cache.message().find("model.safetensors: no KV tensors found"), std::string::npos)
      << cache.message();
}

struct BadCase {
  const char* name;
  Bytes bytes;
  const char* expected;  // a part of the message
};

Bytes raw_header(std::string_view text, const Bytes& data = {}) {
  Bytes out;
  file_test::put64(out, text.size());
  file_test::append(out, text);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

json entry(std::string dtype, std::vector<std::uint64_t> shape, std::uint64_t b, std::uint64_t e) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {b, e}}};
}

std::vector<BadCase> bad_cases() {
  const std::vector<HandTensor> two_layers = {{"layers.0.key", {2, 1, 2}},
                                              {"layers.0.value", {2, 1, 2}},
                                              {"layers.1.key", {2, 1, 2}},
                                              {"layers.1.value", {2, 1, 2}}};
  Bytes absurd;
  file_test::put64(absurd, 200'000'000);
  file_test::append(absurd, "{}");
  const Bytes whole = hand_file(two_layers);
  const Bytes truncated_data(whole.begin(), whole.end() - 5);  // 5 bytes of layers.1.value gone
  const Bytes sixteen(16);
  Bytes length_past_end;
  file_test::put64(length_past_end, 1000);
  file_test::append(length_past_end, "{}");

  return {
      {"empty", {}, "the file is empty"},
      {"short", {1, 2, 3, 4, 5}, "too short"},
      {"length_past_end", length_past_end, "header length 1000 is larger than the file (10 bytes)"},
      {"absurd_header", absurd, "exceeds the limit"},
      {"bad_json", raw_header("{\"layers.0.key\": {\"dtype\": "), "not valid JSON"},
      {"binary_json", raw_header(std::string("\x01\xff\x00garbage", 10)), "not valid JSON"},
      {"not_object", raw_header("[1, 2, 3]"), "not a JSON object"},
      {"entry_not_object", raw_header(R"({"layers.0.key": 5})"),
       "'layers.0.key': entry is not a JSON object"},
      {"missing_dtype",
       raw_header(R"({"layers.0.key": {"shape": [1], "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
       "tensor 'layers.0.key': missing 'dtype'"},
      {"missing_shape",
       raw_header(R"({"layers.0.key": {"dtype": "F32", "data_offsets": [0, 4]}})", {0, 0, 0, 0}),
       "tensor 'layers.0.key': missing 'shape'"},
      {"missing_offsets",
       raw_header(R"({"layers.0.key": {"dtype": "F32", "shape": [1]}})", {0, 0, 0, 0}),
       "tensor 'layers.0.key': missing 'data_offsets'"},
      {"unknown_dtype",
       file_test::safetensors_bytes({{"layers.0.key", entry("F17", {1}, 0, 4)}}, {0, 0, 0, 0}),
       "tensor 'layers.0.key': unknown dtype \"F17\""},
      {"size_mismatch",
       file_test::safetensors_bytes({{"layers.0.key", entry("F32", {2, 1, 2}, 0, 12)}}, sixteen),
       "tensor 'layers.0.key': shape [2, 1, 2] of F32 needs 16 bytes but data range [0, 12) holds "
       "12"},
      {"overlap",
       file_test::safetensors_bytes({{"layers.0.key", entry("F32", {2, 1, 2}, 0, 16)},
                                     {"layers.0.value", entry("F32", {2, 1, 2}, 8, 24)}},
                                    Bytes(24)),
       "tensor 'layers.0.value': data range [8, 24) overlaps tensor 'layers.0.key' [0, 16)"},
      {"past_end",
       file_test::safetensors_bytes({{"layers.3.value", entry("F32", {2, 1, 2}, 16, 32)}}, sixteen),
       "tensor 'layers.3.value': data range [16, 32) is past the end of the file"},
      {"overflow",
       file_test::safetensors_bytes(
           {{"layers.0.key", entry("F32", {1ull << 32, 1ull << 32, 2}, 0, 16)}}, sixteen),
       "tensor 'layers.0.key': shape [4294967296, 4294967296, 2] overflows"},
      {"negative_offset",
       raw_header(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})"),
       "tensor 'x': 'data_offsets' [-4,0] has an element that is not a non-negative integer"},
      {"float_shape",
       raw_header(R"({"x": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})",
                  {0, 0, 0, 0}),
       "tensor 'x': 'shape' [1.5] has an element"},
      {"reversed_offsets", file_test::safetensors_bytes({{"x", entry("F32", {0}, 8, 4)}}, sixteen),
       "tensor 'x': data range [8, 4) ends before it begins"},
      {"three_offsets",
       raw_header(R"({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})", sixteen),
       "tensor 'x': 'data_offsets' must be [begin, end]"},
      {"metadata_not_string", raw_header(R"({"__metadata__": {"kvlab.layers": 2}})"),
       "__metadata__ value for 'kvlab.layers' is not a string"},
      {"missing_layer",
       hand_file({{"layers.0.key", {2, 1, 2}},
                  {"layers.0.value", {2, 1, 2}},
                  {"layers.2.key", {2, 1, 2}},
                  {"layers.2.value", {2, 1, 2}}}),
       "layers.1 is missing"},
      {"missing_value",
       hand_file({{"layers.0.key", {2, 1, 2}},
                  {"layers.0.value", {2, 1, 2}},
                  {"layers.1.key", {2, 1, 2}}}),
       "tensor 'layers.1.value' is missing"},
      {"kv_shape_mismatch", hand_file({{"layers.0.key", {2, 1, 2}}, {"layers.0.value", {3, 1, 2}}}),
       "tensor 'layers.0.value': shape mismatch: [3, 1, 2] but 'layers.0.key' is [2, 1, 2]"},
      {"layer_shape_mismatch",
       hand_file({{"layers.0.key", {2, 1, 2}},
                  {"layers.0.value", {2, 1, 2}},
                  {"layers.1.key", {2, 2, 2}},
                  {"layers.1.value", {2, 2, 2}}}),
       "tensor 'layers.1.key': shape mismatch"},
      {"head_dim_mismatch",
       hand_file({{"layers.0.key", {2, 1, 2}},
                  {"layers.0.value", {2, 1, 2}},
                  {"layers.1.key", {2, 1, 4}},
                  {"layers.1.value", {2, 1, 4}}}),
       "tensor 'layers.1.key': head_dim mismatch"},
      {"query_head_dim",
       hand_file({{"layers.0.key", {2, 1, 2}},
                  {"layers.0.value", {2, 1, 2}},
                  {"layers.0.query", {1, 2, 4}}}),
       "tensor 'layers.0.query': head_dim mismatch"},
      {"query_heads",
       hand_file({{"layers.0.key", {2, 2, 2}},
                  {"layers.0.value", {2, 2, 2}},
                  {"layers.0.query", {1, 3, 2}}}),
       "tensor 'layers.0.query': 3 query heads is not a positive multiple of the 2 KV heads"},
      {"query_missing",
       hand_file({{"layers.0.key", {2, 1, 2}},
                  {"layers.0.value", {2, 1, 2}},
                  {"layers.0.query", {1, 1, 2}},
                  {"layers.1.key", {2, 1, 2}},
                  {"layers.1.value", {2, 1, 2}}}),
       "tensor 'layers.1.query' is missing"},
      {"not_3d",
       file_test::safetensors_bytes({{"layers.0.key", entry("F32", {2, 2}, 0, 16)},
                                     {"layers.0.value", entry("F32", {2, 1, 2}, 16, 32)}},
                                    Bytes(32)),
       "tensor 'layers.0.key': expected 3 dimensions [tokens, heads, head_dim], got 2"},
      {"zero_heads", hand_file({{"layers.0.key", {2, 0, 2}}, {"layers.0.value", {2, 0, 2}}}),
       "tensor 'layers.0.key': shape [2, 0, 2] has no heads"},
      {"kv_dtype",
       hand_file({{"layers.0.key", {2, 1, 2}, "I32"}, {"layers.0.value", {2, 1, 2}, "I32"}}),
       "tensor 'layers.0.key': dtype I32 is not supported for KV tensors"},
      {"dtype_mismatch",
       file_test::safetensors_bytes({{"layers.0.key", entry("F32", {2, 1, 2}, 0, 16)},
                                     {"layers.0.value", entry("F16", {2, 1, 2}, 16, 24)}},
                                    Bytes(24)),
       "tensor 'layers.0.value': dtype mismatch: F16 but 'layers.0.key' is F32"},
      {"bad_name", hand_file({{"layers.x.key", {2, 1, 2}}}), "tensor 'layers.x.key': name is not"},
      {"huge_layer_index", hand_file({{"layers.99999.key", {2, 1, 2}}}),
       "tensor 'layers.99999.key': name is not"},
      {"no_kv_tensors", hand_file({{"weights", {2, 1, 2}}}), "no KV tensors found"},
      {"meta_kv_heads", hand_file(two_layers, {{"kvlab.kv_heads", "8"}}),
       "metadata kvlab.kv_heads = 8 but tensor 'layers.0.key' has 1 KV heads"},
      {"meta_layers", hand_file(two_layers, {{"kvlab.layers", "3"}}),
       "metadata kvlab.layers = 3 but the file has 2 layers"},
      {"meta_head_dim", hand_file(two_layers, {{"kvlab.head_dim", "64"}}),
       "metadata kvlab.head_dim = 64"},
      {"meta_not_int", hand_file(two_layers, {{"kvlab.q_heads", "four"}}),
       "metadata kvlab.q_heads = 'four' is not a positive integer"},
      {"meta_q_not_multiple",
       hand_file({{"layers.0.key", {2, 2, 2}}, {"layers.0.value", {2, 2, 2}}},
                 {{"kvlab.q_heads", "3"}}),
       "q_heads (3) must be a multiple of kv_heads (2)"},
      {"meta_format", hand_file(two_layers, {{"kvlab.format", "kv-cache/2"}}),
       "kvlab.format = 'kv-cache/2' is not supported"},
      {"truncated_data", truncated_data,
       "tensor 'layers.1.value': data range [48, 64) is past the end of the file (the data after "
       "the header is 59 bytes)"},
  };
}

TEST(Safetensors, BadFilesGiveErrorsNamingFileTensorAndProblem) {
  const auto dir = file_test::scratch_dir("safetensors_bad");
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.name);
    const auto path = dir / (std::string(c.name) + ".safetensors");
    file_test::write_bytes(path, c.bytes);
    auto cache = load_cache_file(path);
    ASSERT_FALSE(cache) << c.name;
    EXPECT_NE(cache.message().find(path.string()), std::string::npos) << cache.message();
    EXPECT_NE(cache.message().find(c.expected), std::string::npos) << cache.message();
  }
}

TEST(Safetensors, DuplicateOfAValidFileWithGarbageAfterItsJsonFails) {
  const auto dir = file_test::scratch_dir("safetensors_trailing");
  const auto path = dir / "trailing.safetensors";
  file_test::write_bytes(path, raw_header("{}  xyz"));
  auto index = read_safetensors_index(path);
  ASSERT_FALSE(index);
  EXPECT_NE(index.message().find("not valid JSON"), std::string::npos) << index.message();
}

TEST(CacheFile, DispatchAndErrors) {
  const auto dir = file_test::scratch_dir("cache_file");
  auto missing = load_cache_file(dir / "nope.safetensors");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.message().find("nope.safetensors: no such file"), std::string::npos);

  file_test::write_bytes(dir / "cache.bin", {1, 2, 3});
  auto unsupported = load_cache_file(dir / "cache.bin");
  ASSERT_FALSE(unsupported);
  EXPECT_NE(unsupported.message().find("cache.bin: unsupported file type '.bin'"),
            std::string::npos)
      << unsupported.message();

  const KvCache cache = file_test::random_cache(DType::F16, 1, 2, 1, 2);
  const Status npz = save_cache_file(cache, dir / "out.npz");
  ASSERT_FALSE(npz);
  EXPECT_NE(npz.message().find("out.npz"), std::string::npos);
  EXPECT_NE(npz.message().find(".safetensors only"), std::string::npos);

  // Extensions are case-insensitive.
  ASSERT_TRUE(save_cache_file(cache, dir / "UPPER.SafeTensors"));
  EXPECT_TRUE(load_cache_file(dir / "UPPER.SafeTensors"));
  EXPECT_EQ(cache_file_format(dir / "x.NPZ"), CacheFileFormat::Npz);
  EXPECT_EQ(cache_file_format(dir), CacheFileFormat::NpyDirectory);
  EXPECT_FALSE(cache_file_format(dir / "x.txt").has_value());
}

TEST(Safetensors, ProgressIsReportedAndCanCancel) {
  const auto dir = file_test::scratch_dir("safetensors_progress");
  const auto path = dir / "cache.safetensors";
  ASSERT_TRUE(save_cache_file(file_test::random_cache(DType::F16, 4, 8, 2, 4), path));
  std::vector<double> seen;
  auto cache = load_cache_file(path, [&](double f, std::string_view) {
    seen.push_back(f);
    return true;
  });
  ASSERT_TRUE(cache) << cache.message();
  ASSERT_GE(seen.size(), 2u);
  EXPECT_DOUBLE_EQ(seen.front(), 0.0);
  EXPECT_DOUBLE_EQ(seen.back(), 1.0);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));

  int calls = 0;
  auto cancelled = load_cache_file(path, [&](double, std::string_view) { return ++calls < 3; });
  ASSERT_FALSE(cancelled);
  EXPECT_EQ(cancelled.message(), kCancelledMessage);
}

}  // namespace
}  // namespace kvlab
