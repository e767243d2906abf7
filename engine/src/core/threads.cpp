// Thread limits for the engine's oneTBB loops, and the loop they share (see threads.h).
#include "kvlab/engine/core/threads.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

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

namespace detail {

struct LoopState {
  explicit LoopState(int items) : parts(static_cast<std::size_t>(items)) {}
  std::vector<std::atomic<float>> parts;  // share of each item done, 1 when finished
  std::stop_source stop;                  // requested when the user cancels or an item fails
  std::mutex mutex;
  std::optional<std::pair<int, Error>> first_error;  // the lowest failing item, failures first

  void fail(int item, Error error) {
    // An item that stopped because another failed (or the user cancelled) says "cancelled": a
    // real failure wins over it, and the lowest item among equals.
    const bool stopped = error.message == kCancelledMessage;
    std::lock_guard lock(mutex);
    const bool first_stopped = first_error && first_error->second.message == kCancelledMessage;
    if (!first_error || (first_stopped && !stopped) ||
        (first_stopped == stopped && item < first_error->first)) {
      first_error.emplace(item, std::move(error));
    }
    stop.request_stop();
  }
};

}  // namespace detail

Status ItemProgress::keep_going(double part) {
  m_loop.parts[static_cast<std::size_t>(m_item)].store(
      static_cast<float>(std::clamp(part, 0.0, 1.0)), std::memory_order_relaxed);
  if (m_loop.stop.stop_requested()) return make_error(std::string(kCancelledMessage));
  return Ok{};
}

namespace {
thread_local InnerProgressScope* t_inner_scope = nullptr;
}  // namespace

InnerProgressScope::InnerProgressScope(ItemProgress& progress, double from, double to)
    : m_progress(progress), m_from(from), m_to(to), m_outer(t_inner_scope) {
  t_inner_scope = this;
}

InnerProgressScope::~InnerProgressScope() {
  t_inner_scope = m_outer;
}

Status inner_progress(double fraction) {
  InnerProgressScope* scope = t_inner_scope;
  if (!scope) return Ok{};
  const double f = std::clamp(fraction, 0.0, 1.0);
  return scope->m_progress.keep_going(scope->m_from + f * (scope->m_to - scope->m_from));
}

std::stop_token ItemProgress::stop_token() const {
  return m_loop.stop.get_token();
}

namespace {

void run_items(detail::LoopState& loop, int items,
               const std::function<Status(int, ItemProgress&)>& body) {
  // One task per item (grain 1, simple partitioner): items are large (a layer, a chunk).
  tbb::parallel_for(
      tbb::blocked_range<int>(0, items, 1),
      [&](const tbb::blocked_range<int>& range) {
        for (int i = range.begin(); i < range.end(); ++i) {
          if (loop.stop.stop_requested()) return;
          ItemProgress p(loop, i);
          Status s = body(i, p);
          if (!s) {
            loop.fail(i, s.error());
            return;
          }
          loop.parts[static_cast<std::size_t>(i)].store(1.0f, std::memory_order_relaxed);
        }
      },
      tbb::simple_partitioner());
}

}  // namespace

Status for_each_item(int items, const ProgressFn& progress, std::string_view noun,
                     const std::function<Status(int, ItemProgress&)>& body) {
  if (items <= 0) return Ok{};
  detail::LoopState loop(items);
  bool cancelled = false;
  if (!progress) {
    run_items(loop, items, body);
  } else {
    const auto report = [&] {
      double sum = 0;
      int done = 0;
      for (const auto& p : loop.parts) {
        const float v = p.load(std::memory_order_relaxed);
        sum += v;
        done += v >= 1.0f;
      }
      if (!progress(std::min(1.0, sum / items), fmt::format("{} of {} {}s", done, items, noun))) {
        cancelled = true;
        loop.stop.request_stop();
      }
    };
    report();
    std::mutex mutex;
    std::condition_variable finished_cv;
    bool finished = false;
    std::exception_ptr thrown;
    std::thread runner([&] {
      try {
        if (!loop.stop.stop_requested()) run_items(loop, items, body);
      } catch (...) {
        thrown = std::current_exception();
      }
      std::lock_guard lock(mutex);
      finished = true;
      finished_cv.notify_all();
    });
    {
      std::unique_lock lock(mutex);
      while (!finished_cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return finished; })) {
        lock.unlock();
        if (!cancelled) report();
        lock.lock();
      }
    }
    runner.join();
    if (thrown) std::rethrow_exception(thrown);
    if (!cancelled && !loop.first_error) report();
  }
  if (loop.first_error && (loop.first_error->second.message != kCancelledMessage || !cancelled)) {
    return loop.first_error->second;
  }
  if (cancelled) return make_error(std::string(kCancelledMessage));
  return Ok{};
}

}  // namespace kvlab
