// Hugging Face config.json → ModelSpec, for the families whose KV layout kvlab knows.
//
// The field names, the per-family layer patterns and the defaults used when a field is absent
// follow transformers' configuration_*.py for each model_type (Llama4TextConfig, Gemma3TextConfig,
// GptOssConfig, Qwen3MoeConfig, Qwen3NextConfig, DeepseekV3Config, ...).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/planners/catalog.h"

namespace kvlab::planners {
namespace {

using Json = nlohmann::json;

const std::set<std::string> kFamilies = {
    "deepseek_v2", "deepseek_v3", "gemma2",    "gemma3",      "gemma3_text", "gpt_oss",
    "kimi_k2",     "llama",       "llama4",    "llama4_text", "mistral",     "mixtral",
    "phi3",        "qwen2",       "qwen2_moe", "qwen3",       "qwen3_moe",   "qwen3_next"};

// Counts in config.json (layers, heads, sizes) all fit an int.
constexpr long long kMaxCount = (1ll << 31) - 1;

bool is_llama4(const std::string& t) {
  return t == "llama4" || t == "llama4_text";
}
bool is_gemma3(const std::string& t) {
  return t == "gemma3" || t == "gemma3_text";
}
bool is_mla_family(const std::string& t) {
  return t == "deepseek_v2" || t == "deepseek_v3" || t == "kimi_k2";
}
bool is_qwen(const std::string& t) {
  return t.rfind("qwen", 0) == 0;
}

// Where a model's fields are: the file itself, or its "text_config" (the multimodal Llama 4 and
// Gemma 3 keep the language model there; dtype and tied embeddings may sit at the top level).
// Every error names the field as the file spells it ("text_config.sliding_window").
class Fields {
 public:
  Fields(const Json& file, const Json& text, std::string prefix)
      : m_file(file), m_text(text), m_prefix(std::move(prefix)) {}

  std::string name(std::string_view key) const { return m_prefix + std::string(key); }
  Error error(std::string_view key, std::string_view what) const {
    return make_error(fmt::format("config.json: '{}' {}", name(key), what));
  }

  // The field, or nullptr when absent or null (Hugging Face writes null for "not set").
  const Json* get(std::string_view key) const { return find(m_text, key); }
  // The field in the text config, else at the file's top level.
  const Json* get_any(std::string_view key) const {
    if (const Json* v = get(key)) return v;
    return &m_file != &m_text ? find(m_file, key) : nullptr;
  }

  // A positive integer (or zero when zero_ok); nullopt when absent.
  Result<std::optional<long long>> opt_int(std::string_view key, bool zero_ok = false) const {
    const Json* v = get(key);
    if (!v) return std::optional<long long>{};
    long long n = 0;
    if (!as_count(*v, zero_ok ? 0 : 1, n)) {
      return error(key, fmt::format("must be a {} integer, not {}",
                                    zero_ok ? "non-negative" : "positive", v->dump()));
    }
    return std::optional<long long>{n};
  }
  Result<long long> req_int(std::string_view key) const {
    auto v = opt_int(key);
    if (!v) return v.error();
    if (!*v) return make_error(fmt::format("config.json: the field '{}' is missing", name(key)));
    return **v;
  }
  // transformers' default stands in for an absent field.
  Result<long long> int_or(std::string_view key, long long fallback, bool zero_ok = false) const {
    auto v = opt_int(key, zero_ok);
    if (!v) return v.error();
    return v->value_or(fallback);
  }
  Result<bool> flag(std::string_view key, bool fallback, bool anywhere = false) const {
    const Json* v = anywhere ? get_any(key) : get(key);
    if (!v) return fallback;
    if (!v->is_boolean())
      return error(key, fmt::format("must be true or false, not {}", v->dump()));
    return v->get<bool>();
  }
  // A list of layer indices (mlp_only_layers, moe_layers), each below `layers`.
  Result<std::vector<int>> layer_list(std::string_view key, int layers) const {
    std::vector<int> out;
    const Json* v = get(key);
    if (!v) return out;
    if (!v->is_array()) {
      return error(key, fmt::format("must be a list of layer indices, not {}", v->dump()));
    }
    for (std::size_t i = 0; i < v->size(); ++i) {
      long long n = 0;
      if (!as_count((*v)[i], 0, n) || n >= layers) {
        return error(key, fmt::format("entry {} is {} (expected a layer index below the {} layers)",
                                      i, json_text((*v)[i]), layers));
      }
      out.push_back(static_cast<int>(n));
    }
    return out;
  }

  static bool as_count(const Json& v, long long low, long long& out) {
    if (v.is_number_unsigned()) {
      const auto u = v.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(kMaxCount)) return false;
      out = static_cast<long long>(u);
    } else if (v.is_number_integer()) {
      out = v.get<long long>();
    } else {
      return false;
    }
    return out >= low && out <= kMaxCount;
  }

 private:
  static const Json* find(const Json& obj, std::string_view key) {
    if (!obj.is_object()) return nullptr;
    const auto it = obj.find(std::string(key));
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  const Json& m_file;
  const Json& m_text;
  std::string m_prefix;
};

// ---- Layer kinds ------------------------------------------------------------------------------

// transformers' names, and the two legacy ones its remap_legacy_layer_types still accepts.
std::optional<LayerKind> hf_layer_kind(std::string_view t) {
  if (t == "full_attention" || t == "attention") return LayerKind::Full;
  if (t == "sliding_attention") return LayerKind::Sliding;
  if (t == "chunked_attention") return LayerKind::Chunked;
  if (t == "linear_attention" || t == "mamba") return LayerKind::Linear;
  return std::nullopt;
}

// How each layer attends, and what in the file said so (for the errors).
struct Kinds {
  std::vector<LayerKind> kinds;  // one per layer; empty: left to the sliding window (below)
  std::string source;
};

Result<Kinds> derive_kinds(const Fields& f, const std::string& type, int layers) {
  Kinds k;
  const auto every = [&](auto kind_of) {
    for (int l = 0; l < layers; ++l) k.kinds.push_back(kind_of(l));
  };
  // An explicit list wins, whatever the family.
  if (const Json* types = f.get("layer_types")) {
    k.source = fmt::format("'{}'", f.name("layer_types"));
    if (!types->is_array()) {
      return f.error("layer_types", fmt::format("must be a list, not {}", types->dump()));
    }
    if (types->size() != static_cast<std::size_t>(layers)) {
      return make_error(fmt::format("config.json: '{}' has {} entries for {} layers ('{}')",
                                    f.name("layer_types"), types->size(), layers,
                                    f.name("num_hidden_layers")));
    }
    for (std::size_t i = 0; i < types->size(); ++i) {
      const Json& t = (*types)[i];
      const auto kind = t.is_string() ? hf_layer_kind(t.get<std::string>()) : std::nullopt;
      if (!kind) {
        return make_error(fmt::format(
            "config.json: '{}' entry {} is {} (expected full_attention, sliding_attention, "
            "chunked_attention or linear_attention)",
            f.name("layer_types"), i, json_text(t)));
      }
      k.kinds.push_back(*kind);
    }
    return k;
  }
  if (is_gemma3(type)) {
    // Gemma 3: every Nth layer (counting from 1) is global, the others slide.
    auto n = f.int_or("sliding_window_pattern", 6);
    if (!n) return n.error();
    k.source = fmt::format("'{}' {}", f.name("sliding_window_pattern"), *n);
    every([&](int l) { return (l + 1) % *n == 0 ? LayerKind::Full : LayerKind::Sliding; });
  } else if (type == "gpt_oss") {
    // GPT-OSS: banded (sliding) and dense layers alternate, layer 0 banded.
    k.source = "model_type 'gpt_oss' (sliding and full layers alternate)";
    every([](int l) { return l % 2 == 0 ? LayerKind::Sliding : LayerKind::Full; });
  } else if (is_llama4(type)) {
    // Llama 4: a layer with RoPE (no_rope_layers entry 1) attends within its chunk; a NoPE layer
    // (entry 0) attends to everything. Without the list, every Nth layer (from 1) is NoPE.
    const Json* nope = f.get("no_rope_layers");
    if (nope && !(nope->is_array() && nope->empty())) {
      k.source = fmt::format("'{}'", f.name("no_rope_layers"));
      if (!nope->is_array()) {
        return f.error("no_rope_layers",
                       fmt::format("must be a list of 0 and 1, not {}", nope->dump()));
      }
      if (nope->size() < static_cast<std::size_t>(layers)) {
        return make_error(fmt::format("config.json: '{}' has {} entries for {} layers ('{}')",
                                      f.name("no_rope_layers"), nope->size(), layers,
                                      f.name("num_hidden_layers")));
      }
      for (int l = 0; l < layers; ++l) {
        const Json& e = (*nope)[static_cast<std::size_t>(l)];
        long long bit = 0;
        if (e.is_boolean()) {
          bit = e.get<bool>() ? 1 : 0;
        } else if (!Fields::as_count(e, 0, bit) || bit > 1) {
          return f.error("no_rope_layers",
                         fmt::format("entry {} is {} (expected 0 or 1)", l, json_text(e)));
        }
        k.kinds.push_back(bit == 1 ? LayerKind::Chunked : LayerKind::Full);
      }
    } else {
      auto n = f.int_or("no_rope_layer_interval", 4);
      if (!n) return n.error();
      k.source = fmt::format("'{}' {}", f.name("no_rope_layer_interval"), *n);
      every([&](int l) { return (l + 1) % *n == 0 ? LayerKind::Full : LayerKind::Chunked; });
    }
  } else if (type == "qwen3_next") {
    // Qwen3-Next: every Nth layer (from 1) is full attention, the others Gated DeltaNet.
    auto n = f.int_or("full_attention_interval", 4);
    if (!n) return n.error();
    k.source = fmt::format("'{}' {}", f.name("full_attention_interval"), *n);
    every([&](int l) { return (l + 1) % *n == 0 ? LayerKind::Full : LayerKind::Linear; });
  }
  return k;
}

// ---- Mixture of experts -----------------------------------------------------------------------

struct Moe {
  long long experts = 0, top_k = 0;  // routed experts per MoE layer, and per token
  std::vector<char> layer;           // 1: the layer's MLP is a sparse MoE block
  double expert_inter = 0;           // one routed expert's intermediate size
  double shared_inter = 0;           // the always-on shared expert(s), summed
  bool shared_gate = false;          // Qwen's sigmoid gate on the shared expert (hidden × 1)
  bool any() const { return std::find(layer.begin(), layer.end(), 1) != layer.end(); }
};

// transformers' default num_experts_per_tok where the config class has one.
std::optional<long long> default_top_k(const std::string& type) {
  if (type == "mixtral") return 2;
  if (type == "qwen2_moe" || type == "gpt_oss") return 4;
  if (type == "qwen3_moe" || type == "deepseek_v3") return 8;
  if (type == "qwen3_next") return 10;
  if (is_llama4(type)) return 1;
  return std::nullopt;
}

Result<Moe> read_moe(const Fields& f, const std::string& type, int layers) {
  Moe moe;
  moe.layer.assign(static_cast<std::size_t>(layers), 0);
  // num_local_experts (Mixtral, GPT-OSS, Llama 4), n_routed_experts (DeepSeek, Kimi),
  // num_experts (Qwen MoE); 0 is a dense model.
  const char* experts_key = nullptr;
  for (const char* key : {"num_local_experts", "n_routed_experts", "num_experts"}) {
    auto v = f.opt_int(key, /*zero_ok=*/true);
    if (!v) return v.error();
    if (*v) {
      moe.experts = **v;
      experts_key = key;
      break;
    }
  }
  if (moe.experts == 0) return moe;

  const char* top_k_key = "num_experts_per_tok";
  auto top_k = f.opt_int(top_k_key);
  if (!top_k) return top_k.error();
  if (!*top_k && type == "gpt_oss") {  // GPT-OSS's original name for it
    top_k_key = "experts_per_token";
    top_k = f.opt_int(top_k_key);
    if (!top_k) return top_k.error();
  }
  if (*top_k) {
    moe.top_k = **top_k;
  } else if (const auto d = default_top_k(type)) {
    moe.top_k = *d;
  } else {
    return make_error(fmt::format("config.json: the field '{}' is missing ('{}' is {})",
                                  f.name("num_experts_per_tok"), f.name(experts_key), moe.experts));
  }
  if (moe.top_k > moe.experts) {
    return f.error(top_k_key, fmt::format("{} is more than the {} experts of '{}'", moe.top_k,
                                          moe.experts, f.name(experts_key)));
  }

  // Which layers are MoE.
  if (is_mla_family(type)) {
    // DeepSeek, Kimi: dense for the first first_k_dense_replace layers, then every
    // moe_layer_freq-th layer.
    auto first = f.int_or("first_k_dense_replace", 0, /*zero_ok=*/true);
    auto freq = f.int_or("moe_layer_freq", 1);
    if (!first) return first.error();
    if (!freq) return freq.error();
    for (int l = 0; l < layers; ++l) moe.layer[l] = l >= *first && l % *freq == 0;
  } else if (is_qwen(type)) {
    // Qwen MoE: every decoder_sparse_step-th layer (from 1), except those in mlp_only_layers.
    auto step = f.int_or("decoder_sparse_step", 1);
    auto dense = f.layer_list("mlp_only_layers", layers);
    if (!step) return step.error();
    if (!dense) return dense.error();
    for (int l = 0; l < layers; ++l) moe.layer[l] = (l + 1) % *step == 0;
    for (int l : *dense) moe.layer[l] = 0;
  } else if (is_llama4(type)) {
    // Llama 4: moe_layers when listed, else every interleave_moe_layer_step-th layer (from 1).
    if (f.get("moe_layers")) {
      auto list = f.layer_list("moe_layers", layers);
      if (!list) return list.error();
      for (int l : *list) moe.layer[l] = 1;
    } else {
      auto step = f.int_or("interleave_moe_layer_step", 1);
      if (!step) return step.error();
      for (int l = 0; l < layers; ++l) moe.layer[l] = (l + 1) % *step == 0;
    }
  } else {
    std::fill(moe.layer.begin(), moe.layer.end(), 1);  // Mixtral, GPT-OSS: every layer
  }

  // Expert widths: moe_intermediate_size where the family has one, else intermediate_size.
  auto expert = f.opt_int("moe_intermediate_size");
  if (!expert) return expert.error();
  if (!*expert) {
    auto inter = f.req_int("intermediate_size");
    if (!inter) return inter.error();
    *expert = *inter;
  }
  moe.expert_inter = static_cast<double>(**expert);
  // Shared experts: DeepSeek's n_shared_experts of the routed width, Qwen's one shared expert of
  // shared_expert_intermediate_size behind a gate, Llama 4's one shared expert of the routed
  // width.
  auto shared = f.int_or("n_shared_experts", 0, /*zero_ok=*/true);
  auto qwen_shared = f.int_or("shared_expert_intermediate_size", 0, /*zero_ok=*/true);
  if (!shared) return shared.error();
  if (!qwen_shared) return qwen_shared.error();
  moe.shared_inter = static_cast<double>(*shared) * moe.expert_inter +
                     static_cast<double>(*qwen_shared) + (is_llama4(type) ? moe.expert_inter : 0.0);
  moe.shared_gate = *qwen_shared > 0;
  return moe;
}

// ---- Parameters -------------------------------------------------------------------------------

struct Params {
  double total = 0, active = 0;  // billions
};

// Weights held in memory and weights one token uses, estimated from the shapes: embeddings,
// attention (or MLA, or linear attention), and the MLP or the experts with their router. Norms
// and biases are left out (well under 0.1%). Active counts the routed experts a token is sent
// to, the shared experts and everything else (embeddings included).
Result<Params> estimate_params(const Fields& f, const std::string& type, const ModelSpec& m,
                               const Moe& moe, long long hidden, long long vocab, bool tied) {
  const double h = static_cast<double>(hidden);
  const double hq = m.q_heads, hkv = m.kv_heads, d = m.head_dim;

  // Attention per layer.
  double attn = 0;
  if (m.is_mla()) {
    auto q_rank = f.int_or("q_lora_rank", 0, /*zero_ok=*/true);
    auto nope = f.int_or("qk_nope_head_dim", 128);
    auto v_dim = f.int_or("v_head_dim", 128);
    if (!q_rank) return q_rank.error();
    if (!nope) return nope.error();
    if (!v_dim) return v_dim.error();
    const double qr = static_cast<double>(*q_rank),
                 qk = static_cast<double>(*nope) + m.qk_rope_head_dim;
    const double vd = static_cast<double>(*v_dim);
    attn = (qr > 0 ? h * qr + qr * hq * qk : h * hq * qk) +
           h * (m.kv_lora_rank + m.qk_rope_head_dim) +
           m.kv_lora_rank * hq * (static_cast<double>(*nope) + vd) + hq * vd * h;
  } else {
    // q, k, v, o; Qwen3-Next's attention also projects an output gate as wide as q.
    auto gate = f.flag("attn_output_gate", type == "qwen3_next");
    if (!gate) return gate.error();
    attn = h * hq * d * (*gate ? 3.0 : 2.0) + 2.0 * h * hkv * d;
  }
  // A linear-attention layer. Qwen3-Next's Gated DeltaNet, estimated from its projections:
  // in_proj_qkvz (hidden → 2 × key dim + 2 × value dim: q, k, v and the gate z), in_proj_ba (two
  // scalars per value head), the short convolution over q, k and v, and out_proj (value dim →
  // hidden); norms and per-head constants are left out. Other families' linear layers are
  // counted as an ordinary attention layer, a stand-in.
  double linear = attn;
  if (type == "qwen3_next" || f.get("linear_num_value_heads")) {
    auto kh = f.int_or("linear_num_key_heads", 16), kd = f.int_or("linear_key_head_dim", 128);
    auto vh = f.int_or("linear_num_value_heads", 32), vd = f.int_or("linear_value_head_dim", 128);
    auto conv = f.int_or("linear_conv_kernel_dim", 4);
    for (const auto* r : {&kh, &kd, &vh, &vd, &conv}) {
      if (!*r) return r->error();
    }
    const double key_dim = static_cast<double>(*kh) * static_cast<double>(*kd);
    const double value_dim = static_cast<double>(*vh) * static_cast<double>(*vd);
    linear = h * (2 * key_dim + 2 * value_dim) + h * 2.0 * static_cast<double>(*vh) +
             (2 * key_dim + value_dim) * static_cast<double>(*conv) + value_dim * h;
  }

  // The dense MLP width, where some layer has one (Llama 4's dense layers:
  // intermediate_size_mlp).
  double dense_inter = 0;
  if (std::find(moe.layer.begin(), moe.layer.end(), 0) != moe.layer.end()) {
    auto inter = is_llama4(type) && f.get("intermediate_size_mlp")
                     ? f.req_int("intermediate_size_mlp")
                     : f.req_int("intermediate_size");
    if (!inter) return inter.error();
    dense_inter = static_cast<double>(*inter);
  }

  Params p;
  double total = vocab * h * (tied ? 1.0 : 2.0), active = total;
  const double experts = static_cast<double>(moe.experts);
  for (int l = 0; l < m.layers; ++l) {
    const double a = m.layer_kind(l) == LayerKind::Linear ? linear : attn;
    if (moe.layer[static_cast<std::size_t>(l)]) {
      const double common = a + h * experts +  // the router
                            3.0 * h * moe.shared_inter + (moe.shared_gate ? h : 0.0);
      total += common + 3.0 * h * moe.expert_inter * experts;
      active += common + 3.0 * h * moe.expert_inter * static_cast<double>(moe.top_k);
    } else {
      total += a + 3.0 * h * dense_inter;
      active += a + 3.0 * h * dense_inter;
    }
  }
  p.total = total / 1e9;
  p.active = active / 1e9;
  return p;
}

std::string count_of(std::size_t n, int of) {
  return fmt::format("{} of the {} layers", n, of);
}

Result<ModelSpec> read_config(const Json& file, std::string id) {
  if (!file.is_object()) return make_error("config.json: not a JSON object");
  if (!file.contains("model_type") || !file["model_type"].is_string()) {
    return make_error("config.json: the field 'model_type' is missing");
  }
  const std::string type = file["model_type"].get<std::string>();
  if (!kFamilies.count(type)) {
    return make_error(fmt::format("config.json: model_type '{}' is not supported (supported: {})",
                                  type, fmt::join(kFamilies, ", ")));
  }
  // The multimodal Llama 4 and Gemma 3 keep the language model's fields under text_config.
  const Json* text = &file;
  std::string prefix;
  if ((type == "llama4" || type == "gemma3") && file.contains("text_config") &&
      !file["text_config"].is_null()) {
    if (!file["text_config"].is_object()) {
      return make_error(fmt::format("config.json: 'text_config' must be an object, not {}",
                                    json_text(file["text_config"])));
    }
    text = &file["text_config"];
    prefix = "text_config.";
  }
  const Fields f(file, *text, prefix);

  ModelSpec m;
  // The id comes from a folder's name: text (valid_utf8), and the name, only ever shown, escaped
  // once as a terminal line is (as a GGUF's general.name is).
  m.id = valid_utf8(id);
  m.name = terminal_text(m.id);
  m.family = type;
  m.source = "imported config.json";
  auto layers = f.req_int("num_hidden_layers");
  auto heads = f.req_int("num_attention_heads");
  auto hidden = f.req_int("hidden_size");
  if (!layers) return layers.error();
  if (!heads) return heads.error();
  if (!hidden) return hidden.error();
  if (*layers > kMaxLayers) {
    return f.error(
        "num_hidden_layers",
        fmt::format("is {}, more layers than any model has (at most {})", *layers, kMaxLayers));
  }
  m.layers = static_cast<int>(*layers);
  m.q_heads = static_cast<int>(*heads);
  // Gemma 3's published configs leave out what matches Gemma3TextConfig's defaults.
  auto max_pos = is_gemma3(type) ? f.int_or("max_position_embeddings", 131072)
                                 : f.req_int("max_position_embeddings");
  if (!max_pos) return max_pos.error();
  m.max_context = static_cast<int>(*max_pos);

  if (is_mla_family(type)) {
    auto rank = f.req_int("kv_lora_rank");
    auto rope = f.req_int("qk_rope_head_dim");
    if (!rank) return rank.error();
    if (!rope) return rope.error();
    m.kv_lora_rank = static_cast<int>(*rank);
    m.qk_rope_head_dim = static_cast<int>(*rope);
    m.kv_heads = 1;
    m.head_dim = m.kv_lora_rank + m.qk_rope_head_dim;
  } else {
    auto kv = f.opt_int("num_key_value_heads");
    if (!kv) return kv.error();
    m.kv_heads = static_cast<int>(kv->value_or(*heads));
    if (m.q_heads % m.kv_heads != 0) {
      return make_error(fmt::format("config.json: {} {} is not a multiple of {} {}",
                                    f.name("num_attention_heads"), m.q_heads,
                                    f.name("num_key_value_heads"), m.kv_heads));
    }
    auto hd = f.opt_int("head_dim");
    if (!hd) return hd.error();
    if (*hd) {
      m.head_dim = static_cast<int>(**hd);
    } else if (*hidden % *heads == 0) {
      m.head_dim = static_cast<int>(*hidden / *heads);
    } else {
      return make_error(fmt::format("config.json: no '{}', and {} {} is not a multiple of {} {}",
                                    f.name("head_dim"), f.name("hidden_size"), *hidden,
                                    f.name("num_attention_heads"), *heads));
    }
  }

  // Layer kinds: explicit layer_types, else the family's pattern; sliding layers need a window
  // and chunked layers a chunk size.
  auto kinds = derive_kinds(f, type, m.layers);
  if (!kinds) return kinds.error();
  auto window = f.opt_int("sliding_window");
  if (!window) return window.error();
  if (!kinds->kinds.empty()) {
    const auto count = [&](LayerKind want) {
      return static_cast<std::size_t>(std::count(kinds->kinds.begin(), kinds->kinds.end(), want));
    };
    if (const auto n = count(LayerKind::Sliding); n > 0) {
      if (!*window) {
        return make_error(
            fmt::format("config.json: {} makes {} sliding_attention, but '{}' is missing",
                        kinds->source, count_of(n, m.layers), f.name("sliding_window")));
      }
      m.sliding_window = static_cast<int>(**window);
    }
    if (const auto n = count(LayerKind::Chunked); n > 0) {
      auto chunk = f.opt_int("attention_chunk_size");
      if (!chunk) return chunk.error();
      if (!*chunk) {
        return make_error(
            fmt::format("config.json: {} makes {} chunked_attention, but '{}' is missing",
                        kinds->source, count_of(n, m.layers), f.name("attention_chunk_size")));
      }
      m.chunk_size = static_cast<int>(**chunk);
    }
    if (count(LayerKind::Linear) == static_cast<std::size_t>(m.layers)) {
      return make_error(fmt::format(
          "config.json: {} makes every layer linear_attention, so no layer keeps a KV cache",
          kinds->source));
    }
    if (count(LayerKind::Full) != static_cast<std::size_t>(m.layers)) {
      m.layer_kinds = std::move(kinds->kinds);
    }
  } else {
    // No per-layer kinds: Qwen's sliding_window counts only with use_sliding_window true (its
    // configs carry one even when it is off), from max_window_layers on; Gemma 2 alternates
    // starting with a sliding layer 0; otherwise (Mistral, Phi-3) the window covers every layer.
    bool window_on = window->has_value();
    if (is_qwen(type) && window_on) {
      auto use = f.flag("use_sliding_window", false);
      if (!use) return use.error();
      window_on = *use;
    }
    if (window_on) {
      m.sliding_window = static_cast<int>(**window);
      if (type == "gemma2") {
        for (int l = 0; l < m.layers; ++l) {
          m.layer_kinds.push_back(l % 2 == 0 ? LayerKind::Sliding : LayerKind::Full);
        }
      } else if (is_qwen(type) && f.get("max_window_layers")) {
        auto first = f.req_int("max_window_layers");
        if (!first) return first.error();
        for (int l = 0; l < m.layers; ++l) {
          m.layer_kinds.push_back(l >= *first ? LayerKind::Sliding : LayerKind::Full);
        }
        if (m.layers_of(LayerKind::Sliding) == 0) {
          m.layer_kinds.clear();
          m.sliding_window.reset();
        }
      }
    }
  }
  // GPT-OSS learns a sink logit per head in every attention layer.
  m.attention_sinks = type == "gpt_oss";

  auto moe = read_moe(f, type, m.layers);
  if (!moe) return moe.error();
  auto vocab = is_gemma3(type) ? f.int_or("vocab_size", 262208) : f.req_int("vocab_size");
  if (!vocab) return vocab.error();
  auto tied = f.flag("tie_word_embeddings", type == "gemma2" || is_gemma3(type), true);
  if (!tied) return tied.error();
  auto params = estimate_params(f, type, m, *moe, *hidden, *vocab, *tied);
  if (!params) return params.error();
  m.params_billion = params->total;
  if (moe->any() && moe->top_k < moe->experts) {
    m.active_params_billion = params->active;
    m.experts = static_cast<int>(moe->experts);
    m.experts_per_token = static_cast<int>(moe->top_k);
  }

  // Weights: the checkpoint's dtype ("torch_dtype", or "dtype" in newer files), or its
  // quantization (FP8 blocks: DeepSeek-V3, Kimi K2; MXFP4 experts: GPT-OSS).
  m.weights_dtype = "bf16";
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (const Json* d = f.get_any(key); d && d->is_string()) {
      if (*d == "float16") m.weights_dtype = "fp16";
      if (*d == "float32") m.weights_dtype = "fp32";
      break;
    }
  }
  if (const Json* q = f.get_any("quantization_config"); q && q->is_object()) {
    const auto method = q->find("quant_method");
    if (method != q->end() && method->is_string()) {
      if (*method == "fp8") m.weights_dtype = "fp8";
      if (*method == "mxfp4") m.weights_dtype = "fp4";
    }
  }
  if (auto v = m.validate(); !v) return make_error("config.json: " + v.message());
  return m;
}

}  // namespace

Result<ModelSpec> import_hf_config(const nlohmann::json& c, std::string id) {
  try {
    return read_config(c, std::move(id));
  } catch (const nlohmann::json::exception& e) {  // every access is checked; a last guard
    return make_error(fmt::format("config.json: {}", e.what()));
  }
}

Result<ModelSpec> import_hf_config_file(const std::filesystem::path& file) {
  const std::string path = file.string();
  std::ifstream in(path);
  if (!in) return make_error(fmt::format("{}: cannot open the file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  // The model's id: the folder holding config.json, else the file's own name.
  std::string id = path;
  const auto slash = id.find_last_of('/');
  if (id.size() > 12 && id.substr(id.size() - 12) == "/config.json" && slash != std::string::npos) {
    const auto prev = id.find_last_of('/', slash - 1);
    id = id.substr(prev == std::string::npos ? 0 : prev + 1,
                   slash - (prev == std::string::npos ? 0 : prev + 1));
  } else if (slash != std::string::npos) {
    id = id.substr(slash + 1);
  }
  if (id.size() > 5 && id.substr(id.size() - 5) == ".json") id.resize(id.size() - 5);
  auto m = import_hf_config(j, id);
  if (!m) return make_error(fmt::format("{}: {}", path, m.message()));
  m->source = valid_utf8(path);
  return m;
}

}  // namespace kvlab::planners
