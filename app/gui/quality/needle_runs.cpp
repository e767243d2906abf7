#include "quality/needle_runs.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include <QObject>

#include "kvlab/store/run_records.h"
#include "quality/quality_runs.h"

namespace kvlab::gui {

namespace {

bool text(const nlohmann::json& j, const char* key, std::string& out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return false;
  out = it->get<std::string>();
  return true;
}

bool number(const nlohmann::json& j, const char* key, double& out) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  out = it->get<double>();
  return true;
}

QString line_name(const NeedlePoint& p) {
  QString name = QString::fromStdString(p.policy_id);
  if (!p.method.empty() && p.method != "none") {
    name = p.policy_id == "none" ? QString::fromStdString(p.method)
                                 : name + QStringLiteral(" + ") + QString::fromStdString(p.method);
  }
  if (p.budget_of == "key channels") {
    name += QObject::tr(" (x: key channels kept)");
  } else if (p.budget_of == "none") {
    name += QObject::tr(" (no token budget: at 100 %)");
  }
  if (p.press_before_question) name += QObject::tr(", pressed before the question");
  return name;
}

}  // namespace

std::optional<NeedlePoint> needle_point(const RunSummary& run) {
  const nlohmann::json& m = run.metrics;
  if (run.kind != run_kind_id(RunKind::Needle) || !m.is_object()) return std::nullopt;
  NeedlePoint p;
  p.run_id = run.id;
  if (!text(m, "model", p.model) || !text(m, "policy_id", p.policy_id) ||
      !number(m, "budget_fraction", p.budget_fraction) || !number(m, "accuracy", p.accuracy)) {
    return std::nullopt;
  }
  text(m, "policy", p.policy);
  text(m, "method", p.method);
  text(m, "budget_of", p.budget_of);
  const auto press = m.find("press_before_question");
  p.press_before_question = press != m.end() && press->is_boolean() && press->get<bool>();
  return p;
}

Result<RetrievalChartData> load_retrieval(const RunsStore& store, const std::string& model) {
  auto runs = store.list_runs(-1);
  if (!runs) return runs.error();
  std::vector<NeedlePoint> points;
  for (const RunSummary& run : *runs) {  // newest first
    if (auto p = needle_point(run)) points.push_back(std::move(*p));
  }
  RetrievalChartData out;
  if (points.empty()) return out;
  const bool known =
      !model.empty() && std::any_of(points.begin(), points.end(),
                                    [&](const auto& p) { return same_model_path(p.model, model); });
  out.model = known ? model : points.front().model;
  std::set<std::tuple<QString, double>> seen;  // the newest run of each (line, budget)
  std::map<QString, RetrievalLine> lines;
  for (const NeedlePoint& p : points) {
    if (!same_model_path(p.model, out.model)) continue;
    const bool full = p.policy_id == "none" && (p.method.empty() || p.method == "none");
    if (full) {
      if (!out.full_accuracy) out.full_accuracy = p.accuracy;
      continue;
    }
    const QString name = line_name(p);
    if (!seen.emplace(name, p.budget_fraction).second) continue;
    RetrievalLine& line = lines[name];
    line.name = name;
    line.policy_id = p.policy_id;
    line.press_before_question = p.press_before_question;
    line.budget.push_back(p.budget_fraction);
    line.accuracy.push_back(p.accuracy);
    line.run_ids.push_back(p.run_id);
  }
  for (auto& [name, line] : lines) {  // by budget, for the line through the points
    std::vector<std::size_t> order(line.budget.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](std::size_t a, std::size_t b) { return line.budget[a] < line.budget[b]; });
    RetrievalLine sorted{line.name, line.policy_id, line.press_before_question, {}, {}, {}};
    for (std::size_t i : order) {
      sorted.budget.push_back(line.budget[i]);
      sorted.accuracy.push_back(line.accuracy[i]);
      sorted.run_ids.push_back(line.run_ids[i]);
    }
    out.lines.push_back(std::move(sorted));
  }
  out.title = QObject::tr("Passkey retrieval against budget · %1")
                  .arg(QString::fromStdString(out.model).section(QLatin1Char('/'), -1));
  return out;
}

}  // namespace kvlab::gui
