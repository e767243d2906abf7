// Progress reporting for long work. The callback gets the fraction done (0..1) and a short
// description of the stage; returning false asks the work to stop, which then returns an
// Error whose message is kCancelledMessage.
#pragma once

#include <functional>
#include <string_view>

namespace kvlab {

using ProgressFn = std::function<bool(double fraction, std::string_view stage)>;

inline constexpr std::string_view kCancelledMessage = "cancelled by the user";

// Calls `fn` when set; true means "go on".
inline bool report_progress(const ProgressFn& fn, double fraction, std::string_view stage) {
  return !fn || fn(fraction, stage);
}

}  // namespace kvlab
