// kvlab runs: list, show, export, report, import and delete saved runs.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/store/run_export.h"
#include "kvlab/store/run_report.h"
#include "kvlab/store/sweep_plan.h"

namespace kvlab::cli {

namespace {

double metric(const nlohmann::json& m, const char* key) {
  return m.contains(key) && m[key].is_number() ? m[key].get<double>() : 0.0;
}

// A cell of at most `width` characters, so that long labels keep the table's columns.
std::string cell(const std::string& text, std::size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

// A number a run has, written as the app writes it; "-" where its kind has none.
std::string cell(const std::optional<double>& value, MetricFormat format) {
  return value ? format_metric_value(*value, format) : std::string("-");
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

void show_plan(const RunRecord& run) {
  const nlohmann::json& m = run.metrics;
  fmt::print("plan    {} on {}, context {:.0f}, batch {:.0f}, TP {:.0f}, PP {:.0f}\n",
             m.value("model_name", run.source), m.value("gpu_name", std::string("?")),
             metric(m, "context"), metric(m, "batch"), metric(m, "tp"), metric(m, "pp"));
  if (!m.contains("schemes") || !m["schemes"].is_array()) return;
  for (const auto& s : m["schemes"]) {
    // Plans saved before the latency model named these kv_bytes_total and decode_tokens_per_s.
    const auto either = [&](const char* now, const char* before) {
      return s.contains(now) ? metric(s, now) : metric(s, before);
    };
    fmt::print(
        "  {:<28} KV {:>14.0f} B per GPU  fits {:<3}  max batch {:>6.0f}  max context "
        "{:>7.0f}  min GPUs {:>3.0f}  {:>8.0f} tokens/s (deployment)\n",
        cell(s.value("scheme_label", std::string("?")), 28),
        either("kv_bytes_batch_per_gpu", "kv_bytes_total"), s.value("fits", false) ? "yes" : "no",
        metric(s, "max_batch"), metric(s, "max_context"), metric(s, "min_gpus"),
        either("tokens_per_s_deployment", "decode_tokens_per_s"));
  }
}

int list(const DbOption& db, bool json) {
  auto store = db.open_existing();
  if (!store) return fail(store.message());
  auto runs = store->list_runs(-1);
  if (!runs) return fail(runs.message());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *runs) {
      const RunRow row = run_row(r);
      out.push_back({{"id", row.id},
                     {"created_at", row.created_at},
                     {"kind", row.kind},
                     {"source", row.source},
                     {"method", row.method},
                     {"label", row.label},
                     {"context", optional_json(row.context)},
                     {"ratio", optional_json(row.ratio)},
                     {"bits_per_value", optional_json(row.bits_per_value)},
                     {"attn_output_rel_error", optional_json(row.error)},
                     {"perplexity_change", optional_json(row.perplexity_change)},
                     {"kl_mean", optional_json(row.kl)},
                     {"needle_retained", optional_json(row.needle_kept)}});
      if (!r.damage.empty()) out.back()["damage"] = r.damage;
    }
    fmt::print("{}\n", json_text(out, 2));
    return 0;
  }
  if (runs->empty()) {
    fmt::print("no runs yet in {} (save one with 'kvlab compress ... --save')\n",
               store->path().string());
    return 0;
  }
  constexpr const char* kRow =
      "{:>5}  {:<24} {:<11} {:<22} {:>7} {:<28} {:>8} {:>8} {:>9} {:>9} {:>11}\n";
  fmt::print(kRow, "id", "created (UTC)", "kind", "source", "context", "method", "ratio",
             "bits/val", "attn err", "Δ ppl", "KL");
  for (const auto& r : *runs) {
    const RunRow row = run_row(r);
    fmt::print(kRow, row.id, row.created_at, row.kind, cell(terminal_text(row.source), 22),
               cell(row.context, MetricFormat::Count),
               cell(terminal_text((r.damage.empty() ? "" : "[damaged] ") +
                                  (row.label.empty() ? row.method : row.label)),
                    28),
               cell(row.ratio, MetricFormat::Ratio), cell(row.bits_per_value, MetricFormat::Bits),
               cell(row.error, MetricFormat::Number),
               cell(row.perplexity_change, MetricFormat::SignedPercent),
               cell(row.kl, MetricFormat::Nats));
  }
  return 0;
}

int show(const DbOption& db, std::int64_t id, bool json) {
  auto store = db.open_existing();
  if (!store) return fail(store.message());
  auto run = store->load_run(id);
  if (!run) return fail(run.message());
  if (json) {
    fmt::print("{}\n", json_text(run_to_json(*run), 2));
    return 0;
  }
  // Labels, notes and sources are the user's or a file's text: escaped for the terminal.
  fmt::print("run {}  ({}, {})\nsource  {}\nmethod  {}\nlabel   {}\n", run->id, run->kind,
             run->created_at, terminal_text(run->source), terminal_text(run->method),
             terminal_text(run->label));
  fmt::print("params  {}\n", json_text(run->params));
  if (!run->damage.empty()) fmt::print("damaged {}\n", terminal_text(run->damage));
  const auto metrics = run_metrics(*run);
  std::size_t width = 0;
  for (const RunMetric& m : metrics) width = std::max(width, m.name.size());
  for (const RunMetric& m : metrics) fmt::print("  {:<{}}  {}\n", m.name, width, m.text());
  if (is_run_kind(run->kind, RunKind::Plan)) show_plan(*run);
  if (!run->notes.empty()) fmt::print("notes   {}\n", terminal_text(run->notes));
  fmt::print("artifacts:");
  for (const auto& [name, data] : run->artifacts) fmt::print(" {}", name);
  fmt::print("\n");
  return 0;
}

int export_run(const DbOption& db, std::int64_t id, const std::string& format,
               const std::string& out) {
  auto store = db.open_existing();
  if (!store) return fail(store.message());
  auto run = store->load_run(id);
  if (!run) return fail(run.message());
  const std::string text =
      format == "csv" ? run_to_csv(*run) : json_text(run_to_json(*run), 2) + "\n";
  if (out.empty() || out == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  std::ofstream f(out, std::ios::binary);
  if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size()))) {
    return fail(fmt::format("{}: cannot write the export", out));
  }
  fmt::print(stderr, "wrote run {} to {}\n", id, out);
  return 0;
}

// A self-contained HTML report of one run, or a comparison of several.
int report(const DbOption& db, const std::vector<std::int64_t>& ids, const std::string& title,
           const std::string& out) {
  auto store = db.open_existing();
  if (!store) return fail(store.message());
  std::vector<RunRecord> runs;
  for (std::int64_t id : ids) {
    auto run = store->load_run(id);
    if (!run) return fail(run.message());
    runs.push_back(std::move(*run));
  }
  ReportOptions options;
  options.title = title;
  const auto now = std::chrono::system_clock::now();
  options.generated_at =
      fmt::format("{:%Y-%m-%d %H:%M} UTC", std::chrono::floor<std::chrono::minutes>(now));
  auto html = runs_html_report(runs, options);
  if (!html) return fail(html.message());
  if (out.empty() || out == "-") {
    std::fwrite(html->data(), 1, html->size(), stdout);
    return 0;
  }
  std::ofstream f(out, std::ios::binary);
  if (!f || !f.write(html->data(), static_cast<std::streamsize>(html->size()))) {
    return fail(fmt::format("{}: cannot write the report", out));
  }
  fmt::print(stderr, "wrote a report of {} run{} to {}\n", ids.size(), ids.size() == 1 ? "" : "s",
             out);
  return 0;
}

int remove(const DbOption& db, std::int64_t id) {
  auto store = db.open_existing();
  if (!store) return fail(store.message());
  if (auto s = store->delete_run(id); !s) return fail(s.message());
  fmt::print("deleted run {}\n", id);
  return 0;
}

// The items of a sweep a database lacks, after a merge of its parts.
struct SweepGaps {
  std::size_t items = 0;
  std::vector<const SweepItem*> missing;
};

Result<SweepGaps> sweep_gaps(const RunsStore& store, const SweepPlan& plan) {
  SweepGaps gaps{plan.items.size(), {}};
  for (const SweepItem& item : plan.items) {
    auto found = store.find_run(item.uid);
    if (!found) return found.error();
    if (!*found) gaps.missing.push_back(&item);
  }
  return gaps;
}

// "part 3 of 8 (items 2, 10), part 6 of 8 (item 5)" with `parts`, else the items with titles.
std::string missing_text(const SweepGaps& gaps, int parts) {
  std::vector<std::string> pieces;
  if (parts > 0) {
    std::map<int, std::vector<int>> by_part;
    for (const SweepItem* item : gaps.missing)
      by_part[item->index % parts + 1].push_back(item->index);
    for (const auto& [part, items] : by_part) {
      pieces.push_back(fmt::format("part {} of {} (item{} {})", part, parts,
                                   items.size() == 1 ? "" : "s", fmt::join(items, ", ")));
    }
  } else {
    constexpr std::size_t kNamed = 10;
    for (std::size_t i = 0; i < gaps.missing.size() && i < kNamed; ++i) {
      pieces.push_back(fmt::format("item {} ({})", gaps.missing[i]->index, gaps.missing[i]->title));
    }
    if (gaps.missing.size() > kNamed) {
      pieces.push_back(fmt::format("and {} more", gaps.missing.size() - kNamed));
    }
  }
  return fmt::format("{}", fmt::join(pieces, ", "));
}

// The parts (1-based) the missing items belong to, when the sweep was cut into `parts` > 0.
std::set<int> parts_of(const SweepGaps& gaps, int parts) {
  std::set<int> out;
  if (parts > 0) {
    for (const SweepItem* item : gaps.missing) out.insert(item->index % parts + 1);
  }
  return out;
}

nlohmann::json gaps_json(const SweepGaps& gaps, const std::string& file, int parts) {
  nlohmann::json missing = nlohmann::json::array();
  for (const SweepItem* item : gaps.missing) {
    missing.push_back({{"item", item->index}, {"uid", item->uid}, {"title", item->title}});
    if (parts > 0) missing.back()["part"] = item->index % parts + 1;
  }
  return {{"file", file},
          {"items", gaps.items},
          {"present", gaps.items - gaps.missing.size()},
          {"parts", parts > 0 ? nlohmann::json(parts) : nlohmann::json()},
          {"missing_items", missing},
          {"missing_parts", parts_of(gaps, parts)}};
}

// Merges the databases `from` into `db` (created when missing), one transaction each. With a
// sweep file, then checks that every item of the sweep is in `db`: when some are not, what was
// there stays merged and the command fails naming them (by part with `parts`), so that a script
// does not go on with half a sweep.
int import_runs(const DbOption& db, const std::vector<std::string>& from,
                const std::string& sweep_file, std::optional<int> parts_given, bool json) {
  const int parts = parts_given.value_or(0);  // 0: items are not named by part
  // The sweep is read first: a bad file or --parts fails before anything is merged.
  std::optional<SweepPlan> plan;
  if (!sweep_file.empty()) {
    auto loaded = load_sweep_file(sweep_file);
    if (!loaded) return fail(loaded.message());
    if (parts_given && (parts < 1 || static_cast<std::size_t>(parts) > loaded->items.size())) {
      return fail(fmt::format("--parts {}: {} has {} items, so from 1 to {} parts", parts,
                              sweep_file, loaded->items.size(), loaded->items.size()));
    }
    plan = std::move(*loaded);
  }
  auto store = db.open_for_saving();
  if (!store) return fail(store.message());
  nlohmann::json reports = nlohmann::json::array();
  int imported = 0, skipped = 0;
  for (const auto& path : from) {
    auto r = store->import_runs(path);
    if (!r) {
      // The databases before this one are in; this one left nothing behind.
      return fail(
          fmt::format("{} (the databases before it were imported; run the command again "
                      "for the rest: runs held already are skipped)",
                      r.message()));
    }
    imported += r->imported;
    skipped += r->skipped;
    reports.push_back({{"from", path}, {"imported", r->imported}, {"skipped", r->skipped}});
    if (!json) {
      fmt::print("{}: {} runs imported, {} held already (same uid) skipped\n", path, r->imported,
                 r->skipped);
    }
  }
  std::optional<SweepGaps> gaps;
  if (plan) {
    auto found = sweep_gaps(*store, *plan);
    if (!found) return fail(found.message());
    gaps = std::move(*found);
  }
  if (json) {
    nlohmann::json out{{"db", store->path().string()},
                       {"imported", imported},
                       {"skipped", skipped},
                       {"databases", reports}};
    if (gaps) out["sweep"] = gaps_json(*gaps, sweep_file, parts);
    fmt::print("{}\n", json_text(out, 2));
  } else {
    fmt::print("{}: {} runs imported from {} databases, {} skipped\n", store->path().string(),
               imported, from.size(), skipped);
    if (gaps && gaps->missing.empty()) {
      fmt::print("{}: all {} items of the sweep {} are in it\n", store->path().string(),
                 gaps->items, sweep_file);
    }
  }
  if (gaps && !gaps->missing.empty()) {
    const std::string remedy =
        parts > 0 ? fmt::format(
                        "make each part again with 'kvlab sweep {} --shard K/{} --db "
                        "PART.sqlite' (a Slurm array: 'sbatch --array={} "
                        "DIR/sweep.sbatch'), then import it again",
                        sweep_file, parts, fmt::join(parts_of(*gaps, parts), ","))
                  : "run the sweep again to make them (give --parts N to have the parts named)";
    return fail(fmt::format(
        "the sweep {} is incomplete: {} of {} items are not in {} (the rest are merged): {}; {}",
        sweep_file, gaps->missing.size(), gaps->items, store->path().string(),
        missing_text(*gaps, parts), remedy));
  }
  return 0;
}

}  // namespace

void add_runs_command(CLI::App& app) {
  struct Options {
    DbOption db;
    bool json = false;
    std::int64_t id = 0;
    std::string format = "json";
    std::string out;
    std::vector<std::int64_t> ids;
    std::string title;
    std::vector<std::string> from;
    std::string sweep;
    std::optional<int> parts;
  };
  auto o = std::make_shared<Options>();
  CLI::App* runs =
      app.add_subcommand("runs", "List, show, export, report, import and delete saved runs");
  runs->require_subcommand(1);

  CLI::App* l = runs->add_subcommand("list", "List saved runs, newest first");
  o->db.add_to(*l);
  l->add_flag("--json", o->json, "print as JSON");
  l->callback([o] { exit_code() = list(o->db, o->json); });

  CLI::App* s = runs->add_subcommand("show", "Show one run");
  s->add_option("id", o->id, "run id")->required();
  o->db.add_to(*s);
  s->add_flag("--json", o->json, "print the whole run as JSON");
  s->callback([o] { exit_code() = show(o->db, o->id, o->json); });

  CLI::App* e = runs->add_subcommand("export", "Export one run as CSV or JSON");
  e->add_option("id", o->id, "run id")->required();
  e->add_option("--format", o->format, "csv or json")
      ->check(CLI::IsMember({"csv", "json"}))
      ->capture_default_str();
  e->add_option("--out", o->out, "file to write (default: standard output)");
  o->db.add_to(*e);
  e->callback([o] { exit_code() = export_run(o->db, o->id, o->format, o->out); });

  CLI::App* r = runs->add_subcommand(
      "report", "Write a self-contained HTML report (tables and charts) of one or more runs");
  r->add_option("ids", o->ids, "run ids; two or more make a comparison")->required();
  r->add_option("--out", o->out, "file to write (default: standard output)");
  r->add_option("--title", o->title, "report title (default: kvlab run N / comparison)");
  o->db.add_to(*r);
  r->callback([o] { exit_code() = report(o->db, o->ids, o->title, o->out); });

  CLI::App* im = runs->add_subcommand(
      "import",
      "Merge other runs databases (the shards of a sweep) into this one, each in one "
      "transaction; runs it holds already (the same uid) are skipped");
  im->add_option("from", o->from, "databases to copy the runs of")
      ->required()
      ->check(CLI::ExistingFile);
  CLI::Option* sweep = im->add_option(
      "--sweep", o->sweep,
      "FILE: the sweep the databases are parts of; after the merge, check that every item of it "
      "is in the database, and when some are not, keep what was merged, name them and exit 1");
  im->add_option("--parts", o->parts,
                 "with --sweep: N, the number of parts the sweep was cut into (--shard K/N, "
                 "--slurm --parts N), so that the missing items are named by part")
      ->needs(sweep);
  o->db.add_to(*im);
  im->add_flag("--json", o->json, "print JSON");
  im->callback([o] { exit_code() = import_runs(o->db, o->from, o->sweep, o->parts, o->json); });

  CLI::App* d = runs->add_subcommand("delete", "Delete one run");
  d->add_option("id", o->id, "run id")->required();
  o->db.add_to(*d);
  d->callback([o] { exit_code() = remove(o->db, o->id); });
}

}  // namespace kvlab::cli
