// kvlab_fuzz_replay: runs saved inputs through the fuzz targets without libFuzzer, so that every
// build (GCC's too) replays the corpus and the inputs that once crashed as an ordinary test
// (zstd's tests/fuzz/regression_driver.c). Every target is linked in under its own name,
// kvlab_fuzz_<name> (fuzz_target.h); fuzz_targets.inc, written by CMake, lists them.
//
//   kvlab_fuzz_replay TARGET PATH...   each PATH a file, or a folder read recursively
//   kvlab_fuzz_replay --list           the target names
//
// Each input is copied into a buffer of exactly its size, so that a read past the end is caught
// by ASan as libFuzzer would catch it. A crash ends the program; the line before it names the
// input.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#define KVLAB_FUZZ_TARGET(name) \
  extern "C" int kvlab_fuzz_##name(const std::uint8_t* data, std::size_t size);
#include "fuzz_targets.inc"
#undef KVLAB_FUZZ_TARGET

namespace {

namespace fs = std::filesystem;
using Entry = int (*)(const std::uint8_t*, std::size_t);

struct Target {
  std::string_view name;
  Entry entry;
};

constexpr Target kTargets[] = {
#define KVLAB_FUZZ_TARGET(name) {#name, &kvlab_fuzz_##name},
#include "fuzz_targets.inc"
#undef KVLAB_FUZZ_TARGET
};

// Regular files under `path` (or `path` itself), sorted, hidden files (.gitkeep) left out.
std::vector<fs::path> inputs_under(const fs::path& path) {
  std::vector<fs::path> out;
  if (fs::is_regular_file(path)) return {path};
  for (const auto& entry : fs::recursive_directory_iterator(path)) {
    if (entry.is_regular_file() && entry.path().filename().string().front() != '.') {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

int usage() {
  std::fprintf(stderr, "usage: kvlab_fuzz_replay TARGET PATH...  |  kvlab_fuzz_replay --list\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == "--list") {
    for (const Target& t : kTargets) std::printf("%.*s\n", int(t.name.size()), t.name.data());
    return 0;
  }
  if (argc < 3) return usage();
  const auto target = std::find_if(std::begin(kTargets), std::end(kTargets),
                                   [&](const Target& t) { return t.name == argv[1]; });
  if (target == std::end(kTargets)) {
    std::fprintf(stderr, "kvlab_fuzz_replay: no target '%s' (--list names them)\n", argv[1]);
    return 2;
  }
  const auto start = std::chrono::steady_clock::now();
  std::size_t files = 0, bytes = 0;
  for (int a = 2; a < argc; ++a) {
    if (!fs::exists(argv[a])) {
      std::fprintf(stderr, "kvlab_fuzz_replay: %s does not exist\n", argv[a]);
      return 2;
    }
    for (const fs::path& path : inputs_under(argv[a])) {
      std::ifstream in(path, std::ios::binary);
      const std::vector<char> text{std::istreambuf_iterator<char>(in),
                                   std::istreambuf_iterator<char>()};
      const auto data = std::make_unique<std::uint8_t[]>(text.size());
      std::copy(text.begin(), text.end(), data.get());
      std::fprintf(stderr, "%s\n", path.c_str());  // the last line names a crashing input
      target->entry(data.get(), text.size());
      ++files;
      bytes += text.size();
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%s: %zu inputs, %zu bytes, %.2f s, no crash\n", argv[1], files, bytes, seconds);
  return 0;
}
