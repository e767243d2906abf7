// GGUF models for the runner (see gguf_model.h).
#include "kvlab/engine/model/gguf_model.h"

#include <fstream>
#include <memory>
#include <set>

#include <fmt/format.h>

#include "kvlab/engine/model/hf_tokenizer.h"

namespace kvlab {
namespace {

std::string arch_key(std::string_view arch, std::string_view key) {
  return fmt::format("{}.{}", arch, key);
}

// An integer key as int, checked to be in [lo, hi].
Result<int> int_key(const GgufFile& f, const std::string& key, std::int64_t lo, std::int64_t hi) {
  auto v = f.get_integer(key);
  if (!v) return v.error();
  if (*v < lo || *v > hi) {
    return make_error(fmt::format("{}: {} = {} is outside {}..{}", f.path(), key, *v, lo, hi));
  }
  return static_cast<int>(*v);
}

// An optional integer key: `fallback` when absent.
Result<int> int_key_or(const GgufFile& f, const std::string& key, int fallback, std::int64_t lo,
                       std::int64_t hi) {
  if (!f.find(key)) return fallback;
  return int_key(f, key, lo, hi);
}

// The floats of a small (1-D) tensor, dequantized from any supported type.
Result<std::vector<float>> small_tensor(const GgufFile& f, const GgufTensorInfo& t) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(t.type));
  if (!info || !info->dequantizable) {
    return make_error(fmt::format("{}: tensor {} is of type {}, which kvlab cannot read", f.path(),
                                  t.name, info ? info->name : "?"));
  }
  std::vector<float> out(static_cast<std::size_t>(t.elements()));
  ggml_dequantize(t.type, f.tensor_data(t).data(), out.data(), t.elements());
  return out;
}

// The weights that load_gguf_model converts to float live here, with the mapping.
struct GgufOwner {
  std::shared_ptr<const void> mapping;
  std::vector<std::vector<float>> floats;
};

}  // namespace

bool is_gguf_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

GgufSummary summarize_gguf(const GgufFile& f) {
  GgufSummary s;
  s.path = f.path();
  s.version = f.version();
  s.file_bytes = f.file_size();
  s.tensor_count = f.tensors().size();
  s.metadata_count = f.metadata().size();
  const auto str = [&](const std::string& key) {
    auto v = f.get_string(key);
    return v ? *v : std::string();
  };
  const auto num = [&](const std::string& key) -> std::int64_t {
    auto v = f.get_integer(key);
    return v && *v >= 0 && *v <= (1ll << 31) - 1 ? *v : 0;
  };
  const auto real = [&](const std::string& key) {
    auto v = f.get_real(key);
    return v ? *v : 0.0;
  };
  s.architecture = str("general.architecture");
  s.name = str("general.name");
  s.tokenizer = str("tokenizer.ggml.model");
  s.has_chat_template = f.find("tokenizer.chat_template") != nullptr;
  if (const auto ft = f.get_integer("general.file_type"); ft) {
    // llama.cpp's llama_ftype: the type most of the weights have.
    static const std::map<std::int64_t, const char*> kFileTypes = {
        {0, "F32"},     {1, "F16"},     {2, "Q4_0"},    {3, "Q4_1"},    {7, "Q8_0"},
        {8, "Q5_0"},    {9, "Q5_1"},    {10, "Q2_K"},   {11, "Q3_K_S"}, {12, "Q3_K_M"},
        {13, "Q3_K_L"}, {14, "Q4_K_S"}, {15, "Q4_K_M"}, {16, "Q5_K_S"}, {17, "Q5_K_M"},
        {18, "Q6_K"},   {32, "BF16"}};
    const auto it = kFileTypes.find(*ft);
    s.file_type = it != kFileTypes.end() ? it->second : fmt::format("type {}", *ft);
  }
  const std::string& a = s.architecture;
  s.layers = static_cast<int>(num(a + ".block_count"));
  s.dim = static_cast<int>(num(a + ".embedding_length"));
  s.hidden_dim = static_cast<int>(num(a + ".feed_forward_length"));
  s.heads = static_cast<int>(num(a + ".attention.head_count"));
  s.kv_heads = f.find(a + ".attention.head_count_kv")
                   ? static_cast<int>(num(a + ".attention.head_count_kv"))
                   : s.heads;
  s.head_dim = f.find(a + ".attention.key_length")
                   ? static_cast<int>(num(a + ".attention.key_length"))
               : s.heads > 0 ? s.dim / s.heads
                             : 0;
  const int value_dim = f.find(a + ".attention.value_length")
                            ? static_cast<int>(num(a + ".attention.value_length"))
                            : s.head_dim;
  s.context = static_cast<int>(num(a + ".context_length"));
  s.sliding_window = static_cast<int>(num(a + ".attention.sliding_window"));
  s.experts = static_cast<int>(num(a + ".expert_count"));
  s.rope_dims = f.find(a + ".rope.dimension_count")
                    ? static_cast<int>(num(a + ".rope.dimension_count"))
                    : s.head_dim;
  s.rope_theta = f.find(a + ".rope.freq_base") ? real(a + ".rope.freq_base") : 10000.0;
  s.rope_scaling = str(a + ".rope.scaling.type");
  s.rope_scaling_factor = real(a + ".rope.scaling.factor");
  if (f.find_tensor("rope_freqs.weight") && s.rope_scaling.empty()) s.rope_scaling = "rope_freqs";
  s.rope_layout = a == "llama" ? "adjacent pairs (ggml normal)" : "halves (ggml neox)";
  s.vocab = f.find(a + ".vocab_size") ? static_cast<int>(num(a + ".vocab_size")) : 0;
  if (s.vocab == 0) {
    if (const GgufKeyValue* tokens = f.find("tokenizer.ggml.tokens")) {
      s.vocab = static_cast<int>(std::min<std::uint64_t>(tokens->count, 1u << 30));
    }
  }
  for (const auto& t : f.tensors()) {
    const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(t.type));
    ++s.tensor_types[std::string(info ? info->name : "?")];
    s.parameters += static_cast<std::uint64_t>(t.elements());
  }
  // fp16 (2 bytes) keys and values of every layer and KV head.
  s.kv_bytes_per_token = 2ull * static_cast<std::uint64_t>(s.layers) *
                         static_cast<std::uint64_t>(s.kv_heads) *
                         static_cast<std::uint64_t>(s.head_dim + value_dim);
  s.runnable = (a == "llama" || a == "qwen2") && s.experts == 0;
  return s;
}

Result<LlamaConfig> gguf_llama_config(const GgufFile& f) {
  auto arch = f.get_string("general.architecture");
  if (!arch) return arch.error();
  const std::string& a = *arch;
  if (a != "llama" && a != "qwen2") {
    return make_error(
        fmt::format("{}: architecture \"{}\" is not supported (llama and qwen2 are)", f.path(), a));
  }
  if (const GgufKeyValue* e = f.find(a + ".expert_count"); e && e->is_integer() && e->integer > 0) {
    return make_error(fmt::format("{}: a mixture of {} experts; the runner has dense FFNs only",
                                  f.path(), e->integer));
  }
  constexpr std::int64_t kMaxDim = 1 << 16, kMaxLayers = 1024, kMaxVocab = 1 << 22;
  LlamaConfig c;
  const auto get = [&](int& out, const char* key, std::int64_t lo, std::int64_t hi) -> Status {
    auto v = int_key(f, arch_key(a, key), lo, hi);
    if (!v) return v.error();
    out = *v;
    return Ok{};
  };
  KVLAB_TRY(get(c.layers, "block_count", 1, kMaxLayers));
  KVLAB_TRY(get(c.dim, "embedding_length", 1, kMaxDim));
  KVLAB_TRY(get(c.hidden_dim, "feed_forward_length", 1, 4 * kMaxDim));
  KVLAB_TRY(get(c.heads, "attention.head_count", 1, kMaxDim));
  auto kv = int_key_or(f, a + ".attention.head_count_kv", c.heads, 1, c.heads);
  if (!kv) return kv.error();
  c.kv_heads = *kv;
  auto ctx = int_key_or(f, a + ".context_length", 2048, 1, 1 << 24);
  if (!ctx) return ctx.error();
  c.seq_len = *ctx;
  if (c.dim % c.heads != 0 || c.heads % c.kv_heads != 0) {
    return make_error(fmt::format("{}: {} heads ({} KV heads) do not divide the width {}", f.path(),
                                  c.heads, c.kv_heads, c.dim));
  }
  const int head_dim = c.dim / c.heads;
  for (const char* key :
       {"attention.key_length", "attention.value_length", "rope.dimension_count"}) {
    auto v = int_key_or(f, arch_key(a, key), head_dim, 1, kMaxDim);
    if (!v) return v.error();
    if (*v != head_dim) {
      return make_error(fmt::format("{}: {}.{} = {}, but the runner needs width / heads = {}",
                                    f.path(), a, key, *v, head_dim));
    }
  }
  if (auto window = int_key_or(f, a + ".attention.sliding_window", 0, 0, 1 << 24); !window) {
    return window.error();
  } else if (*window > 0 && *window < c.seq_len) {
    c.seq_len = *window;  // the runner attends to every position: stay inside the window
  }
  if (f.find(a + ".attention.layer_norm_rms_epsilon")) {
    auto eps = f.get_real(a + ".attention.layer_norm_rms_epsilon");
    if (!eps) return eps.error();
    if (!(*eps > 0 && *eps < 1)) {
      return make_error(fmt::format("{}: RMS norm epsilon {} is not in (0, 1)", f.path(), *eps));
    }
    c.norm_eps = static_cast<float>(*eps);
  }
  if (f.find(a + ".rope.freq_base")) {
    auto theta = f.get_real(a + ".rope.freq_base");
    if (!theta) return theta.error();
    if (!(*theta > 1)) {
      return make_error(fmt::format("{}: RoPE base {} must be above 1", f.path(), *theta));
    }
    c.rope_theta = *theta;
  }
  if (f.find(a + ".rope.scaling.type")) {
    auto type = f.get_string(a + ".rope.scaling.type");
    if (!type) return type.error();
    if (*type == "linear") {
      auto factor = f.get_real(a + ".rope.scaling.factor");
      if (!factor) return factor.error();
      if (!(*factor >= 1 && *factor <= 1024)) {
        return make_error(
            fmt::format("{}: RoPE scaling factor {} is not in 1..1024", f.path(), *factor));
      }
      c.rope_scaling.kind = RopeScaling::Kind::Linear;
      c.rope_scaling.factor = *factor;
    } else if (*type != "none") {
      return make_error(
          fmt::format("{}: RoPE scaling \"{}\" is not supported (linear is)", f.path(), *type));
    }
  }
  if (const GgufTensorInfo* t = f.find_tensor("rope_freqs.weight")) {
    if (t->elements() != head_dim / 2) {
      return make_error(fmt::format("{}: rope_freqs.weight has {} values for {} pairs", f.path(),
                                    t->elements(), head_dim / 2));
    }
    auto divisors = small_tensor(f, *t);
    if (!divisors) return divisors.error();
    for (const float d : *divisors) {
      if (!(d > 0)) return make_error(fmt::format("{}: rope_freqs.weight holds {}", f.path(), d));
      c.rope_scaling.freq_divisors.push_back(d);
    }
  }
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) return make_error(fmt::format("{}: tensor token_embd.weight is missing", f.path()));
  if (embd->dims.size() != 2 || embd->dims[0] != c.dim || embd->dims[1] > kMaxVocab) {
    return make_error(fmt::format("{}: token_embd.weight is not [vocab × {}]", f.path(), c.dim));
  }
  c.vocab = static_cast<int>(embd->dims[1]);
  c.rope_half_split = a != "llama";  // see the header: llama's q and k rows are permuted
  c.shared_classifier = f.find_tensor("output.weight") == nullptr;
  c.qkv_bias = a == "qwen2";
  return c;
}

namespace {

// The model of a parsed file; its weights point into the file's mapping, which they keep alive.
Result<LlamaModel> model_of(const GgufFile& f) {
  auto config = gguf_llama_config(f);
  if (!config) return config.error();
  const LlamaConfig& c = *config;
  auto owner = std::make_shared<GgufOwner>();
  owner->mapping = f.owner();
  std::set<std::string> used = {"rope_freqs.weight"};
  std::string error;
  // A matrix [rows][cols] (ggml dims {cols, rows}) used where it lies in the mapping.
  const auto matrix = [&](const std::string& name, int rows, int cols) -> WeightMatrix {
    if (!error.empty()) return {};
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
      error = fmt::format("{}: tensor {} is missing", f.path(), name);
      return {};
    }
    used.insert(name);
    const GgmlTypeInfo* info = ggml_type_info(static_cast<std::uint32_t>(t->type));
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      std::string dims;
      for (const auto d : t->dims) dims += fmt::format("{}{}", dims.empty() ? "" : ", ", d);
      error = fmt::format("{}: tensor {} has dims [{}], expected [{}, {}]", f.path(), name, dims,
                          cols, rows);
      return {};
    }
    if (!info || !info->dequantizable) {
      error = fmt::format("{}: tensor {} is of type {}, which kvlab cannot dequantize", f.path(),
                          name, info ? info->name : "?");
      return {};
    }
    return WeightMatrix(f.tensor_data(*t).data(), t->type);
  };
  // A vector [n], converted to float and kept by the owner.
  const auto vector = [&](const std::string& name, int n) -> const float* {
    if (!error.empty()) return nullptr;
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
      error = fmt::format("{}: tensor {} is missing", f.path(), name);
      return nullptr;
    }
    used.insert(name);
    if (t->dims.size() != 1 || t->dims[0] != n) {
      error =
          fmt::format("{}: tensor {} has {} values, expected {}", f.path(), name, t->elements(), n);
      return nullptr;
    }
    auto floats = small_tensor(f, *t);
    if (!floats) {
      error = floats.message();
      return nullptr;
    }
    owner->floats.push_back(std::move(*floats));
    return owner->floats.back().data();
  };
  const int D = c.dim, KV = c.kv_dim(), F = c.hidden_dim, V = c.vocab;
  LlamaWeights w;
  w.embedding = matrix("token_embd.weight", V, D);
  w.final_norm = vector("output_norm.weight", D);
  w.classifier = c.shared_classifier ? w.embedding : matrix("output.weight", V, D);
  for (int l = 0; l < c.layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    LlamaLayerWeights lw;
    lw.attn_norm = vector(p + "attn_norm.weight", D);
    lw.wq = matrix(p + "attn_q.weight", D, D);
    lw.wk = matrix(p + "attn_k.weight", KV, D);
    lw.wv = matrix(p + "attn_v.weight", KV, D);
    lw.wo = matrix(p + "attn_output.weight", D, D);
    if (c.qkv_bias) {
      lw.bq = vector(p + "attn_q.bias", D);
      lw.bk = vector(p + "attn_k.bias", KV);
      lw.bv = vector(p + "attn_v.bias", KV);
    }
    lw.ffn_norm = vector(p + "ffn_norm.weight", D);
    lw.w1 = matrix(p + "ffn_gate.weight", F, D);
    lw.w2 = matrix(p + "ffn_down.weight", D, F);
    lw.w3 = matrix(p + "ffn_up.weight", F, D);
    w.layers.push_back(lw);
  }
  if (!error.empty()) return make_error(std::move(error));
  // A tensor the forward would not use (a bias, a q/k norm, an expert) means another model.
  for (const auto& t : f.tensors()) {
    if (!used.count(t.name)) {
      return make_error(
          fmt::format("{}: tensor {} is not part of a {} model the runner can run "
                      "(a feature it lacks)",
                      f.path(), t.name, *f.get_string("general.architecture")));
    }
  }
  w.owner = std::move(owner);
  return LlamaModel::from_weights(f.path(), c, std::move(w));
}

}  // namespace

Result<LlamaModel> load_gguf_model(const std::filesystem::path& path) {
  auto file = GgufFile::open(path);
  if (!file) return file.error();
  return model_of(*file);
}

Result<LoadedModel> load_gguf(const std::filesystem::path& path) {
  auto file = GgufFile::open(path);  // parsed once: the model and its tokenizer
  if (!file) return file.error();
  const GgufFile& f = *file;
  auto model = model_of(f);
  if (!model) return model.error();
  const int vocab = model->config().vocab;
  auto kind = f.get_string("tokenizer.ggml.model");
  if (!kind) return kind.error();
  auto tokens = f.get_strings("tokenizer.ggml.tokens");
  if (!tokens) return tokens.error();
  if (static_cast<int>(tokens->size()) != vocab) {
    return make_error(fmt::format("{}: tokenizer.ggml.tokens has {} tokens, the embedding {}",
                                  f.path(), tokens->size(), vocab));
  }
  const auto id_key = [&](const char* key, int fallback) -> Result<int> {
    return int_key_or(f, key, fallback, -1, vocab - 1);
  };
  auto bos = id_key("tokenizer.ggml.bos_token_id", -1);
  if (!bos) return bos.error();
  auto eos = id_key("tokenizer.ggml.eos_token_id", -1);
  if (!eos) return eos.error();
  bool add_bos = true;
  if (const GgufKeyValue* b = f.find("tokenizer.ggml.add_bos_token"); b && b->is_integer()) {
    add_bos = b->integer != 0;
  }
  LoadedModel m{std::move(*model), {}, {}, *bos, *eos, {}};
  if (auto t = f.get_string("tokenizer.chat_template"); t) m.chat_template = *t;
  std::vector<std::int64_t> types(tokens->size(), 1);
  if (f.find("tokenizer.ggml.token_type")) {
    auto tt = f.get_integers("tokenizer.ggml.token_type");
    if (!tt) return tt.error();
    if (tt->size() != tokens->size()) {
      return make_error(fmt::format("{}: tokenizer.ggml.token_type has {} entries for {} tokens",
                                    f.path(), tt->size(), tokens->size()));
    }
    types = std::move(*tt);
  }
  if (*kind == "gpt2") {
    auto merges = f.get_strings("tokenizer.ggml.merges");
    if (!merges) return merges.error();
    HfTokenizer::Vocabulary v;
    v.pieces = *tokens;
    v.types = types;
    v.merges = *merges;
    v.bos = *bos, v.eos = *eos;
    // llama.cpp's pre-tokenizers (llama-vocab.cpp) that split digits one by one before GPT-2's
    // pattern; the others use GPT-2's pattern as it is.
    const std::string pre = f.get_string("tokenizer.ggml.pre").ok()
                                ? *f.get_string("tokenizer.ggml.pre")
                                : std::string("default");
    v.split_digits = pre == "smollm" || pre == "qwen2" || pre == "starcoder" || pre == "refact";
    auto tok = HfTokenizer::from_vocabulary(v, f.path());
    if (!tok) return tok.error();
    auto shared = std::make_shared<HfTokenizer>(std::move(*tok));
    const bool with_bos = add_bos && *bos >= 0;
    m.encode = [shared, with_bos](const std::string& text) {
      return shared->encode(text, with_bos, false);
    };
    m.decode = [shared](const std::vector<int>& ids) { return shared->decode(ids, true); };
    return m;
  }
  if (*kind == "llama") {
    auto scores = f.get_reals("tokenizer.ggml.scores");
    if (!scores) return scores.error();
    if (scores->size() != tokens->size()) {
      return make_error(fmt::format("{}: tokenizer.ggml.scores has {} entries for {} tokens",
                                    f.path(), scores->size(), tokens->size()));
    }
    std::vector<std::string> pieces(tokens->begin(), tokens->end());
    std::vector<float> sc(scores->begin(), scores->end());
    auto shared = std::make_shared<LlamaTokenizer>(
        LlamaTokenizer::from_pieces(std::move(pieces), std::move(sc)));
    const int b = *bos;
    m.encode = [shared, add_bos](const std::string& text) -> Result<std::vector<int>> {
      return shared->encode(text, add_bos, false);
    };
    m.decode = [shared, b](const std::vector<int>& ids) {
      std::string out;
      for (std::size_t i = 0; i < ids.size(); ++i)
        out += shared->decode(i == 0 ? b : ids[i - 1], ids[i]);
      return out;
    };
    return m;
  }
  return make_error(
      fmt::format("{}: tokenizer \"{}\" is not supported (gpt2 and llama are)", f.path(), *kind));
}

}  // namespace kvlab
