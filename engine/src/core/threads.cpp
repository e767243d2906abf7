// Thread limits for the engine's oneTBB loops (see threads.h).
#include "kvlab/engine/core/threads.h"

#include <tbb/global_control.h>

namespace kvlab {

std::shared_ptr<void> limit_threads(int threads) {
  if (threads <= 0) return nullptr;
  return std::make_shared<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                               static_cast<std::size_t>(threads));
}

int worker_threads() {
  return static_cast<int>(
      tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

}  // namespace kvlab
