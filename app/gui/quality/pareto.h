// The Pareto frontier of configurations measured on two axes (e.g. compression ratio against
// perplexity change): the points no other point beats. Plain numbers in, indices out; no Qt, no
// engine, so it is tested on hand-computed examples.
#pragma once

#include <vector>

namespace kvlab::gui {

struct ParetoPoint {
  double x = 0, y = 0;
  bool operator==(const ParetoPoint&) const = default;
};

// Which end of an axis is better: a higher compression ratio, a lower perplexity change.
enum class Better { Higher, Lower };

struct ParetoAxes {
  Better x = Better::Higher;
  Better y = Better::Lower;
};

// True when `a` dominates `b`: at least as good on both axes and strictly better on one.
bool dominates(const ParetoPoint& a, const ParetoPoint& b, ParetoAxes axes);

// Indices of the points that no other point dominates, sorted by x ascending (then y
// ascending). Points with a NaN or infinite coordinate are never on the frontier and dominate
// nothing. Equal points do not dominate each other, so duplicates are all on it.
std::vector<int> pareto_frontier(const std::vector<ParetoPoint>& points, ParetoAxes axes);

// The frontier (points sorted by x ascending, as pareto_frontier orders them) as a step line:
// between two neighbours it turns at the corner both of them dominate (the worse x with the
// worse y of the pair), so the line is the edge of the region the frontier dominates.
std::vector<ParetoPoint> pareto_staircase(const std::vector<ParetoPoint>& frontier,
                                          ParetoAxes axes);

}  // namespace kvlab::gui
