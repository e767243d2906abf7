#include "cli_common.h"

#include <unistd.h>

#include <cstdio>

#include <fmt/format.h>

#include "kvlab/engine/cache_file.h"

namespace kvlab::cli {

int& exit_code() {
  static int code = 0;
  return code;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "kvlab: %s\n", message.c_str());
  return kExitFailure;
}

ProgressFn terminal_progress() {
  if (!isatty(STDERR_FILENO)) return {};
  return [](double fraction, std::string_view stage) {
    std::fprintf(stderr, "\r  %3.0f%% %-40.*s", fraction * 100, static_cast<int>(stage.size()),
                 stage.data());
    if (fraction >= 1.0) std::fprintf(stderr, "\r%50s\r", "");
    std::fflush(stderr);
    return true;
  };
}

void SourceOptions::add_to(CLI::App& app) {
  app.add_option("--source", source,
                 "KV source: synthetic:PRESET (llama2-7b, llama3-8b, mistral-7b, qwen2.5-7b, "
                 "tiny) or file:PATH (.safetensors, .npz, .npy, or a folder of .npy)")
      ->capture_default_str();
  app.add_option("--layers", synthetic.layers, "synthetic: number of layers (0: the preset's)")
      ->capture_default_str();
  app.add_option("--context", synthetic.context, "synthetic: tokens in the cache")
      ->capture_default_str();
  app.add_option("--seed", synthetic.seed, "synthetic: random seed")->capture_default_str();
  app.add_option("--queries", synthetic.queries,
                 "synthetic: decode-time queries per layer, for attention metrics")
      ->capture_default_str();
}

Result<KvCache> SourceOptions::load(const ProgressFn& progress) const {
  const auto colon = source.find(':');
  const std::string kind = source.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : source.substr(colon + 1);
  if (kind == "synthetic") {
    SyntheticConfig c = synthetic;
    c.preset = rest.empty() ? "llama3-8b" : rest;
    return generate_synthetic(c, progress);
  }
  if (kind == "file") {
    if (rest.empty()) return make_error("--source file: needs a path, e.g. file:cache.safetensors");
    return load_cache_file(rest, progress);
  }
  return make_error(fmt::format("--source '{}': expected synthetic:PRESET or file:PATH", source));
}

void DbOption::add_to(CLI::App& app) {
  app.add_option("--db", path,
                 "runs database (default: $KVLAB_DB or ~/.local/share/kvlab/runs.sqlite)");
}

Result<RunsStore> DbOption::open() const {
  return RunsStore::open(path.empty() ? default_db_path() : std::filesystem::path(path));
}

Result<std::unique_ptr<RunsStore>> DbOption::open_if(bool save) const {
  if (!save) return std::unique_ptr<RunsStore>{};
  auto store = open();
  if (!store) return store.error();
  return std::make_unique<RunsStore>(std::move(*store));
}

int save_and_print(RunsStore* store, const NewRun& run, nlohmann::json& j, bool json,
                   const std::function<void()>& print_text) {
  if (store) {
    auto id = store->save_run(run);
    if (!id) return fail(id.message());
    j["run_id"] = *id;
    if (!json) fmt::print(stderr, "saved as run {} in {}\n", *id, store->path().string());
  }
  if (json) {
    fmt::print("{}\n", j.dump(2));
  } else {
    print_text();
  }
  return 0;
}

}  // namespace kvlab::cli
