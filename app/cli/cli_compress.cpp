// kvlab compress: run one method over a KV source and report ratio, bytes and error.
#include <chrono>
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/io/report_json.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/planners/memory_formula.h"

namespace kvlab::cli {

namespace {

struct CompressOptions {
  SourceOptions source;
  DbOption db;
  BackendOption backend;
  std::string method = "kivi";
  MethodOptions method_options;
  bool json = false;
  bool save = false;
  std::string label;
};

void print_text(const CompressionReport& r) {
  const auto& b = r.bytes;
  fmt::print("source   {}  ({} layers x {} kv_heads x {} head_dim, {} tokens)\n", r.source,
             r.shape.layers, r.shape.kv_heads, r.shape.head_dim, r.tokens);
  fmt::print("method   {}\n", r.method_label);
  fmt::print("backend  {} ({})\n\n", r.backend, r.device);
  fmt::print("ratio            {:.3f}x vs fp16\n", r.ratio);
  fmt::print("bits per value   {:.3f}\n", r.bits_per_value);
  fmt::print("fp16 memory      {}\n", planners::explain_kv_bytes(r.shape, r.tokens, 16.0));
  fmt::print("compressed       {}\n\n",
             planners::explain_kv_bytes(r.shape, r.tokens, r.bits_per_value));
  fmt::print(
      "bytes            codes {}  scales {}  zero-points {}  fp16 residual {}  "
      "metadata {}  total {}\n\n",
      b.codes, b.scales, b.zero_points, b.residual, b.metadata, b.total());
  if (r.config.codec) {
    const auto& c = r.codec;
    fmt::print(
        "codec            {}: entropy {:.3f} bits/code, payload {:.3f} bits/code, "
        "offsets+counts {} B, codebooks {} B\n\n",
        codec_id(*r.config.codec), c.entropy_bits_per_code, c.payload_bits_per_code,
        c.metadata_bytes, c.codebook_bytes);
  }
  const auto& e = r.error;
  fmt::print("error            MSE {:.4g}  max|err| {:.4g}  SNR {:.2f} dB\n", e.mse, e.max_abs,
             e.snr_db);
  fmt::print(
      "attention        logit RMSE {:.4g}  softmax KL {:.4g}  output rel. error {:.4g}  "
      "output cosine {:.6f}\n\n",
      e.logit_rmse, e.softmax_kl, e.attn_output_rel_error, e.attn_output_cosine);
  fmt::print("{:>5} {:>9} {:>9} {:>12} {:>10} {:>12}\n", "layer", "ratio", "bits/val", "MSE",
             "SNR dB", "attn rel err");
  for (const auto& l : r.layers) {
    fmt::print("{:>5} {:>9.3f} {:>9.3f} {:>12.4g} {:>10.2f} {:>12.4g}\n", l.layer, l.ratio,
               l.bits_per_value, l.error.mse, l.error.snr_db, l.error.attn_output_rel_error);
  }
  fmt::print(
      "\ntime             {:.2f} s wall: source {:.2f} s, compression {:.2f} s on {} thread{} "
      "(thread-seconds: quantize {:.2f}, code {:.2f}, dequantize {:.2f}, metrics {:.2f})\n",
      r.wall_seconds, r.source_seconds, r.total_seconds, r.threads, r.threads == 1 ? "" : "s",
      r.quantize_seconds, r.code_seconds, r.dequantize_seconds, r.metrics_seconds);
  if (const std::string stages = stage_summary(r); !stages.empty()) {
    fmt::print("stages           {}\n", stages);
  }
  if (r.memory_peak_bytes > 0) {
    constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
    fmt::print(
        "memory           peak {:.2f} GiB resident while compressing ({:.2f} GiB when it began: "
        "the program and the source's bytes in memory; a file source is read in place)\n",
        r.memory_peak_bytes / kGiB, r.memory_start_bytes / kGiB);
    if (r.device_memory_peak_bytes > 0) {
      fmt::print("                 peak {:.2f} GiB on the GPU\n",
                 r.device_memory_peak_bytes / kGiB);
    }
  }
}

int run(const CompressOptions& o) {
  auto resolved = o.method_options.resolve(o.method, "--method");
  if (!resolved) return fail(resolved.message());
  const MethodConfig& config = *resolved;
  auto backend = o.backend.make();
  if (!backend) return fail(backend.message());
  auto store = o.db.open_if(o.save);
  if (!store) return fail(store.message());
  const ProgressFn progress = terminal_progress(o.json);
  const auto start = std::chrono::steady_clock::now();
  auto cache = o.source.load(progress);
  if (!cache) return fail(cache.message());
  const std::chrono::duration<double> source = std::chrono::steady_clock::now() - start;
  auto report = compress_cache(*cache, config, progress, backend->get());
  if (!report) return fail(report.message());
  report->source_seconds = source.count();
  report->wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nlohmann::json j = report_to_json(*report);
  NewRun run;
  if (*store) run = compression_run(*report, o.label);
  return save_and_print(store->get(), run, j, o.json, [&] { print_text(*report); });
}

}  // namespace

void add_compress_command(CLI::App& app) {
  auto o = std::make_shared<CompressOptions>();
  CLI::App* cmd = app.add_subcommand(
      "compress", "Compress a KV cache with one method; report ratio, bytes and error");
  o->source.add_to(*cmd);
  cmd->add_option("--method", o->method,
                  join_ids(method_ids()) + " ('kvlab methods' says what each one is)")
      ->capture_default_str();
  o->method_options.add_to(*cmd);
  o->backend.add_to(*cmd);
  cmd->add_flag("--json", o->json, "print the result as JSON");
  cmd->add_flag("--save", o->save, "save the run to the runs database");
  cmd->add_option("--label", o->label, "label for the saved run");
  o->db.add_to(*cmd);
  cmd->callback([o] { exit_code() = run(*o); });
}

}  // namespace kvlab::cli
