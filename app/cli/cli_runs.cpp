// kvlab runs: list, show, export and delete saved runs.
#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/chrono.h>
#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/store/run_export.h"
#include "kvlab/store/run_report.h"

namespace kvlab::cli {

namespace {

double metric(const nlohmann::json& m, const char* key) {
  return m.contains(key) && m[key].is_number() ? m[key].get<double>() : 0.0;
}

double error_metric(const nlohmann::json& m, const char* key) {
  return m.contains("error") ? metric(m["error"], key) : 0.0;
}

// The numbers the runs table shows, for every kind of run. An eviction run's ratio is its
// memory against the full fp16 cache, and its bits per value the fp16 bits over that ratio.
double run_ratio(const RunSummary& r) {
  return r.kind == "eviction" ? metric(r.metrics, "memory_ratio") : metric(r.metrics, "ratio");
}

double run_bits_per_value(const RunSummary& r) {
  if (r.kind != "eviction") return metric(r.metrics, "bits_per_value");
  const double ratio = run_ratio(r);
  return ratio > 0 ? 16.0 / ratio : 0.0;
}

double run_attn_error(const RunSummary& r) {
  return r.kind == "eviction" ? metric(r.metrics, "attn_output_rel_error")
                              : error_metric(r.metrics, "attn_output_rel_error");
}

// A cell of at most `width` characters, so that long labels keep the table's columns.
std::string cell(const std::string& text, std::size_t width) {
  return text.size() <= width ? text : text.substr(0, width - 3) + "...";
}

void show_eviction(const RunRecord& run) {
  const nlohmann::json& m = run.metrics;
  fmt::print("memory  {:.0f} B vs {:.0f} B full fp16 cache ({:.3f}x smaller)\n",
             metric(m, "memory_bytes"), metric(m, "full_memory_bytes"), run_ratio(run));
  fmt::print("kept    {:.1f} of {:.0f} tokens ({:.0f} decode steps)\n", metric(m, "kept_tokens"),
             metric(m, "tokens"), metric(m, "steps"));
  fmt::print("quality attention mass {:.4f}  output rel. error {:.4g}  output cosine {:.6f}\n",
             metric(m, "attention_mass_retained"), metric(m, "attn_output_rel_error"),
             metric(m, "attn_output_cosine"));
  if (m.contains("needle_retained") && m["needle_retained"].is_number()) {
    fmt::print("needle  retained {:.3f}  in top-k {:.3f} (fractions of KV heads)\n",
               metric(m, "needle_retained"), metric(m, "needle_in_top_k"));
  }
}

void show_plan(const RunRecord& run) {
  const nlohmann::json& m = run.metrics;
  fmt::print("plan    {} on {}, context {:.0f}, batch {:.0f}, TP {:.0f}, PP {:.0f}\n",
             m.value("model_name", run.source), m.value("gpu_name", std::string("?")),
             metric(m, "context"), metric(m, "batch"), metric(m, "tp"), metric(m, "pp"));
  if (!m.contains("schemes") || !m["schemes"].is_array()) return;
  for (const auto& s : m["schemes"]) {
    fmt::print(
        "  {:<28} KV {:>14.0f} B total  fits {:<3}  max batch {:>6.0f}  max context "
        "{:>7.0f}  min GPUs {:>3.0f}  {:>8.0f} tokens/s\n",
        cell(s.value("scheme_label", std::string("?")), 28), metric(s, "kv_bytes_total"),
        s.value("fits", false) ? "yes" : "no", metric(s, "max_batch"), metric(s, "max_context"),
        metric(s, "min_gpus"), metric(s, "decode_tokens_per_s"));
  }
}

int list(const DbOption& db, bool json) {
  auto store = db.open();
  if (!store) return fail(store.message());
  auto runs = store->list_runs(-1);
  if (!runs) return fail(runs.message());
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : *runs) {
      out.push_back({{"id", r.id},
                     {"created_at", r.created_at},
                     {"kind", r.kind},
                     {"source", r.source},
                     {"method", r.method},
                     {"label", r.label},
                     {"ratio", run_ratio(r)},
                     {"bits_per_value", run_bits_per_value(r)},
                     {"attn_output_rel_error", run_attn_error(r)}});
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  if (runs->empty()) {
    fmt::print("no runs yet in {} (save one with 'kvlab compress ... --save')\n",
               store->path().string());
    return 0;
  }
  fmt::print("{:>5}  {:<24} {:<24} {:<28} {:>8} {:>8} {:>12}\n", "id", "created (UTC)", "source",
             "method", "ratio", "bits/val", "attn rel err");
  for (const auto& r : *runs) {
    if (r.kind == "plan") {  // a scenario: no ratio or error of its own
      fmt::print("{:>5}  {:<24} {:<24} {:<28} {:>8} {:>8} {:>12}\n", r.id, r.created_at,
                 cell(r.source, 24), cell(r.label.empty() ? r.method : r.label, 28), "plan", "-",
                 "-");
      continue;
    }
    fmt::print("{:>5}  {:<24} {:<24} {:<28} {:>8.3f} {:>8.3f} {:>12.4g}\n", r.id, r.created_at,
               cell(r.source, 24), cell(r.label.empty() ? r.method : r.label, 28), run_ratio(r),
               run_bits_per_value(r), run_attn_error(r));
  }
  return 0;
}

int show(const DbOption& db, std::int64_t id, bool json) {
  auto store = db.open();
  if (!store) return fail(store.message());
  auto run = store->load_run(id);
  if (!run) return fail(run.message());
  if (json) {
    fmt::print("{}\n", run_to_json(*run).dump(2));
    return 0;
  }
  fmt::print("run {}  ({}, {})\nsource  {}\nmethod  {}\nlabel   {}\n", run->id, run->kind,
             run->created_at, run->source, run->method, run->label);
  fmt::print("params  {}\n", run->params.dump());
  if (run->kind == "eviction") {
    show_eviction(*run);
  } else if (run->kind == "plan") {
    show_plan(*run);
  } else {
    fmt::print("ratio   {:.3f}x   bits/value {:.3f}\n", metric(run->metrics, "ratio"),
               metric(run->metrics, "bits_per_value"));
  }
  if (run->metrics.contains("error")) fmt::print("error   {}\n", run->metrics["error"].dump());
  if (!run->notes.empty()) fmt::print("notes   {}\n", run->notes);
  fmt::print("artifacts:");
  for (const auto& [name, data] : run->artifacts) fmt::print(" {}", name);
  fmt::print("\n");
  return 0;
}

int export_run(const DbOption& db, std::int64_t id, const std::string& format,
               const std::string& out) {
  auto store = db.open();
  if (!store) return fail(store.message());
  auto run = store->load_run(id);
  if (!run) return fail(run.message());
  const std::string text = format == "csv" ? run_to_csv(*run) : run_to_json(*run).dump(2) + "\n";
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
  auto store = db.open();
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
  auto store = db.open();
  if (!store) return fail(store.message());
  if (auto s = store->delete_run(id); !s) return fail(s.message());
  fmt::print("deleted run {}\n", id);
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
  };
  auto o = std::make_shared<Options>();
  CLI::App* runs = app.add_subcommand("runs", "List, show, export, report and delete saved runs");
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

  CLI::App* d = runs->add_subcommand("delete", "Delete one run");
  d->add_option("id", o->id, "run id")->required();
  o->db.add_to(*d);
  d->callback([o] { exit_code() = remove(o->db, o->id); });
}

}  // namespace kvlab::cli
