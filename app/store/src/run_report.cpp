// HTML reports of stored runs (run_report.h). Charts are plain SVG built from the run's JSON:
// bar charts for per-layer values and headline comparisons, line charts for per-step series.
// Everything the user typed (labels, notes, sources) is HTML-escaped.
#include "kvlab/store/run_report.h"
#include "kvlab/engine/io/json_text.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "kvlab/engine/core/interval.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/store/run_records.h"

namespace kvlab {

namespace {

using nlohmann::json;

constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759",
                                    "#76b7b2", "#edc948", "#b07aa1", "#9c755f"};

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string number(double v) {
  if (!std::isfinite(v)) return "–";
  const double a = std::abs(v);
  // Large numbers with an SI prefix a person reads at a glance ("51.03 M", not "5.103e+07").
  if (a >= 1e12 && a < 1e18) return fmt::format("{:.4g} T", v / 1e12);
  if (a >= 1e9 && a < 1e12) return fmt::format("{:.4g} G", v / 1e9);
  if (a >= 1e7 && a < 1e9) return fmt::format("{:.4g} M", v / 1e6);
  if (a != 0 && (a >= 1e18 || a < 1e-3)) return fmt::format("{:.4g}", v);
  if (a >= 1000) return fmt::format("{:.0f}", v);
  return fmt::format("{:.4g}", v);
}

std::string value_text(const json& v) {
  if (v.is_number()) return number(v.get<double>());
  if (v.is_string()) return esc(v.get<std::string>());
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_null()) return "";
  return esc(json_text(v));
}

// Scalar leaves of a JSON object as (dotted key, value), arrays of objects left out.
void flatten(const json& j, const std::string& prefix,
             std::vector<std::pair<std::string, json>>& out, int depth = 0) {
  if (!j.is_object()) return;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object() && depth < 2) {
      flatten(*it, key, out, depth + 1);
    } else if (!it->is_array() && !it->is_object()) {
      out.emplace_back(key, *it);
    }
  }
}

std::string table(const std::vector<std::pair<std::string, json>>& rows) {
  std::string h = "<table><tbody>\n";
  for (const auto& [k, v] : rows) {
    h += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", esc(k), value_text(v));
  }
  return h + "</tbody></table>\n";
}

struct Series {
  std::string name;
  std::vector<double> values;
  // The 95% interval of each value, drawn as a whisker where both ends are finite; empty where
  // the metric has none.
  std::vector<double> low = {}, high = {};
};

// A vertical bar chart: one group per label, one bar per series.
std::string bar_chart(const std::string& title, const std::vector<std::string>& labels,
                      const std::vector<Series>& series, const std::string& unit = "") {
  const int w = 640, left = 64, right = 16, top = 32;
  // Labels wider than their group (run names) are slanted, shortened to kMaxLabel characters,
  // and the chart grows to hold them.
  constexpr std::size_t kMaxLabel = 40;
  constexpr double kCharWidth = 6.2;  // of the 11 px axis font, roughly
  std::size_t longest = 0;
  for (const std::string& l : labels) longest = std::max(longest, std::min(l.size(), kMaxLabel));
  const double group_width =
      static_cast<double>(w - left - right) / std::max<std::size_t>(1, labels.size());
  const bool slanted = static_cast<double>(longest) * kCharWidth > 0.95 * group_width;
  const int label_h =
      slanted ? static_cast<int>(static_cast<double>(longest) * kCharWidth * 0.58) : 0;
  const int h = 260 + label_h, bottom = 48 + label_h;
  // The axis spans zero and every value and interval end: a change can be negative.
  double lo = 0, hi = 0;
  for (const Series& s : series) {
    for (const auto* v : {&s.values, &s.low, &s.high}) {
      for (double x : *v) {
        if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
      }
    }
  }
  if (hi <= lo) hi = lo + 1;
  const double pw = w - left - right, ph = h - top - bottom;
  const auto y_of = [&](double v) { return top + ph * (hi - v) / (hi - lo); };
  const std::size_t groups = labels.size();
  const double gw = groups ? pw / groups : pw;
  const double bw = std::max(1.0, gw * 0.8 / std::max<std::size_t>(1, series.size()));
  std::string s = fmt::format(
      "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n",
      w, h, w, h, esc(title));
  s += fmt::format("<text x=\"{}\" y=\"18\" class=\"t\">{}</text>\n", left, esc(title));
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4, y = y_of(v);
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" class=\"g\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"a\" text-anchor=\"end\">{}</text>\n",
        left, y, w - right, y, left - 6, y + 4, esc(number(v) + unit));
  }
  const auto at = [](const std::vector<double>& v, std::size_t i) {
    return i < v.size() ? v[i] : NAN;
  };
  for (std::size_t i = 0; i < groups; ++i) {
    for (std::size_t j = 0; j < series.size(); ++j) {
      const double v = at(series[j].values, i);
      if (!std::isfinite(v)) continue;
      const double x = left + gw * i + gw * 0.1 + bw * j;
      const double y0 = y_of(std::max(0.0, v)), y1 = y_of(std::min(0.0, v));
      const double a = at(series[j].low, i), b = at(series[j].high, i);
      const bool whisker = std::isfinite(a) && std::isfinite(b);
      s += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}: {} {}{}</title></rect>\n",
          x, y0, bw, y1 - y0, kPalette[j % 8], esc(labels[i]), esc(series[j].name), esc(number(v)),
          whisker ? esc(fmt::format(", 95% interval {} to {}", number(a), number(b))) : "");
      if (whisker) {
        const double cx = x + bw / 2, cap = std::min(6.0, bw / 3);
        s += fmt::format(
            "<path class=\"ci\" d=\"M{:.1f} {:.1f}V{:.1f}M{:.1f} {:.1f}H{:.1f}M{:.1f} "
            "{:.1f}H{:.1f}\" stroke=\"#222\" fill=\"none\"/>\n",
            cx, y_of(a), y_of(b), cx - cap, y_of(a), cx + cap, cx - cap, y_of(b), cx + cap);
      }
    }
    if (groups <= 40 || i % ((groups + 39) / 40) == 0) {
      const double x = left + gw * (i + 0.5);
      const int y = h - bottom + 16;
      if (!slanted) {
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{}\" class=\"a\" text-anchor=\"middle\">{}</text>\n", x, y,
            esc(labels[i]));
      } else {
        const std::string& l = labels[i];
        const std::string shown =
            l.size() <= kMaxLabel ? l : std::string(utf8_prefix(l, kMaxLabel - 1)) + "…";
        s += fmt::format(
            "<text x=\"{:.1f}\" y=\"{}\" class=\"a\" text-anchor=\"end\" "
            "transform=\"rotate(-35 {:.1f} {})\"><title>{}</title>{}</text>\n",
            x, y - 6, x, y - 6, esc(l), esc(shown));
      }
    }
  }
  for (std::size_t j = 0; j < series.size() && series.size() > 1; ++j) {
    s += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\" class=\"a\">{}</text>\n",
        left + 150 * j, h - 18, kPalette[j % 8], left + 150 * j + 14, h - 9, esc(series[j].name));
  }
  return s + "</svg></figure>\n";
}

// A line chart of one or more series against their index (decode step).
std::string line_chart(const std::string& title, const std::vector<Series>& series,
                       const std::string& x_label) {
  const int w = 640, h = 240, left = 64, right = 16, top = 32, bottom = 44;
  double lo = INFINITY, hi = -INFINITY;
  std::size_t n = 0;
  for (const Series& s : series) {
    n = std::max(n, s.values.size());
    for (double v : s.values) {
      if (std::isfinite(v)) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
  }
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (lo > 0) lo = 0;
  if (hi <= lo) hi = lo + 1;
  const double pw = w - left - right, ph = h - top - bottom;
  std::string s = fmt::format(
      "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}\">\n",
      w, h, w, h, esc(title));
  s += fmt::format("<text x=\"{}\" y=\"18\" class=\"t\">{}</text>\n", left, esc(title));
  for (int k = 0; k <= 4; ++k) {
    const double v = lo + (hi - lo) * k / 4, y = top + ph - ph * k / 4;
    s += fmt::format(
        "<line x1=\"{}\" y1=\"{:.1f}\" x2=\"{}\" y2=\"{:.1f}\" class=\"g\"/>"
        "<text x=\"{}\" y=\"{:.1f}\" class=\"a\" text-anchor=\"end\">{}</text>\n",
        left, y, w - right, y, left - 6, y + 4, esc(number(v)));
  }
  s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"a\" text-anchor=\"middle\">{}</text>\n",
                   left + pw / 2, h - 6, esc(x_label));
  for (std::size_t j = 0; j < series.size(); ++j) {
    std::string pts;
    const auto& v = series[j].values;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!std::isfinite(v[i])) continue;
      const double x = left + (n > 1 ? pw * i / (n - 1) : pw / 2);
      const double y = top + ph - ph * (v[i] - lo) / (hi - lo);
      pts += fmt::format("{:.1f},{:.1f} ", x, y);
    }
    s += fmt::format(
        "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\">"
        "<title>{}</title></polyline>\n",
        pts, kPalette[j % 8], esc(series[j].name));
    if (series.size() > 1) {
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
          "<text x=\"{}\" y=\"{}\" class=\"a\">{}</text>\n",
          left + 150 * j, 24, kPalette[j % 8], left + 150 * j + 14, 33, esc(series[j].name));
    }
  }
  return s + "</svg></figure>\n";
}

std::vector<double> numbers_of(const json& arr) {
  std::vector<double> v;
  if (!arr.is_array()) return v;
  for (const json& x : arr) v.push_back(x.is_number() ? x.get<double>() : NAN);
  return v;
}

// Per-layer values of `key` (a dotted path inside each layer object), NaN where absent.
std::vector<double> per_layer(const json& layers, const std::string& key) {
  std::vector<double> v;
  for (const json& l : layers) {
    const json* p = &l;
    std::size_t start = 0;
    while (p && start <= key.size()) {
      const std::size_t dot = key.find('.', start);
      const std::string part = key.substr(start, dot == std::string::npos ? dot : dot - start);
      p = p->is_object() && p->contains(part) ? &(*p)[part] : nullptr;
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    v.push_back(p && p->is_number() ? p->get<double>() : NAN);
  }
  return v;
}

bool any_finite(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
}

std::string run_charts(const RunRecord& run) {
  std::string h;
  const json& m = run.metrics;
  if (m.contains("per_layer") && m["per_layer"].is_array() && !m["per_layer"].empty()) {
    const json& layers = m["per_layer"];
    std::vector<std::string> labels;
    for (std::size_t i = 0; i < layers.size(); ++i) labels.push_back(std::to_string(i));
    struct Want {
      const char* key;
      const char* title;
    };
    const Want wants[] = {
        {"ratio", "Compression ratio per layer (fp16 bytes / stored bytes)"},
        {"bits_per_value", "Bits per value per layer, all metadata included"},
        {"error.attn_output_rel_error", "Attention output relative error per layer"},
        {"attn_output_rel_error", "Attention output relative error per layer"},
        {"attention_mass_retained", "Attention mass retained per layer"}};
    for (const Want& w : wants) {
      const auto v = per_layer(layers, w.key);
      if (any_finite(v)) h += bar_chart(w.title, labels, {{w.key, v}});
    }
  }
  if (m.contains("per_step") && m["per_step"].is_object()) {
    const json& ps = m["per_step"];
    const std::pair<const char*, const char*> wants[] = {
        {"memory_bytes", "KV memory over decode steps (bytes)"},
        {"kept_tokens", "Kept tokens over decode steps"},
        {"attention_mass_retained", "Attention mass retained over decode steps"},
        {"attn_output_rel_error", "Attention output relative error over decode steps"}};
    for (const auto& [key, title] : wants) {
      if (ps.contains(key)) {
        const auto v = numbers_of(ps[key]);
        if (any_finite(v)) h += line_chart(title, {{key, v}}, "decode step");
      }
    }
  }
  return h;
}

// A metric as a bar chart draws it: percentages in percent.
double chart_scale(const RunMetric& m) {
  const bool percent = m.format == MetricFormat::Percent || m.format == MetricFormat::SignedPercent;
  return percent ? 100.0 : 1.0;
}
double chart_value(const RunMetric& m) {
  return chart_scale(m) * m.value;
}

std::string chart_title(const RunMetric& m) {
  const bool percent = m.format == MetricFormat::Percent || m.format == MetricFormat::SignedPercent;
  return percent ? m.name + " (%)" : m.name;
}

// The formatted metrics of a run as a two-column table.
std::string metrics_table(const std::vector<RunMetric>& metrics) {
  std::string h = "<table><tbody>\n";
  for (const RunMetric& m : metrics) {
    h += fmt::format("<tr><th>{}</th><td>{}</td></tr>\n", esc(m.name), esc(m.text()));
  }
  return h + "</tbody></table>\n";
}

std::string run_name(const RunRecord& r) {
  std::string n = fmt::format("#{} {}", r.id, r.method);
  if (!r.label.empty() && r.label != r.method) n += " (" + r.label + ")";
  return n;
}

// The metrics that carry a 95% interval (issue 48) and the keys that give it: a standard error
// (value ± kZ95 · se) or the interval's ends (Wilson's, for shares).
struct IntervalKeys {
  const char* value;
  const char* se;
  const char* low;
  const char* high;
};
constexpr IntervalKeys kIntervals[] = {
    {"perplexity_change", "perplexity_change_se", nullptr, nullptr},
    {"kl_mean", "kl_mean_se", nullptr, nullptr},
    {"next_token_agreement", nullptr, "next_token_agreement_low", "next_token_agreement_high"},
    {"accuracy", nullptr, "accuracy_low", "accuracy_high"},
};

const IntervalKeys* interval_of(const std::string& key) {
  for (const IntervalKeys& k : kIntervals) {
    if (key == k.value) return &k;
  }
  return nullptr;
}

// A standard error or an interval's end: shown in the table, drawn as its value's whisker.
bool is_interval_part(const std::string& key) {
  for (const IntervalKeys& k : kIntervals) {
    for (const char* part : {k.se, k.low, k.high}) {
      if (part && key == part) return true;
    }
  }
  return false;
}

// The run's 95% interval of `keys.value`, NaN ends where the run has none.
std::pair<double, double> interval(const std::vector<RunMetric>& of_run, const IntervalKeys& keys) {
  const auto get = [&](const char* key) -> double {
    if (!key) return NAN;
    const auto it = std::find_if(of_run.begin(), of_run.end(),
                                 [&](const RunMetric& m) { return m.key == key; });
    return it != of_run.end() ? it->value : NAN;
  };
  if (keys.se) {
    const double v = get(keys.value), se = get(keys.se);
    return {v - kZ95 * se, v + kZ95 * se};
  }
  return {get(keys.low), get(keys.high)};
}

// Which runs a chart cannot rank: those whose 95% intervals overlap, named pair by pair.
std::string within_noise(const std::vector<std::string>& labels, const std::vector<double>& low,
                         const std::vector<double>& high) {
  constexpr int kMaxPairs = 12;
  std::vector<std::string> pairs;
  int more = 0;
  for (std::size_t a = 0; a < labels.size(); ++a) {
    for (std::size_t b = a + 1; b < labels.size(); ++b) {
      const bool known = std::isfinite(low[a]) && std::isfinite(high[a]) && std::isfinite(low[b]) &&
                         std::isfinite(high[b]);
      if (!known || low[a] > high[b] || low[b] > high[a]) continue;
      if (static_cast<int>(pairs.size()) < kMaxPairs) {
        pairs.push_back(esc(labels[a]) + " and " + esc(labels[b]));
      } else {
        ++more;
      }
    }
  }
  std::string h = "<p class=\"meta\">Whiskers: 95% intervals. ";
  if (pairs.empty()) return h + "No two runs' intervals overlap.</p>\n";
  h += "Within noise of each other (intervals overlap, so not ranked): ";
  for (std::size_t i = 0; i < pairs.size(); ++i) h += (i ? "; " : "") + pairs[i];
  if (more > 0) h += fmt::format("; and {} more pairs", more);
  return h + ".</p>\n";
}

}  // namespace

Result<std::string> runs_html_report(const std::vector<RunRecord>& runs,
                                     const ReportOptions& options) {
  if (runs.empty()) return make_error("report: no runs given");
  std::set<std::int64_t> ids;
  for (const RunRecord& r : runs) {
    if (!ids.insert(r.id).second) {
      return make_error(fmt::format("report: run {} is given twice; name each run once", r.id));
    }
  }
  const std::string title = !options.title.empty() ? options.title
                            : runs.size() == 1
                                ? fmt::format("kvlab run {}", runs[0].id)
                                : fmt::format("kvlab comparison of {} runs", runs.size());
  std::string h = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  h += "<title>" + esc(title) +
       "</title>\n<style>\n"
       "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:980px;color:#222}\n"
       "h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;"
       "margin-top:2em}h3{font-size:1.05em}\n"
       "table{border-collapse:collapse;margin:.5em 0 1em}th,td{border:1px solid #ddd;"
       "padding:.25em .6em;text-align:left;font-size:.9em}th{background:#f4f6fa;"
       "font-weight:600}td{font-variant-numeric:tabular-nums}\n"
       "figure{margin:1em 0}svg .t{font-size:13px;font-weight:600}svg .a{font-size:11px;"
       "fill:#444}svg .g{stroke:#e3e3e3}\n.meta{color:#666;font-size:.9em}\n"
       "</style></head><body>\n";
  h += "<h1>" + esc(title) + "</h1>\n";
  if (runs.size() > 1) {
    // Columns: every metric any of the runs has, in the order their kinds list them.
    std::vector<std::vector<RunMetric>> metrics;
    std::vector<RunMetric> columns;
    for (const RunRecord& r : runs) {
      metrics.push_back(run_metrics(r));
      for (const RunMetric& m : metrics.back()) {
        const bool seen = std::any_of(columns.begin(), columns.end(),
                                      [&](const RunMetric& c) { return c.name == m.name; });
        if (!seen) columns.push_back(m);
      }
    }
    const auto find = [](const std::vector<RunMetric>& of_run, const RunMetric& column) {
      return std::find_if(of_run.begin(), of_run.end(),
                          [&](const RunMetric& m) { return m.name == column.name; });
    };
    h += "<h2>Comparison</h2>\n<table><thead><tr><th>run</th><th>kind</th><th>source</th>";
    for (const RunMetric& c : columns) h += "<th>" + esc(c.name) + "</th>";
    h += "</tr></thead><tbody>\n";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const RunRecord& r = runs[i];
      h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td>", esc(run_name(r)), esc(r.kind),
                       esc(r.source));
      for (const RunMetric& c : columns) {
        const auto it = find(metrics[i], c);
        h += "<td>" + (it != metrics[i].end() ? esc(it->text()) : std::string("–")) + "</td>";
      }
      h += "</tr>\n";
    }
    h += "</tbody></table>\n";
    std::vector<std::string> labels;
    for (const RunRecord& r : runs) labels.push_back(run_name(r));
    for (const RunMetric& c : columns) {
      if (is_interval_part(c.key)) continue;  // the whiskers of its value's chart
      std::vector<double> v;
      for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto it = find(metrics[i], c);
        v.push_back(it != metrics[i].end() ? chart_value(*it) : NAN);
      }
      Series series{c.name, v, {}, {}};
      if (const IntervalKeys* keys = interval_of(c.key)) {
        const double scale = chart_scale(c);  // percent or not, as the value
        for (std::size_t i = 0; i < runs.size(); ++i) {
          const auto [a, b] = interval(metrics[i], *keys);
          series.low.push_back(a * scale), series.high.push_back(b * scale);
        }
      }
      // A metric every run has the same value of (the fp16 bytes of one source) says nothing
      // a chart could show: the table has it.
      std::vector<double> finite;
      for (double x : v) {
        if (std::isfinite(x)) finite.push_back(x);
      }
      const bool constant =
          finite.size() < 2 ||
          std::all_of(finite.begin(), finite.end(), [&](double x) { return x == finite.front(); });
      if (constant) continue;
      h += bar_chart(chart_title(c), labels, {series});
      if (!series.low.empty() && any_finite(series.low)) {
        h += within_noise(labels, series.low, series.high);
      }
    }
  }
  for (const RunRecord& r : runs) {
    h += "<h2>" + esc(run_name(r)) + "</h2>\n";
    h += fmt::format("<p class=\"meta\">{} run · source {} · saved {}</p>\n", esc(r.kind),
                     esc(r.source), esc(r.created_at));
    if (!r.notes.empty()) h += "<p>" + esc(r.notes) + "</p>\n";
    std::vector<std::pair<std::string, json>> params;
    flatten(r.params, "", params);
    if (!params.empty()) h += "<h3>Parameters</h3>\n" + table(params);
    const auto metrics = run_metrics(r);
    if (!metrics.empty()) h += "<h3>Metrics</h3>\n" + metrics_table(metrics);
    const std::string charts = run_charts(r);
    if (!charts.empty()) h += "<h3>Charts</h3>\n" + charts;
  }
  h += "<p class=\"meta\">Written by kvlab";
  if (!options.generated_at.empty()) h += " on " + esc(options.generated_at);
  h += ". Every number comes from the runs store; the same data is in the JSON export "
       "(<code>kvlab runs export ID --format json</code>).</p>\n</body></html>\n";
  return h;
}

}  // namespace kvlab
