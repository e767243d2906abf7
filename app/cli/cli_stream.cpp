// kvlab stream: feed a KV source through the streaming compressed cache (prefill, then one token
// per decode step) and report its memory by component over the steps.
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/codec/stream_sim_json.h"

namespace kvlab::cli {

namespace {

struct StreamOptions {
  SourceOptions source;
  DbOption db;
  StreamConfig config;
  std::string codec = "huffman";
  bool json = false;
  bool save = false;
  std::string label;
};

void print_text(const StreamReport& r) {
  const StreamConfig& c = r.config;
  fmt::print("source   {}  ({} layers x {} kv_heads x {} head_dim)\n", r.source, r.layers,
             r.kv_heads, r.head_dim);
  fmt::print("stream   prefill {} tokens, block {}, buffer {}, rel. scale {}, codec {}\n\n",
             c.prefill_tokens, c.block_size, c.buffer_size, c.rel_scale, codec_id(c.codec));
  fmt::print("{:>6} {:>7} {:>12} {:>12} {:>14} {:>12} {:>12} {:>8}\n", "step", "tokens",
             "compressed", "buffer", "meta+books", "total", "fp16", "ratio");
  for (const StreamPoint& p : r.points) {
    const CacheMemory& m = p.memory;
    fmt::print("{:>6} {:>7} {:>12} {:>12} {:>14} {:>12} {:>12} {:>7.3f}x\n", p.step, p.tokens,
               m.payload + m.quant_params, m.buffer, m.metadata + m.codebooks, m.total(),
               p.fp16_bytes, p.ratio());
  }
  fmt::print("\nbytes summed over layers; compressed = coded payload + quantization parameters\n");
}

int run(StreamOptions& o) {
  auto codec = parse_codec(o.codec);
  if (!codec) return fail("--codec: " + codec.message());
  o.config.codec = *codec;
  if (auto c = stream_cache_config(o.config); !c) return fail(c.message());
  auto store = o.db.open_if(o.save);
  if (!store) return fail(store.message());
  const ProgressFn progress = terminal_progress(o.json);
  auto cache = o.source.load(progress);
  if (!cache) return fail(cache.message());
  auto report = simulate_stream(*cache, o.config, progress);
  if (!report) return fail(report.message());
  nlohmann::json j = stream_to_json(*report);
  NewRun run;
  if (*store) run = stream_run(*report, o.config, o.label);
  return save_and_print(store->get(), run, j, o.json, [&] { print_text(*report); });
}

}  // namespace

void add_stream_command(CLI::App& app) {
  auto o = std::make_shared<StreamOptions>();
  CLI::App* cmd = app.add_subcommand(
      "stream", "Memory of the streaming compressed cache (kvcomp) over decode steps");
  o->source.add_to(*cmd);
  StreamConfig& c = o->config;
  cmd->add_option("--prefill", c.prefill_tokens,
                  "tokens compressed at once; the rest arrive one per decode step")
      ->capture_default_str();
  cmd->add_option("--block-size", c.block_size, "tokens per compressed block")
      ->capture_default_str();
  cmd->add_option("--buffer-size", c.buffer_size,
                  "fp16 buffer capacity in tokens, a multiple of --block-size")
      ->capture_default_str();
  cmd->add_option("--rel-scale", c.rel_scale,
                  "quantization step as a fraction of each unit's range")
      ->capture_default_str();
  cmd->add_option("--codec", o->codec, "huffman | rans | bitpack")->capture_default_str();
  cmd->add_option("--every", c.record_every, "decode steps between reported points")
      ->capture_default_str();
  cmd->add_option("--max-layers", c.max_layers, "simulate only the first N layers (0: all)")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "print the result as JSON");
  cmd->add_flag("--save", o->save, "save the run (kind \"stream\") to the runs database");
  cmd->add_option("--label", o->label, "label for the saved run");
  o->db.add_to(*cmd);
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace kvlab::cli
