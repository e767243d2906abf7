// Qwen2 checkpoints: a tiny random Qwen2-shaped Hugging Face folder, written here, gives the
// logits of a deliberately simple double-precision forward written here too (plain loops, the
// half-split RoPE, q/k/v biases) on every path of the runner: one token at a time, a batched
// prefill, hooks (mask, observer, reader) and capture (queries, pre-RoPE keys). Bias tensors
// where the model type has none, missing ones where it has them, and scaled RoPE are errors
// naming the tensor or field. Needs no model files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "file_test_util.h"
#include "kvlab/engine/model/hf_model.h"

namespace kvlab {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kDim = 32, kHidden = 48, kLayers = 2, kHeads = 4, kKvHeads = 2, kVocab = 40;
constexpr int kHeadDim = kDim / kHeads, kKvDim = kKvHeads * kHeadDim;
constexpr double kTheta = 1e6, kEps = 1e-6;

#define EXPECT_ERROR_HAS(result, ...)                                        \
  do {                                                                       \
    const auto& r_ = (result);                                               \
    ASSERT_FALSE(r_.ok());                                                   \
    for (const std::string part : {__VA_ARGS__}) {                           \
      EXPECT_NE(r_.message().find(part), std::string::npos) << r_.message(); \
    }                                                                        \
  } while (0)

// A checkpoint in memory: tensors by name ([out][in] row-major, as save_pretrained writes them).
struct Checkpoint {
  std::map<std::string, std::pair<std::vector<std::uint64_t>, std::vector<float>>> tensors;
  json config;

  const std::vector<float>& at(const std::string& name) const { return tensors.at(name).second; }
  bool has(const std::string& name) const { return tensors.count(name) > 0; }
};

// Random weights of a Qwen2-shaped model (GQA, untied lm_head, q/k/v biases large enough that
// a forward without them is far off).
Checkpoint tiny_qwen2(bool biases = true) {
  std::mt19937 rng(20260601);
  Checkpoint c;
  const auto add = [&](const std::string& name, std::vector<std::uint64_t> shape, double spread,
                       double center = 0.0) {
    std::uniform_real_distribution<float> u(static_cast<float>(center - spread),
                                            static_cast<float>(center + spread));
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    c.tensors[name] = {std::move(shape), std::move(v)};
  };
  const std::uint64_t D = kDim, F = kHidden, KV = kKvDim, V = kVocab;
  const double w = 1.0 / std::sqrt(static_cast<double>(kDim));
  add("model.embed_tokens.weight", {V, D}, 1.0);
  for (int l = 0; l < kLayers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", {D}, 0.2, 1.0);
    add(p + "self_attn.q_proj.weight", {D, D}, w * 2);
    add(p + "self_attn.k_proj.weight", {KV, D}, w * 2);
    add(p + "self_attn.v_proj.weight", {KV, D}, w);
    if (biases) {
      add(p + "self_attn.q_proj.bias", {D}, 0.8);
      add(p + "self_attn.k_proj.bias", {KV}, 0.8);
      add(p + "self_attn.v_proj.bias", {KV}, 0.8);
    }
    add(p + "self_attn.o_proj.weight", {D, D}, w);
    add(p + "post_attention_layernorm.weight", {D}, 0.2, 1.0);
    add(p + "mlp.gate_proj.weight", {F, D}, w);
    add(p + "mlp.up_proj.weight", {F, D}, w);
    add(p + "mlp.down_proj.weight", {D, F}, 1.0 / std::sqrt(static_cast<double>(kHidden)));
  }
  add("model.norm.weight", {D}, 0.2, 1.0);
  add("lm_head.weight", {V, D}, w);
  c.config = {{"architectures", {"Qwen2ForCausalLM"}},
              {"model_type", "qwen2"},
              {"hidden_size", kDim},
              {"intermediate_size", kHidden},
              {"num_hidden_layers", kLayers},
              {"num_attention_heads", kHeads},
              {"num_key_value_heads", kKvHeads},
              {"vocab_size", kVocab},
              {"max_position_embeddings", 64},
              {"rope_theta", kTheta},
              {"rms_norm_eps", kEps},
              {"hidden_act", "silu"},
              {"tie_word_embeddings", false},
              {"use_sliding_window", false},
              {"sliding_window", 32},
              {"max_window_layers", 2},
              {"rope_scaling", nullptr},
              {"torch_dtype", "float32"}};
  return c;
}

// The running test's scratch folder, emptied on its first use only.
fs::path test_dir() {
  static std::string test;
  static fs::path dir;
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info->name() != test) {
    test = info->name();
    dir = file_test::scratch_dir("qwen2");
  }
  return dir;
}

// The checkpoint as a folder (config.json, model.safetensors in F32) named `name`.
std::string write(const Checkpoint& c, const std::string& name) {
  const fs::path dir = test_dir() / name;
  fs::create_directories(dir);
  json header = json::object();
  file_test::Bytes data;
  for (const auto& [tensor, value] : c.tensors) {
    const auto& [shape, floats] = value;
    header[tensor] = {{"dtype", "F32"},
                      {"shape", shape},
                      {"data_offsets", {data.size(), data.size() + floats.size() * 4}}};
    file_test::append(data, floats.data(), floats.size() * 4);
  }
  file_test::write_bytes(dir / "model.safetensors", file_test::safetensors_bytes(header, data));
  std::ofstream(dir / "config.json") << c.config.dump(2);
  return dir.string();
}

// ---- The reference: Qwen2's forward in double, one token at a time -----------------------------

struct Reference {
  const Checkpoint& c;
  std::vector<std::vector<double>> kc, vc, k_pre_rope;  // per layer [pos][kv_dim]

  explicit Reference(const Checkpoint& checkpoint)
      : c(checkpoint), kc(kLayers), vc(kLayers), k_pre_rope(kLayers) {}

  // W x (+ b), W named `name` [rows][x.size()].
  std::vector<double> linear(const std::string& name, const std::vector<double>& x,
                             const std::string& bias = "") const {
    const auto& w = c.at(name);
    const std::size_t rows = w.size() / x.size();
    std::vector<double> out(rows, 0.0);
    for (std::size_t i = 0; i < rows; ++i) {
      for (std::size_t j = 0; j < x.size(); ++j) out[i] += double(w[i * x.size() + j]) * x[j];
      if (!bias.empty() && c.has(bias)) out[i] += c.at(bias)[i];
    }
    return out;
  }
  std::vector<double> norm(const std::vector<double>& x, const std::string& name) const {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / x.size() + kEps);
    std::vector<double> out(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = x[i] * s * c.at(name)[i];
    return out;
  }
  // Hugging Face's rotate_half: element i of a head turns with element i + head_dim / 2.
  static void rope(std::vector<double>& v, int pos) {
    const int half = kHeadDim / 2;
    for (std::size_t h = 0; h < v.size() / kHeadDim; ++h) {
      for (int i = 0; i < half; ++i) {
        const double angle = pos * std::pow(kTheta, -2.0 * i / kHeadDim);
        double& a = v[h * kHeadDim + i];
        double& b = v[h * kHeadDim + i + half];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(angle) - b0 * std::sin(angle);
        b = a0 * std::sin(angle) + b0 * std::cos(angle);
      }
    }
  }

  std::vector<double> step(int token, int pos) {
    const auto& emb = c.at("model.embed_tokens.weight");
    std::vector<double> x(emb.begin() + token * kDim, emb.begin() + (token + 1) * kDim);
    for (int l = 0; l < kLayers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      auto xn = norm(x, p + "input_layernorm.weight");
      auto q = linear(p + "self_attn.q_proj.weight", xn, p + "self_attn.q_proj.bias");
      auto k = linear(p + "self_attn.k_proj.weight", xn, p + "self_attn.k_proj.bias");
      auto v = linear(p + "self_attn.v_proj.weight", xn, p + "self_attn.v_proj.bias");
      k_pre_rope[l].insert(k_pre_rope[l].end(), k.begin(), k.end());
      rope(q, pos);
      rope(k, pos);
      kc[l].insert(kc[l].end(), k.begin(), k.end());
      vc[l].insert(vc[l].end(), v.begin(), v.end());
      std::vector<double> att(kDim, 0.0);
      for (int h = 0; h < kHeads; ++h) {
        const int kvh = h / (kHeads / kKvHeads);
        std::vector<double> s(pos + 1);
        double m = -1e300, sum = 0;
        for (int t = 0; t <= pos; ++t) {
          s[t] = 0;
          for (int d = 0; d < kHeadDim; ++d)
            s[t] += q[h * kHeadDim + d] * kc[l][t * kKvDim + kvh * kHeadDim + d];
          s[t] /= std::sqrt(double(kHeadDim));
          m = std::max(m, s[t]);
        }
        for (double& e : s) sum += (e = std::exp(e - m));
        for (int t = 0; t <= pos; ++t) {
          for (int d = 0; d < kHeadDim; ++d)
            att[h * kHeadDim + d] += s[t] / sum * vc[l][t * kKvDim + kvh * kHeadDim + d];
        }
      }
      const auto o = linear(p + "self_attn.o_proj.weight", att);
      for (int i = 0; i < kDim; ++i) x[i] += o[i];
      xn = norm(x, p + "post_attention_layernorm.weight");
      auto g = linear(p + "mlp.gate_proj.weight", xn);
      const auto u = linear(p + "mlp.up_proj.weight", xn);
      for (int i = 0; i < kHidden; ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      const auto d = linear(p + "mlp.down_proj.weight", g);
      for (int i = 0; i < kDim; ++i) x[i] += d[i];
    }
    return linear("lm_head.weight", norm(x, "model.norm.weight"));
  }
};

const std::vector<int> kTokens = {1, 7, 33, 2, 19, 19, 0, 39, 12, 5, 28, 3, 11, 30};

double worst(const std::vector<float>& got, const std::vector<double>& want) {
  double w = 0;
  for (std::size_t i = 0; i < want.size(); ++i) w = std::max(w, std::abs(got[i] - want[i]));
  return w;
}

TEST(HfQwen2, BiasedProjectionsMatchADoublePrecisionReference) {
  const Checkpoint ckpt = tiny_qwen2();
  auto model = load_hf_model(write(ckpt, "qwen2"));
  ASSERT_TRUE(model.ok()) << model.message();
  const LlamaConfig& c = model->config();
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_TRUE(c.rope_half_split);
  EXPECT_FALSE(c.shared_classifier);
  EXPECT_EQ(c.seq_len, 64);  // use_sliding_window false: the window does not cap the positions
  EXPECT_DOUBLE_EQ(c.rope_theta, kTheta);

  Reference ref(ckpt);
  std::vector<std::vector<double>> want;
  for (std::size_t p = 0; p < kTokens.size(); ++p)
    want.push_back(ref.step(kTokens[p], static_cast<int>(p)));
  // One token at a time.
  {
    auto state = model->new_state();
    for (std::size_t p = 0; p < kTokens.size(); ++p) {
      EXPECT_LT(worst(model->forward(state, {kTokens[p]}).value(), want[p]), 1e-4)
          << "position " << p;
    }
  }
  // Batched prefill chunks, the second one starting past position 0.
  {
    auto state = model->new_state();
    const std::vector<int> first(kTokens.begin(), kTokens.begin() + 5),
        rest(kTokens.begin() + 5, kTokens.end());
    EXPECT_LT(worst(model->forward(state, first).value(), want[4]), 1e-4);
    EXPECT_LT(worst(model->forward(state, rest).value(), want.back()), 1e-4);
  }
  // Hooks: a mask that keeps everything, an observer and a reader handing back the exact cache.
  {
    auto state = model->new_state();
    const std::vector<char> all(kTokens.size(), 1);
    int observed = 0, read = 0;
    state.kept_tokens = [&](int, int) { return &all; };
    state.observe_attention = [&](int, int, std::span<const float> probs) {
      ++observed;
      double sum = 0;
      for (const float p : probs) sum += p;
      EXPECT_NEAR(sum, 1.0, 1e-5);
    };
    state.attention_reader = [&](int, const AlignedFloats& k, const AlignedFloats& v,
                                 AlignedFloats& k_out, AlignedFloats& v_out) -> Status {
      ++read;
      k_out = k, v_out = v;
      return Ok{};
    };
    EXPECT_LT(worst(model->forward(state, kTokens).value(), want.back()), 1e-4);
    EXPECT_EQ(observed, static_cast<int>(kTokens.size()) * kLayers * kHeads);
    EXPECT_EQ(read, kLayers);
  }
  // Capture: the kept queries and keys, before and after RoPE, carry the biases.
  {
    auto state = model->new_state(/*keep_queries=*/true, /*keep_pre_rope=*/true);
    ASSERT_TRUE(model->forward(state, kTokens).ok());
    for (int l = 0; l < kLayers; ++l) {
      ASSERT_EQ(state.keys_pre_rope[l].size(), ref.k_pre_rope[l].size());
      ASSERT_EQ(state.keys[l].size(), ref.kc[l].size());
      for (std::size_t i = 0; i < ref.kc[l].size(); ++i) {
        EXPECT_NEAR(state.keys_pre_rope[l][i], ref.k_pre_rope[l][i], 1e-4) << "layer " << l;
        EXPECT_NEAR(state.keys[l][i], ref.kc[l][i], 1e-4) << "layer " << l;
        EXPECT_NEAR(state.values[l][i], ref.vc[l][i], 1e-4) << "layer " << l;
      }
      EXPECT_EQ(state.queries[l].size(), kTokens.size() * kDim);
    }
  }
  // The biases matter: without them the reference moves by far more than the tolerance.
  const Checkpoint plain = tiny_qwen2(/*biases=*/false);
  Reference unbiased(plain);
  double moved = 0;
  for (std::size_t p = 0; p < kTokens.size(); ++p) {
    const auto logits = unbiased.step(kTokens[p], static_cast<int>(p));
    for (int i = 0; i < kVocab; ++i) moved = std::max(moved, std::abs(logits[i] - want[p][i]));
  }
  EXPECT_GT(moved, 0.05);
}

// The model keeps RoPE rows for the first 32768 positions and computes later ones per forward:
// both agree with the reference across the boundary. The cache before position 32766 is zeros
// (set by hand in the runner's state and in the reference alike), so no long prompt is needed.
TEST(HfQwen2, PositionsPastTheRopeTable) {
  Checkpoint ckpt = tiny_qwen2();
  ckpt.config["max_position_embeddings"] = 40000;
  auto model = load_hf_model(write(ckpt, "long"));
  ASSERT_TRUE(model.ok()) << model.message();
  constexpr int kStart = 32766;
  const std::vector<int> tokens = {3, 17, 29, 8};
  Reference ref(ckpt);
  auto single = model->new_state();
  single.pos = kStart;
  for (int l = 0; l < kLayers; ++l) {
    ref.kc[l].assign(std::size_t{kStart} * kKvDim, 0.0);
    ref.vc[l].assign(std::size_t{kStart} * kKvDim, 0.0);
    single.keys[l].assign(std::size_t{kStart} * kKvDim, 0.0f);
    single.values[l].assign(std::size_t{kStart} * kKvDim, 0.0f);
  }
  auto batched = single;
  std::vector<double> want;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    want = ref.step(tokens[i], kStart + static_cast<int>(i));
    EXPECT_LT(worst(model->forward(single, {tokens[i]}).value(), want), 1e-4)
        << "position " << kStart + i;
  }
  EXPECT_LT(worst(model->forward(batched, tokens).value(), want), 1e-4);
}

// A Llama checkpoint of the same shape has no biases: it loads without them and matches the
// reference run without biases.
TEST(HfQwen2, BiasFreeLlamaStillLoads) {
  Checkpoint ckpt = tiny_qwen2(/*biases=*/false);
  ckpt.config["model_type"] = "llama";
  ckpt.config["architectures"] = {"LlamaForCausalLM"};
  auto model = load_hf_model(write(ckpt, "llama"));
  ASSERT_TRUE(model.ok()) << model.message();
  EXPECT_FALSE(model->config().qkv_bias);
  Reference ref(ckpt);
  auto state = model->new_state();
  for (std::size_t p = 0; p < kTokens.size(); ++p) {
    EXPECT_LT(worst(model->forward(state, {kTokens[p]}).value(),
                    ref.step(kTokens[p], static_cast<int>(p))),
              1e-4)
        << "position " << p;
  }
}

TEST(HfQwen2, BiasesWhereTheyDoNotBelongOrMissingAreErrorsNamingTheTensor) {
  // q/k/v biases in a llama checkpoint would be ignored: refused, naming the first one.
  Checkpoint llama = tiny_qwen2();
  llama.config["model_type"] = "llama";
  EXPECT_ERROR_HAS(load_hf_model(write(llama, "llama_biases")),
                   "model.layers.0.self_attn.q_proj.bias", "model_type");
  // A qwen2 checkpoint without one of its biases is broken.
  Checkpoint missing = tiny_qwen2();
  missing.tensors.erase("model.layers.1.self_attn.k_proj.bias");
  EXPECT_ERROR_HAS(load_hf_model(write(missing, "missing")), "model.layers.1.self_attn.k_proj.bias",
                   "is missing");
  // Qwen2 has no o_proj or MLP biases; the forward would not add one.
  for (const char* extra : {"self_attn.o_proj.bias", "mlp.down_proj.bias"}) {
    Checkpoint more = tiny_qwen2();
    more.tensors[std::string("model.layers.0.") + extra] = {{kDim}, std::vector<float>(kDim, 0.5f)};
    EXPECT_ERROR_HAS(load_hf_model(write(more, "extra")), std::string("model.layers.0.") + extra);
  }
  // A bias of the wrong length.
  Checkpoint reshaped = tiny_qwen2();
  reshaped.tensors["model.layers.0.self_attn.v_proj.bias"] = {{kDim},
                                                              std::vector<float>(kDim, 0.5f)};
  EXPECT_ERROR_HAS(load_hf_model(write(reshaped, "reshaped")),
                   "model.layers.0.self_attn.v_proj.bias", "shape [32], expected [16]");
}

TEST(HfQwen2, ScaledRopeIsRefusedNamingItsType) {
  Checkpoint ckpt = tiny_qwen2();
  ckpt.config["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  EXPECT_ERROR_HAS(load_hf_model(write(ckpt, "yarn")), "'rope_scaling'", "\"yarn\"",
                   "does not implement");
  ckpt.config["rope_scaling"] = {{"factor", 2.0}};
  EXPECT_ERROR_HAS(load_hf_model(write(ckpt, "untyped")), "'rope_scaling'");
  ckpt.config["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_TRUE(load_hf_model(write(ckpt, "default")).ok());
  ckpt.config.erase("rope_scaling");
  ckpt.config["attention_bias"] = true;  // Llama's o_proj bias
  EXPECT_ERROR_HAS(load_hf_model(write(ckpt, "attention_bias")), "'attention_bias'");
}

}  // namespace
}  // namespace kvlab
