#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

#include "kvlab/store/runs_store.h"

namespace kvlab {

namespace {

// Null for an unset or empty variable.
const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

std::filesystem::path home_dir() {
  if (const char* home = env("HOME")) return home;
  // No $HOME (a service, a stripped environment): ask the password database.
  std::vector<char> buffer(16384);
  passwd entry{};
  passwd* found = nullptr;
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && *found->pw_dir != '\0') {
    return found->pw_dir;
  }
  return {};  // relative to the working folder, as a last resort
}

}  // namespace

std::filesystem::path default_db_path() {
  if (const char* db = env("KVLAB_DB")) return db;
  // The XDG base directory spec ignores relative paths in $XDG_DATA_HOME.
  if (const char* data = env("XDG_DATA_HOME"); data != nullptr && data[0] == '/') {
    return std::filesystem::path(data) / "kvlab" / "runs.sqlite";
  }
  return home_dir() / ".local" / "share" / "kvlab" / "runs.sqlite";
}

}  // namespace kvlab
