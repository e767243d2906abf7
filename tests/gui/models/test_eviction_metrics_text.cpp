// The Eviction page's Results texts (eviction_metrics_text.h) with no widget: a summary written by
// hand against the texts a person reads, and real runs (H2O, a sliding window, SnapKV with its
// needle query) against texts computed here from the engine's reports with printf's rules.
#include <gtest/gtest.h>

#include <QString>

#include "eviction/eviction_chart_data.h"
#include "eviction/eviction_metrics_text.h"
#include "gui_test_support.h"

namespace kvlab::gui {
namespace {

EvictionSummary hand_written_summary() {
  EvictionSummary s;
  s.label = QStringLiteral("h2o budget 25%");
  s.scope = QStringLiteral("all layers");
  s.context = 96;
  s.kept_tokens = 24;
  s.memory_bytes = 3 * 1024;
  s.full_memory_bytes = 12 * 1024;
  s.mass_retained = 0.8766;
  s.mass_without_needle_step = 0.9012;
  s.rel_error = 0.05;
  s.cosine = 0.99876;
  s.needle_retained = 0.5;
  return s;
}

TEST(EvictionMetricsText, EachNumberInItsUnit) {
  const EvictionMetricTexts t = eviction_metric_texts(hand_written_summary());
  EXPECT_EQ(t[EvictionMetric::Policy], QStringLiteral("h2o budget 25%"));
  EXPECT_EQ(t[EvictionMetric::Kept], QStringLiteral("24.0 of 96 tokens (25 %)"));
  EXPECT_EQ(t[EvictionMetric::Memory], QStringLiteral("3.0 KiB of 12.0 KiB"));
  EXPECT_EQ(t[EvictionMetric::Ratio], QStringLiteral("4.00×"));
  EXPECT_EQ(t[EvictionMetric::MassRetained], QStringLiteral("87.7 % (90.1 % w/o needle query)"));
  EXPECT_EQ(t[EvictionMetric::RelError], QStringLiteral("5 %"));  // no number without the query
  EXPECT_EQ(t[EvictionMetric::Cosine], QStringLiteral("0.9988"));
  EXPECT_EQ(t[EvictionMetric::NeedleRetained], QStringLiteral("50 % of KV heads"));
  EXPECT_EQ(t[EvictionMetric::NeedleTopK], QStringLiteral("— (no needle known)"));
  EXPECT_EQ(eviction_metrics_heading(hand_written_summary(), QStringLiteral("stored run #4")),
            QStringLiteral("h2o budget 25% · 96 tokens, numbers over all layers · stored run #4"));
}

TEST(EvictionMetricsText, NothingKeptHasNoRatio) {
  EvictionSummary s = hand_written_summary();
  s.memory_bytes = 0;
  s.context = 0;
  const EvictionMetricTexts t = eviction_metric_texts(s);
  EXPECT_EQ(t[EvictionMetric::Ratio], QStringLiteral("—"));
  EXPECT_EQ(t[EvictionMetric::Memory], QStringLiteral("0 B of 12.0 KiB"));
  EXPECT_EQ(t[EvictionMetric::Kept], QStringLiteral("24.0 of 0 tokens (0 %)"));
}

EvictionConfig policy(EvictionPolicy p, double budget_fraction) {
  EvictionConfig c;
  c.policy = p;
  c.budget = Budget{budget_fraction, true};
  c.steps = 16;
  c.window = 8;
  c.pool = 3;
  return c;
}

QString percent(double fraction) {
  return QString::asprintf("%.3g %%", 100 * fraction);
}

TEST(EvictionMetricsText, RealRunsReadAsTheEnginesReports) {
  const EvictionReport h2o =
      gui_test::engine_eviction_report(gui_test::tiny_source(), policy(EvictionPolicy::H2O, 0.25));
  ASSERT_EQ(h2o.layers.size(), 2u);
  ASSERT_TRUE(h2o.needle_retained.has_value());
  const EvictionMetricTexts all = eviction_metric_texts(eviction_summary(h2o, -1));
  EXPECT_EQ(all[EvictionMetric::Policy], QString::fromStdString(h2o.label));
  EXPECT_EQ(all[EvictionMetric::Kept],
            QString::asprintf("%.1f of %d tokens (", h2o.kept_tokens, h2o.tokens) +
                percent(h2o.kept_tokens / h2o.tokens) + QStringLiteral(")"));
  EXPECT_EQ(all[EvictionMetric::Ratio],
            QString::asprintf("%.2f×", h2o.full_memory_bytes / h2o.memory_bytes));
  EXPECT_EQ(all[EvictionMetric::Cosine], QString::asprintf("%.4f", h2o.attn_output_cosine));
  EXPECT_EQ(all[EvictionMetric::NeedleRetained],
            percent(*h2o.needle_retained) + QStringLiteral(" of KV heads"));
  // Over layer 1: that layer's mass, and no needle-query split.
  EXPECT_EQ(eviction_metric_texts(eviction_summary(h2o, 1))[EvictionMetric::MassRetained],
            percent(h2o.layers[1].attention_mass_retained));

  // A window never keeps the needle once it has slid past (the needle sits early).
  const EvictionReport window = gui_test::engine_eviction_report(
      gui_test::tiny_source(), policy(EvictionPolicy::Window, 0.25));
  ASSERT_EQ(window.needle_retained, 0.0);
  EXPECT_EQ(eviction_metric_texts(eviction_summary(window, -1))[EvictionMetric::NeedleRetained],
            QStringLiteral("0 % of KV heads"));

  // SnapKV's last step is the needle query: the numbers of ordinary decoding beside.
  SyntheticConfig two_layers = gui_test::tiny_source();
  two_layers.layers = 2;
  const EvictionReport snap =
      gui_test::engine_eviction_report(two_layers, policy(EvictionPolicy::SnapKV, 0.25));
  ASSERT_TRUE(snap.mass_without_needle_step && snap.rel_error_without_needle_step);
  const EvictionMetricTexts s = eviction_metric_texts(eviction_summary(snap, -1));
  EXPECT_EQ(s[EvictionMetric::MassRetained],
            percent(snap.attention_mass_retained) + QStringLiteral(" (") +
                percent(*snap.mass_without_needle_step) + QStringLiteral(" w/o needle query)"));
  EXPECT_EQ(s[EvictionMetric::RelError], percent(snap.attn_output_rel_error) +
                                             QStringLiteral(" (") +
                                             percent(*snap.rel_error_without_needle_step) +
                                             QStringLiteral(" w/o needle query)"));
}

}  // namespace
}  // namespace kvlab::gui
