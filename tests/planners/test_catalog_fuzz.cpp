// The planner's parsers against broken input: config.json import, catalogue entries and stored
// GPU benchmarks, every value swapped for every JSON type and seeded byte flips of the text. Each
// gives a valid result or an error, never a throw or a crash; a result that comes back can be
// planned with.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvlab/planners/solvers.h"

namespace kvlab::planners {
namespace {

const nlohmann::json kKinds[] = {
    nullptr,      0,     -1, 1.5, "x", nlohmann::json::array(), nlohmann::json::object(), true,
    4294967296.0, 100000};

// Real configs' shapes (the repos named), trimmed to what the importer reads.
std::vector<nlohmann::json> configs() {
  return {
      // openai/gpt-oss-120b
      {{"model_type", "gpt_oss"},
       {"num_hidden_layers", 4},
       {"num_attention_heads", 64},
       {"num_key_value_heads", 8},
       {"head_dim", 64},
       {"hidden_size", 2880},
       {"intermediate_size", 2880},
       {"num_local_experts", 128},
       {"num_experts_per_tok", 4},
       {"vocab_size", 201088},
       {"max_position_embeddings", 131072},
       {"sliding_window", 128},
       {"layer_types",
        {"sliding_attention", "full_attention", "sliding_attention", "full_attention"}}},
      // google/gemma-3-27b-it
      {{"model_type", "gemma3"},
       {"text_config",
        {{"num_hidden_layers", 12},
         {"num_attention_heads", 32},
         {"num_key_value_heads", 16},
         {"head_dim", 128},
         {"hidden_size", 5376},
         {"intermediate_size", 21504},
         {"sliding_window", 1024},
         {"sliding_window_pattern", 6}}}},
      // Qwen/Qwen3-Next-80B-A3B-Instruct
      {{"model_type", "qwen3_next"},
       {"num_hidden_layers", 8},
       {"num_attention_heads", 16},
       {"num_key_value_heads", 2},
       {"head_dim", 256},
       {"hidden_size", 2048},
       {"intermediate_size", 5120},
       {"moe_intermediate_size", 512},
       {"num_experts", 512},
       {"num_experts_per_tok", 10},
       {"vocab_size", 151936},
       {"max_position_embeddings", 262144},
       {"full_attention_interval", 4}},
      // deepseek-ai/DeepSeek-V3
      {{"model_type", "deepseek_v3"},
       {"num_hidden_layers", 5},
       {"num_attention_heads", 128},
       {"hidden_size", 7168},
       {"intermediate_size", 18432},
       {"kv_lora_rank", 512},
       {"qk_rope_head_dim", 64},
       {"q_lora_rank", 1536},
       {"n_routed_experts", 256},
       {"num_experts_per_tok", 8},
       {"moe_intermediate_size", 2048},
       {"first_k_dense_replace", 3},
       {"vocab_size", 129280},
       {"max_position_embeddings", 163840}},
  };
}

// What a parsed model must allow: sizing and timing one sequence.
void use(const ModelSpec& m) {
  ASSERT_TRUE(m.validate().ok()) << m.id;
  const Scheme fp16 = parse_scheme("fp16").value();
  Deployment d;
  (void)kv_bytes_per_sequence(m, fp16, d, std::min(m.max_context, 4096));
  const GpuSpec g = find_gpu("h100-sxm").value();
  (void)estimate_latency(m, g, fp16, d, std::min(m.max_context, 4096), 2, {}, {}, 1ull << 30);
}

template <class Parse>
std::size_t swap_every_value(const nlohmann::json& valid, Parse parse) {
  std::size_t cases = 0;
  const nlohmann::json flat = valid.flatten();
  for (const auto& [pointer, value] : flat.items()) {
    for (const auto& replacement : kKinds) {
      nlohmann::json changed = valid;
      changed[nlohmann::json::json_pointer(pointer)] = replacement;
      EXPECT_NO_THROW(parse(changed)) << pointer << " = " << replacement.dump();
      nlohmann::json removed = valid;
      removed.erase(pointer.substr(1));  // top-level keys only; nested stay
      EXPECT_NO_THROW(parse(removed)) << "without " << pointer;
      cases += 2;
    }
  }
  return cases;
}

TEST(PlannerFuzz, ConfigJsonImportNeverThrows) {
  std::size_t cases = 0;
  for (const auto& c : configs()) {
    auto base = import_hf_config(c, "fuzz");
    ASSERT_TRUE(base.ok()) << base.message();
    cases += swap_every_value(c, [](const nlohmann::json& j) {
      if (auto m = import_hf_config(j, "fuzz")) use(*m);
    });
  }
  // Seeded byte flips of the text, through the file reader.
  const auto dir = std::filesystem::temp_directory_path() / "kvlab-planner-fuzz";
  std::filesystem::create_directories(dir / "m");
  std::uint64_t state = 2026;
  const auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (const auto& c : configs()) {
    const std::string text = c.dump();
    for (int i = 0; i < 150; ++i) {
      std::string bytes = text;
      for (int flips = 1 + static_cast<int>(next() % 4); flips > 0; --flips) {
        bytes[next() % bytes.size()] = static_cast<char>(next() & 0xFF);
      }
      std::ofstream(dir / "m" / "config.json", std::ios::binary) << bytes;
      EXPECT_NO_THROW({
        if (auto m = import_hf_config_file(dir / "m" / "config.json")) use(*m);
      }) << bytes;
      ++cases;
    }
  }
  EXPECT_GT(cases, 1000u);
}

TEST(PlannerFuzz, CatalogueEntriesNeverThrow) {
  std::size_t cases = 0;
  for (const char* id :
       {"gpt-oss-120b", "gemma-3-27b", "qwen3-next-80b-a3b", "llama-4-scout", "deepseek-v3"}) {
    ModelSpec m = find_model(id).value();
    m.weights_bytes = 4'100'000'000;  // as a GGUF file gives it (import_gguf_file)
    cases += swap_every_value(model_to_json(m), [](const nlohmann::json& j) {
      if (auto m = model_from_json(j)) use(*m);
    });
  }
  cases += swap_every_value(gpu_to_json(find_gpu("gb200").value()), [](const nlohmann::json& j) {
    if (auto g = gpu_from_json(j)) {
      EXPECT_TRUE(g->validate().ok());
    }
  });
  EXPECT_GT(cases, 500u);
}

// Every value of a stored benchmark swapped (swap_every_value): rates that come back are all
// positive. The cases tried.
std::size_t fuzz_kernel_bench(const nlohmann::json& bench, const char* device, double tflops) {
  return swap_every_value(bench, [&](const nlohmann::json& j) {
    if (auto r = kernel_rates_from_bench(j, device, tflops, "test")) {
      EXPECT_GT(r->fp8, 0);
      EXPECT_GT(r->packed, 0);
      EXPECT_GT(r->huffman, 0);
    }
  });
}

TEST(PlannerFuzz, StoredGpuBenchmarksNeverThrow) {
  std::ifstream in(std::string(KVLAB_SOURCE_DIR) + "/bench/results/gpu_h100_2026-11-23.json");
  std::stringstream ss;
  ss << in.rdbuf();
  const auto bench = nlohmann::json::parse(ss.str());
  const auto good = kernel_rates_from_bench(bench, "h100-sxm", 67, "test");
  ASSERT_TRUE(good.ok()) << good.message();
  EXPECT_GT(good->huffman, 0);
  EXPECT_GT(fuzz_kernel_bench(bench, "h100-sxm", 67), 500u);
}

// `kvlab bench cpu --json`'s form: one <kernel>_attention row per cache and context, K and V
// together. The rate is K and V's fp16 values over the step's time.
TEST(PlannerFuzz, StoredCpuBenchmarksNeverThrow) {
  nlohmann::json rows = nlohmann::json::array();
  for (const char* kernel :
       {"fp16_attention", "fp8_attention", "packed4_attention", "huffman_attention"}) {
    rows.push_back({{"kernel", kernel},
                    {"context", 32768},
                    {"microseconds", 4000.0},
                    {"fp16_bytes", 134217728.0}});
  }
  const nlohmann::json bench{{"device", "AMD EPYC, 2 threads"},
                             {"copy_gb_s", 40.0},
                             {"rows", rows},
                             {"encode", {{{"context", 32768}, {"gb_s", 1.2}}}}};
  const auto good = kernel_rates_from_bench(bench, "my-cpu", 0.25, "test");
  ASSERT_TRUE(good.ok()) << good.message();
  EXPECT_DOUBLE_EQ(good->packed, 134217728.0 / 2 / 4000e-6);
  EXPECT_DOUBLE_EQ(good->huffman_encode, 1.2e9 / 2);
  EXPECT_GT(fuzz_kernel_bench(bench, "my-cpu", 0.25), 50u);
}

}  // namespace
}  // namespace kvlab::planners
