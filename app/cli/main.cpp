// kvlab: the command line of the KV-cache compression lab.
#include <CLI/CLI.hpp>

#include "cli_common.h"
#include "kvlab/app/backends.h"
#include "kvlab/engine/core/process_memory.h"
#include "kvlab/engine/core/utf8.h"

int main(int argc, char** argv) {
  kvlab::release_large_buffers_when_freed();
  kvlab::register_backends();
  CLI::App app{
      "kvlab: a lab and capacity planner for LLM key/value-cache compression.\n"
      "Compress real or synthetic KV caches, measure ratio and error, keep every run."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kvlab 0.1.0");
  kvlab::cli::add_compress_command(app);
  kvlab::cli::add_methods_command(app);
  kvlab::cli::add_runs_command(app);
  kvlab::cli::add_sources_command(app);
  kvlab::cli::add_stream_command(app);
  kvlab::cli::add_evict_command(app);
  kvlab::cli::add_capture_command(app);
  kvlab::cli::add_generate_command(app);
  kvlab::cli::add_quality_command(app);
  kvlab::cli::add_sweep_command(app);
  kvlab::cli::add_plan_command(app);
  kvlab::cli::add_models_command(app);
  kvlab::cli::add_gpus_command(app);
  kvlab::cli::add_bench_command(app);
  // An unknown command gets the nearest ones, not CLI11's "argument was not expected".
  if (auto unknown = kvlab::cli::unknown_command(app, argc, argv)) {
    std::fprintf(stderr, "kvlab: %s\nRun 'kvlab --help' or 'kvlab <command> --help'.\n",
                 unknown->c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, then where to look.
    std::fprintf(stderr, "kvlab: %s\nRun 'kvlab --help' or 'kvlab <command> --help'.\n",
                 kvlab::terminal_text(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    // Whatever a command let escape ends it with one line, never an abort.
    return kvlab::cli::fail(std::string("internal error: ") + e.what());
  }
  return kvlab::cli::exit_code();
}
