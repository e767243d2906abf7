// kvlab_store_test_client DB LABEL: a second process on a runs database, for the store tests.
// Lists every run (closing that connection is where SQLite deletes the WAL when it believes it
// is the last user of the file), then saves one sample run labelled LABEL and prints its id.
// Exit status 0 on success, 1 with a one-line message on standard error otherwise.
#include <cstdio>
#include <filesystem>

#include "kvlab/store/runs_store.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s DB LABEL\n", argv[0]);
    return 1;
  }
  const std::filesystem::path db = argv[1];
  {
    auto store = kvlab::RunsStore::open(db);
    if (!store) {
      std::fprintf(stderr, "%s\n", store.message().c_str());
      return 1;
    }
    if (auto listed = store->list_runs(-1); !listed) {
      std::fprintf(stderr, "%s\n", listed.message().c_str());
      return 1;
    }
  }
  auto store = kvlab::RunsStore::open(db);
  if (!store) {
    std::fprintf(stderr, "%s\n", store.message().c_str());
    return 1;
  }
  kvlab::NewRun run;
  run.kind = "compression";
  run.source = "synthetic:tiny";
  run.method = "int8";
  run.label = argv[2];
  run.params = {{"bits", 8}};
  run.metrics = {{"ratio", 2.0}};
  auto id = store->save_run(run);
  if (!id) {
    std::fprintf(stderr, "%s\n", id.message().c_str());
    return 1;
  }
  std::printf("%lld\n", static_cast<long long>(*id));
  return 0;
}
