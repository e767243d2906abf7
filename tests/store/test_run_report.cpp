// The HTML report of stored runs: self-contained (nothing loaded from elsewhere), user text
// escaped, every run's parameters and headline numbers present, and the charts its series call
// for.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "kvlab/engine/core/utf8.h"
#include "kvlab/store/run_report.h"

namespace kvlab {
namespace {

RunRecord compression_run(std::int64_t id, double ratio, const std::string& label) {
  RunRecord r;
  r.id = id;
  r.kind = "compression";
  r.created_at = "2026-11-23T00:00:00.000Z";
  r.source = "synthetic:llama3-8b";
  r.method = "kivi-2 G=32 R=128";
  r.label = label;
  r.params = {{"method", "kivi"}, {"bits", 2}, {"group_size", 32}};
  nlohmann::json layers = nlohmann::json::array();
  for (int l = 0; l < 3; ++l) {
    layers.push_back({{"layer", l},
                      {"ratio", ratio + l},
                      {"bits_per_value", 16.0 / (ratio + l)},
                      {"error", {{"attn_output_rel_error", 0.01 * (l + 1)}}}});
  }
  r.metrics = {{"ratio", ratio},
               {"bits_per_value", 16.0 / ratio},
               {"error", {{"attn_output_rel_error", 0.0123}}},
               {"per_layer", layers}};
  return r;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(RunReport, OneRunHasItsTablesAndPerLayerCharts) {
  auto html = runs_html_report({compression_run(7, 4.0, "baseline")});
  ASSERT_TRUE(html) << html.message();
  EXPECT_EQ(html->rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html->find("kvlab run 7"), std::string::npos);
  EXPECT_NE(html->find("<th>group_size</th><td>32</td>"), std::string::npos);
  // Metrics as the app writes them (run_records.h), not raw JSON keys and fractions.
  EXPECT_NE(html->find("<th>ratio vs fp16</th><td>4.00×</td>"), std::string::npos);
  EXPECT_NE(html->find("<th>bits per value</th><td>4.00</td>"), std::string::npos);
  EXPECT_NE(html->find("<th>attention output rel. error</th><td>0.0123</td>"), std::string::npos);
  // Ratio, bits per value and the nested attention error per layer: three charts of 3 bars.
  EXPECT_EQ(count(*html, "<svg "), 3);
  EXPECT_EQ(count(*html, "<rect x="), 9);
  EXPECT_NE(html->find("2: ratio 6"), std::string::npos);  // layer 2's bar, ratio 4 + 2
  EXPECT_EQ(count(*html, "</html>"), 1);
}

TEST(RunReport, IsSelfContainedAndEscapesUserText) {
  RunRecord r = compression_run(1, 3.0, "<script>alert('x')</script> & co");
  r.notes = "a \"quoted\" <b>note</b>";
  auto html = runs_html_report({r});
  ASSERT_TRUE(html);
  EXPECT_EQ(html->find("<script"), std::string::npos);
  EXPECT_NE(html->find("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; co"),
            std::string::npos);
  EXPECT_NE(html->find("a &quot;quoted&quot; &lt;b&gt;note&lt;/b&gt;"), std::string::npos);
  // Nothing is fetched: no src= or href= attributes, no url() in the style sheet.
  EXPECT_FALSE(std::regex_search(*html, std::regex(R"((src|href)\s*=)")));
  EXPECT_EQ(html->find("url("), std::string::npos);
}

TEST(RunReport, ComparisonPutsHeadlineMetricsSideBySide) {
  RunRecord evict;
  evict.id = 9;
  evict.kind = "eviction";
  evict.method = "h2o budget 25%";
  evict.metrics = {{"memory_ratio", 4.0},
                   {"attn_output_rel_error", 0.5},
                   {"per_step", {{"kept_tokens", {10, 11, 12}}, {"memory_bytes", {1, 2, 3}}}}};
  auto html = runs_html_report({compression_run(1, 2.0, ""), compression_run(2, 5.0, ""), evict});
  ASSERT_TRUE(html);
  EXPECT_NE(html->find("kvlab comparison of 3 runs"), std::string::npos);
  EXPECT_NE(html->find("<th>ratio vs fp16</th>"), std::string::npos);
  EXPECT_NE(html->find("<th>memory vs full fp16 cache</th>"), std::string::npos);
  EXPECT_NE(html->find("<td>5.00×</td>"), std::string::npos);  // run 2's ratio, as the app has it
  // The eviction run's steps become line charts.
  EXPECT_EQ(count(*html, "<polyline"), 2);
  EXPECT_NE(html->find("#2 kivi-2 G=32 R=128: ratio vs fp16 5"), std::string::npos);
}

// Issue 43, item 8: a metric every run shares (the fp16 bytes of one source) gets no chart,
// and large numbers are written with an SI prefix, not as 5.103e+07.
TEST(RunReport, ComparisonLeavesOutConstantsAndWritesLargeNumbersPlainly) {
  RunRecord a = compression_run(1, 2.0, "");
  RunRecord b = compression_run(2, 5.0, "");
  for (RunRecord* r : {&a, &b}) r->metrics["fp16_bytes"] = 51'030'000.0;
  a.metrics["bytes"] = {{"total", 25'515'000.0}};
  b.metrics["bytes"] = {{"total", 10'206'000.0}};
  auto html = runs_html_report({a, b});
  ASSERT_TRUE(html) << html.message();
  EXPECT_EQ(html->find("e+0"), std::string::npos) << "no exponents a person must decode";
  EXPECT_NE(html->find("<th>fp16 bytes</th>"), std::string::npos) << "the table keeps it";
  const auto charts = count(*html, "<svg ");
  EXPECT_GE(charts, 1);
  for (std::size_t at = html->find("<svg "); at != std::string::npos;
       at = html->find("<svg ", at + 1)) {
    const std::string svg = html->substr(at, html->find("</svg>", at) - at);
    EXPECT_EQ(svg.find("class=\"t\">fp16 bytes"), std::string::npos)
        << "a chart of a constant: " << svg;
  }
}

// Issue 48: quality numbers are charted with their 95% intervals as whiskers (a standard error
// gives value ± 1.96 se, agreement its stored Wilson ends), the standard errors and ends get no
// chart of their own, a negative change is a bar below zero, and the runs whose intervals
// overlap are named as within noise of each other instead of ranked.
TEST(RunReport, QualityComparisonDrawsIntervalsAndSaysWhatIsWithinNoise) {
  const auto quality = [](std::int64_t id, const std::string& method, double change, double kl,
                          double agree) {
    RunRecord r;
    r.id = id;
    r.kind = "quality";
    r.method = method;
    r.metrics = {{"perplexity_change", change},
                 {"perplexity_change_se", 0.002},
                 {"kl_mean", kl},
                 {"kl_mean_se", 0.0005},
                 {"next_token_agreement", agree},
                 {"next_token_agreement_low", agree - 0.01},
                 {"next_token_agreement_high", agree + 0.01}};
    return r;
  };
  auto html = runs_html_report({quality(1, "int8", -0.003, 0.005, 0.96),
                                quality(2, "kivi-4", 0.002, 0.006, 0.955),
                                quality(3, "int4", 0.10, 0.1, 0.80)});
  ASSERT_TRUE(html) << html.message();
  EXPECT_EQ(count(*html, "<svg "), 3);         // change, agreement, KL: no chart of an s.e.
  EXPECT_EQ(count(*html, "class=\"ci\""), 9);  // a whisker for every bar
  EXPECT_EQ(html->find("class=\"t\">perplexity change, standard error"), std::string::npos);
  // Run 1's change: -0.3% ± 1.96 x 0.2 points, to four digits.
  EXPECT_NE(html->find("#1 int8: perplexity change -0.3, 95% interval -0.692 to 0.09199"),
            std::string::npos);
  EXPECT_EQ(html->find("height=\"-"), std::string::npos) << "a negative bar has a height";
  // 1 and 2 overlap in every metric, 3 in none.
  EXPECT_EQ(count(*html,
                  "Within noise of each other (intervals overlap, so not ranked): #1 int8 "
                  "and #2 kivi-4."),
            3);
  EXPECT_EQ(html->find("and #3 int4"), std::string::npos);
}

// A run name shortened for a slanted axis label is cut between characters, never inside one:
// the report stays UTF-8.
TEST(RunReport, ShortenedLabelsStayUtf8) {
  std::vector<RunRecord> runs;
  for (std::int64_t id = 1; id <= 8; ++id) {
    RunRecord r = compression_run(id, 2.0 + static_cast<double>(id), "");
    r.method = "kivi-2 " + std::string(40, 'x').substr(0, static_cast<std::size_t>(id)) +
               "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
               "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";  // é x 15
    runs.push_back(r);
  }
  auto html = runs_html_report(runs);
  ASSERT_TRUE(html) << html.message();
  EXPECT_NE(html->find("transform=\"rotate(-35"), std::string::npos) << "labels are slanted";
  EXPECT_NE(html->find("…</text>"), std::string::npos) << "and shortened";
  EXPECT_EQ(first_invalid_utf8(*html), std::nullopt);
}

TEST(RunReport, NoRunsIsAnError) {
  auto html = runs_html_report({});
  ASSERT_FALSE(html);
  EXPECT_NE(html.message().find("no runs"), std::string::npos);
}

}  // namespace
}  // namespace kvlab
