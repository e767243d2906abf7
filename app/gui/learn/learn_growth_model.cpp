#include "learn/learn_growth_model.h"

#include <algorithm>

#include <QLocale>
#include <QObject>

#include "common/gui_format.h"
#include "kvlab/planners/catalog.h"

namespace kvlab::gui {

const std::vector<std::string>& LearnGrowthModel::scheme_ids() {
  static const std::vector<std::string> ids = {"kivi2", "kivi4", "int4", "int8", "fp8"};
  return ids;
}

LearnGrowthModel::LearnGrowthModel()
    : m_models(planners::builtin_models()),
      m_fp16(planners::parse_scheme("fp16").value()),
      m_scheme(planners::parse_scheme(scheme_ids().front()).value()) {
  set_model("llama-3-8b");
  reset();
}

void LearnGrowthModel::set_model(int index) {
  if (index < 0 || index >= static_cast<int>(m_models.size())) return;
  m_model = index;
  settings_changed();
}

bool LearnGrowthModel::set_model(const std::string& id) {
  const int i = catalog_index(m_models, id);
  if (i >= 0) set_model(i);
  return i >= 0;
}

bool LearnGrowthModel::set_scheme(const std::string& id) {
  if (std::find(scheme_ids().begin(), scheme_ids().end(), id) == scheme_ids().end()) return false;
  m_scheme = planners::parse_scheme(id).value();
  settings_changed();
  return true;
}

void LearnGrowthModel::set_prompt(int tokens) {
  m_prompt = std::max(0, tokens);
  reset();
}

void LearnGrowthModel::set_target(int tokens) {
  m_target = tokens;
  settings_changed();
}

void LearnGrowthModel::set_step_tokens(int tokens) {
  m_step_tokens = std::max(1, tokens);
}

void LearnGrowthModel::settings_changed() {
  const int max_context = std::max(1, model().max_context);
  m_target = std::clamp(m_target, 1, max_context);
  // Lowering the target (or picking a model with a shorter context) cuts the cache back to it,
  // never below the prompt.
  const std::int64_t prompt = std::min(m_prompt, max_context);
  m_tokens = std::min<std::int64_t>(m_tokens, std::max<std::int64_t>(m_target, prompt));
}

void LearnGrowthModel::step() {
  if (at_end()) return;
  m_tokens = std::min<std::int64_t>(m_target, m_tokens + m_step_tokens);
}

void LearnGrowthModel::reset() {
  m_tokens = std::min(m_prompt, model().max_context);
  settings_changed();
}

planners::Deployment LearnGrowthModel::deployment() const {
  planners::Deployment d;
  d.page_tokens = 1;  // the bare formula: no paging on this page (the planner page shows it)
  return d;
}

std::uint64_t LearnGrowthModel::bytes_at(const planners::Scheme& scheme,
                                         std::int64_t tokens) const {
  return planners::kv_bytes_per_sequence(model(), scheme, deployment(), tokens);
}

std::uint64_t LearnGrowthModel::fp16_bytes() const {
  return bytes_at(m_fp16, m_tokens);
}

std::uint64_t LearnGrowthModel::compressed_bytes() const {
  return bytes_at(m_scheme, m_tokens);
}

QString LearnGrowthModel::headline() const {
  const planners::ModelSpec& m = model();
  const double fp16 = static_cast<double>(fp16_bytes());
  const double compressed = static_cast<double>(compressed_bytes());
  const std::int64_t decoded = std::max<std::int64_t>(0, m_tokens - m_prompt);
  return QObject::tr(
             "<b>%1 tokens</b> in the cache (prompt %2 + %3 decoded) · fp16 <b>%4</b> · %5 "
             "<b>%6</b>%7 · each token adds %8 in fp16")
      .arg(QLocale().toString(static_cast<qlonglong>(m_tokens)))
      .arg(QLocale().toString(std::min(m_prompt, m.max_context)))
      .arg(QLocale().toString(static_cast<qlonglong>(decoded)))
      .arg(format_byte_count(fp16), QString::fromStdString(m_scheme.label),
           format_byte_count(compressed))
      .arg(compressed > 0 ? QObject::tr(" (%1 smaller)").arg(format_ratio(fp16 / compressed))
                          : QString())
      .arg(format_byte_count(planners::kv_bytes_per_token(m, m_fp16)));
}

QString LearnGrowthModel::formula() const {
  const auto d = deployment();
  return QString::fromStdString(planners::explain_kv(model(), m_fp16, d, m_tokens, 1) + "\n" +
                                planners::explain_kv(model(), m_scheme, d, m_tokens, 1))
      .trimmed();
}

QString LearnGrowthModel::error_text() const {
  if (m_prompt <= m_target) return {};
  return QObject::tr(
             "Prompt: %1 tokens is longer than \"Decode until\" (%2 tokens); the cache starts at "
             "the prompt and does not grow.")
      .arg(m_prompt)
      .arg(m_target);
}

std::vector<LearnGrowthModel::Line> LearnGrowthModel::lines() const {
  std::vector<Line> out;
  const std::int64_t end = chart_end();
  for (const planners::Scheme* scheme : {&m_fp16, &m_scheme}) {
    Line line;
    line.scheme = scheme;
    for (int k = 0; k <= kChartPoints; ++k) {
      const std::int64_t t = end * k / kChartPoints;
      const double y = static_cast<double>(bytes_at(*scheme, t));
      if (t <= m_tokens) {
        line.done_tokens.push_back(t);
        line.done_bytes.push_back(y);
      } else {
        line.ahead_tokens.push_back(t);
        line.ahead_bytes.push_back(y);
      }
    }
    line.now_bytes = static_cast<double>(bytes_at(*scheme, m_tokens));
    line.done_tokens.push_back(m_tokens);
    line.done_bytes.push_back(line.now_bytes);
    out.push_back(std::move(line));
  }
  return out;
}

LearnLink LearnGrowthModel::link() const {
  planners::Scenario s;
  s.model = model();
  const auto gpu = planners::find_gpu("h100-sxm");
  s.gpu = gpu ? *gpu : planners::builtin_gpus().front();
  s.context = std::max<std::int64_t>(1, m_tokens);
  s.batch = 1;
  return LearnLink::to_planner(s, {"fp16", m_scheme.id});
}

}  // namespace kvlab::gui
