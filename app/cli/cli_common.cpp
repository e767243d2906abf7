#include "cli_common.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "kvlab/engine/core/names.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/sources/cache_file.h"

namespace kvlab::cli {

int& exit_code() {
  static int code = 0;
  return code;
}

Result<std::string> read_text_file(const std::string& option, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{} {}: cannot open it", option, path));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int fail(const std::string& message) {
  // One line, whatever the message holds: bytes from a file or a path are escaped (utf8.h).
  const std::string line = "kvlab: " + terminal_text(message) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  return kExitFailure;
}

std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv) {
  CLI::App* current = &app;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') return std::nullopt;
    const auto subcommands = current->get_subcommands([](CLI::App*) { return true; });
    if (subcommands.empty()) return std::nullopt;  // a positional argument of the command
    std::vector<std::string> names;
    for (const CLI::App* sub : subcommands) {
      if (sub->get_name() == word) {
        current = const_cast<CLI::App*>(sub);
        break;
      }
      names.push_back(sub->get_name());
    }
    if (current->get_name() == word) {
      path += (path.empty() ? "" : " ") + word;
      continue;
    }
    return unknown_name_message(path.empty() ? "command" : "'" + path + "' subcommand", word,
                                names);
  }
  return std::nullopt;
}

ProgressFn terminal_progress(bool json) {
  if (json || !isatty(STDERR_FILENO)) return {};
  const auto start = std::chrono::steady_clock::now();
  return [start](double fraction, std::string_view stage) {
    constexpr int kWidth = 30;
    const double f = std::clamp(fraction, 0.0, 1.0);
    const int filled = static_cast<int>(f * kWidth + 0.5);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "\r  [%.*s%.*s] %3.0f%% %5.1f s  %-36.*s", filled,
                 "##############################", kWidth - filled,
                 "------------------------------", f * 100, seconds,
                 static_cast<int>(std::min<std::size_t>(stage.size(), 36)), stage.data());
    if (fraction >= 1.0) std::fprintf(stderr, "\r%88s\r", "");
    std::fflush(stderr);
    return true;
  };
}

void SourceOptions::add_to(CLI::App& app) {
  app.add_option("--source", source,
                 "KV source: synthetic:PRESET (llama2-7b, llama3-8b, mistral-7b, qwen2.5-7b, "
                 "tiny) or file:PATH (.safetensors, .npz, .npy, a folder of .npy, or a llama.cpp "
                 "state file: llama_state_seq_save_file, llama-server slot save)")
      ->capture_default_str();
  app.add_option("--layers", synthetic.layers, "synthetic: number of layers (0: the preset's)")
      ->capture_default_str();
  app.add_option("--context", synthetic.context, "synthetic: tokens in the cache")
      ->capture_default_str();
  app.add_option("--seed", synthetic.seed, "synthetic: random seed")->capture_default_str();
  app.add_option("--queries", synthetic.queries,
                 "synthetic: decode-time queries per layer, for attention metrics")
      ->capture_default_str();
  app.add_option("--model", llama_state.model,
                 "llama.cpp state file: the GGUF model that wrote it (its KV heads and head_dim, "
                 "which the file does not record)");
  app.add_option("--kv-heads", llama_state.kv_heads,
                 "llama.cpp state file without --model: KV heads (0: from --head-dim)")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--head-dim", llama_state.head_dim,
                 "llama.cpp state file without --model: head_dim (0: from --kv-heads)")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--llama-rotation", llama_rotation,
                 "llama.cpp state file: its Hadamard rotation of quantized K/V, undone on reading: "
                 "auto (llama.cpp's rule: quantized type and head_dim % 64 == 0), on, or off "
                 "(written with LLAMA_ATTN_ROT_DISABLE=1)")
      ->capture_default_str();
}

std::optional<SyntheticConfig> SourceOptions::synthetic_config() const {
  const auto colon = source.find(':');
  if (source.substr(0, colon) != "synthetic") return std::nullopt;
  const std::string rest = colon == std::string::npos ? "" : source.substr(colon + 1);
  SyntheticConfig c = synthetic;
  c.preset = rest.empty() ? "llama3-8b" : rest;
  return c;
}

Result<KvCache> SourceOptions::load(const ProgressFn& progress) const {
  if (auto c = synthetic_config()) return generate_synthetic(*c, progress);
  const auto colon = source.find(':');
  const std::string kind = source.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : source.substr(colon + 1);
  if (kind == "file") {
    if (rest.empty()) return make_error("--source file: needs a path, e.g. file:cache.safetensors");
    LlamaStateOptions state = llama_state;
    auto rotation = parse_llama_state_rotation(llama_rotation);
    if (!rotation) return make_error("--llama-rotation " + rotation.message());
    state.rotation = *rotation;
    return load_cache_file(rest, state, progress);
  }
  return make_error(fmt::format("--source '{}': expected synthetic:PRESET or file:PATH", source));
}

nlohmann::json SourceOptions::to_json() const {
  nlohmann::json j = {{"source", source}};
  if (auto c = synthetic_config()) {
    j["preset"] = c->preset;
    j["layers"] = c->layers;
    j["context"] = c->context;
    j["seed"] = c->seed;
    j["queries"] = c->queries;
  }
  if (!llama_state.model.empty()) j["model"] = llama_state.model.string();
  if (llama_state.kv_heads > 0) j["kv_heads"] = llama_state.kv_heads;
  if (llama_state.head_dim > 0) j["head_dim"] = llama_state.head_dim;
  if (llama_rotation != "auto") j["llama_rotation"] = llama_rotation;
  return j;
}

void MethodOptions::add_to(CLI::App& app) {
  MethodConfig& c = config;
  app.add_option("--bits", c.bits,
                 "code bits: kivi 2 or 4; kvquant 2, 3 or 4; turboquant 1 to 4 (QJL bit included)")
      ->capture_default_str();
  app.add_option("--group-size", c.group_size,
                 "kivi, tiered: tokens per key group / channels per value group")
      ->capture_default_str();
  app.add_option("--residual", c.residual, "kivi, tiered: newest tokens kept in fp16")
      ->capture_default_str();
  app.add_flag("--per-head-scale", c.per_head_scale, "fp8: one scale per KV head");
  app.add_option("--int8-tokens", c.int8_tokens, "tiered: tokens in the INT8 tier")
      ->capture_default_str();
  app.add_option("--old-bits", c.old_bits, "tiered: bits of the oldest tier, 4 or 2")
      ->capture_default_str();
  app.add_option("--block-size", c.block_size, "kvcomp: tokens per key block")
      ->capture_default_str();
  app.add_option("--rel-scale", c.rel_scale,
                 "kvcomp: quantization step as a fraction of each unit's range")
      ->capture_default_str();
  app.add_option(
         "--codec", codec,
         "kvcomp: entropy coding of the byte codes: none | bitpack | varwidth | huffman | rans "
         "(blocks of --block-size tokens)")
      ->capture_default_str();
  app.add_option("--calib-tokens", c.calib_tokens,
                 "fp8: scales calibrated once from the first N tokens as vLLM's "
                 "calculate_kv_scales (amax/200 keys, amax/100 values), saturating later tokens; "
                 "0: one scale from the whole tensor. kvquant: the prefill tokens its levels and "
                 "key thresholds are fitted on (0: all)")
      ->capture_default_str();
  app.add_flag("--no-attn-rot{false}", c.llama_rotation,
               "q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl: without the Hadamard rotation llama.cpp "
               "applies to a quantized cache (as LLAMA_ATTN_ROT_DISABLE=1)");
  app.add_option("--levels", levels,
                 "kvquant: non-uniform levels fitted by k-means on the tensor (kmeans) or "
                 "NormalFloat levels (nf)")
      ->capture_default_str();
  app.add_option("--outliers", c.outlier_fraction,
                 "kvquant: fraction of values kept exactly in the sparse outlier table")
      ->capture_default_str();
  app.add_flag("--post-rope{false}", c.pre_rope,
               "kvquant: quantize keys as stored, after RoPE, instead of before it (the paper's "
               "way, used wherever the source says how RoPE turned its keys)");
  app.add_flag("--qjl", c.qjl, "turboquant: spend one of --bits on a 1-bit QJL residual sketch");
  app.add_option("--rotation", rotation,
                 "rotate each head vector before quantizing: none | hadamard (randomized, "
                 "power-of-two head_dim) | orthogonal (random); turboquant: its rotation "
                 "(default orthogonal)")
      ->capture_default_str();
  app.add_option("--rotation-seed", c.rotation_seed, "seed of the rotations")
      ->capture_default_str();
  app.add_flag("--rotate-values", c.rotate_values, "rotate the values too (keys always)");
  app.add_option("--param-dtype", param_dtype,
                 "kivi, tiered, kvcomp: dtype of each group's step and minimum, f16 | bf16 | f32 "
                 "(default: the reference's, f16 for kivi and tiered, f32 for kvcomp)");
}

Result<MethodConfig> MethodOptions::resolve(std::string_view id,
                                            std::string_view method_option) const {
  auto kind = parse_method(id);
  if (!kind) return make_error(fmt::format("{}: {}", method_option, kind.message()));
  MethodConfig c = config;
  c.kind = *kind;
  auto parsed_codec = parse_codec_option(codec);
  if (!parsed_codec) return make_error("--codec: " + parsed_codec.message());
  c.codec = *parsed_codec;
  if (!param_dtype.empty()) {
    const auto dt = parse_dtype(param_dtype);
    if (!dt) {
      return make_error(fmt::format("--param-dtype '{}': expected f16, bf16 or f32", param_dtype));
    }
    c.param_dtype = *dt;
  }
  if (levels != "kmeans" && levels != "nf") {
    return make_error(fmt::format("--levels '{}': expected kmeans or nf", levels));
  }
  c.normal_float = levels == "nf";
  auto rot = parse_rotation(rotation);
  if (!rot) return make_error("--rotation: " + rot.message());
  c.rotation = *rot;
  KVLAB_TRY(make_quantizer(c));
  return c;
}

void EvictionOptions::add_to(CLI::App& app, const std::string& policy_help) {
  EvictionConfig& c = config;
  app.add_option("--policy", policy, policy_help)->capture_default_str();
  app.add_option("--budget", budget,
                 "tokens kept per KV head: a count (512) or a fraction (0.25, 25%)")
      ->capture_default_str();
  app.add_option("--layer-budgets", layer_budgets, "one budget per layer: B0,B1,...")
      ->delimiter(',');
  app.add_option("--sinks", c.sinks, "streaming: first tokens always kept")->capture_default_str();
  app.add_option("--recent-fraction", c.recent_fraction,
                 "h2o, merge: share of the budget for the newest tokens")
      ->capture_default_str();
  app.add_option("--recent", c.recent, "threshold: steps of grace for a new token")
      ->capture_default_str();
  app.add_option("--threshold", c.threshold,
                 "threshold: drop below this fraction of uniform attention")
      ->capture_default_str();
  app.add_option("--w-attention", c.w_attention, "importance: weight of received attention")
      ->capture_default_str();
  app.add_option("--w-recency", c.w_recency, "importance: weight of recency")
      ->capture_default_str();
  app.add_option("--protect", c.protected_tokens,
                 "importance: positions never evicted, POS,POS (default: 0, the BOS token)")
      ->delimiter(',');
  app.add_option("--merge-similarity", c.merge_similarity,
                 "merge: least key cosine similarity to merge")
      ->capture_default_str();
  app.add_option("--merge-window", c.merge_window, "merge: kept neighbours searched each side")
      ->capture_default_str();
  app.add_option("--obs-window", c.window,
                 "snapkv, pyramidkv, expected-attention, think: the observation window, the "
                 "last prompt queries that score")
      ->capture_default_str();
  app.add_option("--pool", c.pool, "snapkv, pyramidkv: average-pooling width over positions (odd)")
      ->capture_default_str();
  app.add_option("--beta", c.pyramid_beta, "pyramidkv: the top layer keeps budget / beta")
      ->capture_default_str();
  app.add_option("--scorer", scorer,
                 "adakv, chunkkv, think --think-tokens: whose scores select: snapkv | pyramidkv "
                 "| knorm | keydiff | expected-attention")
      ->capture_default_str();
  app.add_option("--safeguard", c.ada_safeguard,
                 "adakv: each head keeps at least this share of the per-head budget")
      ->capture_default_str();
  app.add_option("--chunk", c.chunk, "chunkkv: tokens per chunk")->capture_default_str();
  app.add_option("--key-channels", c.key_channels, "think: share of key channels kept per head")
      ->capture_default_str();
  app.add_flag("--think-tokens", c.think_tokens,
               "think: also keep only the budget's tokens, chosen by --scorer");
  app.add_option("--future", c.future, "expected-attention: future positions averaged over")
      ->capture_default_str();
  app.add_flag("--no-covariance{false}", c.covariance,
               "expected-attention: leave out the query covariance term");
  app.add_flag("--no-value-norm{false}", c.value_norm,
               "expected-attention: do not weigh scores by the value's norm");
  app.add_option("--merge-t", c.merge_t, "minicache: SLERP weight towards the upper layer")
      ->capture_default_str();
  app.add_option("--retain", c.retain,
                 "minicache: the top share of the angular-distance range kept unmerged")
      ->capture_default_str();
}

Result<EvictionConfig> EvictionOptions::resolve() const {
  EvictionConfig c = config;
  auto parsed = parse_eviction_policy(policy);
  if (!parsed) return make_error("--policy: " + parsed.message());
  c.policy = *parsed;
  auto b = Budget::parse(budget);
  if (!b) return make_error("--budget: " + b.message());
  c.budget = *b;
  auto sc = parse_eviction_policy(scorer);
  if (!sc) return make_error("--scorer: " + sc.message());
  c.scorer = *sc;
  c.layer_budgets.clear();
  for (const auto& text : layer_budgets) {
    auto lb = Budget::parse(text);
    if (!lb) return make_error("--layer-budgets: " + lb.message());
    c.layer_budgets.push_back(*lb);
  }
  return c;
}

void BackendOption::add_to(CLI::App& app) {
  app.add_option("--backend", id,
                 "where a run's stages (quantize, code, dequantize, metrics) run: auto (the GPU "
                 "when one is usable and runs every stage of the method, else the CPU on all its "
                 "threads; the report says where each stage ran and why a run left the GPU) | "
                 "cpu | cuda")
      ->capture_default_str();
}

Result<std::unique_ptr<Backend>> BackendOption::make() const {
  auto backend = make_backend(id);
  if (!backend) return make_error(fmt::format("--backend {}: {}", id, backend.message()));
  return backend;
}

void DbOption::add_to(CLI::App& app) {
  app.add_option("--db", path,
                 "runs database (default: $KVLAB_DB or ~/.local/share/kvlab/runs.sqlite)");
}

Result<RunsStore> DbOption::open_existing() const {
  return RunsStore::open(path.empty() ? default_db_path() : std::filesystem::path(path),
                         RunsStore::OpenMode::MustExist);
}

Result<RunsStore> DbOption::open_for_saving() const {
  return RunsStore::open(path.empty() ? default_db_path() : std::filesystem::path(path),
                         RunsStore::OpenMode::CreateIfMissing);
}

Result<std::unique_ptr<RunsStore>> DbOption::open_if(bool save) const {
  if (!save) return std::unique_ptr<RunsStore>{};
  auto store = open_for_saving();
  if (!store) return store.error();
  return std::make_unique<RunsStore>(std::move(*store));
}

int save_and_print(RunsStore* store, const NewRun& run, nlohmann::json& j, bool json,
                   const std::function<void()>& print_text) {
  if (store) {
    auto id = store->save_run(run);
    if (!id) return fail(id.message());
    j["run_id"] = *id;
    if (!json) fmt::print(stderr, "saved as run {} in {}\n", *id, store->path().string());
  }
  if (json) {
    fmt::print("{}\n", json_text(j, 2));
  } else {
    print_text();
  }
  return 0;
}

std::string join_ids(const std::vector<std::string_view>& ids, std::string_view first,
                     std::string_view separator) {
  std::string out(first);
  for (const auto id : ids) {
    if (!out.empty()) out += separator;
    out += id;
  }
  return out;
}

}  // namespace kvlab::cli
