// kvlab capture from both checkpoint layouts of the real stories260K weights: the llama2.c file,
// and the Hugging Face folder `kvlab models convert-llama2c` writes from it. Both write a capture
// with every layer's keys, values and queries and the token ids, and agree with each other: the
// same tokens, the same values, and keys equal up to the per-head row order the conversion
// permutes. Skipped when ../shared/models is absent.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/safetensors.h"

namespace {

using kvlab::cli_test::Output;
namespace fs = std::filesystem;

const std::string kModels = std::string(KVLAB_MODELS_DIR) + "/stories260K";
constexpr int kLayers = 5, kHeads = 8, kKvHeads = 4, kHeadDim = 8;
constexpr int kTokens = 19;  // BOS, "Once", " upon" and 16 generated

std::string fresh(const std::string& name) {
  const std::string dir = std::string(KVLAB_TEST_TMPDIR) + "/capture-hf-" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

Output run(const std::string& dir, const std::string& args) {
  return kvlab::cli_test::run_kvlab(args, "KVLAB_DB='" + dir + "/runs.sqlite'");
}

// The capture's tensors: layers.N.{key,value,query} in F32 and the token ids.
void expect_capture_tensors(const std::string& path) {
  SCOPED_TRACE(path);
  ASSERT_TRUE(fs::exists(path));
  const auto index = kvlab::read_safetensors_index(path);
  ASSERT_TRUE(index.ok()) << index.message();
  EXPECT_EQ(index->tensors.size(), 3u * kLayers + 1);
  const std::vector<std::uint64_t> kv = {kTokens, kKvHeads, kHeadDim},
                                   q = {kTokens, kHeads, kHeadDim};
  for (int l = 0; l < kLayers; ++l) {
    for (const auto& [role, shape] : {std::pair{"key", kv}, {"value", kv}, {"query", q}}) {
      const std::string name = fmt::format("layers.{}.{}", l, role);
      const kvlab::SafetensorsEntry* e = index->find(name);
      ASSERT_NE(e, nullptr) << name;
      EXPECT_EQ(e->shape, shape) << name;
      EXPECT_EQ(kvlab::safetensors_dtype_name(e->dtype), "F32") << name;
    }
  }
  const kvlab::SafetensorsEntry* ids = index->find("tokens");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->shape, std::vector<std::uint64_t>{kTokens});
}

TEST(CliCaptureHf, ConvertedFolderAndLlama2cFileCaptureTheSameCache) {
  if (!fs::exists(kModels + "/stories260K.bin")) GTEST_SKIP() << kModels << " is absent: skipped";
  const std::string dir = fresh("both");
  const std::string hf = dir + "/stories260K-hf";
  Output o = run(dir, "models convert-llama2c " + kModels + "/stories260K.bin " + hf);
  ASSERT_EQ(o.code, 0) << o.out;
  EXPECT_TRUE(fs::exists(hf + "/config.json"));
  EXPECT_TRUE(fs::exists(hf + "/model.safetensors"));

  // The folder has no tokenizer.json: the llama2.c tokenizer is named, and without it the error
  // says what is missing.
  const std::string args = " --prompt 'Once upon' --max-tokens 16 --json --out ";
  o = run(dir, "capture --model " + hf + args + dir + "/none.safetensors");
  EXPECT_NE(o.code, 0);
  EXPECT_NE(o.out.find("tokenizer.json"), std::string::npos) << o.out;
  EXPECT_FALSE(fs::exists(dir + "/none.safetensors"));

  const std::string from_hf = dir + "/hf.safetensors", from_bin = dir + "/bin.safetensors";
  o = run(dir,
          "capture --model " + hf + " --tokenizer " + kModels + "/tok512.bin" + args + from_hf);
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j_hf = nlohmann::json::parse(o.out);
  o = run(dir, "capture --model " + kModels + "/stories260K.bin" + args + from_bin);
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j_bin = nlohmann::json::parse(o.out);
  for (const auto* j : {&j_hf, &j_bin}) {
    EXPECT_EQ((*j)["tokens"], kTokens);
    EXPECT_EQ((*j)["layers"], kLayers);
    EXPECT_EQ((*j)["kv_heads"], kKvHeads);
    EXPECT_EQ((*j)["head_dim"], kHeadDim);
  }
  EXPECT_EQ(j_hf["generated"].get<std::string>().rfind(" a time, there was a little girl", 0), 0u)
      << j_hf["generated"];
  EXPECT_EQ(j_hf["generated"], j_bin["generated"]);
  expect_capture_tensors(from_hf);
  expect_capture_tensors(from_bin);

  // The two caches agree: the same token ids and values; key element r of a head in the Hugging
  // Face layout is element 2r (r < 4) or 2(r − 4) + 1 of the llama2.c one.
  const auto a = kvlab::load_cache_file(from_hf), b = kvlab::load_cache_file(from_bin);
  ASSERT_TRUE(a.ok()) << a.message();
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(a->token_ids, b->token_ids);
  double worst_key = 0, worst_value = 0;
  for (int l = 0; l < kLayers; ++l) {
    for (int t = 0; t < kTokens; ++t) {
      for (int h = 0; h < kKvHeads; ++h) {
        for (int r = 0; r < kHeadDim; ++r) {
          const int half = kHeadDim / 2, from = r < half ? 2 * r : 2 * (r - half) + 1;
          worst_key = std::max(worst_key, double(std::abs(a->layers[l].key.at(t, h, r) -
                                                          b->layers[l].key.at(t, h, from))));
          worst_value = std::max(worst_value, double(std::abs(a->layers[l].value.at(t, h, r) -
                                                              b->layers[l].value.at(t, h, r))));
        }
      }
    }
  }
  EXPECT_LT(worst_key, 1e-4);
  EXPECT_LT(worst_value, 1e-4);
}

}  // namespace
