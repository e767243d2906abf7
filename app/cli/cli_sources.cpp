// kvlab sources: list presets, export a synthetic cache, describe a cache file.
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
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

int info(const std::string& path) {
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

  CLI::App* i = sources->add_subcommand("info", "Describe a KV cache file");
  i->add_option("path", o->path, ".safetensors, .npz, .npy or a folder of .npy")->required();
  i->callback([o] { exit_code() = info(o->path); });
}

}  // namespace kvlab::cli
