// kvlab evict: simulate a decode-time eviction or merging policy over a KV source and report
// what it keeps, the memory it saves and the attention quality it costs.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/planners/memory_formula.h"

namespace kvlab::cli {

namespace {

// A synthetic source gets one decode-time query per step, up to what the generator allows
// (with fewer, the simulation reuses them in order).
constexpr int kMaxSyntheticQueries = 4096;

struct EvictOptions {
  SourceOptions source;
  DbOption db;
  EvictionOptions policy;  // --policy, --budget and the policy's options
  EvictionConfig config;   // resolved from `policy`, with the simulation's own options
  int steps = EvictionConfig{}.steps, top_k = EvictionConfig{}.top_k;
  std::optional<int> needle;
  std::string quant = "none";
  MethodOptions quant_options;
  bool queries_given = false;
  bool json = false;
  bool maps = false;
  bool save = false;
  std::string label;
};

std::string percent(double f) {
  return fmt::format("{:.1f}%", 100.0 * f);
}

void print_text(const EvictionReport& r) {
  const ModelShape& s = r.shape;
  fmt::print(
      "source   {}  ({} layers x {} kv_heads x {} head_dim, {} tokens: prompt {} + {} decode "
      "steps)\n",
      r.source, s.layers, s.kv_heads, s.head_dim, r.tokens, r.prompt, r.steps);
  fmt::print("policy   {}  ({}: {})\n\n", r.label, r.policy,
             eviction_schedule(r.config.policy) == EvictionSchedule::Prefill
                 ? "once, when the prefill ends"
                 : "after every decode step");
  fmt::print("kept tokens      {:.1f} of {} ({} of the context, mean over layers and KV heads)\n",
             r.kept_tokens, r.tokens, percent(r.kept_tokens / std::max(1, r.tokens)));
  const double ratio = r.memory_bytes > 0 ? r.full_memory_bytes / r.memory_bytes : 0.0;
  fmt::print("memory           {} vs {} for the full fp16 cache ({:.2f}x smaller)\n",
             planners::format_bytes(r.memory_bytes), planners::format_bytes(r.full_memory_bytes),
             ratio);
  if (r.config.quant) {
    fmt::print("quantized        {} at {:.1f} bytes per token and KV head (K and V)\n",
               method_label(*r.config.quant), r.quant_bytes_per_token);
  }
  fmt::print("attention mass   {:.4f} of the full cache's attention on kept tokens\n",
             r.attention_mass_retained);
  fmt::print("attn output      rel. error {:.4g}  cosine {:.6f}  (vs the full cache, all steps)\n",
             r.attn_output_rel_error, r.attn_output_cosine);
  if (!r.steps_total.empty()) {
    // The last step uses the cache's last query, the synthetic needle query: often the outlier.
    const EvictionStep& last = r.steps_total.back();
    fmt::print("last step        rel. error {:.4g}  cosine {:.6f}  attention mass {:.4f}{}\n",
               last.attn_output_rel_error, last.attn_output_cosine, last.attention_mass_retained,
               r.config.needle ? "  (the needle query)" : "");
  }
  if (r.rel_error_without_needle_step && r.mass_without_needle_step) {
    fmt::print("without it       rel. error {:.4g}  attention mass {:.4f}\n",
               *r.rel_error_without_needle_step, *r.mass_without_needle_step);
  }
  for (const auto& l : r.layers) {
    if (l.key_channels > 0) {
      fmt::print("key channels     {} of {} per head kept in the prompt's keys (think)\n",
                 l.key_channels, r.shape.head_dim);
      break;
    }
  }
  int merged = 0;
  double retained = 0;
  for (const auto& l : r.layers) merged += l.merged, retained += l.merged ? l.retained : 0;
  if (merged > 0) {
    fmt::print(
        "merged layers    {} of {} share their prompt's directions; {} of tokens kept "
        "unmerged\n",
        merged, r.layers.size(), percent(retained / merged));
  }
  if (r.config.needle && r.needle_retained && r.needle_in_top_k) {
    fmt::print("needle           token {}: retained in {} of KV heads, in the top {} in {}\n",
               *r.config.needle, percent(*r.needle_retained), r.config.top_k,
               percent(*r.needle_in_top_k));
  } else {
    fmt::print("needle           unknown (give --needle POS)\n");
  }
  const double gflops = r.seconds > 0 ? r.matmul_flops / r.seconds / 1e9 : 0.0;
  fmt::print("time             {:.3f} s ({:.1f} GFLOP/s in matrix products)\n\n", r.seconds,
             gflops);
  // A prefill policy's heads: the prompt tokens each kept (Ada-KV spreads them unevenly).
  const bool prefill = eviction_schedule(r.config.policy) == EvictionSchedule::Prefill;
  fmt::print("{:>5} {:>7} {:>8} {:>11} {:>8} {:>10} {:>10} {:>7}{}\n", "layer", "budget", "kept",
             "memory", "mass", "rel err", "cosine", "needle",
             prefill ? fmt::format(" {:>13}", "prompt/head") : "");
  for (const auto& l : r.layers) {
    const std::string needle = r.config.needle ? percent(l.needle_retained) : "-";
    std::string heads;
    if (prefill && !l.heads.empty()) {
      const auto [lo, hi] = std::minmax_element(
          l.heads.begin(), l.heads.end(),
          [](const auto& a, const auto& b) { return a.prompt_kept < b.prompt_kept; });
      heads = lo->prompt_kept == hi->prompt_kept
                  ? fmt::format(" {:>13}", lo->prompt_kept)
                  : fmt::format(" {:>13}", fmt::format("{}-{}", lo->prompt_kept, hi->prompt_kept));
    }
    fmt::print("{:>5} {:>7} {:>8.1f} {:>11} {:>8.4f} {:>10.4g} {:>10.6f} {:>7}{}\n", l.layer,
               l.budget_tokens, l.kept_tokens, planners::format_bytes(l.memory_bytes),
               l.attention_mass_retained, l.attn_output_rel_error, l.attn_output_cosine, needle,
               heads);
  }
  fmt::print(
      "\nmass and cosine: means over the {} decode steps; rel. error: sqrt(sum |o - o'|^2 / "
      "sum |o|^2) over them; kept and memory: last step\n",
      r.steps);
}

// Parses the options that need it into `o.config`; the error names the option.
Status finish_config(EvictOptions& o) {
  auto resolved = o.policy.resolve();
  if (!resolved) return resolved.error();
  o.config = *resolved;
  EvictionConfig& c = o.config;
  c.steps = o.steps;
  c.top_k = o.top_k;
  if (o.quant != "none") {
    auto q = o.quant_options.resolve(o.quant, "--quant");
    if (!q) return q.error();
    c.quant = *q;
  }
  if (c.steps < 1) return make_error(fmt::format("--steps {}: must be at least 1", c.steps));
  c.needle = o.needle;
  if (auto synthetic = o.source.synthetic_config()) {
    // Checked before generating: a cache of `context` tokens holds at most context - 1 steps.
    if (c.steps >= synthetic->context) {
      return make_error(fmt::format("--steps {}: must be below the cache's {} tokens (--context)",
                                    c.steps, synthetic->context));
    }
    // One query per step, and for a prefill policy's observation window as many as it reads
    // before the last query (the question).
    if (!o.queries_given) {
      const int wanted = needs_window(c) ? std::max(c.steps, c.window + 1) : c.steps;
      o.source.synthetic.queries = std::min(wanted, kMaxSyntheticQueries);
    }
    if (!c.needle) c.needle = synthetic_landmarks(*o.source.synthetic_config()).needle;
  }
  return Ok{};
}

int run(EvictOptions& o) {
  if (auto s = finish_config(o); !s) return fail(s.message());
  auto store = o.db.open_if(o.save);
  if (!store) return fail(store.message());
  const ProgressFn progress = terminal_progress(o.json);
  auto cache = o.source.load(progress);
  if (!cache) return fail(cache.message());
  if (auto s = o.config.validate(*cache); !s) return fail(s.message());
  auto report = simulate_eviction(*cache, o.config, progress);
  if (!report) return fail(report.message());
  nlohmann::json j = eviction_report_to_json(*report);
  if (o.maps) j["maps"] = eviction_maps_to_json(*report);
  NewRun run;
  if (*store) run = eviction_run(*report, o.label, o.source.to_json());
  return save_and_print(store->get(), run, j, o.json, [&] { print_text(*report); });
}

constexpr const char* kFooter =
    "Budgets: a whole number is a token count (--budget 512 keeps 512 tokens per KV head); a\n"
    "number below 1 or a percentage is a fraction (--budget 0.25 or 25%): for a decode policy of\n"
    "the tokens the sequence has at each step, for a prefill policy of the prompt's tokens.\n"
    "--layer-budgets gives one budget per layer instead, e.g. 0.5,0.25.\n"
    "\n"
    "Decode policies cut every KV head to its budget after each decode step:\n"
    "  full        keep everything: the reference, through the same simulation\n"
    "  window      the newest tokens only (sliding-window attention)\n"
    "  streaming   StreamingLLM (Xiao et al. 2024): the first --sinks tokens plus the newest\n"
    "  h2o         H2O (Zhang et al. 2023): --recent-fraction of the budget for the newest, the\n"
    "              rest the heavy hitters by accumulated attention\n"
    "  threshold   after --recent steps of grace, drop tokens whose mean attention is below\n"
    "              --threshold x uniform; the budget only caps it\n"
    "  importance  score = --w-attention x attention + --w-recency x recency; --protect positions\n"
    "              are never evicted\n"
    "  merge       H2O's victim merged into its most similar neighbour (key cosine at least\n"
    "              --merge-similarity, within --merge-window kept neighbours) instead of dropped\n"
    "  tova        TOVA (Oren et al. 2024): the entry the current query attends to least goes\n"
    "\n"
    "Prefill policies compress the prompt once when the prefill ends and keep every decoded token\n"
    "(kvpress's presses); the prompt is the cache's tokens before the --steps decode steps:\n"
    "  snapkv      SnapKV (Li et al. 2024): attention of the last --obs-window prompt queries,\n"
    "              average-pooled over --pool positions; the window itself is kept\n"
    "  pyramidkv   PyramidKV (Cai et al. 2024): SnapKV's scores, budgets falling with depth to\n"
    "              budget / --beta at the top layer (the same total)\n"
    "  knorm       keys with the lowest L2 norm (Devoto et al. 2024); no attention needed\n"
    "  keydiff     KeyDiff (Park et al. 2025): keys least similar to the mean key direction\n"
    "  expected-attention\n"
    "              Expected Attention (Devoto et al. 2025): the attention future queries are\n"
    "              expected to pay, from the window's query mean and covariance turned by RoPE\n"
    "              over the next --future positions, times the value norm; --sinks kept\n"
    "  adakv       Ada-KV (Feng et al. 2024): --scorer's scores, the layer's budget spread over\n"
    "              its heads by concentration; each head keeps at least --safeguard of its share\n"
    "  chunkkv     ChunkKV (Liu et al. 2025): whole chunks of --chunk tokens by --scorer's summed\n"
    "              scores, the same for every head\n"
    "  think       ThinK (Xu et al. 2025): prunes the prompt keys' channels to --key-channels,\n"
    "              by query-key channel importance; with --think-tokens also --scorer's tokens\n"
    "  minicache   MiniCache (Liu et al. 2024): the upper half's adjacent layers share each\n"
    "              prompt token's direction (SLERP at --merge-t), keep their norms, and leave the\n"
    "              tokens in the top --retain of the angular-distance range unmerged\n"
    "\n"
    "A synthetic source gets one decode-time query per step (unless --queries) and knows its\n"
    "needle; for a file source give --needle POS. The last step of a synthetic source is its\n"
    "needle query: the report gives the totals with and without it. The observation window of a\n"
    "source with decode-time queries only is those queries but the last. --quant METHOD holds\n"
    "the kept tokens quantized with a 'kvlab compress' method, taking the same method options\n"
    "(--bits, --residual, ...).";

}  // namespace

void add_evict_command(CLI::App& app) {
  auto o = std::make_shared<EvictOptions>();
  CLI::App* cmd = app.add_subcommand(
      "evict", "Simulate decode-time eviction or merging; report memory and attention quality");
  o->source.add_to(*cmd);
  cmd->get_option("--queries")
      ->description("synthetic: decode-time queries per layer (default: one per --steps)")
      ->default_str("");
  o->policy.add_to(*cmd, join_ids(eviction_policy_ids()));
  cmd->add_option("--steps", o->steps, "decode steps simulated (the last tokens of the cache)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "needle: counted as found when in the top k attended")
      ->capture_default_str();
  cmd->add_option("--needle", o->needle,
                  "position of a planted needle (default: the synthetic source's)");
  cmd->add_option("--quant", o->quant,
                  "quantize the kept tokens: " + join_ids(method_ids(), "none"))
      ->capture_default_str();
  o->quant_options.add_to(*cmd);
  cmd->add_flag("--json", o->json, "print the result as JSON");
  cmd->add_flag("--maps", o->maps,
                "with --json: add the eviction map of every layer and KV head (\"maps\")");
  cmd->add_flag("--save", o->save,
                "save the run (kind \"eviction\", with its eviction map) to the runs database");
  cmd->add_option("--label", o->label, "label for the saved run");
  o->db.add_to(*cmd);
  cmd->footer(kFooter);
  cmd->callback([o, cmd] {
    o->queries_given = cmd->get_option("--queries")->count() > 0;
    exit_code() = run(*o);
  });
}

}  // namespace kvlab::cli
