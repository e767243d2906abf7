#include "cli_sweep_slurm.h"

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/io/json_text.h"

extern char** environ;

namespace kvlab::cli {
namespace {

namespace fs = std::filesystem;

// A word the shell reads back as exactly `text`.
std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// sbatch reads `#SBATCH --output=PATH` without a shell, and gives '%' a meaning of its own: a
// folder with such characters cannot be written there faithfully.
bool fits_an_sbatch_line(const std::string& path) {
  for (const unsigned char c : path) {
    if (std::isspace(c) || c == '\'' || c == '"' || c == '%' || c == '\\') return false;
  }
  return true;
}

// "kvlab-sweep-quality_smol" from "/data/quality smol.json": a job name squeue shows whole.
std::string job_name(const fs::path& sweep_file) {
  std::string name = "kvlab-sweep-";
  for (const char c : sweep_file.stem().string()) {
    const bool plain = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
    name += plain ? c : '_';
  }
  return name;
}

struct ProgramOutput {
  int exit_status = 0;  // the exit code, or 128 + signal
  std::string out;
  std::string err;
};

// Runs `argv[0]` (looked up on PATH) without a shell, its standard output and error read apart.
Result<ProgramOutput> run_program(const std::vector<std::string>& argv) {
  std::array<int, 2> out_pipe{-1, -1}, err_pipe{-1, -1};
  if (pipe(out_pipe.data()) != 0 || pipe(err_pipe.data()) != 0) {
    return make_error(fmt::format("{}: cannot make a pipe: {}", argv[0], std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  for (const int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
    posix_spawn_file_actions_addclose(&actions, fd);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (spawned != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    return make_error(spawned == ENOENT
                          ? fmt::format("{}: not found on PATH", argv[0])
                          : fmt::format("{}: cannot start: {}", argv[0], std::strerror(spawned)));
  }
  ProgramOutput result;
  std::array<pollfd, 2> fds{pollfd{out_pipe[0], POLLIN, 0}, pollfd{err_pipe[0], POLLIN, 0}};
  std::array<std::string*, 2> sinks{&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      std::array<char, 4096> buf;
      const ssize_t n = read(fds[i].fd, buf.data(), buf.size());
      if (n > 0) {
        sinks[i]->append(buf.data(), static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// A program's output on one line: trailing space dropped, lines joined by "; ".
std::string trimmed(std::string text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at)) {
    text.replace(at, 1, "; ");
  }
  return text;
}

struct ArrayScript {
  fs::path dir, script, logs, parts, sweep, kvlab, workdir;
  int part_count = 0;
  std::string merge_command;
};

std::string script_text(const ArrayScript& a, const SlurmArrayOptions& o, std::size_t items) {
  const std::string part_db = (a.parts / "part-").string();
  std::string text = "#!/bin/bash\n";
  text += fmt::format("#SBATCH --job-name={}\n", job_name(a.sweep));
  text += fmt::format("#SBATCH --array=1-{}\n", a.part_count);
  text += "#SBATCH --ntasks=1\n";
  text += fmt::format("#SBATCH --output={}\n", (a.logs / "part-%a.log").string());
  for (const auto& line : o.sbatch_lines) text += fmt::format("#SBATCH {}\n", line);
  text += fmt::format(
      "#\n"
      "# The {} items of {} as a Slurm array of {} tasks, written by 'kvlab sweep --slurm'.\n"
      "# Task K makes part K of {} (the items whose number is K-1 modulo {}) into its own\n"
      "# database, {}K.sqlite\n"
      "# (SQLite on a network file system is not safe to share between nodes). A part run\n"
      "# again resumes (the items its database holds are skipped), so a cancelled or failed\n"
      "# part is made whole by submitting it again:\n"
      "#   sbatch --array=K {}\n"
      "# When the array is done, merge the parts; the merge names the parts still missing:\n"
      "#   {}\n"
      "set -eu\n"
      "# Relative paths in the sweep file mean what they meant where this script was written.\n"
      "cd {}\n"
      "exec {} sweep {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{}\" \\\n"
      "    --db {}\"${{SLURM_ARRAY_TASK_ID}}\".sqlite{}\n",
      items, a.sweep.string(), a.part_count, a.part_count, a.part_count, part_db, a.script.string(),
      a.merge_command, shell_quoted(a.workdir.string()), shell_quoted(a.kvlab.string()),
      shell_quoted(a.sweep.string()), a.part_count, shell_quoted(part_db),
      o.backend == "auto" ? "" : " --backend " + shell_quoted(o.backend));
  return text;
}

// Checks the input and makes the folders; nothing is created when the input is bad.
Result<ArrayScript> prepare(const SlurmArrayOptions& o, const std::string& sweep_file,
                            std::size_t items) {
  ArrayScript a;
  a.part_count =
      o.parts ? *o.parts : static_cast<int>(std::min<std::size_t>(items, kDefaultMaxParts));
  if (a.part_count < 1) {
    return make_error(fmt::format("--parts {}: a sweep needs at least 1 part", a.part_count));
  }
  if (static_cast<std::size_t>(a.part_count) > items) {
    return make_error(fmt::format(
        "--parts {}: {} has only {} item{}, so at most {} part{} (a part without items would "
        "make nothing)",
        a.part_count, sweep_file, items, items == 1 ? "" : "s", items, items == 1 ? "" : "s"));
  }
  for (const auto& line : o.sbatch_lines) {
    if (line.empty() || line[0] != '-' || line.find('\n') != std::string::npos) {
      return make_error(fmt::format(
          "--sbatch \"{}\": give one sbatch option, such as --sbatch=--time=01:00:00", line));
    }
  }
  if (o.dir.empty()) return make_error("--slurm: give the folder to write the job into");
  std::error_code ec;
  a.dir = fs::absolute(o.dir, ec).lexically_normal();
  if (ec) return make_error(fmt::format("--slurm {}: {}", o.dir, ec.message()));
  if (!fits_an_sbatch_line(a.dir.string())) {
    return make_error(fmt::format(
        "--slurm {}: Slurm's #SBATCH lines cannot hold a folder with spaces, quotes, '%' or "
        "'\\'; choose another folder",
        o.dir));
  }
  a.sweep = fs::weakly_canonical(fs::absolute(sweep_file), ec);
  if (ec) return make_error(fmt::format("{}: {}", sweep_file, ec.message()));
  a.kvlab = fs::read_symlink("/proc/self/exe", ec);
  if (ec) {
    return make_error(fmt::format(
        "cannot tell where this kvlab program is (/proc/self/exe: {}), which the job must run",
        ec.message()));
  }
  a.workdir = fs::current_path(ec);
  if (ec) return make_error(fmt::format("the current folder: {}", ec.message()));
  a.script = a.dir / "sweep.sbatch";
  a.logs = a.dir / "logs";
  a.parts = a.dir / "parts";
  for (const fs::path& folder : {a.logs, a.parts}) {
    fs::create_directories(folder, ec);
    if (ec || !fs::is_directory(folder) || access(folder.c_str(), W_OK) != 0) {
      return make_error(fmt::format("--slurm {}: cannot make the writable folder {}: {}", o.dir,
                                    folder.string(),
                                    ec ? ec.message() : std::string("permission denied")));
    }
  }
  a.merge_command = fmt::format("{} runs import --sweep {} --parts {} {}/part-*.sqlite --db {}",
                                shell_quoted(a.kvlab.string()), shell_quoted(a.sweep.string()),
                                a.part_count, a.parts.string(), (a.dir / "all.sqlite").string());
  return a;
}

}  // namespace

int write_slurm_array(const SlurmArrayOptions& o, const std::string& sweep_file,
                      const SweepPlan& plan, bool json) {
  auto a = prepare(o, sweep_file, plan.items.size());
  if (!a) return fail(a.message());
  const std::string text = script_text(*a, o, plan.items.size());
  {
    std::ofstream f(a->script, std::ios::binary | std::ios::trunc);
    if (!f || !f.write(text.data(), static_cast<std::streamsize>(text.size())) || !f.flush()) {
      return fail(fmt::format("--slurm {}: cannot write {}", o.dir, a->script.string()));
    }
  }
  std::error_code ec;
  fs::permissions(a->script, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                  fs::perm_options::add, ec);

  std::string job_id;
  if (o.submit) {
    const std::vector<std::string> command{"sbatch", "--parsable", a->script.string()};
    const std::string shown = fmt::format("sbatch --parsable {}", a->script.string());
    auto ran = run_program(command);
    if (!ran) {
      return fail(fmt::format(
          "cannot submit the job: {} ({}); the script {} is written: submit it where Slurm's "
          "commands are",
          ran.message(), shown, a->script.string()));
    }
    if (ran->exit_status != 0) {
      return fail(fmt::format("'{}' failed (exit status {}): {}", shown, ran->exit_status,
                              trimmed(ran->err.empty() ? ran->out : ran->err)));
    }
    // --parsable prints "JOBID" or "JOBID;CLUSTER".
    job_id = trimmed(ran->out.substr(0, ran->out.find(';')));
    if (job_id.empty() || job_id.find_first_not_of("0123456789") != std::string::npos) {
      return fail(fmt::format("'{}' printed no job id: \"{}\"", shown, trimmed(ran->out)));
    }
  }

  if (json) {
    nlohmann::json out = {{"script", a->script.string()},
                          {"parts", a->part_count},
                          {"items", plan.items.size()},
                          {"databases", (a->parts / "part-K.sqlite").string()},
                          {"logs", (a->logs / "part-K.log").string()},
                          {"merge", a->merge_command},
                          {"job_id", job_id.empty() ? nlohmann::json() : nlohmann::json(job_id)}};
    fmt::print("{}\n", json_text(out, 2));
    return 0;
  }
  fmt::print("wrote {}: {} array tasks for the {} items of {}, task K into {}, its log {}\n",
             a->script.string(), a->part_count, plan.items.size(), a->sweep.string(),
             (a->parts / "part-K.sqlite").string(), (a->logs / "part-K.log").string());
  if (job_id.empty()) {
    fmt::print("submit it with: sbatch {}\n", a->script.string());
  } else {
    fmt::print("submitted job {}\n", job_id);
  }
  fmt::print("when it is done, merge the parts: {}\n", a->merge_command);
  return 0;
}

}  // namespace kvlab::cli
