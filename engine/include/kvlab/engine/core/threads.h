// How many threads the engine's parallel loops (oneTBB) may use, and the one loop they share.
#pragma once

#include <functional>
#include <memory>
#include <stop_token>
#include <string_view>

#include "kvlab/engine/core/progress.h"
#include "kvlab/engine/core/result.h"

namespace kvlab {

// Caps the engine's worker threads at `threads` (at least 1) while the returned handle lives;
// 0 leaves the default (every core). For benchmarks that compare thread counts, and for
// `--threads` options.
std::shared_ptr<void> limit_threads(int threads);

// The threads the engine's parallel loops use now.
int worker_threads();

namespace detail {
struct LoopState;
}

// What one item of for_each_item sees of its loop: whether to go on, and a way to say how far
// it is. Long items call keep_going() every few tens of milliseconds of work, so a cancel takes
// effect within that, not at the end of the item. Thread-safe; never calls the user's callback.
class ItemProgress {
 public:
  ItemProgress(detail::LoopState& loop, int item) : m_loop(loop), m_item(item) {}
  // Records `part` (0..1) of this item as done; kCancelledMessage once the user cancelled or
  // another item failed, which the item returns (KVLAB_TRY(progress.keep_going(part))).
  Status keep_going(double part = 0);
  // Requested when keep_going() would say cancelled: for the engine's long computations that
  // take a std::stop_token (attention_errors), to stop between blocks; the item then returns
  // keep_going()'s error.
  std::stop_token stop_token() const;

 private:
  detail::LoopState& m_loop;
  int m_item;
};

// A long computation deep inside one item (a quantizer's calibration, whose interface has no
// progress) reports how far it has got, and learns of a cancel, through inner_progress(): while
// an InnerProgressScope lives on this thread, inner_progress(f) is the item's
// keep_going(from + f × (to − from)); without one it is Ok and does nothing. Scopes nest.
class InnerProgressScope {
 public:
  InnerProgressScope(ItemProgress& progress, double from, double to);
  ~InnerProgressScope();
  InnerProgressScope(const InnerProgressScope&) = delete;
  InnerProgressScope& operator=(const InnerProgressScope&) = delete;

 private:
  friend Status inner_progress(double fraction);
  ItemProgress& m_progress;
  double m_from, m_to;
  InnerProgressScope* m_outer;
};
// kCancelledMessage once the user cancelled; the computation returns it as it is.
Status inner_progress(double fraction);

// Runs body(i, progress) once for every i in [0, items) on the engine's threads (oneTBB), in any
// order and in parallel, so `body` writes only its own item's results; callers reduce them in
// index order afterwards, which keeps results bit-identical to one thread.
//
// With a `progress` callback the calling thread does none of the items: it reports every 50 ms
// (the share of items done, parts of items in flight included, and "<done> of <items>
// <noun>s"), and when the callback asks to stop, the items see it at their next keep_going().
// The callback is only ever called from the calling thread, so it need not be thread-safe.
// Returns the error of the lowest failing item, or kCancelledMessage when the callback asked to
// stop.
Status for_each_item(int items, const ProgressFn& progress, std::string_view noun,
                     const std::function<Status(int item, ItemProgress& progress)>& body);

}  // namespace kvlab
