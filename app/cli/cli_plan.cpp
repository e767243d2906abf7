// kvlab plan, plan sweep, models and gpus: the capacity planner on the command line.
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/model/hf_model.h"
#include "kvlab/planners/memory_formula.h"
#include "kvlab/planners/solvers.h"

namespace kvlab::cli {
namespace {

using planners::GpuSpec;
using planners::ModelSpec;
using planners::Scheme;

// The user's own GPUs and models, from the runs database when it exists (never created here).
struct UserCatalogue {
  std::vector<GpuSpec> gpus;
  std::vector<ModelSpec> models;
};

Result<UserCatalogue> user_catalogue(const DbOption& db) {
  UserCatalogue u;
  const auto path = db.path.empty() ? default_db_path() : std::filesystem::path(db.path);
  if (!std::filesystem::exists(path)) return u;
  auto store = db.open_existing();
  if (!store) return store.error();
  auto gpus = store->list_catalog_entries("gpu");
  if (!gpus) return gpus.error();
  for (const auto& j : *gpus) {
    auto g = planners::gpu_from_json(j);
    if (!g) return make_error(fmt::format("{}: stored GPU: {}", path.string(), g.message()));
    u.gpus.push_back(std::move(*g));
  }
  auto models = store->list_catalog_entries("model");
  if (!models) return models.error();
  for (const auto& j : *models) {
    auto m = planners::model_from_json(j);
    if (!m) return make_error(fmt::format("{}: stored model: {}", path.string(), m.message()));
    u.models.push_back(std::move(*m));
  }
  return u;
}

// --model: a catalogue id (built in or imported), or a path to a config.json.
Result<ModelSpec> resolve_model(const std::string& id, const UserCatalogue& user) {
  if (id.size() > 5 && id.substr(id.size() - 5) == ".json") {
    return planners::import_hf_config_file(id);
  }
  return planners::find_model(id, user.models);
}

// --scheme: a built-in scheme, or run:ID (the bits per value a saved run measured, eviction
// counted).
Result<Scheme> resolve_scheme(const std::string& id, const DbOption& db) {
  if (id.rfind("run:", 0) != 0) return planners::parse_scheme(id);
  std::int64_t run_id = 0;
  try {
    std::size_t used = 0;
    run_id = std::stoll(id.substr(4), &used);
    if (used != id.size() - 4) throw std::invalid_argument(id);
  } catch (const std::exception&) {
    return make_error(fmt::format("--scheme '{}': expected run:ID with a number", id));
  }
  auto store = db.open_existing();
  if (!store) return store.error();
  auto run = store->load_run(run_id);
  if (!run) return run.error();
  return run_scheme(*run, id);
}

struct PlanOptions {
  std::string model = "llama-3-8b", gpu = "h100-sxm";
  std::int64_t context = 8192;
  int batch = 1;
  std::vector<std::string> schemes = {"fp16"};
  planners::Deployment deployment;
  double reserve_gib = 1.0;
  double efficiency = 0.8;
  bool explain = false, json = false, save = false;
  std::string label;
  DbOption db;
};

int run_plan(const PlanOptions& o) {
  auto user = user_catalogue(o.db);
  if (!user) return fail(user.message());
  auto model = resolve_model(o.model, *user);
  if (!model) return fail(model.message());
  auto gpu = planners::find_gpu(o.gpu, user->gpus);
  if (!gpu) return fail(gpu.message());
  if (!(o.reserve_gib >= 0 && o.reserve_gib < 1e6)) {
    return fail(fmt::format("--reserve-gib {}: must be a non-negative number", o.reserve_gib));
  }
  auto store = o.db.open_if(o.save);
  if (!store) return fail(store.message());

  planners::Scenario sc;
  sc.model = *model;
  sc.gpu = *gpu;
  sc.deployment = o.deployment;
  sc.deployment.reserve_bytes = static_cast<std::uint64_t>(o.reserve_gib * (1ull << 30));
  sc.context = o.context;
  sc.batch = o.batch;
  sc.bandwidth_efficiency = o.efficiency;
  std::vector<std::pair<Scheme, planners::PlanResult>> results;
  for (const auto& id : o.schemes) {
    auto s = resolve_scheme(id, o.db);
    if (!s) return fail(s.message());
    sc.scheme = *s;
    auto r = planners::plan(sc);
    if (!r) return fail(r.message());
    results.emplace_back(*s, *r);
  }
  const NewRun run = plan_run(sc, results, {o.schemes, o.reserve_gib, {}, o.label});
  nlohmann::json j = run.metrics;
  return save_and_print(store->get(), run, j, o.json, [&] {
    fmt::print("{} on {} × {} (TP {}, PP {}), context {}, batch {}\n", model->name, gpu->name,
               o.deployment.tp * o.deployment.pp, o.deployment.tp, o.deployment.pp, o.context,
               o.batch);
    fmt::print("GPU memory {} × util {:g} = {}; weights {} per GPU; reserve {}\n\n",
               planners::format_bytes(static_cast<double>(gpu->memory_bytes)),
               o.deployment.gpu_memory_utilization,
               planners::format_bytes(static_cast<double>(results.front().second.usable_bytes)),
               planners::format_bytes(static_cast<double>(results.front().second.weights_bytes)),
               planners::format_bytes(static_cast<double>(sc.deployment.reserve_bytes)));
    fmt::print("{:<28} {:>12} {:>11} {:>11} {:>5} {:>9} {:>11} {:>8} {:>10}\n", "scheme",
               "KV B/token", "KV/seq", "KV total", "fits", "max batch", "max context", "min GPUs",
               "tokens/s");
    for (const auto& [s, r] : results) {
      fmt::print("{:<28} {:>12.0f} {:>11} {:>11} {:>5} {:>9} {:>11} {:>8} {:>10.0f}\n",
                 s.label.substr(0, 28), r.kv_bytes_per_token,
                 planners::format_bytes(static_cast<double>(r.kv_bytes_per_sequence)),
                 planners::format_bytes(static_cast<double>(r.kv_bytes_total)),
                 r.fits ? "yes" : "NO", r.max_batch, r.max_context,
                 r.min_gpus ? std::to_string(r.min_gpus) : std::string("-"), r.decode_tokens_per_s);
    }
    if (o.explain) {
      for (const auto& [s, r] : results) fmt::print("\n{}", r.formula);
    }
  });
}

template <class T>
Result<std::vector<T>> parse_list(const std::string& text, const char* option) {
  std::vector<T> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    const std::string item = text.substr(start, comma - start);
    try {
      std::size_t used = 0;
      const long long v = std::stoll(item, &used);
      if (used != item.size() || v < 1) throw std::invalid_argument(item);
      out.push_back(static_cast<T>(v));
    } catch (const std::exception&) {
      return make_error(fmt::format("{} '{}': expected positive whole numbers separated by commas",
                                    option, text));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const auto comma = text.find(',', start);
    out.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

void add_plan_options(CLI::App& cmd, PlanOptions& o) {
  cmd.add_option("--model", o.model,
                 "model id (see 'kvlab models list') or a Hugging Face config.json")
      ->capture_default_str();
  cmd.add_option("--tp", o.deployment.tp,
                 "tensor parallelism: splits KV heads (replicated when "
                 "TP > kv_heads; an MLA latent is not split)")
      ->capture_default_str();
  cmd.add_option("--pp", o.deployment.pp, "pipeline parallelism: splits layers")
      ->capture_default_str();
  cmd.add_option("--util", o.deployment.gpu_memory_utilization,
                 "the serving engine's share of GPU memory (vLLM's gpu_memory_utilization)")
      ->capture_default_str();
  cmd.add_option("--reserve-gib", o.reserve_gib,
                 "memory per GPU kept for activations and the runtime, GiB")
      ->capture_default_str();
  cmd.add_option("--page", o.deployment.page_tokens, "KV allocated in pages of this many tokens")
      ->capture_default_str();
  cmd.add_option("--weights", o.deployment.weights_dtype,
                 "weights dtype: fp32, fp16, bf16, fp8, int8, int4 (default: the model's)");
  cmd.add_option("--efficiency", o.efficiency,
                 "achieved fraction of peak memory bandwidth, for throughput")
      ->capture_default_str();
  o.db.add_to(cmd);
}

constexpr const char* kSchemeHelp =
    "KV storage scheme(s), comma-separated: fp16, bf16, fp8, int8, int4, kivi2, kivi4 (group 32, "
    "fp16 window 128), or run:ID (bits per value measured by a saved compression run); add "
    "+evict:N (tokens) or +evict:F (fraction) for an eviction budget, e.g. int4+evict:0.25";

}  // namespace

void add_plan_command(CLI::App& app) {
  auto opts = std::make_shared<PlanOptions>();
  auto* cmd = app.add_subcommand(
      "plan",
      "Capacity planning: does a model's KV cache fit a GPU at a context and batch, the largest "
      "batch and context, the fewest GPUs, and decode throughput from the bandwidth roofline");
  cmd->add_option("--gpu", opts->gpu, "GPU id (see 'kvlab gpus list')")->capture_default_str();
  cmd->add_option("--context", opts->context, "tokens per sequence")->capture_default_str();
  cmd->add_option("--batch", opts->batch, "sequences at once")->capture_default_str();
  auto schemes = std::make_shared<std::string>("fp16");
  cmd->add_option("--scheme", *schemes, kSchemeHelp)->capture_default_str();
  add_plan_options(*cmd, *opts);
  cmd->add_flag("--explain", opts->explain, "write the memory formula out with the numbers");
  cmd->add_flag("--json", opts->json, "print JSON");
  cmd->add_flag("--save", opts->save, "save the scenario to the runs database");
  cmd->add_option("--label", opts->label, "a label for the saved scenario");
  cmd->callback([cmd, opts, schemes] {
    if (cmd->got_subcommand("sweep")) return;
    opts->schemes = split(*schemes);
    exit_code() = run_plan(*opts);
  });

  // kvlab plan sweep
  auto sw = std::make_shared<PlanOptions>();
  auto gpus = std::make_shared<std::string>("h100-sxm,a100-80gb,l40s");
  auto sw_schemes = std::make_shared<std::string>("fp16,fp8,kivi2");
  auto contexts = std::make_shared<std::string>("1024,4096,8192");
  auto batches = std::make_shared<std::string>("1,8,32,128");
  auto* sub = cmd->add_subcommand(
      "sweep", "Every combination of GPUs × schemes × contexts × batches as a table (CSV)");
  sub->add_option("--gpus", *gpus, "GPU ids, comma-separated")->capture_default_str();
  sub->add_option("--schemes", *sw_schemes, kSchemeHelp)->capture_default_str();
  sub->add_option("--contexts", *contexts, "contexts, comma-separated")->capture_default_str();
  sub->add_option("--batches", *batches, "batch sizes, comma-separated")->capture_default_str();
  add_plan_options(*sub, *sw);
  auto csv = std::make_shared<bool>(false);
  sub->add_flag("--csv", *csv, "print CSV (default: an aligned table)");
  sub->callback([=] {
    exit_code() = [&]() -> int {
      auto user = user_catalogue(sw->db);
      if (!user) return fail(user.message());
      planners::SweepSpec spec;
      auto model = resolve_model(sw->model, *user);
      if (!model) return fail(model.message());
      spec.model = *model;
      spec.deployment = sw->deployment;
      spec.deployment.reserve_bytes = static_cast<std::uint64_t>(sw->reserve_gib * (1ull << 30));
      spec.bandwidth_efficiency = sw->efficiency;
      for (const auto& id : split(*gpus)) {
        auto g = planners::find_gpu(id, user->gpus);
        if (!g) return fail(g.message());
        spec.gpus.push_back(*g);
      }
      for (const auto& id : split(*sw_schemes)) {
        auto s = resolve_scheme(id, sw->db);
        if (!s) return fail(s.message());
        spec.schemes.push_back(*s);
      }
      auto c = parse_list<std::int64_t>(*contexts, "--contexts");
      if (!c) return fail(c.message());
      auto b = parse_list<int>(*batches, "--batches");
      if (!b) return fail(b.message());
      spec.contexts = *c;
      spec.batches = *b;
      auto rows = planners::sweep(spec);
      if (!rows) return fail(rows.message());
      if (*csv) {
        fmt::print("{}", planners::sweep_to_csv(spec, *rows));
        return 0;
      }
      fmt::print("{:<12} {:<22} {:>8} {:>6} {:>5} {:>11} {:>9} {:>10}\n", "gpu", "scheme",
                 "context", "batch", "fits", "KV total", "max batch", "tokens/s");
      for (const auto& r : *rows) {
        fmt::print("{:<12} {:<22} {:>8} {:>6} {:>5} {:>11} {:>9} {:>10.0f}\n", spec.gpus[r.gpu].id,
                   spec.schemes[r.scheme].id, r.context, r.batch, r.plan.fits ? "yes" : "NO",
                   planners::format_bytes(static_cast<double>(r.plan.kv_bytes_total)),
                   r.plan.max_batch, r.plan.decode_tokens_per_s);
      }
      return 0;
    }();
  });
}

void add_models_convert_command(CLI::App& models);

void add_models_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "models", "The model catalogue: list, import a config.json, convert a llama2.c checkpoint");
  cmd->require_subcommand(1);
  auto db = std::make_shared<DbOption>();
  auto* list = cmd->add_subcommand("list", "Built-in and imported models");
  db->add_to(*list);
  list->callback([db] {
    exit_code() = [&]() -> int {
      auto user = user_catalogue(*db);
      if (!user) return fail(user.message());
      fmt::print("{:<16} {:>6} {:>7} {:>8} {:>8} {:>9} {:>14}  {}\n", "id", "layers", "q_heads",
                 "kv_heads", "head_dim", "params B", "KV B/token", "notes");
      std::vector<ModelSpec> all = planners::builtin_models();
      all.insert(all.end(), user->models.begin(), user->models.end());
      const Scheme fp16 = planners::parse_scheme("fp16").value();
      for (const auto& m : all) {
        std::string notes;
        if (m.is_mla())
          notes += fmt::format("MLA latent {}+{} ", m.kv_lora_rank, m.qk_rope_head_dim);
        if (m.sliding_window) {
          notes += fmt::format("window {}{} ", *m.sliding_window,
                               m.layer_kinds.empty() ? " (all layers)" : " (some layers)");
        }
        fmt::print("{:<16} {:>6} {:>7} {:>8} {:>8} {:>9.1f} {:>14.0f}  {}\n", m.id, m.layers,
                   m.q_heads, m.is_mla() ? 0 : m.kv_heads, m.head_dim, m.params_billion,
                   planners::kv_bytes_per_token(m, fp16), notes);
      }
      return 0;
    }();
  });
  add_models_convert_command(*cmd);
  auto path = std::make_shared<std::string>();
  auto save = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  auto* imp = cmd->add_subcommand(
      "import",
      "Read a Hugging Face config.json (Llama, Mistral, Mixtral, Qwen2, Gemma2, "
      "DeepSeek-V2/V3) and show, or with --save store, the model it describes");
  imp->add_option("config", *path, "path to config.json")->required();
  imp->add_flag("--save", *save, "store it in the runs database, for --model ID later");
  imp->add_flag("--json", *json, "print the catalogue entry as JSON");
  db->add_to(*imp);
  imp->callback([=] {
    exit_code() = [&]() -> int {
      auto m = planners::import_hf_config_file(*path);
      if (!m) return fail(m.message());
      if (*save) {
        auto store = db->open_for_saving();
        if (!store) return fail(store.message());
        if (auto s = store->save_catalog_entry("model", m->id, planners::model_to_json(*m)); !s) {
          return fail(s.message());
        }
      }
      if (*json) {
        fmt::print("{}\n", planners::model_to_json(*m).dump(2));
      } else {
        const Scheme fp16 = planners::parse_scheme("fp16").value();
        fmt::print(
            "{}: {} layers, {} query heads, {} KV heads × {} head_dim{}{}, ~{:.2f}B "
            "params ({}), max context {}; fp16 KV {:.0f} bytes per token{}\n",
            m->id, m->layers, m->q_heads, m->kv_heads, m->head_dim,
            m->is_mla() ? fmt::format(" (MLA latent {}+{})", m->kv_lora_rank, m->qk_rope_head_dim)
                        : "",
            m->sliding_window ? fmt::format(", sliding window {}", *m->sliding_window) : "",
            m->params_billion, m->weights_dtype, m->max_context,
            planners::kv_bytes_per_token(*m, fp16), *save ? "; saved" : "");
      }
      return 0;
    }();
  });
}

void add_models_convert_command(CLI::App& models) {
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("f32");
  auto* cmd =
      models.add_subcommand("convert-llama2c",
                            "Write a llama2.c checkpoint as a Hugging Face folder (config.json, "
                            "model.safetensors), with the query/key rows permuted for the HF RoPE");
  cmd->add_option("checkpoint", *in, "llama2.c checkpoint (.bin)")->required();
  cmd->add_option("out_dir", *out, "the folder to write")->required();
  cmd->add_option("--dtype", *dtype, "weights dtype: f32, f16 or bf16")->capture_default_str();
  cmd->callback([=] {
    exit_code() = [&]() -> int {
      const auto d = parse_dtype(*dtype);
      if (!d) return fail(fmt::format("--dtype {}: expected f32, f16 or bf16", *dtype));
      if (auto s = convert_llama2c_to_hf(*in, *out, *d); !s) return fail(s.message());
      fmt::print("wrote {}/config.json and {}/model.safetensors\n", *out, *out);
      return 0;
    }();
  });
}

void add_gpus_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("gpus", "The GPU catalogue: list, add your own, remove");
  cmd->require_subcommand(1);
  auto db = std::make_shared<DbOption>();
  auto* list = cmd->add_subcommand("list", "Built-in GPUs and your own");
  db->add_to(*list);
  list->callback([db] {
    exit_code() = [&]() -> int {
      auto user = user_catalogue(*db);
      if (!user) return fail(user.message());
      fmt::print("{:<16} {:>10} {:>10}  {:<34} {}\n", "id", "memory", "GB/s", "name", "source");
      std::vector<GpuSpec> all = planners::builtin_gpus();
      all.insert(all.end(), user->gpus.begin(), user->gpus.end());
      for (const auto& g : all) {
        fmt::print("{:<16} {:>10} {:>10.0f}  {:<34} {}\n", g.id,
                   planners::format_bytes(static_cast<double>(g.memory_bytes)), g.bandwidth_gbs,
                   g.name, g.user ? "yours" : g.source);
      }
      return 0;
    }();
  });
  auto g = std::make_shared<GpuSpec>();
  auto gib = std::make_shared<double>(0);
  auto* add = cmd->add_subcommand("add", "Store your own GPU for --gpu ID");
  add->add_option("--id", g->id, "its id")->required();
  add->add_option("--name", g->name, "its name");
  add->add_option("--memory-gib", *gib, "device memory in GiB (as nvidia-smi reports it)")
      ->required();
  add->add_option("--bandwidth", g->bandwidth_gbs, "peak memory bandwidth in GB/s")->required();
  add->add_option("--source", g->source, "where the numbers come from");
  db->add_to(*add);
  add->callback([=] {
    exit_code() = [&]() -> int {
      GpuSpec spec = *g;
      if (!(*gib > 0 && *gib < 1e6))
        return fail(fmt::format("--memory-gib {}: must be positive", *gib));
      spec.memory_bytes = static_cast<std::uint64_t>(*gib * (1ull << 30));
      spec.memory_stated = fmt::format("{:g} GiB (given by the user)", *gib);
      spec.user = true;
      if (spec.name.empty()) spec.name = spec.id;
      if (auto v = spec.validate(); !v) return fail(v.message());
      for (const auto& b : planners::builtin_gpus()) {
        if (b.id == spec.id)
          return fail(fmt::format("--id {}: a built-in GPU has that id", spec.id));
      }
      auto store = db->open_for_saving();
      if (!store) return fail(store.message());
      if (auto s = store->save_catalog_entry("gpu", spec.id, planners::gpu_to_json(spec)); !s) {
        return fail(s.message());
      }
      fmt::print("saved GPU '{}' ({}, {:g} GB/s)\n", spec.id,
                 planners::format_bytes(static_cast<double>(spec.memory_bytes)),
                 spec.bandwidth_gbs);
      return 0;
    }();
  });
  auto id = std::make_shared<std::string>();
  auto* rm = cmd->add_subcommand("remove", "Delete one of your own GPUs");
  rm->add_option("id", *id, "its id")->required();
  db->add_to(*rm);
  rm->callback([=] {
    exit_code() = [&]() -> int {
      auto store = db->open_existing();
      if (!store) return fail(store.message());
      if (auto s = store->delete_catalog_entry("gpu", *id); !s) return fail(s.message());
      fmt::print("removed GPU '{}'\n", *id);
      return 0;
    }();
  });
}

}  // namespace kvlab::cli
