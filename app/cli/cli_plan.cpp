// kvlab plan and plan sweep: the capacity planner and its latency model on the command line.
#include <fmt/format.h>

#include "cli_plan_support.h"
#include "kvlab/planners/memory_formula.h"
#include "kvlab/store/run_records.h"

namespace kvlab::cli {
namespace {

using planners::Scheme;

struct PlanOptions {
  DeploymentOptions where;
  std::int64_t context = 8192;
  int batch = 1;
  std::string schemes = "fp16";
  double ttft_ms = 0, tpot_ms = 0;
  bool explain = false, json = false, save = false, frontier = false;
  std::string label;
};

void print_header(const planners::Scenario& sc, const planners::PlanResult& r) {
  const auto& d = sc.deployment;
  fmt::print("{} on {} × {} (TP {}, PP {}), {} tokens per sequence, batch {} sequences\n",
             sc.model.name, sc.gpu.name, d.tp * d.pp, d.tp, d.pp, sc.context, sc.batch);
  fmt::print("Per GPU: memory {} × util {:g} = {} usable; weights {}; reserve {}; KV capacity {}\n",
             planners::format_bytes(static_cast<double>(sc.gpu.memory_bytes)),
             d.gpu_memory_utilization, planners::format_bytes(static_cast<double>(r.usable_bytes)),
             planners::format_bytes(static_cast<double>(r.weights_bytes_per_gpu)),
             planners::format_bytes(static_cast<double>(d.reserve_bytes)),
             planners::format_bytes(static_cast<double>(r.kv_capacity_bytes)));
  const std::string dtype = d.weights_dtype.empty() ? sc.model.weights_dtype : d.weights_dtype;
  if (sc.gpu.tflops.bf16 > 0) {
    fmt::print("Per GPU: {:g} GB/s × {:g}; dense {} {:g} TFLOPS × {:g}{}\n", sc.gpu.bandwidth_gbs,
               sc.bandwidth_efficiency, dtype, sc.gpu.dense_tflops(dtype), sc.compute_efficiency,
               sc.model.is_moe() ? fmt::format("; MoE: {:g}B of {:g}B parameters active per token",
                                               sc.model.active_params(), sc.model.params_billion)
                                 : "");
  } else {
    fmt::print("{} has no compute figures (tflops): compute is not charged, only memory\n",
               sc.gpu.id);
  }
  fmt::print("Decompression rates: {}\n\n", sc.rates.source);
}

void print_tables(const std::vector<std::pair<Scheme, planners::PlanResult>>& results) {
  fmt::print("{:<28} {:>12} {:>11} {:>11} {:>5} {:>9} {:>11} {:>8}\n", "memory", "KV B/token",
             "KV per seq", "KV batch", "fits", "max batch", "max context", "min GPUs");
  fmt::print("{:<28} {:>12} {:>11} {:>11} {:>5} {:>9} {:>11} {:>8}\n", "scheme", "(model)",
             "(per GPU)", "(per GPU)", "", "", "", "");
  for (const auto& [s, r] : results) {
    fmt::print("{:<28} {:>12.0f} {:>11} {:>11} {:>5} {:>9} {:>11} {:>8}\n", s.label.substr(0, 28),
               r.kv_bytes_per_token_model,
               planners::format_bytes(static_cast<double>(r.kv_bytes_per_sequence_per_gpu)),
               planners::format_bytes(static_cast<double>(r.kv_bytes_batch_per_gpu)),
               r.fits ? "yes" : "NO", r.max_batch, r.max_context,
               r.min_gpus ? std::to_string(r.min_gpus) : std::string("-"));
  }
  fmt::print("\n{:<28} {:>9} {:>9} {:>11} {:>10} {:>12}  {}\n", "latency", "TTFT", "TPOT", "tok/s",
             "tok/s", "tok/s", "decode step waits on");
  fmt::print("{:<28} {:>9} {:>9} {:>11} {:>10} {:>12}\n", "scheme", "", "", "(per user)",
             "(per GPU)", "(deployment)");
  for (const auto& [s, r] : results) {
    const auto& st = r.latency.step;
    if (!r.fits) {  // a batch that does not fit does not decode: no step time as if it ran
      fmt::print(
          "{:<28} {:>9} {:>9}  the batch does not fit: at most {} sequences of this context\n",
          s.label.substr(0, 28), millis(r.ttft_s), "-", r.max_batch);
      continue;
    }
    fmt::print("{:<28} {:>9} {:>9} {:>11.1f} {:>10.0f} {:>12.0f}  {} ({}-bound)\n",
               s.label.substr(0, 28), millis(r.ttft_s), millis(r.tpot_s), r.tokens_per_s_per_user,
               r.tokens_per_s_per_gpu, r.tokens_per_s_deployment, st.bound_by,
               st.compute_bound ? "compute" : "memory");
  }
}

int run_plan(const PlanOptions& o) {
  auto user = user_catalogue(o.where.db);
  if (!user) return fail(user.message());
  auto base = o.where.scenario(*user);
  if (!base) return fail(base.message());
  auto store = o.where.db.open_if(o.save);
  if (!store) return fail(store.message());
  auto schemes = resolve_schemes(o.schemes, o.where.db);
  if (!schemes) return fail(schemes.message());

  planners::Scenario sc = *base;
  sc.context = o.context;
  sc.batch = o.batch;
  std::vector<std::pair<Scheme, planners::PlanResult>> results;
  for (const auto& s : *schemes) {
    sc.scheme = s;
    auto r = planners::plan(sc);
    if (!r) return fail(r.message());
    results.emplace_back(s, *r);
  }
  std::optional<planners::SloChoice> slo;
  if (o.ttft_ms > 0 || o.tpot_ms > 0) {
    auto c = planners::best_under_slo(sc, *schemes, {o.ttft_ms, o.tpot_ms});
    if (!c) return fail(c.message());
    slo = *c;
  }
  std::vector<std::vector<planners::FrontierPoint>> frontiers;
  if (o.frontier) {
    for (const auto& s : *schemes) {
      sc.scheme = s;
      frontiers.push_back(planners::frontier(sc));
    }
  }
  const NewRun run = plan_run(sc, results, {split(o.schemes), o.where.reserve_gib, {}, o.label});
  nlohmann::json j = run.metrics;
  j["decompression_rates"] = planners::kernel_rates_to_json(sc.rates);
  if (slo) {
    j["slo"] = {{"ttft_ms_target", o.ttft_ms},
                {"tpot_ms_target", o.tpot_ms},
                {"found", slo->found},
                {"scheme", slo->found ? nlohmann::json((*schemes)[slo->scheme].id) : nullptr},
                {"batch", slo->batch},
                {"tokens_per_s_per_gpu", slo->tokens_per_s_per_gpu},
                {"tokens_per_s_per_user", slo->tokens_per_s_per_user},
                {"ttft_ms", slo->ttft_ms},
                {"tpot_ms", slo->tpot_ms},
                {"reason", slo->reason}};
  }
  if (o.frontier) {
    auto& f = j["frontier"] = nlohmann::json::object();
    for (std::size_t k = 0; k < frontiers.size(); ++k) {
      auto& pts = f[(*schemes)[k].id] = nlohmann::json::array();
      for (const auto& p : frontiers[k]) {
        pts.push_back({{"batch", p.batch},
                       {"tokens_per_s_per_user", p.tokens_per_s_per_user},
                       {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
                       {"tpot_ms", p.tpot_s * 1e3}});
      }
    }
  }
  return save_and_print(store->get(), run, j, o.json, [&] {
    print_header(sc, results.front().second);
    print_tables(results);
    if (slo) {
      fmt::print("\nUnder TTFT ≤ {} and TPOT ≤ {}: {}\n",
                 o.ttft_ms > 0 ? fmt::format("{:g} ms", o.ttft_ms) : "any",
                 o.tpot_ms > 0 ? fmt::format("{:g} ms", o.tpot_ms) : "any", slo->reason);
    }
    for (std::size_t k = 0; k < frontiers.size(); ++k) {
      fmt::print("\nFrontier of {} (batch grows down):\n{:>8} {:>16} {:>15} {:>9}\n",
                 (*schemes)[k].label, "batch", "tok/s per user", "tok/s per GPU", "TPOT");
      for (const auto& p : frontiers[k]) {
        fmt::print("{:>8} {:>16.1f} {:>15.0f} {:>9}\n", p.batch, p.tokens_per_s_per_user,
                   p.tokens_per_s_per_gpu, millis(p.tpot_s));
      }
    }
    if (o.explain) {
      for (const auto& [s, r] : results) fmt::print("\n{}", r.formula);
    }
  });
}

// Every built-in scheme, from the planner's registry.
std::string scheme_help() {
  return "KV storage scheme(s), comma-separated: " + join_ids(planners::scheme_ids(), {}, ", ") +
         " (kivi: group 32, fp16 window 128; kvcomp: Huffman, 5.03 bits as measured on an H100), "
         "or run:ID (bits per value measured by a saved run); add +evict:N (tokens) or +evict:F "
         "(fraction) for an eviction budget, +offload to keep what does not fit in host memory, "
         "e.g. int4+evict:0.25";
}

int run_sweep(const PlanOptions& o, const std::string& gpus, const std::string& contexts,
              const std::string& batches, bool csv) {
  auto user = user_catalogue(o.where.db);
  if (!user) return fail(user.message());
  auto base = o.where.scenario(*user);
  if (!base) return fail(base.message());
  planners::SweepSpec spec;
  spec.model = base->model;
  spec.deployment = base->deployment;
  spec.bandwidth_efficiency = base->bandwidth_efficiency;
  spec.compute_efficiency = base->compute_efficiency;
  spec.link_efficiency = base->link_efficiency;
  spec.rates = base->rates;
  for (const auto& id : split(gpus)) {
    auto g = planners::find_gpu(id, user->gpus);
    if (!g) return fail(g.message());
    spec.gpus.push_back(*g);
  }
  auto schemes = resolve_schemes(o.schemes, o.where.db);
  if (!schemes) return fail(schemes.message());
  spec.schemes = *schemes;
  auto c = parse_list<std::int64_t>(contexts, "--contexts");
  if (!c) return fail(c.message());
  auto b = parse_list<int>(batches, "--batches");
  if (!b) return fail(b.message());
  spec.contexts = *c;
  spec.batches = *b;
  auto rows = planners::sweep(spec);
  if (!rows) return fail(rows.message());
  if (csv) {
    fmt::print("{}", planners::sweep_to_csv(spec, *rows));
    return 0;
  }
  fmt::print("{:<12} {:<22} {:>8} {:>6} {:>5} {:>11} {:>9} {:>9} {:>9} {:>10} {:>10}\n", "gpu",
             "scheme", "context", "batch", "fits", "KV per GPU", "max batch", "TTFT", "TPOT",
             "tok/s/user", "tok/s/GPU");
  for (const auto& r : *rows) {
    if (!r.plan.fits) {  // no decode speed for a batch that does not fit
      fmt::print("{:<12} {:<22} {:>8} {:>6} {:>5} {:>11} {:>9} {:>9} {:>9} {:>10} {:>10}\n",
                 spec.gpus[r.gpu].id, spec.schemes[r.scheme].id, r.context, r.batch, "NO",
                 planners::format_bytes(static_cast<double>(r.plan.kv_bytes_batch_per_gpu)),
                 r.plan.max_batch, millis(r.plan.ttft_s), "-", "-", "-");
      continue;
    }
    fmt::print("{:<12} {:<22} {:>8} {:>6} {:>5} {:>11} {:>9} {:>9} {:>9} {:>10.1f} {:>10.0f}\n",
               spec.gpus[r.gpu].id, spec.schemes[r.scheme].id, r.context, r.batch,
               r.plan.fits ? "yes" : "NO",
               planners::format_bytes(static_cast<double>(r.plan.kv_bytes_batch_per_gpu)),
               r.plan.max_batch, millis(r.plan.ttft_s), millis(r.plan.tpot_s),
               r.plan.tokens_per_s_per_user, r.plan.tokens_per_s_per_gpu);
  }
  return 0;
}

}  // namespace

void add_plan_advise_command(CLI::App& plan);

void add_plan_command(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand(
      "plan",
      "Capacity and latency planning: does a model's KV cache fit a GPU at a context and batch, "
      "the largest batch and context, the fewest GPUs, time to first token, time per output "
      "token and tokens/s per user and per GPU, with each scheme's decompression charged");
  cmd->add_option("--gpu", o->where.gpu, "GPU id or alias (see 'kvlab gpus list')")
      ->capture_default_str();
  cmd->add_option("--context", o->context, "tokens per sequence (the prompt, for TTFT)")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "sequences at once")->capture_default_str();
  cmd->add_option("--scheme", o->schemes, scheme_help())->capture_default_str();
  o->where.add_to(*cmd);
  cmd->add_option("--ttft-ms", o->ttft_ms,
                  "target time to first token: find the best scheme and batch within it (0: none)")
      ->capture_default_str();
  cmd->add_option("--tpot-ms", o->tpot_ms,
                  "target time per output token: find the best scheme and batch within it (0: "
                  "none)")
      ->capture_default_str();
  cmd->add_flag("--frontier", o->frontier,
                "print tokens/s per user against tokens/s per GPU as the batch grows, per scheme");
  cmd->add_flag("--explain", o->explain, "write the memory formula out with the numbers");
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->add_flag("--save", o->save, "save the scenario to the runs database");
  cmd->add_option("--label", o->label, "a label for the saved scenario");
  cmd->callback([cmd, o] {
    if (cmd->got_subcommand("sweep") || cmd->got_subcommand("advise")) return;
    exit_code() = run_plan(*o);
  });

  // kvlab plan sweep
  auto sw = std::make_shared<PlanOptions>();
  sw->schemes = "fp16,fp8,kivi2";
  auto gpus = std::make_shared<std::string>("h100-sxm,a100-80gb,l40s");
  auto contexts = std::make_shared<std::string>("1024,4096,8192");
  auto batches = std::make_shared<std::string>("1,8,32,128");
  auto csv = std::make_shared<bool>(false);
  auto* sub = cmd->add_subcommand(
      "sweep", "Every combination of GPUs × schemes × contexts × batches as a table (CSV)");
  sub->add_option("--gpus", *gpus, "GPU ids, comma-separated")->capture_default_str();
  sub->add_option("--schemes", sw->schemes, scheme_help())->capture_default_str();
  sub->add_option("--contexts", *contexts, "contexts, comma-separated")->capture_default_str();
  sub->add_option("--batches", *batches, "batch sizes, comma-separated")->capture_default_str();
  sw->where.add_to(*sub);
  sub->add_flag("--csv", *csv, "print CSV (default: an aligned table)");
  sub->callback([=] {
    sw->where.gpu = *gpus;
    exit_code() = run_sweep(*sw, *gpus, *contexts, *batches, *csv);
  });
  add_plan_advise_command(*cmd);
}

}  // namespace kvlab::cli
