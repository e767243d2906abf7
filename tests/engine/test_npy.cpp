// NumPy sources: hand-written .npy headers (v1/v2/v3; f16, f32, bf16-as-u2), single 5-D arrays,
// directories of .npy files, stored and deflated .npz archives, and their error messages.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "file_test_util.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/npy.h"

namespace kvlab {
namespace {

using file_test::Bytes;

// Values for element i of a tensor, exactly representable in f16, bf16 and f32.
float value_at(std::size_t i, float base) {
  return base + 0.5f * static_cast<float>(i % 64);
}

Bytes encode(DType dtype, const std::vector<float>& values) {
  Bytes out(values.size() * dtype_size(dtype));
  convert_from_float(dtype, values, std::as_writable_bytes(std::span(out)));
  return out;
}

std::vector<float> ramp(std::size_t n, float base) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = value_at(i, base);
  return v;
}

void expect_tensor(const Tensor& t, int tokens, int heads, int dim, float base) {
  ASSERT_EQ(t.tokens(), tokens);
  ASSERT_EQ(t.heads(), heads);
  ASSERT_EQ(t.dim(), dim);
  std::size_t i = 0;
  for (int a = 0; a < tokens; ++a) {
    for (int h = 0; h < heads; ++h) {
      for (int d = 0; d < dim; ++d, ++i) ASSERT_EQ(t.at(a, h, d), value_at(i, base)) << i;
    }
  }
}

struct NpyCase {
  const char* descr;
  DType dtype;
  int version;
};

class NpySingleArray : public ::testing::TestWithParam<NpyCase> {};

TEST_P(NpySingleArray, FiveDimArrayIsKeysThenValues) {
  const NpyCase c = GetParam();
  const auto dir = file_test::scratch_dir("npy_single");
  const int layers = 2, tokens = 3, heads = 2, dim = 4;
  const std::size_t per = tokens * heads * dim;
  std::vector<float> values;
  for (int i = 0; i < layers * 2; ++i) {
    const auto part = ramp(per, 10.0f * i);
    values.insert(values.end(), part.begin(), part.end());
  }
  const auto path = dir / "kv.npy";
  file_test::write_bytes(
      path, file_test::npy_bytes(c.descr, "(2, 2, 3, 2, 4)", encode(c.dtype, values), c.version));
  auto cache = load_cache_file(path);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->shape.name, "kv");
  EXPECT_EQ(cache->shape.layers, 2);
  EXPECT_EQ(cache->shape.kv_heads, 2);
  EXPECT_EQ(cache->shape.q_heads, 2);
  EXPECT_EQ(cache->shape.head_dim, 4);
  EXPECT_FALSE(cache->has_queries());
  for (int l = 0; l < layers; ++l) {
    EXPECT_EQ(cache->layers[l].key.dtype(), c.dtype);
    expect_tensor(cache->layers[l].key, tokens, heads, dim, 10.0f * (2 * l));
    expect_tensor(cache->layers[l].value, tokens, heads, dim, 10.0f * (2 * l + 1));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, NpySingleArray,
    ::testing::Values(NpyCase{"<f2", DType::F16, 1}, NpyCase{"<f4", DType::F32, 1},
                      NpyCase{"<u2", DType::BF16, 1}, NpyCase{"<f2", DType::F16, 2},
                      NpyCase{"<f4", DType::F32, 3}, NpyCase{"<u2", DType::BF16, 3}),
    [](const auto& info) {
      return std::string(dtype_name(info.param.dtype)) + "_v" + std::to_string(info.param.version);
    });

TEST(Npy, HeaderParserAcceptsNumpyVariants) {
  const auto parse = [](std::string_view dict) {
    Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    file_test::put16(b, static_cast<std::uint32_t>(dict.size()));
    file_test::append(b, dict);
    return parse_npy_header(std::as_bytes(std::span(b)), "x.npy");
  };
  const std::string_view py2 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }\n";
  auto h = parse(py2);
  ASSERT_TRUE(h) << h.message();
  EXPECT_EQ(h->shape, (std::vector<std::uint64_t>{2, 3}));
  EXPECT_EQ(h->data_bytes, 24u);
  EXPECT_EQ(h->data_offset, 10u + py2.size());
  h = parse("{\"shape\":(5,),\"fortran_order\":False,\"descr\":\"<u2\"}");
  ASSERT_TRUE(h) << h.message();
  EXPECT_EQ(h->dtype, DType::BF16);
  EXPECT_EQ(h->shape, (std::vector<std::uint64_t>{5}));
  h = parse("{'descr': '<f2', 'fortran_order': False, 'shape': ()}");
  ASSERT_TRUE(h) << h.message();
  EXPECT_TRUE(h->shape.empty());
  EXPECT_EQ(h->data_bytes, 2u);
}

struct NpyBad {
  const char* name;
  Bytes bytes;
  const char* expected;
};

TEST(Npy, BadFilesGiveClearErrors) {
  const auto dir = file_test::scratch_dir("npy_bad");
  const Bytes f16_8 = encode(DType::F16, ramp(8, 0));
  Bytes bad_magic = file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", f16_8);
  bad_magic[1] = 'X';
  Bytes bad_version = file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", f16_8);
  bad_version[6] = 4;
  Bytes long_header = file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", {});
  long_header[8] = 0xFF;
  long_header[9] = 0x7F;
  Bytes huge_header = file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", {}, 2);
  huge_header[11] = 0x10;  // 256 MiB
  Bytes truncated = file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", f16_8);
  truncated.resize(truncated.size() - 3);
  Bytes trailing = file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", f16_8);
  trailing.push_back(0);
  const std::vector<NpyBad> cases = {
      {"empty", {}, "the file is empty"},
      {"bad_magic", bad_magic, "not a .npy file"},
      {"short", {0x93, 'N', 'U', 'M'}, "truncated .npy header"},
      {"bad_version", bad_version, "unsupported .npy format version 4.0"},
      {"header_past_end", long_header, "the .npy header says it is 32777 bytes but the file holds"},
      {"huge_header", huge_header, "exceeds the limit"},
      {"fortran", file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", f16_8, 1, "True"),
       "fortran_order"},
      {"big_endian", file_test::npy_bytes(">f4", "(1, 2, 1, 1, 2)", Bytes(16)),
       "big-endian data ('>f4') is not supported"},
      {"f64", file_test::npy_bytes("<f8", "(1, 2, 1, 1, 1)", Bytes(16)),
       "dtype '<f8' is not supported"},
      {"garbage_dict", file_test::npy_bytes("<f2", "(1, 2, 2, 1, 2)", f16_8, 1, "Maybe"),
       "'fortran_order' is not True or False"},
      {"negative_dim", file_test::npy_bytes("<f2", "(1, -2, 2, 1, 2)", f16_8),
       "'shape' is not a tuple"},
      {"overflow", file_test::npy_bytes("<f2", "(4294967296, 4294967296, 2)", {}), "overflows"},
      {"truncated", truncated,
       "truncated: shape (1, 2, 2, 1, 2) of '<f2' needs 16 bytes of data but only 13"},
      {"trailing", trailing, "1 bytes follow the array data"},
      {"wrong_rank", file_test::npy_bytes("<f2", "(2, 2, 2)", f16_8), "expected a 5-D array"},
      {"not_kv_pair", file_test::npy_bytes("<f2", "(1, 3, 1, 1, 2)", Bytes(12)),
       "expected a 5-D array"},
      {"zero_layers", file_test::npy_bytes("<f2", "(0, 2, 1, 1, 2)", {}),
       "0 layers is out of range"},
  };
  // Headers written raw: numpy's structured dtypes, extra keys, text after the dict.
  const auto raw_npy = [](std::string_view dict, const Bytes& data) {
    Bytes b = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    file_test::put16(b, static_cast<std::uint32_t>(dict.size()));
    file_test::append(b, dict);
    b.insert(b.end(), data.begin(), data.end());
    return b;
  };
  std::vector<NpyBad> all = cases;
  all.push_back(
      {"structured",
       raw_npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", Bytes(4)),
       "bad .npy header dictionary: 'descr' is not a string (structured dtypes"});
  all.push_back(
      {"extra_key",
       raw_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (1,), 'x': 1}", Bytes(2)),
       "bad .npy header dictionary: unexpected key 'x'"});
  all.push_back({"text_after",
                 raw_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (1,)} x", Bytes(2)),
                 "text follows the closing '}'"});
  all.push_back({"missing_shape", raw_npy("{'descr': '<f2', 'fortran_order': False}", Bytes(2)),
                 "'shape' is missing"});
  all.push_back(
      {"unterminated", raw_npy("{'descr': '<f2", {}), "'descr' is an unterminated string"});

  for (const auto& c : all) {
    SCOPED_TRACE(c.name);
    const auto path = dir / (std::string(c.name) + ".npy");
    file_test::write_bytes(path, c.bytes);
    auto cache = load_cache_file(path);
    ASSERT_FALSE(cache);
    EXPECT_NE(cache.message().find(path.string()), std::string::npos) << cache.message();
    EXPECT_NE(cache.message().find(c.expected), std::string::npos) << cache.message();
  }
}

// layers.{0,1}.{key,value,query}.npy with f16 ramps; queries [2, 4, 2] (q_heads 4, kv_heads 2).
std::vector<file_test::ZipMember> kv_members(bool queries = true) {
  std::vector<file_test::ZipMember> members;
  for (int l = 0; l < 2; ++l) {
    members.push_back(
        {"layers." + std::to_string(l) + ".key.npy",
         file_test::npy_bytes("<f2", "(3, 2, 2)", encode(DType::F16, ramp(12, 10.0f * l)))});
    members.push_back(
        {"layers." + std::to_string(l) + ".value.npy",
         file_test::npy_bytes("<f2", "(3, 2, 2)", encode(DType::F16, ramp(12, 10.0f * l + 5)), 2)});
    if (queries) {
      members.push_back(
          {"layers." + std::to_string(l) + ".query.npy",
           file_test::npy_bytes("<f2", "(2, 4, 2)", encode(DType::F16, ramp(16, -3.0f)), 3)});
    }
  }
  return members;
}

void expect_kv_members(const KvCache& cache) {
  EXPECT_EQ(cache.shape.layers, 2);
  EXPECT_EQ(cache.shape.kv_heads, 2);
  EXPECT_EQ(cache.shape.q_heads, 4);
  EXPECT_EQ(cache.shape.head_dim, 2);
  EXPECT_TRUE(cache.has_queries());
  for (int l = 0; l < 2; ++l) {
    expect_tensor(cache.layers[l].key, 3, 2, 2, 10.0f * l);
    expect_tensor(cache.layers[l].value, 3, 2, 2, 10.0f * l + 5);
    expect_tensor(cache.layers[l].query, 2, 4, 2, -3.0f);
  }
}

TEST(Npy, DirectoryOfNpyFiles) {
  const auto dir = file_test::scratch_dir("npy_dir") / "run1";
  std::filesystem::create_directories(dir);
  for (const auto& m : kv_members()) file_test::write_bytes(dir / m.name, m.data);
  file_test::write_bytes(dir / "notes.txt", {'h', 'i'});
  file_test::write_bytes(dir / "tokens.npy", {1, 2, 3});  // not a layers.* name: ignored
  auto cache = load_cache_file(dir);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->shape.name, "run1");
  expect_kv_members(*cache);

  std::filesystem::remove(dir / "layers.1.key.npy");
  cache = load_cache_file(dir);
  ASSERT_FALSE(cache);
  EXPECT_NE(cache.message().find(dir.string()), std::string::npos) << cache.message();
  EXPECT_NE(cache.message().find("tensor 'layers.1.key' is missing"), std::string::npos)
      << cache.message();

  const auto empty = file_test::scratch_dir("npy_dir_empty");
  cache = load_cache_file(empty);
  ASSERT_FALSE(cache);
  EXPECT_NE(cache.message().find("no KV tensors found"), std::string::npos) << cache.message();
}

// Where the first record with signature `sig` starts (or b.size() when there is none).
std::size_t find(const Bytes& b, std::uint32_t sig, std::size_t from = 0) {
  for (std::size_t i = from; i + 4 <= b.size(); ++i) {
    if (b[i] == (sig & 0xFF) && b[i + 1] == ((sig >> 8) & 0xFF) &&
        b[i + 2] == ((sig >> 16) & 0xFF) && b[i + 3] == (sig >> 24)) {
      return i;
    }
  }
  return b.size();
}

TEST(Npz, StoredArchive) {
  const auto dir = file_test::scratch_dir("npz_stored");
  const auto path = dir / "cache.npz";
  auto members = kv_members();
  members.push_back({"positions.npy", {0x93, 'N'}});  // not ours: ignored even though broken
  file_test::write_bytes(path, file_test::stored_zip(members));
  auto cache = load_cache_file(path);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->shape.name, "cache");
  EXPECT_EQ(cache->source, "file:" + path.string());
  expect_kv_members(*cache);
}

TEST(Npz, Zip64Archive) {
  const auto dir = file_test::scratch_dir("npz_zip64");
  const auto path = dir / "big.npz";
  const Bytes zip = file_test::stored_zip(kv_members(), true);
  file_test::write_bytes(path, zip);
  auto cache = load_cache_file(path);
  ASSERT_TRUE(cache) << cache.message();
  expect_kv_members(*cache);

  // A zip64 end record whose locator points nowhere.
  Bytes bad = zip;
  const std::size_t locator = bad.size() - 22 - 20;
  ASSERT_EQ(bad[locator], 0x50);
  bad[locator + 8] = 0xF0;
  bad[locator + 15] = 0x70;
  file_test::write_bytes(path, bad);
  cache = load_cache_file(path);
  ASSERT_FALSE(cache);
  EXPECT_NE(cache.message().find("big.npz: zip64 end-of-central-directory offset"),
            std::string::npos)
      << cache.message();

  // 0xFFFFFFFF sizes without the zip64 extra field that must carry them.
  bad = zip;
  const std::size_t cd = find(bad, 0x02014b50);
  bad[cd + 30] = 0;  // extra length 0: the 28 bytes now read as the next header's start
  file_test::write_bytes(path, bad);
  cache = load_cache_file(path);
  ASSERT_FALSE(cache);
  EXPECT_NE(cache.message().find("big.npz"), std::string::npos) << cache.message();
}

TEST(Npz, DeflatedArchiveAsNumpyWritesIt) {
  const auto dir = file_test::scratch_dir("npz_deflated");
  const auto path = dir / "compressed.npz";
  file_test::write_bytes(path, file_test::deflated_npz());
  auto cache = load_cache_file(path);
  ASSERT_TRUE(cache) << cache.message();
  EXPECT_EQ(cache->shape.layers, 2);
  EXPECT_EQ(cache->shape.kv_heads, 1);
  EXPECT_EQ(cache->shape.head_dim, 4);
  EXPECT_EQ(cache->tokens(), 2);
  for (int l = 0; l < 2; ++l) {
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(cache->layers[l].key.at(i / 4, 0, i % 4), 100.0f * l + i);
      EXPECT_EQ(cache->layers[l].value.at(i / 4, 0, i % 4), 100.0f * l + 50 + i);
    }
  }
}

TEST(Npz, BadArchivesGiveClearErrors) {
  const auto dir = file_test::scratch_dir("npz_bad");
  const Bytes good = file_test::stored_zip(kv_members(false));
  const std::size_t cd = find(good, 0x02014b50);
  const std::size_t eocd = find(good, 0x06054b50);
  ASSERT_LT(cd, good.size());
  ASSERT_LT(eocd, good.size());

  std::vector<std::pair<const char*, std::pair<Bytes, const char*>>> cases;
  const auto add = [&](const char* name, Bytes b, const char* expected) {
    cases.push_back({name, {std::move(b), expected}});
  };
  add("empty", {}, "the file is empty");
  add("not_zip", Bytes(100, 'x'), "no end-of-central-directory record");
  {
    Bytes b = good;
    b.resize(eocd);  // the end record is gone
    add("no_eocd", b, "no end-of-central-directory record");
  }
  {
    Bytes b = good;
    b[eocd + 19] = 0x7F;  // central directory offset far past the end
    add("cd_offset", b, "zip central directory [");
  }
  {
    Bytes b = good;
    b[eocd + 10] = 200;  // more entries than the directory can hold
    add("cd_count", b, "claims 200 entries");
  }
  {
    Bytes b = good;
    b[cd + 1] = 'X';
    add("cd_signature", b, "entry 1 of 4 is truncated or has a bad signature");
  }
  {
    Bytes b = good;
    b[cd + 8] |= 1;  // encrypted
    add("encrypted", b, "entry 'layers.0.key.npy': encrypted zip entries are not supported");
  }
  {
    Bytes b = good;
    b[cd + 10] = 12;  // bzip2
    add("method", b, "entry 'layers.0.key.npy': compression method 12 is not supported");
  }
  {
    Bytes b = good;
    b[1] = 'X';  // first local header
    add("local_signature", b, "entry 'layers.0.key.npy': bad local header signature");
  }
  {
    Bytes b = good;
    b[cd + 45] = 0x7F;  // local header offset past the data
    add("local_offset", b, "entry 'layers.0.key.npy': local header offset");
  }
  {
    Bytes b = good;
    b[30 + 16 + 128 + 3] ^= 0x40;  // a data byte of the first entry (after its 128-byte header)
    add("crc", b, "entry 'layers.0.key.npy': CRC-32 mismatch");
  }
  {
    Bytes b = good;
    b[cd + 24] += 1;  // uncompressed size no longer equals compressed size (stored)
    add("stored_sizes", b, "stored entry has compressed size");
  }
  {
    auto members = kv_members(false);
    members[1].data = file_test::npy_bytes("<f2", "(3, 2, 2)", Bytes(20));  // 4 bytes short
    add("npy_in_zip", file_test::stored_zip(members), "entry 'layers.0.value.npy': truncated");
  }
  {
    auto members = kv_members(false);
    members.push_back(members[0]);
    add("duplicate", file_test::stored_zip(members), "tensor 'layers.0.key' appears twice");
  }
  {
    auto members = kv_members(false);
    members.erase(members.begin(), members.begin() + 2);  // layer 0 gone
    add("missing_layer", file_test::stored_zip(members), "layers.0 is missing");
  }
  {
    Bytes b = file_test::deflated_npz();
    b[0x5d] ^= 0xFF;  // inside the first entry's deflate stream
    add("deflate_corrupt", b, "entry 'layers.0.key.npy'");
  }

  for (const auto& [name, c] : cases) {
    SCOPED_TRACE(name);
    const auto path = dir / (std::string(name) + ".npz");
    file_test::write_bytes(path, c.first);
    auto cache = load_cache_file(path);
    ASSERT_FALSE(cache);
    EXPECT_NE(cache.message().find(path.string()), std::string::npos) << cache.message();
    EXPECT_NE(cache.message().find(c.second), std::string::npos) << cache.message();
  }
}

}  // namespace
}  // namespace kvlab
