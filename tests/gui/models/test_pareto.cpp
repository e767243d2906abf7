// The Pareto frontier of the Quality page, on hand-computed examples: which points no other
// point beats, in x order, and the step line through them, for each direction of the axes; and
// the Quality page's axes (eviction counted in memory, percent on the y axis).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "quality/pareto.h"
#include "quality/quality_results.h"

namespace kvlab::gui {
namespace {

// Compression ratio (higher is better) against perplexity change (lower is better).
const std::vector<ParetoPoint> kRatioPoints = {
    {2.0, 0.1},   // 0: on the frontier
    {4.0, 0.5},   // 1: on the frontier
    {3.0, 0.6},   // 2: beaten by 1 (more ratio, less change)
    {8.0, 5.0},   // 3: on the frontier (the most ratio)
    {6.0, 6.0},   // 4: beaten by 3
    {1.5, 0.05},  // 5: on the frontier (the least change)
    {2.0, 0.2},   // 6: beaten by 0 (same ratio, more change)
    {NAN, 0.0},   // 7: not a number: never on it
    {1.0, 0.05},  // 8: beaten by 5 (less ratio, same change)
};

TEST(Pareto, RatioAgainstPerplexityChange) {
  const ParetoAxes axes{Better::Higher, Better::Lower};
  EXPECT_EQ(pareto_frontier(kRatioPoints, axes), (std::vector<int>{5, 0, 1, 3}));
  EXPECT_TRUE(dominates(kRatioPoints[1], kRatioPoints[2], axes));
  EXPECT_TRUE(dominates(kRatioPoints[0], kRatioPoints[6], axes));
  EXPECT_FALSE(dominates(kRatioPoints[0], kRatioPoints[1], axes));
  EXPECT_FALSE(dominates(kRatioPoints[0], kRatioPoints[0], axes));  // not better than itself
  EXPECT_FALSE(dominates(kRatioPoints[7], kRatioPoints[8], axes));

  // Up from each point to the next one's change, then across to it: the edge of what the
  // frontier dominates (less ratio, more change).
  const std::vector<ParetoPoint> frontier = {{1.5, 0.05}, {2.0, 0.1}, {4.0, 0.5}, {8.0, 5.0}};
  const std::vector<ParetoPoint> expected = {{1.5, 0.05}, {1.5, 0.1}, {2.0, 0.1}, {2.0, 0.5},
                                             {4.0, 0.5},  {4.0, 5.0}, {8.0, 5.0}};
  EXPECT_EQ(pareto_staircase(frontier, axes), expected);
}

TEST(Pareto, BitsAgainstPerplexityChange) {
  // Bits per value (lower is better): the frontier falls from left to right.
  const std::vector<ParetoPoint> points = {{16, 0.0}, {8, 0.1}, {4, 0.5}, {5, 0.4},
                                           {2, 3.0},  {4, 0.7}, {8, 0.3}};
  const ParetoAxes axes{Better::Lower, Better::Lower};
  EXPECT_EQ(pareto_frontier(points, axes), (std::vector<int>{4, 2, 3, 1, 0}));
  const std::vector<ParetoPoint> frontier = {{2, 3.0}, {4, 0.5}, {5, 0.4}, {8, 0.1}, {16, 0.0}};
  const std::vector<ParetoPoint> expected = {{2, 3.0}, {4, 3.0}, {4, 0.5},  {5, 0.5}, {5, 0.4},
                                             {8, 0.4}, {8, 0.1}, {16, 0.1}, {16, 0.0}};
  EXPECT_EQ(pareto_staircase(frontier, axes), expected);
}

TEST(Pareto, AgreementAndEdgeCases) {
  // Next-token agreement (higher is better) against the ratio (higher is better).
  const std::vector<ParetoPoint> points = {{2, 99}, {4, 95}, {4, 97}, {8, 80}, {3, 90}};
  const ParetoAxes axes{Better::Higher, Better::Higher};
  EXPECT_EQ(pareto_frontier(points, axes), (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(pareto_staircase({{2, 99}, {4, 97}}, axes),
            (std::vector<ParetoPoint>{{2, 99}, {2, 97}, {4, 97}}));

  EXPECT_TRUE(pareto_frontier({}, axes).empty());
  EXPECT_TRUE(pareto_staircase({}, axes).empty());
  EXPECT_EQ(pareto_frontier({{1, 1}}, axes), (std::vector<int>{0}));
  // Equal points do not beat each other: both are on it, the step line has no corner.
  EXPECT_EQ(pareto_frontier({{1, 1}, {1, 1}, {0.5, 0.5}}, axes), (std::vector<int>{0, 1}));
  EXPECT_EQ(pareto_staircase({{1, 1}, {1, 1}}, axes), (std::vector<ParetoPoint>{{1, 1}, {1, 1}}));
}

TEST(Pareto, QualityAxesCountEvictionInMemory) {
  QualityPoint kivi;  // quantization: the measured ratio as it is
  kivi.method = "kivi-2 G=32 R=128";
  kivi.ratio = 4.0;
  kivi.bits_per_value = 4.0;
  kivi.perplexity_change = 0.02;
  kivi.next_token_agreement = 0.95;
  kivi.kl_mean = 0.01;
  QualityPoint h2o;  // eviction keeping 40% of the tokens: 2.5× less memory at fp16
  h2o.method = "h2o budget 50% recent 50%";
  h2o.kept_fraction = 0.4;
  h2o.perplexity_change = 0.01;
  h2o.next_token_agreement = 0.90;
  h2o.kl_mean = 0.02;
  EXPECT_DOUBLE_EQ(quality_x(h2o, QualityX::Ratio), 2.5);
  EXPECT_DOUBLE_EQ(quality_x(h2o, QualityX::BitsPerValue), 6.4);
  EXPECT_DOUBLE_EQ(quality_y(kivi, QualityY::PerplexityChange), 2.0);
  EXPECT_DOUBLE_EQ(quality_y(kivi, QualityY::Agreement), 95.0);
  EXPECT_DOUBLE_EQ(quality_y(kivi, QualityY::Kl), 0.01);

  const std::vector<QualityPoint> points = {h2o, kivi};
  // Perplexity: each is better on one axis, both on the frontier.
  EXPECT_EQ(quality_frontier(points, QualityX::Ratio, QualityY::PerplexityChange),
            (std::vector<bool>{true, true}));
  // Agreement and KL: KIVI-2 wins on both axes.
  EXPECT_EQ(quality_frontier(points, QualityX::Ratio, QualityY::Agreement),
            (std::vector<bool>{false, true}));
  const QualityChartData data =
      quality_chart_data(points, QualityX::BitsPerValue, QualityY::Kl, QStringLiteral("t"));
  ASSERT_EQ(data.points.size(), 2u);
  EXPECT_EQ(data.points[0].label, QStringLiteral("H2O 50%"));
  EXPECT_EQ(data.points[1].label, QStringLiteral("KIVI-2"));
  EXPECT_FALSE(data.points[0].frontier);
  EXPECT_TRUE(data.points[1].frontier);
  EXPECT_EQ(data.staircase, (std::vector<ParetoPoint>{{4.0, 0.01}}));
}

}  // namespace
}  // namespace kvlab::gui
