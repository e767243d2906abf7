// The 95% interval every quality number carries (issue 48): the two-sided 95% point of the normal
// distribution, and whether value ± that many standard errors holds a given number (0: the
// change is within noise of exact; a limit: the measurement cannot tell which side it is on).
#pragma once

#include <cmath>

namespace kvlab {

inline constexpr double kZ95 = 1.959964;

// Whether value ± kZ95 · se holds x; false when se is NaN.
inline bool interval_holds(double value, double se, double x) {
  return std::fabs(value - x) <= kZ95 * se;
}

}  // namespace kvlab
