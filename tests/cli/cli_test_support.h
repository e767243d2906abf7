// Running the real kvlab binary from the CLI tests: stdout and stderr together, and the exit code.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace kvlab::cli_test {

struct Output {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `kvlab ARGS` through the shell, with `env` (e.g. "KVLAB_DB='...'") in front when given.
inline Output run_kvlab(const std::string& args, const std::string& env = {}) {
  const std::string cmd =
      (env.empty() ? "" : env + " ") + std::string(KVLAB_CLI_PATH) + " " + args + " 2>&1";
  Output o;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return o;
  std::array<char, 4096> buf;
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) o.out.append(buf.data(), n);
  const int status = pclose(p);
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return o;
}

}  // namespace kvlab::cli_test
