// kvlab plan advise: whether compressing the KV cache pays, over contexts × concurrency, every
// cell computed by the latency model, with the quality cost from stored quality runs.
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "cli_plan_support.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/planners/memory_formula.h"
#include "kvlab/store/plan_inputs.h"

namespace kvlab::cli {
namespace {

struct AdviseOptions {
  DeploymentOptions where;
  std::string schemes = fmt::format("{}", fmt::join(planners::kDefaultAdviceSchemes, ","));
  std::string contexts = fmt::format("{}", fmt::join(planners::kDefaultAdviceContexts, ","));
  std::string concurrency =
      fmt::format("{}", fmt::join(planners::kDefaultAdviceConcurrencies, ","));
  double min_gain = 0.10;
  double max_ppl = -1;  // percent; negative: no limit
  bool json = false, reasons = false;
};

std::string cell_text(const planners::Advice& a, const planners::AdviceCell& c) {
  if (c.recommended < 0) return "nothing fits";
  const auto& o = c.outcomes[static_cast<std::size_t>(c.recommended)];
  const std::string scheme = c.recommended == 0 ? "fp16" : a.scheme_ids[c.recommended];
  std::string gain;
  if (c.recommended > 0) {
    gain = std::isfinite(o.gain) ? fmt::format(" {:+.0f}%", o.gain * 100) : " (fp16: none)";
  }
  return fmt::format("{}{} {} {:.0f}%", scheme, gain, o.compute_bound ? "C" : "M",
                     c.memory_pressure * 100);
}

int run_advise(const AdviseOptions& o) {
  auto user = user_catalogue(o.where.db);
  if (!user) return fail(user.message());
  auto base = o.where.scenario(*user);
  if (!base) return fail(base.message());
  planners::AdviceSpec spec;
  spec.base = *base;
  auto schemes = resolve_schemes(o.schemes, o.where.db);
  if (!schemes) return fail(schemes.message());
  spec.schemes = *schemes;
  auto contexts = parse_list<std::int64_t>(o.contexts, "--contexts");
  if (!contexts) return fail(contexts.message());
  // Contexts beyond the model's limit are left out, and said so.
  std::vector<std::int64_t> dropped;
  for (auto c : *contexts) {
    (c <= base->model.max_context ? spec.contexts : dropped).push_back(c);
  }
  if (spec.contexts.empty()) {
    return fail(fmt::format("--contexts {}: all beyond {}'s limit of {} tokens", o.contexts,
                            base->model.name, base->model.max_context));
  }
  auto conc = parse_list<int>(o.concurrency, "--concurrency");
  if (!conc) return fail(conc.message());
  spec.concurrencies = *conc;
  spec.min_gain = o.min_gain;
  if (o.max_ppl >= 0) spec.max_perplexity_change = o.max_ppl / 100;
  bool have_db = false;
  const auto path =
      o.where.db.path.empty() ? default_db_path() : std::filesystem::path(o.where.db.path);
  if (std::filesystem::exists(path)) {
    auto store = o.where.db.open_existing();
    if (!store) return fail(store.message());
    auto q = scheme_quality(*store, base->model, spec.schemes);
    if (!q) return fail(q.message());
    for (const auto& e : *q) {
      spec.quality.push_back(e.text);
      spec.perplexity_change.push_back(e.perplexity_change);
      spec.perplexity_change_se.push_back(e.perplexity_change_se);
    }
    have_db = true;
  }
  auto advice = planners::advise(spec);
  if (!advice) return fail(advice.message());
  if (o.json) {
    nlohmann::json j = planners::advice_to_json(*advice);
    j["model"] = base->model.id;
    j["gpu"] = base->gpu.id;
    j["tp"] = base->deployment.tp;
    j["pp"] = base->deployment.pp;
    j["min_gain"] = o.min_gain;
    j["contexts_beyond_the_model"] = dropped;
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  const auto& d = base->deployment;
  fmt::print("Should {} on {} × {} (TP {}, PP {}) compress its KV cache?\n", base->model.name,
             base->gpu.name, d.tp * d.pp, d.tp, d.pp);
  fmt::print(
      "Each cell: the scheme with the most tokens/s per GPU for that many concurrent sequences of "
      "that many tokens (within 2% of the most, the one earlier in --schemes, whose quality cost "
      "is smaller; 'fp16' = don't compress: no scheme gains {:.0f}% or more), its gain over "
      "fp16, whether its decode step is compute- (C) or memory-bound (M), and the memory pressure "
      "(fp16 KV the users need / KV memory, per GPU).\n\n",
      o.min_gain * 100);
  fmt::print("{:>10}", "context");
  for (int c : spec.concurrencies)
    fmt::print(" {:>22}", fmt::format("{} {}", c, c == 1 ? "user" : "users"));
  fmt::print("\n");
  std::size_t i = 0;
  for (auto ctx : spec.contexts) {
    fmt::print("{:>10}", ctx);
    // (each row: one context)
    for (std::size_t k = 0; k < spec.concurrencies.size(); ++k, ++i) {
      fmt::print(" {:>22}", cell_text(*advice, advice->cells[i]));
    }
    fmt::print("\n");
  }
  if (!dropped.empty()) {
    fmt::print("(left out, beyond the model's {} tokens: {})\n", base->model.max_context,
               fmt::join(dropped, ", "));
  }
  // Every scheme against fp16, so that a loss shows even where the advice is not to compress.
  fmt::print("\nTokens/s per GPU against fp16 (served: sequences held at once, if fewer):\n");
  fmt::print("{:>10} {:>7}", "context", "users");
  for (const auto& s : spec.schemes) fmt::print(" {:>14}", s.id);
  fmt::print("\n");
  i = 0;
  for (auto ctx : spec.contexts) {
    for (std::size_t k = 0; k < spec.concurrencies.size(); ++k, ++i) {
      const auto& c = advice->cells[i];
      fmt::print("{:>10} {:>7}", ctx, c.concurrency);
      for (const auto& out : c.outcomes) {
        std::string t = out.served == 0            ? "none fit"
                        : !std::isfinite(out.gain) ? "fp16: none"
                                                   : fmt::format("{:+.0f}%", out.gain * 100);
        if (out.served > 0 && out.served < c.concurrency) t += fmt::format(" ({})", out.served);
        fmt::print(" {:>14}", t);
      }
      fmt::print("\n");
    }
  }
  fmt::print("\nQuality cost (stored quality runs of {}):\n", base->model.id);
  bool any = false;
  for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
    const std::string q = k < spec.quality.size() ? spec.quality[k] : "";
    if (!q.empty() && k > 0) any = true;
    const bool over = k < advice->allowed.size() && !advice->allowed[k];
    const bool near = k < advice->limit_within_noise.size() && advice->limit_within_noise[k];
    fmt::print("  {:<10} {}{}{}\n", spec.schemes[k].id,
               q.empty() ? std::string("no quality run of this model and method") : q,
               over ? "  (over the --max-perplexity-change limit: not recommended)" : "",
               near ? "  (within noise of the limit: its 95% interval holds it)" : "");
  }
  if (!any) {
    fmt::print("  (none stored{}: measure with 'kvlab quality --model FILE --method M --save')\n",
               have_db ? "" : ", no runs database");
  }
  fmt::print("\nDecompression rates: {}\n", base->rates.source);
  fmt::print("\nWhy, cell by cell{}:\n", o.reasons ? ""
                                                   : " (the first and last of each row; "
                                                     "--reasons for all)");
  i = 0;
  for (auto ctx : spec.contexts) {
    for (std::size_t k = 0; k < spec.concurrencies.size(); ++k, ++i) {
      if (!o.reasons && k != 0 && k + 1 != spec.concurrencies.size()) continue;
      const auto& c = advice->cells[i];
      fmt::print("  {} tokens × {} {}: {}. {}\n", ctx, c.concurrency,
                 c.concurrency == 1 ? "user" : "users", c.verdict, c.reason);
    }
  }
  return 0;
}

}  // namespace

void add_plan_advise_command(CLI::App& plan) {
  auto o = std::make_shared<AdviseOptions>();
  auto* cmd = plan.add_subcommand(
      "advise",
      "Should this deployment compress its KV cache, and with what? A matrix over context "
      "lengths × concurrent sequences, each cell computed from the latency model: the best "
      "scheme, its gain or loss against fp16, compute- or memory-bound, memory pressure, why; "
      "and the quality cost from stored quality runs of the model");
  cmd->add_option("--gpu", o->where.gpu, "GPU id or alias (see 'kvlab gpus list')")
      ->capture_default_str();
  cmd->add_option("--schemes", o->schemes,
                  "schemes to weigh, fp16 first, in order of quality cost (ties go to the "
                  "earlier)")
      ->capture_default_str();
  cmd->add_option("--contexts", o->contexts, "tokens per sequence, comma-separated")
      ->capture_default_str();
  cmd->add_option("--concurrency", o->concurrency, "concurrent sequences, comma-separated")
      ->capture_default_str();
  cmd->add_option("--min-gain", o->min_gain,
                  "the throughput gain over fp16 a compressed scheme must bring to be advised "
                  "when fp16 fits (0.1: 10%)")
      ->capture_default_str();
  cmd->add_option("--max-perplexity-change", o->max_ppl,
                  "recommend only schemes whose stored quality run of this model raised "
                  "perplexity by at most this many percent (unmeasured schemes are left out too; "
                  "a change whose 95% interval holds the limit is judged by its measured value "
                  "and named as within noise of the limit)");
  o->where.add_to(*cmd);
  cmd->add_flag("--reasons", o->reasons, "print the reason for every cell");
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->callback([o] { exit_code() = run_advise(*o); });
}

}  // namespace kvlab::cli
