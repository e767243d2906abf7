// The Quality page's models alone: the table over plain points (cells, run ids, the Pareto and
// "within noise" marks, header tooltips) under QAbstractItemModelTester, and the configurations
// the page offers.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include <QAbstractItemModelTester>

#include "common/gui_format.h"
#include "quality/quality_configs.h"
#include "quality/quality_results.h"

namespace kvlab::gui {
namespace {

// The table's model over plain points: what each cell shows, the run id behind each row, the
// Pareto mark, and header tooltips; QAbstractItemModelTester watches every reset.
TEST(QualityTable, ShowsEachPointsNumbersAndPassesTheModelTester) {
  QualityTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  QualityPoint a;
  a.run_id = 7;
  a.method = "int8 per-tensor";
  a.ratio = 2.0;
  a.bits_per_value = 8.0;
  a.perplexity_exact = 4.0;
  a.perplexity = 4.1;
  a.perplexity_change = 0.025;
  a.next_token_agreement = 0.97;
  a.kl_mean = 0.0123;
  QualityPoint b = a;
  b.run_id = 9;
  b.method = "h2o budget 50% recent 50%";
  b.kept_fraction = 0.5;
  model.set_points({a, b}, {true, false});
  ASSERT_EQ(model.rowCount(), 2);
  ASSERT_EQ(model.columnCount(), kQualityColumnCount);
  const auto cell = [&](int row, int column) { return model.index(row, column).data().toString(); };
  EXPECT_EQ(cell(0, kQualityRun), QStringLiteral("7"));
  EXPECT_EQ(cell(0, kQualityConfiguration), QStringLiteral("INT8"));
  EXPECT_EQ(model.index(0, kQualityConfiguration).data(Qt::ToolTipRole).toString(),
            QStringLiteral("int8 per-tensor"));
  EXPECT_EQ(cell(0, kQualityPerplexity), QStringLiteral("4.000 → 4.100"));
  EXPECT_EQ(cell(0, kQualityPareto), QStringLiteral("✓"));
  EXPECT_EQ(cell(1, kQualityPareto), QString());
  // Eviction counts in memory: half the tokens kept doubles the ratio and halves the bits.
  EXPECT_EQ(cell(1, kQualityRatio), format_ratio(4.0));
  EXPECT_EQ(cell(1, kQualityBits), format_bits_per_value(4.0));
  EXPECT_EQ(model.index(1, kQualityKl).data(Qt::UserRole).toLongLong(), 9);
  EXPECT_EQ(model.row_of_run(9), 1);
  EXPECT_EQ(model.row_of_run(8), -1);
  EXPECT_EQ(model.run_at(0), 7);
  for (int c = 0; c < kQualityColumnCount; ++c) {
    EXPECT_FALSE(model.headerData(c, Qt::Horizontal, Qt::ToolTipRole).toString().isEmpty()) << c;
  }
  model.set_points({}, {});
  EXPECT_EQ(model.rowCount(), 0);
}

// Issue 48: a point beaten only within the 95% intervals is "within noise", not ranked.
TEST(QualityTable, APointBeatenWithinTheIntervalsIsWithinNoise) {
  const auto point = [](double ratio, double change, double se) {
    QualityPoint p;
    p.method = "m";
    p.ratio = ratio;
    p.perplexity_change = change;
    p.perplexity_change_se = se;
    return p;
  };
  const std::vector<QualityPoint> points = {point(2.0, 0.01, 0.005), point(2.0, 0.03, 0.002),
                                            point(1.5, 0.015, 0.005), point(1.5, 0.05, NAN)};
  const auto x = QualityX::Ratio;
  const auto y = QualityY::PerplexityChange;
  const std::vector<bool> frontier = quality_frontier(points, x, y);
  ASSERT_EQ(frontier, std::vector<bool>({true, false, false, false}));
  EXPECT_EQ(quality_within_noise(points, x, y, frontier),
            std::vector<bool>({false, false, true, false}));
  QualityTableModel model;
  QAbstractItemModelTester tester(&model, QAbstractItemModelTester::FailureReportingMode::Fatal);
  model.set_points(points, frontier, quality_within_noise(points, x, y, frontier));
  EXPECT_EQ(model.index(0, kQualityPareto).data().toString(), QStringLiteral("✓"));
  EXPECT_EQ(model.index(1, kQualityPareto).data().toString(), QString());
  EXPECT_EQ(model.index(2, kQualityPareto).data().toString(), QStringLiteral("within noise"));
  EXPECT_EQ(model.index(3, kQualityPareto).data().toString(), QString());
}

// Issue 43: a choice names everything it does; KVComp's are Huffman-coded, and say so.
TEST(QualityConfigs, KvCompChoicesSayTheyAreHuffmanCoded) {
  for (const QualityChoice& c : quality_choices()) {
    if (!c.config.method || c.config.method->kind != MethodKind::KvComp) continue;
    ASSERT_TRUE(c.config.method->codec.has_value()) << c.id.toStdString();
    EXPECT_EQ(*c.config.method->codec, CodecKind::Huffman);
    EXPECT_TRUE(c.name.contains(QStringLiteral("Huffman"))) << c.name.toStdString();
  }
}

}  // namespace
}  // namespace kvlab::gui
