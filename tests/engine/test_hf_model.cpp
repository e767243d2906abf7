// Hugging Face checkpoints: stories260K converted from llama2.c (F32, F16, BF16, sharded) gives
// the llama2.c path's logits and greedy text; broken folders give errors naming the problem.
// The tests on the real model skip with a message when ../shared/models is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "file_test_util.h"
#include "kvlab/engine/model/hf_model.h"
#include "kvlab/engine/sources/safetensors.h"

namespace kvlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kModel = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";

#define REQUIRE_MODEL() \
  if (!fs::exists(kModel)) GTEST_SKIP() << kModel << " is absent: skipped"

#define EXPECT_ERROR_HAS(result, ...)                                        \
  do {                                                                       \
    const auto& r_ = (result);                                               \
    ASSERT_FALSE(r_.ok());                                                   \
    for (const std::string part : {__VA_ARGS__}) {                           \
      EXPECT_NE(r_.message().find(part), std::string::npos) << r_.message(); \
    }                                                                        \
  } while (0)

fs::path scratch() {
  return file_test::scratch_dir("hf");
}

const std::vector<int> kTokens = {1, 403, 407, 261, 378, 283, 2, 500, 14, 77, 300, 301};

// Logits at every position, one token at a time.
std::vector<std::vector<float>> run(const LlamaModel& model, const std::vector<int>& tokens) {
  auto state = model.new_state();
  std::vector<std::vector<float>> out;
  for (int t : tokens) out.push_back(model.forward(state, {t}).value());
  return out;
}

double worst(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double w = 0;
  for (std::size_t p = 0; p < a.size(); ++p) {
    for (std::size_t i = 0; i < a[p].size(); ++i)
      w = std::max(w, double(std::abs(a[p][i] - b[p][i])));
  }
  return w;
}

std::vector<int> greedy(const LlamaModel& model, int steps) {
  auto state = model.new_state();
  std::vector<int> out = {1};
  for (int i = 0; i < steps; ++i) {
    const auto logits = model.forward(state, {out.back()}).value();
    out.push_back(
        static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  return out;
}

// A safetensors file as a list of named tensors, to take apart and write again.
struct StTensor {
  std::string name, dtype;
  std::vector<std::uint64_t> shape;
  file_test::Bytes bytes;
};

std::vector<StTensor> read_tensors(const fs::path& path) {
  const auto index = read_safetensors_index(path).value();
  std::vector<StTensor> out;
  for (const auto& e : index.tensors) {
    StTensor t{e.name, std::string(safetensors_dtype_name(e.dtype)), e.shape, {}};
    t.bytes.resize(e.nbytes());
    EXPECT_TRUE(read_safetensors_tensor(index, e, std::as_writable_bytes(std::span(t.bytes))).ok());
    out.push_back(std::move(t));
  }
  return out;
}

void write_tensors(const fs::path& path, const std::vector<StTensor>& tensors) {
  json header = json::object();
  file_test::Bytes data;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {data.size(), data.size() + t.bytes.size()}}};
    data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  }
  file_test::write_bytes(path, file_test::safetensors_bytes(header, data));
}

TEST(HfModel, ConvertedF32GivesTheLlama2cLogitsAndText) {
  REQUIRE_MODEL();
  const fs::path dir = scratch();
  ASSERT_TRUE(convert_llama2c_to_hf(kModel, dir.string()).ok());
  auto hf = load_hf_model(dir.string());
  ASSERT_TRUE(hf.ok()) << hf.message();
  const auto ref = LlamaModel::load_llama2c(kModel).value();
  const LlamaConfig& c = hf->config();
  EXPECT_TRUE(c.rope_half_split);
  EXPECT_TRUE(c.shared_classifier);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_EQ(c.seq_len, 512);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_LT(worst(run(*hf, kTokens), run(ref, kTokens)), 1e-4);
  EXPECT_EQ(greedy(*hf, 40), greedy(ref, 40));
  // The batched prefill agrees as well (the permuted rows go through the matrix products).
  auto state = hf->new_state();
  const auto last = hf->forward(state, kTokens).value();
  EXPECT_LT(worst({last}, {run(ref, kTokens).back()}), 1e-4);
}

// F16 and BF16 weights keep 11 and 8 significant bits. On stories260K (logits up to ~19) the
// logits then move by at most ~0.017 (F16) and ~0.1 (BF16); the tolerances are 3x and 2.5x that,
// and the first 40 greedy tokens from BOS stay the same.
TEST(HfModel, ConvertedHalfPrecisionStaysClose) {
  REQUIRE_MODEL();
  const auto ref = LlamaModel::load_llama2c(kModel).value();
  const auto want = run(ref, kTokens);
  for (const auto& [dtype, tolerance, same_tokens] :
       {std::tuple{DType::F16, 0.05, 40}, std::tuple{DType::BF16, 0.25, 40}}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    const fs::path dir = scratch() / std::string(dtype_name(dtype));
    ASSERT_TRUE(convert_llama2c_to_hf(kModel, dir.string(), dtype).ok());
    EXPECT_EQ(read_tensors(dir / "model.safetensors").front().dtype,
              dtype == DType::F16 ? "F16" : "BF16");
    auto hf = load_hf_model(dir.string());
    ASSERT_TRUE(hf.ok()) << hf.message();
    const double w = worst(run(*hf, kTokens), want);
    EXPECT_LT(w, tolerance);
    EXPECT_GT(w, 0.0);  // really rounded
    EXPECT_EQ(greedy(*hf, same_tokens), greedy(ref, same_tokens));
  }
}

TEST(HfModel, ShardedCheckpointGivesTheSameLogits) {
  REQUIRE_MODEL();
  const fs::path dir = scratch();
  ASSERT_TRUE(convert_llama2c_to_hf(kModel, dir.string()).ok());
  const auto whole = run(load_hf_model(dir.string()).value(), kTokens);
  const auto tensors = read_tensors(dir / "model.safetensors");
  fs::remove(dir / "model.safetensors");
  const std::size_t half = tensors.size() / 2;
  json map = json::object();
  const std::string names[2] = {"model-00001-of-00002.safetensors",
                                "model-00002-of-00002.safetensors"};
  for (int s = 0; s < 2; ++s) {
    std::vector<StTensor> part(tensors.begin() + (s ? half : 0),
                               s ? tensors.end() : tensors.begin() + half);
    for (const auto& t : part) map[t.name] = names[s];
    write_tensors(dir / names[s], part);
  }
  std::ofstream(dir / "model.safetensors.index.json")
      << json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump(2);
  auto sharded = load_hf_model(dir.string());
  ASSERT_TRUE(sharded.ok()) << sharded.message();
  EXPECT_EQ(worst(run(*sharded, kTokens), whole), 0.0);

  // A shard the index names but that is gone.
  fs::remove(dir / names[1]);
  EXPECT_ERROR_HAS(load_hf_model(dir.string()), names[1]);
}

TEST(HfModel, BrokenCheckpointsAreErrorsNamingTheProblem) {
  REQUIRE_MODEL();
  const fs::path good = scratch() / "good";
  ASSERT_TRUE(convert_llama2c_to_hf(kModel, good.string()).ok());
  const auto tensors = read_tensors(good / "model.safetensors");
  const auto variant = [&](const std::string& name, auto&& edit) {
    const fs::path dir = good.parent_path() / name;
    fs::create_directories(dir);
    fs::copy_file(good / "config.json", dir / "config.json");
    auto copy = tensors;
    edit(copy);
    write_tensors(dir / "model.safetensors", copy);
    return dir.string();
  };
  const std::string missing = variant("missing", [](auto& t) {
    std::erase_if(t,
                  [](const StTensor& x) { return x.name == "model.layers.3.mlp.up_proj.weight"; });
  });
  EXPECT_ERROR_HAS(load_hf_model(missing), "model.layers.3.mlp.up_proj.weight", "is missing",
                   "missing/model.safetensors");
  const std::string reshaped = variant("reshaped", [](auto& t) {
    for (auto& x : t) {
      if (x.name == "model.layers.1.self_attn.k_proj.weight") x.shape = {64, 32};
    }
  });
  EXPECT_ERROR_HAS(load_hf_model(reshaped), "model.layers.1.self_attn.k_proj.weight",
                   "shape [64, 32], expected [32, 64]", "reshaped/model.safetensors");
  const std::string ints = variant("ints", [](auto& t) {
    for (auto& x : t) {
      if (x.name == "model.norm.weight") x.dtype = "I32";
    }
  });
  EXPECT_ERROR_HAS(load_hf_model(ints), "model.norm.weight", "I32");
  // Qwen2-style projection biases are refused by name.
  const std::string bias = variant("bias", [](auto& t) {
    t.push_back({"model.layers.0.self_attn.q_proj.bias", "F32", {64}, file_test::Bytes(256)});
  });
  EXPECT_ERROR_HAS(load_hf_model(bias), "model.layers.0.self_attn.q_proj.bias");
  // Untied classifier without lm_head.weight.
  const std::string untied = variant("untied", [](auto&) {});
  auto config = json::parse(std::ifstream(good / "config.json"));
  config["tie_word_embeddings"] = false;
  std::ofstream(fs::path(untied) / "config.json") << config.dump();
  EXPECT_ERROR_HAS(load_hf_model(untied), "lm_head.weight", "is missing");

  // A truncated file.
  auto bytes = file_test::read_bytes(good / "model.safetensors");
  bytes.resize(bytes.size() - 1000);
  file_test::write_bytes(good / "model.safetensors", bytes);
  EXPECT_ERROR_HAS(load_hf_model(good.string()), "good/model.safetensors", "past the end");
  fs::remove(good / "model.safetensors");
  EXPECT_ERROR_HAS(load_hf_model(good.string()), "model.safetensors.index.json");
}

// config.json alone: every field checked, with the file and the key in the message.
TEST(HfModel, ConfigErrorsNameTheField) {
  const fs::path dir = scratch();
  const json base = {{"model_type", "llama"},    {"hidden_size", 64},
                     {"intermediate_size", 172}, {"num_hidden_layers", 5},
                     {"num_attention_heads", 8}, {"num_key_value_heads", 4},
                     {"vocab_size", 512},        {"max_position_embeddings", 512},
                     {"rms_norm_eps", 1e-5},     {"tie_word_embeddings", true}};
  const auto with = [&](auto&& edit) {
    json c = base;
    edit(c);
    std::ofstream(dir / "config.json") << c.dump();
    return read_hf_config(dir.string());
  };
  auto ok = with([](json&) {});
  ASSERT_TRUE(ok.ok()) << ok.message();
  EXPECT_EQ(ok->head_dim(), 8);
  EXPECT_DOUBLE_EQ(ok->rope_theta, 10000.0);
  auto mha = with([](json& c) { c.erase("num_key_value_heads"); });
  EXPECT_EQ(mha->kv_heads, 8);
  auto mistral = with([](json& c) {
    c["model_type"] = "mistral";
    c["sliding_window"] = 128;
  });
  EXPECT_EQ(mistral->seq_len, 128);

  EXPECT_ERROR_HAS(with([](json& c) { c.erase("hidden_size"); }), "config.json",
                   "'hidden_size' is missing");
  EXPECT_ERROR_HAS(with([](json& c) { c["num_attention_heads"] = "eight"; }),
                   "'num_attention_heads' is not a positive integer");
  EXPECT_ERROR_HAS(with([](json& c) { c["vocab_size"] = -3; }), "'vocab_size'");
  EXPECT_ERROR_HAS(with([](json& c) { c["rms_norm_eps"] = nullptr; }), "'rms_norm_eps' is missing");
  EXPECT_ERROR_HAS(with([](json& c) { c["head_dim"] = 16; }), "'head_dim' differs", "(got 16)");
  EXPECT_ERROR_HAS(with([](json& c) { c["model_type"] = "gpt2"; }), "\"gpt2\"");
  EXPECT_ERROR_HAS(with([](json& c) { c["num_key_value_heads"] = 3; }), "do not divide");
  EXPECT_ERROR_HAS(with([](json& c) { c["hidden_act"] = "gelu"; }), "'hidden_act'");
  EXPECT_ERROR_HAS(with([](json& c) {
                     c["rope_scaling"] = {{"rope_type", "llama3"}};
                   }),
                   "rope_scaling: 'factor' is missing");
  EXPECT_ERROR_HAS(with([](json& c) {
                     c["rope_scaling"] = {{"rope_type", "llama3"},
                                          {"factor", 8.0},
                                          {"low_freq_factor", 4.0},
                                          {"high_freq_factor", 1.0},
                                          {"original_max_position_embeddings", 8192}};
                   }),
                   "'high_freq_factor' must be larger than low_freq_factor");
  EXPECT_ERROR_HAS(with([](json& c) {
                     c["rope_scaling"] = {{"type", "linear"}, {"factor", -2}};
                   }),
                   "rope_scaling: 'factor' is not a positive number");
  EXPECT_ERROR_HAS(with([](json& c) { c["tie_word_embeddings"] = 1; }), "'tie_word_embeddings'");
  std::ofstream(dir / "config.json") << "{\"model_type\": ";
  EXPECT_ERROR_HAS(read_hf_config(dir.string()), "config.json", "not valid JSON");
  EXPECT_ERROR_HAS(read_hf_config((dir / "nowhere").string()), "nowhere/config.json");
}

// Llama 3.1's scaled RoPE, from the formula as transformers' _compute_llama3_parameters states
// it, written out here apart from the engine: a frequency whose wavelength is above
// original / low_freq_factor is divided by the factor, one below original / high_freq_factor is
// kept, and in between the two are blended by (original / wavelength − low) / (high − low).
double llama3_reference(double inv_freq, double factor, double low, double high, double original) {
  const double wavelen = 2 * M_PI / inv_freq;
  const double scaled = wavelen > original / low ? inv_freq / factor : inv_freq;
  const bool medium = !(wavelen < original / high) && !(wavelen > original / low);
  if (!medium) return scaled;
  const double smooth = (original / wavelen - low) / (high - low);
  return (1 - smooth) * scaled / factor + smooth * scaled;
}

TEST(HfModel, ScaledRopeLlama3AndLinearFrequencies) {
  const fs::path dir = scratch();
  json c = {{"model_type", "llama"},     {"hidden_size", 512},
            {"intermediate_size", 1024}, {"num_hidden_layers", 2},
            {"num_attention_heads", 4},  {"num_key_value_heads", 2},
            {"vocab_size", 512},         {"max_position_embeddings", 131072},
            {"rms_norm_eps", 1e-5},      {"rope_theta", 500000.0}};
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  std::ofstream(dir / "config.json") << c.dump();
  auto config = read_hf_config(dir.string());
  ASSERT_TRUE(config.ok()) << config.message();
  const RopeScaling& s = config->rope_scaling;
  EXPECT_EQ(s.kind, RopeScaling::Kind::Llama3);
  EXPECT_DOUBLE_EQ(s.factor, 8.0);
  EXPECT_EQ(s.original_max_positions, 8192);
  const auto freq = rope_frequencies(*config);
  ASSERT_EQ(freq.size(), 64u);  // head_dim 128
  int kept = 0, divided = 0, blended = 0;
  for (std::size_t i = 0; i < freq.size(); ++i) {
    const double plain = std::pow(500000.0, -2.0 * static_cast<double>(i) / 128);
    const double want = llama3_reference(plain, 8, 1, 4, 8192);
    EXPECT_NEAR(freq[i], want, 1e-15 + 1e-12 * want) << "pair " << i;
    if (want == plain)
      ++kept;
    else if (std::abs(want - plain / 8) < 1e-18)
      ++divided;
    else
      ++blended;
  }
  // Llama 3.1's own numbers reach all three regions.
  EXPECT_GT(kept, 0);
  EXPECT_GT(divided, 0);
  EXPECT_GT(blended, 0);

  c["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  std::ofstream(dir / "config.json") << c.dump();
  config = read_hf_config(dir.string());
  ASSERT_TRUE(config.ok()) << config.message();
  EXPECT_EQ(config->rope_scaling.kind, RopeScaling::Kind::Linear);
  const auto linear = rope_frequencies(*config);
  for (std::size_t i = 0; i < linear.size(); ++i) {
    EXPECT_DOUBLE_EQ(linear[i], std::pow(500000.0, -2.0 * static_cast<double>(i) / 128) / 4);
  }
}

// The scaling reaches the runner: at position 0 every angle is 0, so the first logits are the
// same; after it they move. Factor 1 changes nothing anywhere.
TEST(HfModel, ScaledRopeReachesTheForward) {
  REQUIRE_MODEL();
  const fs::path dir = scratch();
  ASSERT_TRUE(convert_llama2c_to_hf(kModel, dir.string()).ok());
  const auto plain = run(load_hf_model(dir.string()).value(), kTokens);
  const auto with_scaling = [&](double factor) {
    json c = json::parse(std::ifstream(dir / "config.json"));
    // head_dim 8 at theta 10000: wavelengths 6.3, 63, 628, 6283 positions; with an original
    // context of 64 the pairs fall in every region (kept, blended, divided).
    c["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", factor},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 64}};
    std::ofstream(dir / "config.json") << c.dump();
    auto model = load_hf_model(dir.string());
    EXPECT_TRUE(model.ok()) << model.message();
    return run(*model, kTokens);
  };
  EXPECT_EQ(worst(with_scaling(1.0), plain), 0.0);
  const auto scaled = with_scaling(8.0);
  EXPECT_EQ(worst({scaled.front()}, {plain.front()}), 0.0);
  EXPECT_GT(worst(scaled, plain), 1e-3);
}

}  // namespace
}  // namespace kvlab
