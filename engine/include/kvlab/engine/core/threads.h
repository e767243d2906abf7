// How many threads the engine's parallel loops (oneTBB) may use.
#pragma once

#include <memory>

namespace kvlab {

// Caps the engine's worker threads at `threads` (at least 1) while the returned handle lives;
// 0 leaves the default (every core). For benchmarks that compare thread counts, and for
// `--threads` options.
std::shared_ptr<void> limit_threads(int threads);

// The threads the engine's parallel loops use now.
int worker_threads();

}  // namespace kvlab
