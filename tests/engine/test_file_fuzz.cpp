// Fuzz-style robustness of the file sources: every truncation and thousands of seeded bit flips
// of small valid files must give either a cache that passes KvCache::validate() or an Error
// naming the file, never a crash or an out-of-bounds read (run under ASan/UBSan too).
// The variants are read from memory (load_cache_bytes runs the same readers as load_cache_file
// over an in-memory InputFile) so the test does not depend on disk speed; the intact file, every
// seventh truncation and every tenth bit-flip variant are also read from disk, where the tensors
// are mapped in place, and the two results must agree.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include "file_test_util.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/npy.h"
#include "kvlab/engine/sources/safetensors.h"

namespace kvlab {
namespace {

using file_test::Bytes;

struct FuzzStats {
  int loaded = 0, errors = 0;
};

// Loads `bytes` as the file `name`; checks the contract and counts the outcome.
void check_one(const std::string& name, const Bytes& bytes, FuzzStats& stats) {
  auto cache = load_cache_bytes(std::as_bytes(std::span(bytes)), name);
  if (cache) {
    const Status valid = cache->validate();
    EXPECT_TRUE(valid) << valid.message();
    ++stats.loaded;
  } else {
    EXPECT_NE(cache.message().find(name), std::string::npos) << cache.message();
    ++stats.errors;
  }
}

// The same bytes written to `path` and read from disk, where tensors are read in place from the
// mapped file (Tensor::borrowed): the same outcome as from memory, and every byte of a loaded
// cache readable (a tensor reaching past the mapping would fault here).
void check_on_disk(const std::filesystem::path& path, const Bytes& bytes) {
  file_test::write_bytes(path, bytes);
  auto from_disk = load_cache_file(path);
  auto from_memory = load_cache_bytes(std::as_bytes(std::span(bytes)), path.filename().string());
  ASSERT_EQ(from_disk.ok(), from_memory.ok())
      << (from_disk ? from_memory.message() : from_disk.message());
  if (!from_disk) {
    EXPECT_NE(from_disk.message().find(path.string()), std::string::npos) << from_disk.message();
    return;
  }
  for (std::size_t l = 0; l < from_disk->layers.size(); ++l) {
    for (const auto& [disk, memory] :
         {std::pair{&from_disk->layers[l].key, &from_memory->layers[l].key},
          {&from_disk->layers[l].value, &from_memory->layers[l].value},
          {&from_disk->layers[l].query, &from_memory->layers[l].query}}) {
      EXPECT_TRUE(file_test::same_bytes(*disk, *memory)) << "layer " << l;
    }
  }
}

void fuzz_file(const std::filesystem::path& path, const Bytes& valid, int flips,
               std::uint32_t seed) {
  const auto start = std::chrono::steady_clock::now();
  FuzzStats truncated, flipped;
  const std::string name = path.filename().string();
  {
    SCOPED_TRACE("intact");
    file_test::write_bytes(path, valid);
    auto from_disk = load_cache_file(path);
    ASSERT_TRUE(from_disk) << from_disk.message();
    auto from_memory = load_cache_bytes(std::as_bytes(std::span(valid)), name);
    ASSERT_TRUE(from_memory) << from_memory.message();
    EXPECT_EQ(from_memory->source, "memory:" + name);
    EXPECT_EQ(from_disk->shape.name, from_memory->shape.name);
    EXPECT_EQ(from_disk->stored_bytes(), from_memory->stored_bytes());
    for (std::size_t l = 0; l < from_disk->layers.size(); ++l) {
      EXPECT_TRUE(file_test::same_bytes(from_disk->layers[l].key, from_memory->layers[l].key));
      EXPECT_TRUE(file_test::same_bytes(from_disk->layers[l].value, from_memory->layers[l].value));
      EXPECT_TRUE(file_test::same_bytes(from_disk->layers[l].query, from_memory->layers[l].query));
    }
  }
  for (std::size_t len = 0; len < valid.size(); ++len) {
    SCOPED_TRACE("truncated to " + std::to_string(len));
    const Bytes cut(valid.begin(), valid.begin() + static_cast<std::ptrdiff_t>(len));
    check_one(name, cut, truncated);
    if (len % 7 == 0) check_on_disk(path, cut);
  }
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::size_t> pick(0, valid.size() * 8 - 1);
  std::uniform_int_distribution<int> how_many(1, 4);
  for (int v = 0; v < flips; ++v) {
    Bytes b = valid;
    const int n = how_many(rng);
    std::string where;
    for (int k = 0; k < n; ++k) {
      const std::size_t bit = pick(rng);
      b[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
      where += std::to_string(bit) + " ";
    }
    SCOPED_TRACE("flipped bits " + where);
    check_one(name, b, flipped);
    if (v % 10 == 0) check_on_disk(path, b);
  }
  // Every strict prefix is missing something the format needs.
  EXPECT_EQ(truncated.loaded, 0);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "[ fuzz     ] %s: %zu bytes, %zu truncations (all errors), %d bit-flip variants: "
      "%d loaded, %d errors, %.2f s\n",
      path.filename().c_str(), valid.size(), valid.size(), flips, flipped.loaded, flipped.errors,
      seconds);
}

constexpr int kFlips = 3000;

TEST(FileFuzz, SafetensorsTruncationsAndBitFlips) {
  const auto dir = file_test::scratch_dir("fuzz_safetensors");
  const auto path = dir / "fuzz.safetensors";
  ASSERT_TRUE(save_cache_file(file_test::random_cache(DType::F16, 2, 3, 2, 4, 4, 2), path));
  fuzz_file(path, file_test::read_bytes(path), kFlips, 1);
}

// A capture's RoPE in the metadata (kvlab.key_rope, JSON inside the JSON header).
TEST(FileFuzz, SafetensorsWithKeyRopeTruncationsAndBitFlips) {
  const auto dir = file_test::scratch_dir("fuzz_safetensors_rope");
  const auto path = dir / "rope.safetensors";
  KvCache cache = file_test::random_cache(DType::F16, 1, 3, 1, 4, 0, 0);
  cache.key_rope.frequencies = {1.0, 0.01};
  cache.key_rope.rotary_dims = 4;
  cache.key_rope.positions = {0, 7, 8};
  ASSERT_TRUE(save_cache_file(cache, path));
  fuzz_file(path, file_test::read_bytes(path), kFlips, 2);
}

TEST(FileFuzz, StoredNpzTruncationsAndBitFlips) {
  const auto dir = file_test::scratch_dir("fuzz_npz");
  const auto npy = [](std::string_view shape, std::size_t bytes, int version) {
    Bytes data(bytes);
    for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::uint8_t>(i * 37);
    return file_test::npy_bytes("<f2", shape, data, version);
  };
  const Bytes zip = file_test::stored_zip({{"layers.0.key.npy", npy("(2, 1, 4)", 16, 1)},
                                           {"layers.0.value.npy", npy("(2, 1, 4)", 16, 2)},
                                           {"layers.1.key.npy", npy("(2, 1, 4)", 16, 3)},
                                           {"layers.1.value.npy", npy("(2, 1, 4)", 16, 1)}});
  fuzz_file(dir / "fuzz.npz", zip, kFlips, 2);
}

TEST(FileFuzz, Zip64NpzTruncationsAndBitFlips) {
  const auto dir = file_test::scratch_dir("fuzz_npz64");
  Bytes data(16);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 53);
  const Bytes zip = file_test::stored_zip(
      {{"layers.0.key.npy", file_test::npy_bytes("<u2", "(2, 1, 4)", data)},
       {"layers.0.value.npy", file_test::npy_bytes("<u2", "(2, 1, 4)", data)}},
      true);
  fuzz_file(dir / "fuzz64.npz", zip, kFlips, 5);
}

TEST(FileFuzz, DeflatedNpzTruncationsAndBitFlips) {
  const auto dir = file_test::scratch_dir("fuzz_npz_deflated");
  fuzz_file(dir / "fuzz.npz", file_test::deflated_npz(), kFlips, 3);
}

TEST(FileFuzz, NpyTruncationsAndBitFlips) {
  const auto dir = file_test::scratch_dir("fuzz_npy");
  Bytes data(2 * 2 * 2 * 1 * 4 * 4);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 11);
  fuzz_file(dir / "fuzz.npy", file_test::npy_bytes("<f4", "(2, 2, 2, 1, 4)", data), kFlips, 4);
}

TEST(FileFuzz, MemoryLoadsNameTheDataAndRefuseUnknownTypes) {
  const Bytes junk = {1, 2, 3};
  auto r = load_cache_bytes(std::as_bytes(std::span(junk)), "upload.bin");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("upload.bin: unsupported file type '.bin'"), std::string::npos);
  r = load_cache_bytes(std::as_bytes(std::span(junk)), "upload.safetensors");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("upload.safetensors: the file is too short"), std::string::npos)
      << r.message();
  r = load_cache_bytes({}, "empty.npz");
  ASSERT_FALSE(r);
  EXPECT_NE(r.message().find("empty.npz: the file is empty"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace kvlab
