// A runs database of three real runs (two KIVI compression runs of a tiny synthetic cache and a
// quality run with eviction), shared by the Runs page test and the Runs model test.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>

#include "gui_test_support.h"
#include "kvlab/store/run_records.h"
#include "kvlab/store/runs_store.h"
#include "sample_runs.h"

namespace kvlab::gui_test {

inline NewRun compression_of(int bits, int context) {
  SyntheticConfig source = tiny_source();
  source.context = context;
  MethodConfig method;
  method.kind = MethodKind::Kivi;
  method.bits = bits;
  method.group_size = 8;
  method.residual = 16;
  return compression_run(engine_report(source, method));
}

inline NewRun quality_with_eviction() {
  QualityConfig config;
  config.eviction = EvictionConfig{};
  return quality_run(test::kivi2_with_h2o_at_20_percent(), config,
                     {"smollm2.gguf", "file:text.txt", 1024, ""});
}

struct ThreeRuns {
  std::filesystem::path db;
  std::shared_ptr<RunsStore> store;
  std::int64_t kivi2 = 0, kivi4 = 0, quality = 0;
};

inline ThreeRuns store_with_three_runs() {
  ThreeRuns p;
  p.db = fresh_dir() / "runs.sqlite";
  p.store = std::make_shared<RunsStore>(RunsStore::open(p.db).value());
  p.kivi2 = p.store->save_run(compression_of(2, 96)).value();
  p.kivi4 = p.store->save_run(compression_of(4, 128)).value();
  p.quality = p.store->save_run(quality_with_eviction()).value();
  return p;
}

}  // namespace kvlab::gui_test
