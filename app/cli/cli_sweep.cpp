// kvlab sweep: the runs a sweep file describes (sweep_plan.h), or one shard of them, each saved
// under its item's key, so that a shard run again resumes and `kvlab runs import` merges shards
// without duplicates.
#include <charconv>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli_common.h"
#include "cli_sweep_slurm.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/llama_state.h"
#include "kvlab/store/sweep_plan.h"

namespace kvlab::cli {
namespace {

struct SweepOptions {
  std::string file;
  std::string shard = "1/1";
  DbOption db;
  BackendOption backend;
  bool dry_run = false;
  bool json = false;
  std::optional<SlurmArrayOptions> slurm;  // --slurm DIR: write the array job, make nothing
};

// What a sweep process keeps between items: the model (items of one model follow each other)
// and the backend.
struct SweepContext {
  const SweepPlan& plan;
  bool json = false;  // no progress bar
  std::unique_ptr<Backend> backend;
  std::string model_path;
  std::optional<LoadedModel> model;
};

Result<NewRun> run_quality_item(SweepContext& ctx, const SweepItem& item) {
  if (!ctx.model || ctx.model_path != item.model) {
    ctx.model.reset();
    auto loaded = load_model(item.model);
    if (!loaded) return loaded.error();
    ctx.model.emplace(std::move(*loaded));
    ctx.model_path = item.model;
  }
  const LoadedModel& loaded = *ctx.model;
  std::string text_file;
  int sample = 0;
  if (item.text.rfind("file:", 0) == 0) {
    text_file = item.text.substr(5);
  } else {  // "sampled:N", checked by the plan
    const std::string n = item.text.substr(item.text.find(':') + 1);
    std::from_chars(n.data(), n.data() + n.size(), sample);
  }
  QualityConfig qc;
  qc.method = item.method;
  qc.eviction = item.eviction;
  qc.window = ctx.plan.window;
  qc.stride = ctx.plan.stride;
  qc.bos = loaded.bos;
  auto text = quality_text(loaded, "text", text_file, ctx.plan.max_tokens, sample, 1, qc);
  if (!text) return text.error();
  auto r = measure_quality(loaded.model, text->tokens, qc, terminal_progress(ctx.json));
  if (!r) return r.error();
  return quality_run(*r, qc, {item.model, text->source, ctx.plan.window, {}});
}

Result<NewRun> run_compression_item(SweepContext& ctx, const SweepItem& item) {
  // A llama.cpp state file does not say how its rows split into heads, and a sweep item has no
  // --model to say it: the way is to write it out once with its model.
  if (item.source.rfind("file:", 0) == 0) {
    const std::string path = item.source.substr(5);
    if (is_llama_state_file(path)) {
      return make_error(fmt::format(
          "{}: a llama.cpp state file needs the GGUF model that wrote it, which a sweep item "
          "cannot give; write it to a cache file once with 'kvlab sources export --source "
          "file:{} --model MODEL.gguf --out CACHE.safetensors' and sweep over "
          "file:CACHE.safetensors",
          item.source, path));
    }
  }
  SourceOptions source;
  source.source = item.source;
  if (item.synthetic) source.synthetic = *item.synthetic;
  const ProgressFn progress = terminal_progress(ctx.json);
  auto cache = source.load(progress);
  if (!cache) return cache.error();
  auto report = compress_cache(*cache, *item.method, progress, ctx.backend.get());
  if (!report) return report.error();
  return compression_run(*report);
}

// The run's headline numbers, for the line printed after each item.
std::string headline(const NewRun& run) {
  const auto& m = run.metrics;
  const auto number = [&](const char* key) {
    return m.contains(key) && m[key].is_number() ? m[key].get<double>() : 0.0;
  };
  if (is_run_kind(run.kind, RunKind::Quality)) {
    return fmt::format("perplexity {:+.3f}%, agreement {:.2f}%, KL {:.3g}",
                       100 * number("perplexity_change"), 100 * number("next_token_agreement"),
                       number("kl_mean"));
  }
  return fmt::format("ratio {:.2f}x, {:.3f} bits/value", number("ratio"), number("bits_per_value"));
}

int run_sweep(const SweepOptions& o) {
  if (o.slurm) {
    auto plan = load_sweep_file(o.file);
    if (!plan) return fail(plan.message());
    SlurmArrayOptions slurm = *o.slurm;
    slurm.backend = o.backend.id;
    return write_slurm_array(slurm, o.file, *plan, o.json);
  }
  auto shard = SweepShard::parse(o.shard);
  if (!shard) return fail(shard.message());
  auto plan = load_sweep_file(o.file);
  if (!plan) return fail(plan.message());
  const auto items = shard_items(*plan, *shard);

  // --dry-run reads the database only when it exists, to say which items it holds; it creates
  // none, and a file that is not a runs database is still an error.
  std::optional<RunsStore> store;
  const std::filesystem::path db_path =
      o.db.path.empty() ? default_db_path() : std::filesystem::path(o.db.path);
  if (!o.dry_run || std::filesystem::exists(db_path)) {
    auto opened = o.dry_run ? o.db.open_existing() : o.db.open_for_saving();
    if (!opened) return fail(opened.message());
    store.emplace(std::move(*opened));
  }
  SweepContext ctx{*plan, o.json, nullptr, {}, std::nullopt};
  if (!o.dry_run && plan->kind == SweepKind::Compression) {
    auto backend = o.backend.make();
    if (!backend) return fail(backend.message());
    ctx.backend = std::move(*backend);
  }

  nlohmann::json rows = nlohmann::json::array();
  int made = 0, present = 0, failed = 0;
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t n = 0; n < items.size(); ++n) {
    const SweepItem& item = *items[n];
    nlohmann::json row = {{"item", item.index}, {"uid", item.uid}, {"title", item.title}};
    std::optional<std::int64_t> existing;
    if (store) {
      auto found = store->find_run(item.uid);
      if (!found) return fail(found.message());
      existing = *found;
    }
    if (!o.json) {
      fmt::print(stderr, "[{}/{}] item {}: {}", n + 1, items.size(), item.index, item.title);
    }
    if (existing) {
      ++present;
      row["status"] = "present";
      row["run_id"] = *existing;
      if (!o.json) fmt::print(stderr, ": in the database already (run {})\n", *existing);
    } else if (o.dry_run) {
      row["status"] = "to do";
      if (!o.json) fmt::print(stderr, ": to do\n");
    } else {
      if (!o.json) fmt::print(stderr, "\n");
      const auto item_start = std::chrono::steady_clock::now();
      auto run = item.kind == SweepKind::Quality ? run_quality_item(ctx, item)
                                                 : run_compression_item(ctx, item);
      if (run) run->uid = item.uid;
      const Result<std::int64_t> id =
          run ? store->save_run(*run) : Result<std::int64_t>(run.error());
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - item_start).count();
      if (id) {
        ++made;
        row["status"] = "made";
        row["run_id"] = *id;
        row["seconds"] = seconds;
        if (!o.json) {
          fmt::print(stderr, "        run {}: {} ({:.1f} s)\n", *id, headline(*run), seconds);
        }
      } else {
        // One bad item (a missing model on this node) does not lose the shard's other items.
        ++failed;
        row["status"] = "failed";
        row["error"] = id.message();
        fmt::print(stderr, "kvlab: sweep item {} ({}): {}\n", item.index, item.title, id.message());
      }
    }
    rows.push_back(std::move(row));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (o.json) {
    fmt::print("{}\n", json_text(nlohmann::json{{"file", o.file},
                                                {"shard", o.shard},
                                                {"items_in_sweep", plan->items.size()},
                                                {"items_in_shard", items.size()},
                                                {"made", made},
                                                {"present", present},
                                                {"failed", failed},
                                                {"seconds", seconds},
                                                {"items", rows}},
                                 2));
  } else {
    fmt::print(
        "shard {} of {}: {} items ({} in the sweep): {} made, {} in the database already, "
        "{} failed; {:.1f} s{}\n",
        shard->index, shard->count, items.size(), plan->items.size(), made, present, failed,
        seconds, store ? fmt::format("; database {}", store->path().string()) : "");
  }
  if (failed > 0) return fail(fmt::format("{} of {} sweep items failed", failed, items.size()));
  return 0;
}

}  // namespace

void add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep",
      "Make the runs a sweep file describes (models x texts x methods for quality, sources x "
      "methods for compression), or one shard of them, into a runs database; items the database "
      "holds are skipped, so a sweep run again resumes; with --slurm, write (and --submit) a "
      "Slurm array job of its parts instead (docs/GUIDES.md: sharded sweeps)");
  cmd->add_option("file", o->file, "the sweep, a JSON file (format: docs/GUIDES.md)")->required();
  cmd->add_option("--shard", o->shard,
                  "I/N: make only part I of N (the items whose number is I-1 modulo N); N "
                  "processes with 1/N ... N/N make the whole sweep")
      ->capture_default_str();
  CLI::Option* dry_run = cmd->add_flag(
      "--dry-run", o->dry_run, "list the shard's items and which the database holds; make nothing");
  o->backend.add_to(*cmd);
  cmd->add_flag("--json", o->json, "print JSON");
  o->db.add_to(*cmd);
  // The Slurm array job (cli_sweep_slurm.h).
  auto slurm = std::make_shared<SlurmArrayOptions>();
  CLI::Option* dir = cmd->add_option(
      "--slurm", slurm->dir,
      "DIR: make nothing here; write DIR/sweep.sbatch, a Slurm array job of one task per part, "
      "task K running 'kvlab sweep FILE --shard K/N' into DIR/parts/part-K.sqlite with its log "
      "in DIR/logs/part-K.log (absolute paths of this kvlab and of FILE), and print the command "
      "that merges the parts");
  cmd->add_option("--parts", slurm->parts,
                  "with --slurm: N, the number of parts and array tasks, from 1 to the number of "
                  "items (default: one per item, at most 16)")
      ->needs(dir);
  cmd->add_flag("--submit", slurm->submit,
                "with --slurm: submit the script with sbatch and print the job id")
      ->needs(dir);
  cmd->add_option("--sbatch", slurm->sbatch_lines,
                  "with --slurm: one more sbatch option for the script, repeatable "
                  "(--sbatch=--time=02:00:00 --sbatch=--cpus-per-task=8)")
      ->needs(dir);
  dir->excludes(dry_run);
  dir->excludes(cmd->get_option("--shard"));
  dir->excludes(cmd->get_option("--db"));
  cmd->callback([o, slurm, dir] {
    if (dir->count() > 0) o->slurm = *slurm;
    exit_code() = run_sweep(*o);
  });
}

}  // namespace kvlab::cli
