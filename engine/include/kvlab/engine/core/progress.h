// Progress reporting for long work. The callback gets the fraction done (0..1) and a short
// description of the stage; returning false asks the work to stop, which then returns an
// Error whose message is kCancelledMessage.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kvlab {

using ProgressFn = std::function<bool(double fraction, std::string_view stage)>;

inline constexpr std::string_view kCancelledMessage = "cancelled by the user";

// `fn` with `prefix` before each stage ("stream: " and "3 of 32 layers"); empty when `fn` is.
inline ProgressFn with_stage_prefix(const ProgressFn& fn, std::string prefix) {
  if (!fn) return {};
  return [fn, prefix = std::move(prefix)](double fraction, std::string_view stage) {
    return fn(fraction, prefix + std::string(stage));
  };
}

// Calls `fn` when set; true means "go on".
inline bool report_progress(const ProgressFn& fn, double fraction, std::string_view stage) {
  return !fn || fn(fraction, stage);
}

}  // namespace kvlab
