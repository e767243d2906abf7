// kvlab sources: list presets, export a synthetic cache, describe a cache file.
#include <algorithm>
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/model/gguf_model.h"
#include "kvlab/engine/quant/rotation.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/llama_state.h"
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
  // Written a few layers at a time: a cache larger than memory can be written, then read in
  // place by every command (--source file:PATH).
  if (auto s = save_synthetic_file(c, out, terminal_progress()); !s) return fail(s.message());
  const auto p = find_synthetic_preset(c.preset);  // found: the file was written with it
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(out, ec);
  fmt::print("wrote {} ({} layers, {} tokens, {})\n", out,
             c.layers > 0 ? c.layers : p->shape.layers, c.context,
             planners::format_bytes(ec ? 0.0 : static_cast<double>(bytes)));
  return 0;
}

// Any source written as a .safetensors file (a llama.cpp state file as kvlab reads it: heads
// split, rotation undone).
int export_source(const SourceOptions& src, const std::string& out) {
  auto cache = src.load(terminal_progress());
  if (!cache) return fail(cache.message());
  if (auto s = save_cache_file(*cache, out); !s) return fail(s.message());
  fmt::print("wrote {} ({} layers, {} tokens, {} KV heads, head_dim {}, {})\n", out,
             cache->shape.layers, cache->tokens(), cache->shape.kv_heads, cache->shape.head_dim,
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
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  fmt::print("{}\n", terminal_text(path));
  fmt::print("format        GGUF v{}, {} tensors, {} metadata keys, {}\n", s.version,
             s.tensor_count, s.metadata_count,
             planners::format_bytes(static_cast<double>(s.file_bytes)));
  // Text from the file is escaped for the terminal (utf8.h): a name can hold any bytes.
  fmt::print("model         {} ({}){}\n", s.name.empty() ? "(unnamed)" : terminal_text(s.name),
             s.architecture.empty() ? "no architecture" : terminal_text(s.architecture),
             s.runnable ? "" : " — not an architecture kvlab's runner runs");
  fmt::print("parameters    {:.1f} M, weights {}\n", static_cast<double>(s.parameters) / 1e6,
             s.file_type.empty() ? "?" : s.file_type);
  fmt::print("shape         {} layers, width {}, FFN {}, {} heads, {} KV heads, head_dim {}\n",
             s.layers, s.dim, s.hidden_dim, s.heads, s.kv_heads, s.head_dim);
  if (s.experts > 0) fmt::print("experts       {}\n", s.experts);
  fmt::print("context       {} tokens{}\n", s.context,
             s.sliding_window > 0 ? fmt::format(", sliding window {}", s.sliding_window) : "");
  fmt::print(
      "RoPE          base {:g}, {} dims, {}{}\n", s.rope_theta, s.rope_dims,
      terminal_text(s.rope_layout),
      s.rope_scaling.empty()
          ? ""
          : fmt::format(", scaling {} {:g}", terminal_text(s.rope_scaling), s.rope_scaling_factor));
  fmt::print("tokenizer     {}, {} tokens{}\n",
             s.tokenizer.empty() ? "none" : terminal_text(s.tokenizer), s.vocab,
             s.has_chat_template ? ", chat template" : "");
  fmt::print("tensor types  {}\n", terminal_text(types));
  fmt::print("KV per token  {} in fp16 ({} at the full context)\n",
             planners::format_bytes(static_cast<double>(s.kv_bytes_per_token)),
             planners::format_bytes(static_cast<double>(s.kv_bytes_per_token) * s.context));
  if (metadata) {
    fmt::print("\nmetadata\n");
    for (const auto& kv : file->metadata()) {
      fmt::print("  {:<44} {:<7} {}\n", terminal_text(kv.key),
                 kv.type == GgufValueType::Array
                     ? fmt::format("{}[]", gguf_value_type_name(kv.element_type))
                     : std::string(gguf_value_type_name(kv.type)),
                 terminal_text(kv.display()));
    }
  }
  return 0;
}

// A llama.cpp sequence-state file: its layout, and the shape and rotation kvlab reads it with
// when the heads are known (--model or --kv-heads / --head-dim).
int llama_state_info(const std::string& path, const LlamaStateOptions& options, bool json) {
  auto layout = read_llama_state_layout(path);
  if (!layout) return fail(layout.message());
  const LlamaStateLayout& l = *layout;
  const LlamaStateLayer& first = l.layers.front();
  auto shape = llama_state_shape(l, options, path);
  // Heads or a model given that do not fit the file are an error, as compress says; given
  // nothing, the report says what it can and how to learn the rest.
  const bool heads_given = !options.model.empty() || options.kv_heads != 0 || options.head_dim != 0;
  if (!shape && heads_given) return fail(shape.message());
  const int head_dim = shape ? shape->head_dim : 0;
  const auto type_name = [](GgmlType t) { return std::string(ggml_type_info(t)->name); };
  // The rotation as kvlab undoes it: "none", or "Hadamard N (undone)".
  const auto rotation = [&](GgmlType type, TensorRole role) -> std::string {
    if (!shape) return "unknown until the head_dim is known";
    if (!llama_state_rotated(options.rotation, type, head_dim)) return "none";
    return fmt::format("Hadamard {}, undone", llama_attn_rot_size(role, head_dim));
  };
  std::int32_t pos_min = 0, pos_max = 0;
  if (!l.positions.empty()) {
    const auto [lo, hi] = std::minmax_element(l.positions.begin(), l.positions.end());
    pos_min = *lo;
    pos_max = *hi;
  }
  const std::uint64_t kv_bytes =
      (first.k_row_bytes + first.v_row_bytes) * l.cells * l.layers.size();
  if (json) {
    nlohmann::json j = {{"path", path},
                        {"format", "llama.cpp sequence state"},
                        {"version", l.version},
                        {"file_bytes", l.file_bytes},
                        {"layers", l.layers.size()},
                        {"tokens", l.cells},
                        {"saved_token_ids", l.tokens.size()},
                        {"position_min", pos_min},
                        {"position_max", pos_max},
                        {"streams", l.streams},
                        {"k_type", type_name(first.k_type)},
                        {"v_type", type_name(first.v_type)},
                        {"k_row_bytes", first.k_row_bytes},
                        {"v_row_bytes", first.v_row_bytes},
                        {"k_values_per_token", first.k_embd},
                        {"v_values_per_token", first.v_embd},
                        {"v_transposed", l.v_transposed},
                        {"kv_bytes", kv_bytes},
                        {"rotation_option", llama_state_rotation_name(options.rotation)},
                        {"k_rotation", rotation(first.k_type, TensorRole::Key)},
                        {"v_rotation", rotation(first.v_type, TensorRole::Value)}};
    if (shape) {
      j["model"] = shape->name;
      j["kv_heads"] = shape->kv_heads;
      j["head_dim"] = shape->head_dim;
      j["q_heads"] = shape->q_heads;
    } else {
      j["kv_heads"] = nullptr;
      j["head_dim"] = nullptr;
      j["shape_error"] = shape.message();
    }
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  fmt::print("{}\n", terminal_text(path));
  fmt::print("format    llama.cpp sequence state v{} ('ggsq'), {}\n", l.version,
             planners::format_bytes(static_cast<double>(l.file_bytes)));
  if (shape) {
    fmt::print("model     {}\nshape     {} layers, {} KV heads, head_dim {} ({} q_heads)\n",
               shape->name, l.layers.size(), shape->kv_heads, shape->head_dim, shape->q_heads);
  } else {
    fmt::print(
        "shape     {} layers, {} values per token and layer; KV heads and head_dim unknown: "
        "give --model MODEL.gguf or --kv-heads / --head-dim\n",
        l.layers.size(), first.k_embd);
  }
  fmt::print("tokens    {} cells, positions {} to {}; {} token ids saved\n", l.cells, pos_min,
             pos_max, l.tokens.size());
  fmt::print("K         {}, {} bytes per token and layer; rotation {}\n", type_name(first.k_type),
             first.k_row_bytes, rotation(first.k_type, TensorRole::Key));
  fmt::print("V         {}, {} bytes per token and layer, {}; rotation {}\n",
             type_name(first.v_type), first.v_row_bytes,
             l.v_transposed ? "transposed (flash attention off)" : "rows (flash attention on)",
             rotation(first.v_type, TensorRole::Value));
  fmt::print("memory    {}\n", planners::format_bytes(static_cast<double>(kv_bytes)));
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
  const RopeSpec& rope = cache->key_rope;
  if (rope.enabled()) {
    fmt::print("keys      {} RoPE ({} rotary dims, {} pairs, positions from {})\n",
               cache->keys_pre_rope ? "before" : "after", rope.rotary_dims,
               rope.half_split ? "half-split" : "adjacent", rope.position(0));
  } else {
    fmt::print("keys      RoPE not known (kvquant quantizes them as stored)\n");
  }
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
    std::string source;
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

  CLI::App* x = sources->add_subcommand(
      "export", "Write any KV source (e.g. a llama.cpp state file) to a .safetensors file");
  o->src.add_to(*x);
  x->add_option("--out", o->out, "output .safetensors file")->required();
  x->callback([o] { exit_code() = export_source(o->src, o->out); });

  CLI::App* i = sources->add_subcommand("info", "Describe a KV cache file or a GGUF model");
  i->add_option("path", o->path,
                ".safetensors, .npz, .npy, a folder of .npy, a llama.cpp state file (layers, KV "
                "heads, head_dim, tokens, K/V types, V layout, rotation), or a .gguf model "
                "(architecture, shape, RoPE, tensor types, KV bytes per token)");
  i->add_option("--source", o->source, "the same as PATH, as file:PATH");
  i->add_flag("--metadata", o->metadata, "GGUF: also list every metadata key and value");
  i->add_flag("--json", o->json, "GGUF, llama.cpp state: print the description as JSON");
  i->add_option("--model", o->src.llama_state.model,
                "llama.cpp state file: the GGUF model that wrote it (its KV heads and head_dim)");
  i->add_option("--kv-heads", o->src.llama_state.kv_heads,
                "llama.cpp state file without --model: KV heads");
  i->add_option("--head-dim", o->src.llama_state.head_dim,
                "llama.cpp state file without --model: head_dim");
  i->add_option("--llama-rotation", o->src.llama_rotation,
                "llama.cpp state file: auto (llama.cpp's rule), on or off")
      ->capture_default_str();
  i->callback([o] {
    std::string path = o->path;
    if (!o->source.empty()) {
      if (!path.empty()) {
        exit_code() = fail("sources info: give PATH or --source file:PATH, not both");
        return;
      }
      if (o->source.rfind("file:", 0) != 0 || o->source.size() == 5) {
        exit_code() = fail(fmt::format("--source '{}': sources info reads file:PATH", o->source));
        return;
      }
      path = o->source.substr(5);
    }
    if (path.empty()) {
      exit_code() = fail("sources info: give a PATH or --source file:PATH");
      return;
    }
    if (is_llama_state_file(path)) {
      LlamaStateOptions state = o->src.llama_state;
      auto rotation = parse_llama_state_rotation(o->src.llama_rotation);
      if (!rotation) {
        exit_code() = fail("--llama-rotation " + rotation.message());
        return;
      }
      state.rotation = *rotation;
      exit_code() = llama_state_info(path, state, o->json);
      return;
    }
    exit_code() = info(path, o->metadata, o->json);
  });
}

}  // namespace kvlab::cli
