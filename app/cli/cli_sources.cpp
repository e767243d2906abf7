// kvlab sources: list presets, export a synthetic cache, describe a cache file.
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/planners/memory_formula.h"

namespace kvlab::cli {

namespace {

int presets() {
  fmt::print("{:<12} {:>7} {:>8} {:>9} {:>9} {:>12}\n", "preset", "layers", "q_heads", "kv_heads",
             "head_dim", "rope_theta");
  for (const auto& p : synthetic_presets()) {
    fmt::print("{:<12} {:>7} {:>8} {:>9} {:>9} {:>12g}\n", p.name, p.shape.layers, p.shape.q_heads,
               p.shape.kv_heads, p.shape.head_dim, p.rope_theta);
  }
  return 0;
}

int export_synthetic(const SourceOptions& src, const std::string& preset, const std::string& dtype,
                     const std::string& out) {
  SyntheticConfig c = src.synthetic;
  c.preset = preset;
  const auto t = parse_dtype(dtype);
  if (!t) return fail(fmt::format("--dtype '{}': expected f16, bf16 or f32", dtype));
  c.dtype = *t;
  auto cache = generate_synthetic(c, terminal_progress());
  if (!cache) return fail(cache.message());
  if (auto s = save_cache_file(*cache, out); !s) return fail(s.message());
  fmt::print("wrote {} ({} layers, {} tokens, {})\n", out, cache->shape.layers, cache->tokens(),
             planners::format_bytes(static_cast<double>(cache->stored_bytes())));
  return 0;
}

// A GGUF model: what kvlab needs to know of it, and with --metadata every key.
int gguf_info(const std::string& path, bool metadata, bool json) {
  auto file = GgufFile::open(path);
  if (!file) return fail(file.message());
  const GgufSummary s = summarize_gguf(*file);
  std::string types;
  for (const auto& [type, n] : s.tensor_types) {
    types += fmt::format("{}{} × {}", types.empty() ? "" : ", ", n, type);
  }
  if (json) {
    nlohmann::json j = {{"path", s.path},
                        {"gguf_version", s.version},
                        {"architecture", s.architecture},
                        {"name", s.name},
                        {"file_type", s.file_type},
                        {"file_bytes", s.file_bytes},
                        {"parameters", s.parameters},
                        {"layers", s.layers},
                        {"dim", s.dim},
                        {"hidden_dim", s.hidden_dim},
                        {"heads", s.heads},
                        {"kv_heads", s.kv_heads},
                        {"head_dim", s.head_dim},
                        {"vocab", s.vocab},
                        {"context", s.context},
                        {"sliding_window", s.sliding_window},
                        {"experts", s.experts},
                        {"rope_theta", s.rope_theta},
                        {"rope_dims", s.rope_dims},
                        {"rope_layout", s.rope_layout},
                        {"rope_scaling", s.rope_scaling},
                        {"tensor_types", s.tensor_types},
                        {"kv_bytes_per_token_fp16", s.kv_bytes_per_token},
                        {"tokenizer", s.tokenizer},
                        {"chat_template", s.has_chat_template},
                        {"runnable", s.runnable}};
    if (metadata) {
      for (const auto& kv : file->metadata()) j["metadata"][kv.key] = kv.display();
    }
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("{}\n", path);
  fmt::print("format        GGUF v{}, {} tensors, {} metadata keys, {}\n", s.version,
             s.tensor_count, s.metadata_count,
             planners::format_bytes(static_cast<double>(s.file_bytes)));
  fmt::print("model         {} ({}){}\n", s.name.empty() ? "(unnamed)" : s.name,
             s.architecture.empty() ? "no architecture" : s.architecture,
             s.runnable ? "" : " — not an architecture kvlab's runner runs");
  fmt::print("parameters    {:.1f} M, weights {}\n", static_cast<double>(s.parameters) / 1e6,
             s.file_type.empty() ? "?" : s.file_type);
  fmt::print("shape         {} layers, width {}, FFN {}, {} heads, {} KV heads, head_dim {}\n",
             s.layers, s.dim, s.hidden_dim, s.heads, s.kv_heads, s.head_dim);
  if (s.experts > 0) fmt::print("experts       {}\n", s.experts);
  fmt::print("context       {} tokens{}\n", s.context,
             s.sliding_window > 0 ? fmt::format(", sliding window {}", s.sliding_window) : "");
  fmt::print("RoPE          base {:g}, {} dims, {}{}\n", s.rope_theta, s.rope_dims, s.rope_layout,
             s.rope_scaling.empty()
                 ? ""
                 : fmt::format(", scaling {} {:g}", s.rope_scaling, s.rope_scaling_factor));
  fmt::print("tokenizer     {}, {} tokens{}\n", s.tokenizer.empty() ? "none" : s.tokenizer, s.vocab,
             s.has_chat_template ? ", chat template" : "");
  fmt::print("tensor types  {}\n", types);
  fmt::print("KV per token  {} in fp16 ({} at the full context)\n",
             planners::format_bytes(static_cast<double>(s.kv_bytes_per_token)),
             planners::format_bytes(static_cast<double>(s.kv_bytes_per_token) * s.context));
  if (metadata) {
    fmt::print("\nmetadata\n");
    for (const auto& kv : file->metadata()) {
      fmt::print("  {:<44} {:<7} {}\n", kv.key,
                 kv.type == GgufValueType::Array
                     ? fmt::format("{}[]", gguf_value_type_name(kv.element_type))
                     : std::string(gguf_value_type_name(kv.type)),
                 kv.display());
    }
  }
  return 0;
}

int info(const std::string& path, bool metadata, bool json) {
  if (is_gguf_file(path)) return gguf_info(path, metadata, json);
  auto cache = load_cache_file(path, terminal_progress());
  if (!cache) return fail(cache.message());
  const ModelShape& s = cache->shape;
  fmt::print("{}\nmodel     {}\nshape     {} layers, {} q_heads, {} kv_heads, head_dim {}\n", path,
             s.name.empty() ? "(unnamed)" : s.name, s.layers, s.q_heads, s.kv_heads, s.head_dim);
  fmt::print("tokens    {}\ndtype     {}\nqueries   {}\nmemory    {}\n", cache->tokens(),
             cache->layers.empty() ? "-" : dtype_name(cache->layers[0].key.dtype()),
             cache->has_queries() ? std::to_string(cache->layers[0].query.tokens()) : "none",
             planners::format_bytes(static_cast<double>(cache->stored_bytes())));
  return 0;
}

}  // namespace

void add_sources_command(CLI::App& app) {
  struct Options {
    SourceOptions src;
    std::string preset = "llama3-8b";
    std::string dtype = "f16";
    std::string out;
    std::string path;
    bool metadata = false, json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* sources = app.add_subcommand("sources", "KV sources: presets, export, inspect");
  sources->require_subcommand(1);

  sources->add_subcommand("presets", "List the synthetic presets")->callback([] {
    exit_code() = presets();
  });

  CLI::App* e = sources->add_subcommand("export-synthetic",
                                        "Write a synthetic KV cache to a .safetensors file");
  e->add_option("--preset", o->preset, "synthetic preset")->capture_default_str();
  e->add_option("--layers", o->src.synthetic.layers, "layers (0: the preset's)")
      ->capture_default_str();
  e->add_option("--context", o->src.synthetic.context, "tokens")->capture_default_str();
  e->add_option("--seed", o->src.synthetic.seed, "random seed")->capture_default_str();
  e->add_option("--queries", o->src.synthetic.queries, "decode-time queries per layer")
      ->capture_default_str();
  e->add_option("--dtype", o->dtype, "f16, bf16 or f32")->capture_default_str();
  e->add_option("--out", o->out, "output .safetensors file")->required();
  e->callback([o] { exit_code() = export_synthetic(o->src, o->preset, o->dtype, o->out); });

  CLI::App* i = sources->add_subcommand("info", "Describe a KV cache file or a GGUF model");
  i->add_option("path", o->path,
                ".safetensors, .npz, .npy, a folder of .npy, or a .gguf model (architecture, "
                "shape, RoPE, tensor types, KV bytes per token)")
      ->required();
  i->add_flag("--metadata", o->metadata, "GGUF: also list every metadata key and value");
  i->add_flag("--json", o->json, "GGUF: print the description as JSON");
  i->callback([o] { exit_code() = info(o->path, o->metadata, o->json); });
}

}  // namespace kvlab::cli
