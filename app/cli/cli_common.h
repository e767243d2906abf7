// Shared pieces of the kvlab command line: options every command takes and how results and
// errors are printed.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/core/kv_cache.h"
#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/model/model_capture.h"  // load_model() for capture and quality
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/llama_state.h"
#include "kvlab/engine/sources/synthetic.h"
#include "kvlab/store/run_records.h"
#include "kvlab/store/runs_store.h"

namespace kvlab::cli {

// Exit codes: 0 success, 1 the work failed (bad file, bad parameter, I/O), 2 bad usage.
inline constexpr int kExitFailure = 1;

// The exit code of the command that ran (commands run from CLI11 callbacks during parse).
int& exit_code();

// Prints "kvlab: <message>" to stderr and returns kExitFailure.
int fail(const std::string& message);

// The whole of a text file given as `option` (e.g. "--prompt-file"); the error names the option
// and the file.
Result<std::string> read_text_file(const std::string& option, const std::string& path);

// "unknown command 'runs lst'; did you mean 'list'? (known: ...)" when the words before the
// first option do not name a command (or a subcommand of a command that needs one).
std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv);

// A progress bar on stderr when it is a terminal ("[#########------]  37%  4.2 s  layer 12 of
// 32"), cleared at the end; nothing when stderr is not a terminal or the output is --json.
ProgressFn terminal_progress(bool json = false);

// Options naming a KV source: --source synthetic:PRESET | file:PATH, synthetic knobs, and what a
// llama.cpp state file needs.
struct SourceOptions {
  std::string source = "synthetic:llama3-8b";
  SyntheticConfig synthetic;
  // How to read a llama.cpp state file (file:slot.bin): --model, --kv-heads, --head-dim,
  // --llama-rotation.
  LlamaStateOptions llama_state;
  std::string llama_rotation = "auto";
  void add_to(CLI::App& app);
  // The generator's configuration, preset resolved, when the source is synthetic.
  std::optional<SyntheticConfig> synthetic_config() const;
  Result<KvCache> load(const ProgressFn& progress) const;
  // What a saved run needs to load the same cache again: the source text, and for a synthetic
  // source the generator knobs that shape it.
  nlohmann::json to_json() const;
};

// The parameters of a compression method (--bits, --group-size, ..., --codec), shared by every
// command that runs one ('kvlab compress --method M', 'kvlab evict --quant M'). The option naming
// the method itself belongs to the command.
struct MethodOptions {
  MethodConfig config;
  std::string codec = "none";
  std::string param_dtype;
  std::string levels = "kmeans";  // kvquant
  std::string rotation = "none";  // empty: the method's reference (method_param_dtype())
  void add_to(CLI::App& app);
  // The configuration for method `id`, validated by building its quantizer; an error names
  // `method_option` (e.g. "--method") when the method is unknown.
  Result<MethodConfig> resolve(std::string_view id, std::string_view method_option) const;
};

// The options of an eviction policy (--policy, --budget, --layer-budgets, --sinks,
// --recent-fraction, --recent, --threshold, --w-attention, --w-recency, --protect,
// --merge-similarity, --merge-window, and the prefill policies' --obs-window, --pool, --beta,
// --scorer, --safeguard, --chunk, --key-channels, --think-tokens, --future, --no-covariance,
// --no-value-norm, --merge-t, --retain), shared by 'kvlab evict' and 'kvlab quality'. What only
// the simulation takes (--steps, --needle, --top-k, --quant) belongs to 'kvlab evict'.
struct EvictionOptions {
  EvictionConfig config;
  std::string policy = "h2o";  // a command may change the default before add_to
  std::string budget = "0.25";
  std::vector<std::string> layer_budgets;
  std::string scorer = "snapkv";
  void add_to(CLI::App& app, const std::string& policy_help);
  // Parses --policy, --budget and --layer-budgets into a copy of `config`; the error names the
  // option.
  Result<EvictionConfig> resolve() const;
};

// --backend auto|cpu|cuda: where the engine's ops run (engine/backend.h).
struct BackendOption {
  std::string id = "auto";
  void add_to(CLI::App& app);
  // The backend; an error starting "--backend ID: " says why it is unavailable.
  Result<std::unique_ptr<Backend>> make() const;
};

// --db PATH (default: the user's data directory).
struct DbOption {
  std::string path;
  void add_to(CLI::App& app);
  // For commands that only read (and delete): a missing database is an error naming the file,
  // and nothing is created.
  Result<RunsStore> open_existing() const;
  // For commands that save: creates the database and its folder when missing.
  Result<RunsStore> open_for_saving() const;
  // The store when `save` is set (opened before any long work, so a bad --db fails fast), else
  // null.
  Result<std::unique_ptr<RunsStore>> open_if(bool save) const;
};

// The end of every command that makes a run: saves `run` when `store` is set (adding "run_id"
// to `j`), then prints `j` as JSON or calls `print_text`.
int save_and_print(RunsStore* store, const NewRun& run, nlohmann::json& j, bool json,
                   const std::function<void()>& print_text);

// The tokens a quality run scores and the text's name in its run record: the UTF-8 file
// `text_file` ("file:PATH"; the BOS its tokenizer adds left out, since windows add their own; at
// most `max_tokens` when positive), or, when it is empty, `sample` tokens of the model's own text
// ("sampled:N tokens, seed S"). Errors name `option` and the file. A text too short for
// `config` (plan_quality) fails before any sampling, not after it.
struct QualityText {
  std::vector<int> tokens;
  std::string source;
};
Result<QualityText> quality_text(const LoadedModel& loaded, const std::string& option,
                                 const std::string& text_file, int max_tokens, int sample,
                                 std::uint64_t seed, const QualityConfig& config);

// Ids of a registry (method_ids(), scheme_ids(), ...) for help text: "a | b | c", after `first`
// when given. Help lists come from the registries, so they cannot leave a method out.
std::string join_ids(const std::vector<std::string_view>& ids, std::string_view first = {},
                     std::string_view separator = " | ");

void add_compress_command(CLI::App& app);
void add_runs_command(CLI::App& app);
void add_sources_command(CLI::App& app);
void add_stream_command(CLI::App& app);
void add_bench_command(CLI::App& app);
// `kvlab bench run`, added to the `bench` command by add_bench_command.
void add_bench_run_command(CLI::App& bench);
void add_plan_command(CLI::App& app);
void add_models_command(CLI::App& app);
void add_gpus_command(CLI::App& app);
void add_methods_command(CLI::App& app);
void add_capture_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_quality_command(CLI::App& app);
void add_evict_command(CLI::App& app);
void add_sweep_command(CLI::App& app);

}  // namespace kvlab::cli
