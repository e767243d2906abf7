// The GGUF reader: files written by the `gguf` package (llama.cpp's Python writer), every block
// type dequantized as that package dequantizes it, and bad input refused with a message naming
// the file and the problem, never a crash (hand-made damage and random mutations).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kvlab/engine/model/gguf.h"
#include "kvlab/engine/model/gguf_model.h"
#include "model_test_support.h"

namespace kvlab {
namespace {

namespace fs = std::filesystem;

std::vector<std::byte> read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> b(c.size());
  std::memcpy(b.data(), c.data(), c.size());
  return b;
}

// --- A small GGUF file built byte by byte, to damage in known places. ---
struct Writer {
  std::vector<std::byte> b;
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b.insert(b.end(), p, p + sizeof(T));
  }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    for (char c : s) b.push_back(static_cast<std::byte>(c));
  }
};

// "GGUF" v3, two keys (a u32 and a string array), one F32 tensor [4 × 2] at offset 0.
struct Tiny {
  std::uint32_t version = 3;
  std::uint64_t tensor_count = 1, kv_count = 2;
  std::uint32_t value_type = 4;  // u32
  std::uint64_t array_count = 2;
  std::uint32_t n_dims = 2;
  std::uint64_t dim0 = 4, dim1 = 2;
  std::uint32_t ggml_type = 0;  // F32
  std::uint64_t offset = 0;
  bool duplicate_key = false;
  std::vector<std::byte> bytes() const {
    Writer w;
    for (char c : std::string("GGUF")) w.b.push_back(static_cast<std::byte>(c));
    w.put(version);
    w.put(tensor_count);
    w.put(kv_count);
    w.str("general.architecture.layers");
    w.put(value_type);
    w.put<std::uint32_t>(7);
    w.str(duplicate_key ? "general.architecture.layers" : "tokenizer.ggml.tokens");
    w.put<std::uint32_t>(9);  // array
    w.put<std::uint32_t>(8);  // of strings
    w.put(array_count);
    w.str("a");
    w.str("bc");
    w.str("weight");
    w.put(n_dims);
    w.put(dim0);
    w.put(dim1);
    w.put(ggml_type);
    w.put(offset);
    while (w.b.size() % 32) w.b.push_back(std::byte{0});
    for (int i = 0; i < 8; ++i) w.put<float>(static_cast<float>(i));
    return w.b;
  }
};

Result<GgufFile> parse(const std::vector<std::byte>& b) {
  return GgufFile::parse(b, "tiny.gguf");
}

TEST(GgufReader, ReadsAHandMadeFile) {
  const auto b = Tiny{}.bytes();
  auto f = parse(b);
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(*f->get_integer("general.architecture.layers"), 7);
  auto tokens = f->get_strings("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens);
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[1], "bc");
  ASSERT_EQ(f->tensors().size(), 1u);
  const GgufTensorInfo& t = f->tensors()[0];
  EXPECT_EQ(t.dims, (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(t.bytes, 32u);
  float v[8];
  std::memcpy(v, f->tensor_data(t).data(), sizeof v);
  EXPECT_EQ(v[7], 7.0f);
  // Typed getters refuse another type, naming the key.
  auto wrong = f->get_string("general.architecture.layers");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.message().find("general.architecture.layers is a u32, not a string"),
            std::string::npos)
      << wrong.message();
  EXPECT_FALSE(f->get_integer("absent.key"));
}

void expect_error(const Tiny& tiny, const std::string& part) {
  auto f = parse(tiny.bytes());
  ASSERT_FALSE(f) << "expected an error about: " << part;
  EXPECT_NE(f.message().find("tiny.gguf"), std::string::npos) << f.message();
  EXPECT_NE(f.message().find(part), std::string::npos) << f.message();
}

TEST(GgufReader, RefusesDamagedHeadersNamingTheProblem) {
  Tiny t;
  t.version = 1;
  expect_error(t, "version 1");
  t = {};
  t.version = 0x03000000;
  expect_error(t, "big-endian");
  t = {};
  t.tensor_count = 1ull << 60;
  expect_error(t, "tensors cannot fit");
  t = {};
  t.kv_count = ~0ull;
  expect_error(t, "key/values cannot fit");
  t = {};
  t.value_type = 13;
  expect_error(t, "unknown value type 13");
  t = {};
  t.array_count = 1ull << 62;
  expect_error(t, "strings cannot fit");
  t = {};
  t.n_dims = 5;
  expect_error(t, "5 dimensions");
  t = {};
  t.dim1 = 0;
  expect_error(t, "dimension 1 of size 0");
  t = {};
  t.dim0 = 1ull << 40, t.dim1 = 1ull << 40;
  expect_error(t, "too large");
  t = {};
  t.ggml_type = 4;  // removed from ggml (Q4_2)
  expect_error(t, "unknown ggml type 4");
  t = {};
  t.ggml_type = 2, t.dim0 = 5;  // Q4_0 rows must be whole blocks of 32
  expect_error(t, "not a whole number of Q4_0 blocks");
  t = {};
  t.offset = 64;
  expect_error(t, "passes the end of the file");
  t = {};
  t.offset = 3;
  expect_error(t, "not a multiple of the alignment");
  t = {};
  t.duplicate_key = true;
  expect_error(t, "appears twice");
}

TEST(GgufReader, EveryTruncationIsAnErrorNotACrash) {
  const auto b = Tiny{}.bytes();
  for (std::size_t n = 0; n < b.size(); ++n) {
    std::vector<std::byte> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(n));
    auto f = parse(cut);
    EXPECT_FALSE(f) << "a file cut to " << n << " bytes was accepted";
    if (!f) {
      EXPECT_NE(f.message().find("tiny.gguf"), std::string::npos) << f.message();
    }
  }
}

// Random damage to the header and metadata of real files: parsing must end in a value or an
// error (AddressSanitizer runs of the suite check that nothing is read out of bounds).
void fuzz(const std::vector<std::byte>& original, std::size_t region, int rounds,
          std::uint32_t seed) {
  std::mt19937 rng(seed);
  int accepted = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::byte> b = original;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const std::size_t at = rng() % std::min(region, b.size());
      switch (rng() % 4) {
        case 0:  // a random byte
          b[at] = static_cast<std::byte>(rng());
          break;
        case 1:  // a large value in a length or count
          b[at] = std::byte{0xFF};
          break;
        case 2:  // a flipped bit
          b[at] ^= static_cast<std::byte>(1u << (rng() % 8));
          break;
        default:  // cut short
          b.resize(at);
          break;
      }
      if (b.empty()) break;
    }
    auto f = GgufFile::parse(b, "fuzzed.gguf");
    if (f) {
      ++accepted;
      for (const auto& t : f->tensors()) ASSERT_LE(t.offset + t.bytes + f->data_offset(), b.size());
    } else {
      ASSERT_FALSE(f.message().empty());
    }
  }
  std::cout << "fuzzed " << rounds << " files, " << accepted << " still valid\n";
}

TEST(GgufReader, FuzzedHandMadeFilesNeverCrash) {
  fuzz(Tiny{}.bytes(), 1 << 10, 20000, 1);
}

TEST(GgufReader, FuzzedGgufPackageFilesNeverCrash) {
  KVLAB_REQUIRE_FILE(test::gguf_types_dir() / "types.gguf");
  const auto b = read_bytes(test::gguf_types_dir() / "types.gguf");
  fuzz(b, 4096, 5000, 2);
}

TEST(GgufReader, FuzzedSmolLm2HeadersNeverCrash) {
  KVLAB_REQUIRE_FILE(test::smollm2());
  // The metadata and tensor infos of SmolLM2 take its first 1.8 MB; the weights are left out.
  auto b = read_bytes(test::smollm2());
  auto f = GgufFile::parse(b, "smollm2");
  ASSERT_TRUE(f) << f.message();
  b.resize(static_cast<std::size_t>(f->data_offset()) + 4096);
  fuzz(b, b.size(), 300, 3);
}

// --- Files written by the gguf package ---

TEST(GgufTypes, EveryBlockTypeDequantizesAsTheGgufPackageDoes) {
  KVLAB_REQUIRE_FILE(test::gguf_types_dir() / "manifest.txt");
  auto f = GgufFile::open(test::gguf_types_dir() / "types.gguf");
  ASSERT_TRUE(f) << f.message();
  std::ifstream manifest(test::gguf_types_dir() / "manifest.txt");
  std::string name;
  std::int64_t rows = 0, cols = 0;
  int checked = 0;
  while (manifest >> name >> rows >> cols) {
    SCOPED_TRACE(name);
    const GgufTensorInfo* t = f->find_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dims, (std::vector<std::int64_t>{cols, rows}));
    const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(t->type));
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(info->name, name);
    const auto want_bytes = read_bytes(test::gguf_types_dir() / (name + ".f32"));
    ASSERT_EQ(want_bytes.size(), static_cast<std::size_t>(rows * cols) * 4);
    std::vector<float> want(static_cast<std::size_t>(rows * cols)), got(want.size());
    std::memcpy(want.data(), want_bytes.data(), want_bytes.size());
    const auto row = ggml_row_bytes(t->type, cols);
    ASSERT_TRUE(row);
    for (std::int64_t r = 0; r < rows; ++r) {
      ggml_dequantize(t->type, f->tensor_data(*t).data() + r * static_cast<std::int64_t>(*row),
                      got.data() + r * cols, cols);
    }
    double worst = 0, scale = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - want[i]));
      scale = std::max(scale, std::abs(static_cast<double>(want[i])));
    }
    EXPECT_LE(worst, 1e-6 * std::max(scale, 1.0)) << name << ": worst difference " << worst;
    ++checked;
  }
  // F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K … Q8_K at least.
  EXPECT_GE(checked, 14);
}

TEST(GgufTypes, MetadataOfEveryValueTypeReadsAsWritten) {
  KVLAB_REQUIRE_FILE(test::gguf_types_dir() / "types.gguf");
  auto f = GgufFile::open(test::gguf_types_dir() / "types.gguf");
  ASSERT_TRUE(f) << f.message();
  EXPECT_EQ(*f->get_integer("test.u8"), 200);
  EXPECT_EQ(*f->get_integer("test.i8"), -100);
  EXPECT_EQ(*f->get_integer("test.u16"), 60000);
  EXPECT_EQ(*f->get_integer("test.i16"), -30000);
  EXPECT_EQ(*f->get_integer("test.u32"), 4000000000);
  EXPECT_EQ(*f->get_integer("test.i32"), -2000000000);
  EXPECT_EQ(*f->get_integer("test.i64"), -(std::int64_t{1} << 62) - 7);
  EXPECT_EQ(*f->get_integer("test.bool"), 1);
  EXPECT_DOUBLE_EQ(*f->get_real("test.f32"), 3.25);
  EXPECT_DOUBLE_EQ(*f->get_real("test.f64"), -0.1);
  EXPECT_EQ(*f->get_string("test.string"), "kvlab ✓ GGUF");
  // 2^63 + 5 does not fit an int64: refused by the integer getter, shown exactly, read as a real.
  auto big = f->get_integer("test.u64");
  ASSERT_FALSE(big);
  EXPECT_NE(big.message().find("test.u64 = 9223372036854775813 is too large"), std::string::npos)
      << big.message();
  EXPECT_EQ(f->find("test.u64")->display(), "9223372036854775813");
  EXPECT_EQ(*f->get_integers("test.array.i32"), (std::vector<std::int64_t>{1, -2, 3, 2147483647}));
  EXPECT_EQ(*f->get_integers("test.array.u8"), (std::vector<std::int64_t>{0, 255, 7}));
  EXPECT_EQ(*f->get_integers("test.array.i64"),
            (std::vector<std::int64_t>{-(std::int64_t{1} << 40), std::int64_t{1} << 62}));
  EXPECT_EQ(*f->get_reals("test.array.f32"), (std::vector<double>{0.5, -1.5}));
  EXPECT_EQ(*f->get_integers("test.array.bool"), (std::vector<std::int64_t>{1, 0, 1}));
  EXPECT_EQ(*f->get_strings("test.array.str"),
            (std::vector<std::string_view>{"alpha", "", "γamma"}));
  EXPECT_TRUE(f->get_integers("test.array.empty")->empty());
  EXPECT_FALSE(f->get_strings("test.array.i32"));  // wrong element type, named
}

}  // namespace
}  // namespace kvlab
