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
  fmt::print("policy   {}\n\n", r.label);
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
    fmt::print("last step        rel. error {:.4g}  cosine {:.6f}  attention mass {:.4f}\n",
               last.attn_output_rel_error, last.attn_output_cosine, last.attention_mass_retained);
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
  fmt::print("{:>5} {:>7} {:>8} {:>11} {:>8} {:>10} {:>10} {:>7}\n", "layer", "budget", "kept",
             "memory", "mass", "rel err", "cosine", "needle");
  for (const auto& l : r.layers) {
    const std::string needle = r.config.needle ? percent(l.needle_retained) : "-";
    fmt::print("{:>5} {:>7} {:>8.1f} {:>11} {:>8.4f} {:>10.4g} {:>10.6f} {:>7}\n", l.layer,
               l.budget_tokens, l.kept_tokens, planners::format_bytes(l.memory_bytes),
               l.attention_mass_retained, l.attn_output_rel_error, l.attn_output_cosine, needle);
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
    if (!o.queries_given) o.source.synthetic.queries = std::min(c.steps, kMaxSyntheticQueries);
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
  NewRun run;
  if (*store) run = eviction_run(*report, o.label, o.source.to_json());
  return save_and_print(store->get(), run, j, o.json, [&] { print_text(*report); });
}

constexpr const char* kFooter =
    "Budgets: a whole number is a token count (--budget 512 keeps 512 tokens per KV head); a\n"
    "number below 1 or a percentage is a fraction of the tokens the sequence has at each step\n"
    "(--budget 0.25 or 25%). --layer-budgets gives one budget per layer instead, e.g. 0.5,0.25.\n"
    "\n"
    "Policies (every KV head keeps its own tokens; the query heads of a group pool attention):\n"
    "  full        keep everything: the reference, through the same simulation\n"
    "  window      the newest tokens only (sliding-window attention)\n"
    "  streaming   StreamingLLM: the first --sinks tokens plus the newest\n"
    "  h2o         H2O: --recent-fraction of the budget for the newest, the rest the heavy "
    "hitters\n"
    "              by accumulated attention\n"
    "  threshold   after --recent steps of grace, drop tokens whose mean attention is below\n"
    "              --threshold x uniform; the budget caps it too\n"
    "  importance  score = --w-attention x attention + --w-recency x recency; --protect positions\n"
    "              are never evicted\n"
    "  merge       H2O's victim merged into its most similar neighbour (key cosine at least\n"
    "              --merge-similarity, within --merge-window kept neighbours) instead of dropped\n"
    "\n"
    "A synthetic source gets one decode-time query per step (unless --queries) and knows its\n"
    "needle; for a file source give --needle POS. --quant METHOD holds the kept tokens quantized\n"
    "with a 'kvlab compress' method, taking the same method options (--bits, --residual, ...).";

}  // namespace

void add_evict_command(CLI::App& app) {
  auto o = std::make_shared<EvictOptions>();
  CLI::App* cmd = app.add_subcommand(
      "evict", "Simulate decode-time eviction or merging; report memory and attention quality");
  o->source.add_to(*cmd);
  cmd->get_option("--queries")
      ->description("synthetic: decode-time queries per layer (default: one per --steps)")
      ->default_str("");
  o->policy.add_to(*cmd, "full | window | streaming | h2o | threshold | importance | merge");
  cmd->add_option("--steps", o->steps, "decode steps simulated (the last tokens of the cache)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->top_k, "needle: counted as found when in the top k attended")
      ->capture_default_str();
  cmd->add_option("--needle", o->needle,
                  "position of a planted needle (default: the synthetic source's)");
  cmd->add_option("--quant", o->quant,
                  "quantize the kept tokens: none | int8 | int4 | kivi | fp8-e4m3 | fp8-e5m2 | "
                  "tiered | kvcomp")
      ->capture_default_str();
  o->quant_options.add_to(*cmd);
  cmd->add_flag("--json", o->json, "print the result as JSON");
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
