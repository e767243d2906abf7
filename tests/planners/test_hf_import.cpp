// Hugging Face config.json import for the families of current models: each config below carries
// the values of the published config.json named above it (fields the importer does not read are
// partly left out), and the expected parameter counts are the model cards' figures, within 3%.
// KV bytes per token are worked out by hand: 2 (K and V) × kv heads × head_dim × 2 bytes (fp16) ×
// the layers that keep KV.
#include <gtest/gtest.h>

#include <string>

#include "kvlab/planners/catalog.h"
#include "kvlab/planners/kv_memory.h"

namespace kvlab::planners {
namespace {

using nlohmann::json;

double fp16_bytes_per_token(const ModelSpec& m) {
  return kv_bytes_per_token(m, parse_scheme("fp16").value());
}

// The error message, or "(imported)" when the config imports.
std::string error_of(const json& config) {
  auto m = import_hf_config(config, "x");
  return m.ok() ? "(imported)" : m.message();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// `pattern` repeated `times` times, as a JSON list.
json repeat(const std::vector<std::string>& pattern, int times) {
  json out = json::array();
  for (int i = 0; i < times; ++i) {
    for (const auto& p : pattern) out.push_back(p);
  }
  return out;
}

json range(int n) {
  json out = json::array();
  for (int i = 0; i < n; ++i) out.push_back(i);
  return out;
}

// meta-llama/Llama-4-Scout-17B-16E config.json: the multimodal file, the language model under
// text_config; no_rope_layers empty (so derived: every 4th layer NoPE), one MoE block per layer.
json llama4_scout() {
  return {{"architectures", {"Llama4ForConditionalGeneration"}},
          {"model_type", "llama4"},
          {"boi_token_index", 200080},
          {"eoi_token_index", 200081},
          {"image_token_index", 200092},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"text_config",
           {{"model_type", "llama4_text"},
            {"attention_bias", false},
            {"attention_chunk_size", 8192},
            {"head_dim", 128},
            {"hidden_act", "silu"},
            {"hidden_size", 5120},
            {"interleave_moe_layer_step", 1},
            {"intermediate_size", 8192},
            {"intermediate_size_mlp", 16384},
            {"max_position_embeddings", 262144},
            {"no_rope_layers", json::array()},
            {"num_attention_heads", 40},
            {"num_experts_per_tok", 1},
            {"num_hidden_layers", 48},
            {"num_key_value_heads", 8},
            {"num_local_experts", 16},
            {"rms_norm_eps", 1e-05},
            {"rope_theta", 500000.0},
            {"torch_dtype", "bfloat16"},
            {"use_qk_norm", true},
            {"vocab_size", 202048}}},
          {"vision_config",
           {{"model_type", "llama4_vision_model"},
            {"hidden_size", 1408},
            {"num_hidden_layers", 34},
            {"num_attention_heads", 16}}}};
}

TEST(HfImport, Llama4ScoutChunkedLayersFromTextConfig) {
  auto r = import_hf_config(llama4_scout(), "scout");
  ASSERT_TRUE(r.ok()) << r.message();
  const ModelSpec& m = *r;
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.q_heads, 40);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.max_context, 262144);
  // Layers 3, 7, ..., 47 attend globally (NoPE); the other 36 within chunks of 8192.
  EXPECT_EQ(m.layers_of(LayerKind::Chunked), 36);
  EXPECT_EQ(m.layers_of(LayerKind::Full), 12);
  EXPECT_EQ(m.layer_kind(0), LayerKind::Chunked);
  EXPECT_EQ(m.layer_kind(3), LayerKind::Full);
  EXPECT_EQ(m.layer_kind(47), LayerKind::Full);
  EXPECT_EQ(m.chunk_size, 8192);
  EXPECT_FALSE(m.sliding_window.has_value());
  EXPECT_FALSE(m.attention_sinks);
  EXPECT_FALSE(m.is_mla());
  // Model card: 109B total (the vision encoder included), 17B active.
  EXPECT_TRUE(m.is_moe());
  EXPECT_NEAR(m.params_billion, 109, 0.03 * 109);
  EXPECT_NEAR(m.active_params_billion, 17, 0.03 * 17);
  // 2 × 8 × 128 × 2 bytes × 48 layers.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(m), 196608.0);
  // At 32768 tokens: 36 chunked layers keep 8192, 12 global ones 32768; 4096 bytes a token.
  EXPECT_EQ(kv_bytes_per_sequence(m, parse_scheme("fp16").value(), Deployment{}, 32768),
            4096ull * (36 * 8192 + 12 * 32768));
}

TEST(HfImport, Llama4TextOnlyConfigWithExplicitLists) {
  // A text-only Llama 4 Scout config.json as transformers saves it (model_type llama4_text,
  // the fields at the top level, no_rope_layers and moe_layers written out), from the vLLM issue
  // "Llama4 always go OOM when using LLama4ForCausalLM": the same model as the nested file.
  json flat = llama4_scout()["text_config"];
  flat["architectures"] = {"Llama4ForCausalLM"};
  flat["model_type"] = "llama4_text";
  flat["no_rope_layers"] = json::array();
  for (int l = 0; l < 48; ++l) flat["no_rope_layers"].push_back((l + 1) % 4 == 0 ? 0 : 1);
  flat["moe_layers"] = range(48);
  flat["tie_word_embeddings"] = false;
  auto r = import_hf_config(flat, "scout-text");
  ASSERT_TRUE(r.ok()) << r.message();
  const ModelSpec nested = import_hf_config(llama4_scout(), "scout").value();
  EXPECT_EQ(r->layer_kinds, nested.layer_kinds);
  EXPECT_EQ(r->chunk_size, 8192);
  EXPECT_DOUBLE_EQ(r->params_billion, nested.params_billion);
  EXPECT_DOUBLE_EQ(r->active_params_billion, nested.active_params_billion);
}

TEST(HfImport, Llama4MaverickInterleavesMoeAndDenseLayers) {
  // meta-llama/Llama-4-Maverick-17B-128E config.json (text_config as TensorRT-LLM's
  // test_modeling_llama4 copies it, with all 48 layers): 128 experts on every 2nd layer, the
  // dense layers 16384 wide.
  json c = llama4_scout();
  auto& t = c["text_config"];
  t["interleave_moe_layer_step"] = 2;
  t["num_local_experts"] = 128;
  t["max_position_embeddings"] = 1048576;
  t["use_qk_norm"] = false;
  t.erase("no_rope_layers");
  auto r = import_hf_config(c, "maverick");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->layers_of(LayerKind::Chunked), 36);
  EXPECT_EQ(r->max_context, 1048576);
  // Model card: 400B total, 17B active.
  EXPECT_NEAR(r->params_billion, 400, 0.03 * 400);
  EXPECT_NEAR(r->active_params_billion, 17, 0.03 * 17);
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(*r), 196608.0);
}

TEST(HfImport, Qwen3DenseHeadDimIsTheConfigs) {
  // Qwen/Qwen3-32B config.json: head_dim 128 although hidden / heads = 80; sliding_window null.
  const json c = {{"architectures", {"Qwen3ForCausalLM"}},
                  {"attention_bias", false},
                  {"head_dim", 128},
                  {"hidden_act", "silu"},
                  {"hidden_size", 5120},
                  {"intermediate_size", 25600},
                  {"max_position_embeddings", 40960},
                  {"max_window_layers", 64},
                  {"model_type", "qwen3"},
                  {"num_attention_heads", 64},
                  {"num_hidden_layers", 64},
                  {"num_key_value_heads", 8},
                  {"rms_norm_eps", 1e-06},
                  {"rope_scaling", nullptr},
                  {"rope_theta", 1000000},
                  {"sliding_window", nullptr},
                  {"tie_word_embeddings", false},
                  {"torch_dtype", "bfloat16"},
                  {"use_cache", true},
                  {"use_sliding_window", false},
                  {"vocab_size", 151936}};
  auto r = import_hf_config(c, "qwen3-32b");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->layers, 64);
  EXPECT_EQ(r->kv_heads, 8);
  EXPECT_EQ(r->head_dim, 128);
  EXPECT_FALSE(r->sliding_window.has_value());
  EXPECT_TRUE(r->layer_kinds.empty());
  EXPECT_FALSE(r->is_moe());
  EXPECT_EQ(r->active_params_billion, 0.0);
  // Model card: 32.8B.
  EXPECT_NEAR(r->params_billion, 32.8, 0.03 * 32.8);
  // 2 × 8 × 128 × 2 × 64.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(*r), 262144.0);
}

// Qwen/Qwen3-30B-A3B config.json.
json qwen3_30b_a3b() {
  return {{"architectures", {"Qwen3MoeForCausalLM"}},
          {"attention_bias", false},
          {"decoder_sparse_step", 1},
          {"head_dim", 128},
          {"hidden_act", "silu"},
          {"hidden_size", 2048},
          {"intermediate_size", 6144},
          {"max_position_embeddings", 40960},
          {"max_window_layers", 48},
          {"mlp_only_layers", json::array()},
          {"model_type", "qwen3_moe"},
          {"moe_intermediate_size", 768},
          {"norm_topk_prob", true},
          {"num_attention_heads", 32},
          {"num_experts", 128},
          {"num_experts_per_tok", 8},
          {"num_hidden_layers", 48},
          {"num_key_value_heads", 4},
          {"rms_norm_eps", 1e-06},
          {"rope_scaling", nullptr},
          {"rope_theta", 1000000.0},
          {"sliding_window", nullptr},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_sliding_window", false},
          {"vocab_size", 151936}};
}

TEST(HfImport, Qwen3MoeCountsEveryExpertButActivatesEight) {
  auto r = import_hf_config(qwen3_30b_a3b(), "qwen3-30b-a3b");
  ASSERT_TRUE(r.ok()) << r.message();
  const ModelSpec& m = *r;
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.kv_heads, 4);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_TRUE(m.layer_kinds.empty());
  EXPECT_FALSE(m.sliding_window.has_value());
  // Model card: 30.5B total, 3.3B activated; intermediate_size 6144 belongs to no layer.
  EXPECT_TRUE(m.is_moe());
  EXPECT_NEAR(m.params_billion, 30.5, 0.03 * 30.5);
  EXPECT_NEAR(m.active_params_billion, 3.3, 0.03 * 3.3);
  // 2 × 4 × 128 × 2 × 48.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(m), 98304.0);

  // mlp_only_layers [0, 1]: two layers trade 128 experts of 3 × 2048 × 768 and the 2048 × 128
  // router (604,241,920 weights) for a dense MLP of 3 × 2048 × 6144 (37,748,736); a token
  // used 8 experts and the router there (38,010,880).
  json c = qwen3_30b_a3b();
  c["mlp_only_layers"] = {0, 1};
  auto two_dense = import_hf_config(c, "x");
  ASSERT_TRUE(two_dense.ok()) << two_dense.message();
  EXPECT_NEAR(m.params_billion - two_dense->params_billion, 2 * (604241920.0 - 37748736.0) / 1e9,
              1e-9);
  EXPECT_NEAR(m.active_params_billion - two_dense->active_params_billion,
              2 * (38010880.0 - 37748736.0) / 1e9, 1e-9);
  // decoder_sparse_step 2: only layers 1, 3, ..., 47 are MoE.
  c = qwen3_30b_a3b();
  c["decoder_sparse_step"] = 2;
  auto every_other = import_hf_config(c, "x");
  ASSERT_TRUE(every_other.ok()) << every_other.message();
  EXPECT_NEAR(m.params_billion - every_other->params_billion, 24 * (604241920.0 - 37748736.0) / 1e9,
              1e-9);
}

// Qwen/Qwen3-Next-80B-A3B-Instruct config.json (as Megatron-Bridge's test_qwen3_next_bridge
// copies it).
json qwen3_next() {
  return {{"architectures", {"Qwen3NextForCausalLM"}},
          {"decoder_sparse_step", 1},
          {"full_attention_interval", 4},
          {"head_dim", 256},
          {"hidden_act", "silu"},
          {"hidden_size", 2048},
          {"intermediate_size", 5120},
          {"linear_conv_kernel_dim", 4},
          {"linear_key_head_dim", 128},
          {"linear_num_key_heads", 16},
          {"linear_num_value_heads", 32},
          {"linear_value_head_dim", 128},
          {"max_position_embeddings", 262144},
          {"mlp_only_layers", json::array()},
          {"model_type", "qwen3_next"},
          {"moe_intermediate_size", 512},
          {"norm_topk_prob", true},
          {"num_attention_heads", 16},
          {"num_experts", 512},
          {"num_experts_per_tok", 10},
          {"num_hidden_layers", 48},
          {"num_key_value_heads", 2},
          {"partial_rotary_factor", 0.25},
          {"rope_theta", 10000000},
          {"shared_expert_intermediate_size", 512},
          {"tie_word_embeddings", false},
          {"torch_dtype", "bfloat16"},
          {"use_sliding_window", false},
          {"vocab_size", 151936}};
}

TEST(HfImport, Qwen3NextLinearLayersKeepNoKv) {
  auto r = import_hf_config(qwen3_next(), "qwen3-next");
  ASSERT_TRUE(r.ok()) << r.message();
  const ModelSpec& m = *r;
  EXPECT_EQ(m.layers, 48);
  EXPECT_EQ(m.kv_heads, 2);
  EXPECT_EQ(m.head_dim, 256);
  // Every 4th layer is full attention, the other 36 Gated DeltaNet.
  EXPECT_EQ(m.layers_of(LayerKind::Linear), 36);
  EXPECT_EQ(m.layers_of(LayerKind::Full), 12);
  EXPECT_EQ(m.layer_kind(0), LayerKind::Linear);
  EXPECT_EQ(m.layer_kind(3), LayerKind::Full);
  EXPECT_FALSE(m.sliding_window.has_value());
  EXPECT_EQ(m.kind_tokens(LayerKind::Linear, 100000), 0);
  // Only the 12 full layers: 2 × 2 × 256 × 2 × 12.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(m), 24576.0);
  // Model card: 80B total. Its "3B activated" is the name's rounding: counted as the Qwen3-30B-A3B
  // card counts (3.3B, embeddings included) it is 3.87B: per layer 10 routed experts and the
  // shared one of 3 × 2048 × 512, its gate and the 2048 × 512 router (35,653,632) × 48, the 12
  // gated attention layers (27,262,976 each), the 36 DeltaNet layers (33,718,272 each, an
  // estimate) and the embeddings (2 × 151936 × 2048) = 3,874,717,696 (3.25B without the
  // embeddings).
  EXPECT_TRUE(m.is_moe());
  EXPECT_NEAR(m.params_billion, 80, 0.03 * 80);
  EXPECT_NEAR(m.active_params_billion, 3.8747, 0.03 * 3.8747);

  // The same layers written out as layer_types, with transformers' legacy names for them.
  json c = qwen3_next();
  c.erase("full_attention_interval");
  c["layer_types"] =
      repeat({"mamba", "linear_attention", "linear_attention", "full_attention"}, 12);
  auto listed = import_hf_config(c, "x");
  ASSERT_TRUE(listed.ok()) << listed.message();
  EXPECT_EQ(listed->layer_kinds, m.layer_kinds);
}

// openai/gpt-oss-120b config.json.
json gpt_oss_120b() {
  return {{"architectures", {"GptOssForCausalLM"}},
          {"attention_bias", true},
          {"experts_per_token", 4},
          {"head_dim", 64},
          {"hidden_act", "silu"},
          {"hidden_size", 2880},
          {"initial_context_length", 4096},
          {"intermediate_size", 2880},
          {"layer_types", repeat({"sliding_attention", "full_attention"}, 18)},
          {"max_position_embeddings", 131072},
          {"model_type", "gpt_oss"},
          {"num_attention_heads", 64},
          {"num_experts_per_tok", 4},
          {"num_hidden_layers", 36},
          {"num_key_value_heads", 8},
          {"num_local_experts", 128},
          {"quantization_config",
           {{"modules_to_not_convert",
             {"model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens",
              "lm_head"}},
            {"quant_method", "mxfp4"}}},
          {"rms_norm_eps", 1e-05},
          {"rope_scaling",
           {{"beta_fast", 32.0},
            {"beta_slow", 1.0},
            {"factor", 32.0},
            {"original_max_position_embeddings", 4096},
            {"rope_type", "yarn"},
            {"truncate", false}}},
          {"rope_theta", 150000},
          {"sliding_window", 128},
          {"swiglu_limit", 7.0},
          {"tie_word_embeddings", false},
          {"vocab_size", 201088}};
}

TEST(HfImport, GptOssAlternatesSlidingLayersWithSinks) {
  auto r = import_hf_config(gpt_oss_120b(), "gpt-oss-120b");
  ASSERT_TRUE(r.ok()) << r.message();
  const ModelSpec& m = *r;
  EXPECT_EQ(m.layers, 36);
  EXPECT_EQ(m.q_heads, 64);
  EXPECT_EQ(m.kv_heads, 8);
  EXPECT_EQ(m.head_dim, 64);
  EXPECT_EQ(m.layers_of(LayerKind::Sliding), 18);
  EXPECT_EQ(m.layers_of(LayerKind::Full), 18);
  EXPECT_EQ(m.layer_kind(0), LayerKind::Sliding);
  EXPECT_EQ(m.layer_kind(1), LayerKind::Full);
  ASSERT_TRUE(m.sliding_window.has_value());
  EXPECT_EQ(*m.sliding_window, 128);
  EXPECT_TRUE(m.attention_sinks);
  EXPECT_EQ(m.weights_dtype, "fp4");  // MXFP4 experts
  // Model card: 116.8B total, 5.1B active. OpenAI's 5.13B leaves out the embedding table
  // (201,088 × 2,880 = 0.58B), which kvlab counts for every model, so 5.71B here.
  EXPECT_TRUE(m.is_moe());
  EXPECT_NEAR(m.params_billion, 116.8, 0.03 * 116.8);
  EXPECT_NEAR(m.active_params_billion, 5.13 + 0.579, 0.03 * 5.71);
  // All 36 layers keep KV: 2 × 8 × 64 × 2 × 36.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(m), 73728.0);

  // Without layer_types, GptOssConfig's own pattern: the same alternation.
  json c = gpt_oss_120b();
  c.erase("layer_types");
  auto derived = import_hf_config(c, "x");
  ASSERT_TRUE(derived.ok()) << derived.message();
  EXPECT_EQ(derived->layer_kinds, m.layer_kinds);
}

// google/gemma-3-27b-it config.json: the language model under text_config, which leaves out what
// matches Gemma3TextConfig's defaults (vocab_size 262208, max_position_embeddings 131072,
// sliding_window_pattern 6, tied embeddings).
json gemma3_27b() {
  return {{"architectures", {"Gemma3ForConditionalGeneration"}},
          {"boi_token_index", 255999},
          {"eoi_token_index", 256000},
          {"eos_token_id", {1, 106}},
          {"image_token_index", 262144},
          {"initializer_range", 0.02},
          {"mm_tokens_per_image", 256},
          {"model_type", "gemma3"},
          {"text_config",
           {{"head_dim", 128},
            {"hidden_size", 5376},
            {"intermediate_size", 21504},
            {"model_type", "gemma3_text"},
            {"num_attention_heads", 32},
            {"num_hidden_layers", 62},
            {"num_key_value_heads", 16},
            {"query_pre_attn_scalar", 168},
            {"rope_scaling", {{"factor", 8.0}, {"rope_type", "linear"}}},
            {"sliding_window", 1024}}},
          {"torch_dtype", "bfloat16"},
          {"transformers_version", "4.50.0.dev0"},
          {"vision_config",
           {{"hidden_size", 1152},
            {"image_size", 896},
            {"intermediate_size", 4304},
            {"model_type", "siglip_vision_model"},
            {"num_attention_heads", 16},
            {"num_hidden_layers", 27},
            {"patch_size", 14},
            {"vision_use_head", false}}}};
}

TEST(HfImport, Gemma3EverySixthLayerGlobal) {
  auto r = import_hf_config(gemma3_27b(), "gemma-3-27b");
  ASSERT_TRUE(r.ok()) << r.message();
  const ModelSpec& m = *r;
  EXPECT_EQ(m.layers, 62);
  EXPECT_EQ(m.q_heads, 32);
  EXPECT_EQ(m.kv_heads, 16);
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.max_context, 131072);
  // Layers 5, 11, ..., 59 are global: 10; the other 52 slide over 1024 tokens.
  EXPECT_EQ(m.layers_of(LayerKind::Sliding), 52);
  EXPECT_EQ(m.layers_of(LayerKind::Full), 10);
  EXPECT_EQ(m.layer_kind(4), LayerKind::Sliding);
  EXPECT_EQ(m.layer_kind(5), LayerKind::Full);
  EXPECT_EQ(m.layer_kind(59), LayerKind::Full);
  EXPECT_EQ(m.layer_kind(61), LayerKind::Sliding);
  ASSERT_TRUE(m.sliding_window.has_value());
  EXPECT_EQ(*m.sliding_window, 1024);
  EXPECT_FALSE(m.attention_sinks);
  EXPECT_FALSE(m.is_moe());
  // Model card: 27B.
  EXPECT_NEAR(m.params_billion, 27, 0.03 * 27);
  // 2 × 16 × 128 × 2 × 62.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(m), 507904.0);
  // At 131072 tokens: 52 × 1024 + 10 × 131072 tokens of 2 × 16 × 128 × 2 = 8192 bytes.
  EXPECT_EQ(kv_bytes_per_sequence(m, parse_scheme("fp16").value(), Deployment{}, 131072),
            8192ull * (52 * 1024 + 10 * 131072));

  // google/gemma-3-1b-it config.json: model_type gemma3_text, the fields at the top level,
  // sliding_window_pattern written out.
  const json one_b = {{"architectures", {"Gemma3ForCausalLM"}},
                      {"head_dim", 256},
                      {"hidden_activation", "gelu_pytorch_tanh"},
                      {"hidden_size", 1152},
                      {"intermediate_size", 6912},
                      {"max_position_embeddings", 32768},
                      {"model_type", "gemma3_text"},
                      {"num_attention_heads", 4},
                      {"num_hidden_layers", 26},
                      {"num_key_value_heads", 1},
                      {"query_pre_attn_scalar", 256},
                      {"rope_local_base_freq", 10000},
                      {"rope_theta", 1000000},
                      {"sliding_window", 512},
                      {"sliding_window_pattern", 6},
                      {"torch_dtype", "bfloat16"},
                      {"vocab_size", 262144}};
  auto small = import_hf_config(one_b, "gemma-3-1b");
  ASSERT_TRUE(small.ok()) << small.message();
  EXPECT_EQ(small->layers_of(LayerKind::Sliding), 22);  // global: 5, 11, 17, 23
  EXPECT_EQ(small->layers_of(LayerKind::Full), 4);
  EXPECT_EQ(*small->sliding_window, 512);
  EXPECT_EQ(small->max_context, 32768);
  EXPECT_NEAR(small->params_billion, 1.0, 0.03);
}

TEST(HfImport, MistralSmall3AndPhi4HaveNoWindow) {
  // mistralai/Mistral-Small-24B-Instruct-2501 config.json: head_dim 128, not 5120 / 32 = 160.
  const json mistral = {{"architectures", {"MistralForCausalLM"}},
                        {"head_dim", 128},
                        {"hidden_act", "silu"},
                        {"hidden_size", 5120},
                        {"intermediate_size", 32768},
                        {"max_position_embeddings", 32768},
                        {"model_type", "mistral"},
                        {"num_attention_heads", 32},
                        {"num_hidden_layers", 40},
                        {"num_key_value_heads", 8},
                        {"rms_norm_eps", 1e-05},
                        {"rope_theta", 100000000.0},
                        {"sliding_window", nullptr},
                        {"tie_word_embeddings", false},
                        {"torch_dtype", "bfloat16"},
                        {"vocab_size", 131072}};
  auto r = import_hf_config(mistral, "mistral-small-3");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->layers, 40);
  EXPECT_EQ(r->kv_heads, 8);
  EXPECT_EQ(r->head_dim, 128);
  EXPECT_FALSE(r->sliding_window.has_value());
  EXPECT_EQ(r->layers_of(LayerKind::Full), 40);
  EXPECT_FALSE(r->is_moe());
  EXPECT_NEAR(r->params_billion, 24, 0.03 * 24);  // model card: 24B
  // 2 × 8 × 128 × 2 × 40.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(*r), 163840.0);

  // microsoft/phi-4 config.json (model_type phi3).
  const json phi4 = {{"architectures", {"Phi3ForCausalLM"}},
                     {"attention_bias", false},
                     {"hidden_act", "silu"},
                     {"hidden_size", 5120},
                     {"intermediate_size", 17920},
                     {"max_position_embeddings", 16384},
                     {"model_type", "phi3"},
                     {"num_attention_heads", 40},
                     {"num_hidden_layers", 40},
                     {"num_key_value_heads", 10},
                     {"original_max_position_embeddings", 16384},
                     {"rms_norm_eps", 1e-05},
                     {"rope_scaling", nullptr},
                     {"rope_theta", 250000},
                     {"sliding_window", nullptr},
                     {"tie_word_embeddings", false},
                     {"torch_dtype", "bfloat16"},
                     {"vocab_size", 100352}};
  r = import_hf_config(phi4, "phi-4");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->layers, 40);
  EXPECT_EQ(r->kv_heads, 10);
  EXPECT_EQ(r->head_dim, 128);
  EXPECT_FALSE(r->sliding_window.has_value());
  EXPECT_EQ(r->max_context, 16384);
  EXPECT_NEAR(r->params_billion, 14.7, 0.03 * 14.7);  // model card: 14.7B
  // 2 × 10 × 128 × 2 × 40.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(*r), 204800.0);
}

// deepseek-ai/DeepSeek-V3 config.json.
json deepseek_v3() {
  return {{"architectures", {"DeepseekV3ForCausalLM"}},
          {"first_k_dense_replace", 3},
          {"hidden_size", 7168},
          {"intermediate_size", 18432},
          {"kv_lora_rank", 512},
          {"max_position_embeddings", 163840},
          {"model_type", "deepseek_v3"},
          {"moe_intermediate_size", 2048},
          {"moe_layer_freq", 1},
          {"n_group", 8},
          {"n_routed_experts", 256},
          {"n_shared_experts", 1},
          {"num_attention_heads", 128},
          {"num_experts_per_tok", 8},
          {"num_hidden_layers", 61},
          {"num_key_value_heads", 128},
          {"num_nextn_predict_layers", 1},
          {"q_lora_rank", 1536},
          {"qk_nope_head_dim", 128},
          {"qk_rope_head_dim", 64},
          {"quantization_config",
           {{"activation_scheme", "dynamic"},
            {"fmt", "e4m3"},
            {"quant_method", "fp8"},
            {"weight_block_size", {128, 128}}}},
          {"tie_word_embeddings", false},
          {"topk_group", 4},
          {"torch_dtype", "bfloat16"},
          {"v_head_dim", 128},
          {"vocab_size", 129280}};
}

TEST(HfImport, DeepSeekV3AndKimiK2CacheOneLatent) {
  auto r = import_hf_config(deepseek_v3(), "deepseek-v3");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->is_mla());
  EXPECT_EQ(r->layers, 61);
  EXPECT_EQ(r->kv_lora_rank, 512);
  EXPECT_EQ(r->qk_rope_head_dim, 64);
  EXPECT_EQ(r->kv_heads, 1);
  EXPECT_EQ(r->head_dim, 576);
  EXPECT_TRUE(r->layer_kinds.empty());
  EXPECT_EQ(r->weights_dtype, "fp8");
  // Model card: 671B total (the MTP module aside), 37B activated.
  EXPECT_TRUE(r->is_moe());
  EXPECT_NEAR(r->params_billion, 671, 0.03 * 671);
  EXPECT_NEAR(r->active_params_billion, 37, 0.03 * 37);
  // (512 + 64) × 61 layers × 2 bytes.
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(*r), 70272.0);

  // moonshotai/Kimi-K2-Instruct config.json: the DeepSeek-V3 architecture with 64 heads, 384
  // experts and one dense layer.
  json kimi = deepseek_v3();
  kimi["model_type"] = "kimi_k2";
  kimi["first_k_dense_replace"] = 1;
  kimi["max_position_embeddings"] = 131072;
  kimi["n_group"] = 1;
  kimi["n_routed_experts"] = 384;
  kimi["num_attention_heads"] = 64;
  kimi["num_key_value_heads"] = 64;
  kimi["num_nextn_predict_layers"] = 0;
  kimi["topk_group"] = 1;
  kimi["vocab_size"] = 163840;
  r = import_hf_config(kimi, "kimi-k2");
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_TRUE(r->is_mla());
  EXPECT_EQ(r->head_dim, 576);
  EXPECT_EQ(r->weights_dtype, "fp8");
  // Model card: 1T total, 32B activated.
  EXPECT_TRUE(r->is_moe());
  EXPECT_NEAR(r->params_billion, 1000, 0.03 * 1000);
  EXPECT_NEAR(r->active_params_billion, 32, 0.03 * 32);
  EXPECT_DOUBLE_EQ(fp16_bytes_per_token(*r), 70272.0);
  // Copies that call it deepseek_v3 read the same.
  kimi["model_type"] = "deepseek_v3";
  auto as_v3 = import_hf_config(kimi, "x");
  ASSERT_TRUE(as_v3.ok()) << as_v3.message();
  EXPECT_DOUBLE_EQ(as_v3->params_billion, r->params_billion);
  EXPECT_DOUBLE_EQ(as_v3->active_params_billion, r->active_params_billion);
}

TEST(HfImport, ErrorsNameTheField) {
  // An unknown layer type: the field, the entry and the value.
  json c = gpt_oss_120b();
  c["layer_types"][3] = "compressed_sparse_attention";
  EXPECT_TRUE(contains(error_of(c),
                       "config.json: 'layer_types' entry 3 is \"compressed_sparse_attention\" "
                       "(expected full_attention, sliding_attention, chunked_attention or "
                       "linear_attention)"))
      << error_of(c);
  c["layer_types"][3] = 7;
  EXPECT_TRUE(contains(error_of(c), "'layer_types' entry 3 is 7")) << error_of(c);
  c["layer_types"] = "sliding_attention";
  EXPECT_TRUE(contains(error_of(c), "'layer_types' must be a list")) << error_of(c);
  // A list that does not cover the layers.
  c = gpt_oss_120b();
  c["layer_types"].erase(35);
  EXPECT_TRUE(contains(error_of(c), "'layer_types' has 35 entries for 36 layers")) << error_of(c);
  // Sliding layers without a window, from layer_types or from a family's pattern.
  c = gpt_oss_120b();
  c["sliding_window"] = nullptr;
  EXPECT_TRUE(contains(error_of(c),
                       "'layer_types' makes 18 of the 36 layers sliding_attention, "
                       "but 'sliding_window' is missing"))
      << error_of(c);
  c.erase("layer_types");
  EXPECT_TRUE(contains(error_of(c), "'sliding_window' is missing")) << error_of(c);
  c = gemma3_27b();
  c["text_config"].erase("sliding_window");
  EXPECT_TRUE(contains(error_of(c),
                       "'text_config.sliding_window_pattern' 6 makes 52 of the 62 layers "
                       "sliding_attention, but 'text_config.sliding_window' is missing"))
      << error_of(c);
  // Chunked layers without a chunk size.
  c = llama4_scout();
  c["text_config"]["attention_chunk_size"] = nullptr;
  EXPECT_TRUE(contains(error_of(c),
                       "chunked_attention, but 'text_config.attention_chunk_size' "
                       "is missing"))
      << error_of(c);
  // Fields under text_config are named with their path.
  c = llama4_scout();
  c["text_config"].erase("num_hidden_layers");
  EXPECT_TRUE(contains(error_of(c), "'text_config.num_hidden_layers' is missing")) << error_of(c);
  c = llama4_scout();
  c["text_config"]["no_rope_layers"] = repeat({"x"}, 48);
  EXPECT_TRUE(
      contains(error_of(c), "'text_config.no_rope_layers' entry 0 is \"x\" (expected 0 or 1)"))
      << error_of(c);
  c["text_config"] = "llama";
  EXPECT_TRUE(contains(error_of(c), "'text_config' must be an object")) << error_of(c);
  // Mixture-of-experts fields.
  c = qwen3_30b_a3b();
  c["num_experts_per_tok"] = 200;
  EXPECT_TRUE(contains(error_of(c),
                       "'num_experts_per_tok' 200 is more than the 128 experts of "
                       "'num_experts'"))
      << error_of(c);
  c = qwen3_30b_a3b();
  c["mlp_only_layers"] = {48};
  EXPECT_TRUE(contains(error_of(c), "'mlp_only_layers' entry 0 is 48")) << error_of(c);
  c = qwen3_30b_a3b();
  c["num_experts"] = "many";
  EXPECT_TRUE(contains(error_of(c), "'num_experts' must be a non-negative integer")) << error_of(c);
  // A dense model without its MLP width, a flag of the wrong type.
  c = gemma3_27b();
  c["text_config"].erase("intermediate_size");
  EXPECT_TRUE(contains(error_of(c), "'text_config.intermediate_size' is missing")) << error_of(c);
  c = qwen3_30b_a3b();
  c["tie_word_embeddings"] = "no";
  EXPECT_TRUE(contains(error_of(c), "'tie_word_embeddings' must be true or false")) << error_of(c);
  // A pattern that leaves no layer with KV.
  c = qwen3_next();
  c["full_attention_interval"] = 100;
  EXPECT_TRUE(contains(error_of(c),
                       "'full_attention_interval' 100 makes every layer "
                       "linear_attention"))
      << error_of(c);
}

}  // namespace
}  // namespace kvlab::planners
