// A job for the run lifecycle tests: it reports its progress every 2 ms until it is cancelled,
// through the real worker thread and progress mechanism (WorkerRunner) every page's runner uses,
// with no engine work behind it.
#pragma once

#include <chrono>
#include <thread>

#include "common/worker_runner.h"

namespace kvlab::gui {

class SteppingRunner : public WorkerRunner {
 public:
  bool start() {
    return launch([progress = progress_fn(0.0, 1.0)]() -> Completion {
      for (int step = 0; progress(step / 1000.0, "step"); ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      return {};
    });
  }
};

}  // namespace kvlab::gui
