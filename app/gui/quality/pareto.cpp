#include "quality/pareto.h"

#include <algorithm>
#include <cmath>

namespace kvlab::gui {

namespace {

// How much better `a` is than `b` on one axis: positive when better, 0 when equal.
double gain(double a, double b, Better better) {
  return better == Better::Higher ? a - b : b - a;
}

bool finite(const ParetoPoint& p) {
  return std::isfinite(p.x) && std::isfinite(p.y);
}

double worse(double a, double b, Better better) {
  return gain(a, b, better) < 0 ? a : b;
}

}  // namespace

bool dominates(const ParetoPoint& a, const ParetoPoint& b, ParetoAxes axes) {
  if (!finite(a) || !finite(b)) return false;
  const double gx = gain(a.x, b.x, axes.x), gy = gain(a.y, b.y, axes.y);
  return gx >= 0 && gy >= 0 && (gx > 0 || gy > 0);
}

std::vector<int> pareto_frontier(const std::vector<ParetoPoint>& points, ParetoAxes axes) {
  std::vector<int> frontier;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!finite(points[i])) continue;
    const bool beaten = std::any_of(points.begin(), points.end(), [&](const ParetoPoint& other) {
      return dominates(other, points[i], axes);
    });
    if (!beaten) frontier.push_back(static_cast<int>(i));
  }
  std::stable_sort(frontier.begin(), frontier.end(), [&](int a, int b) {
    const ParetoPoint &pa = points[static_cast<std::size_t>(a)],
                      &pb = points[static_cast<std::size_t>(b)];
    return pa.x != pb.x ? pa.x < pb.x : pa.y < pb.y;
  });
  return frontier;
}

std::vector<ParetoPoint> pareto_staircase(const std::vector<ParetoPoint>& frontier,
                                          ParetoAxes axes) {
  std::vector<ParetoPoint> line;
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    if (i > 0) {
      const ParetoPoint& a = frontier[i - 1];
      const ParetoPoint& b = frontier[i];
      const ParetoPoint corner{worse(a.x, b.x, axes.x), worse(a.y, b.y, axes.y)};
      if (corner != a && corner != b) line.push_back(corner);
    }
    line.push_back(frontier[i]);
  }
  return line;
}

}  // namespace kvlab::gui
