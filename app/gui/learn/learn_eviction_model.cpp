#include "learn/learn_eviction_model.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <vector>

#include <QLocale>
#include <QObject>

#include "common/gui_format.h"

namespace kvlab::gui {
namespace {

// One layer of the tiny preset (2 KV heads of 16 channels, 2 query heads each): 160 columns ×
// 64 rows read well on the map, and the whole simulation takes a few milliseconds.
constexpr std::uint64_t kSeed = 1;

QString range_text(int first, int last) {
  return first == last ? QString::number(first) : QStringLiteral("%1–%2").arg(first).arg(last);
}

// A mean over KV heads: a whole number under the policies of this page, shown as one.
QString count_text(double n) {
  const double r = std::round(n);
  return std::abs(n - r) < 1e-9 ? QLocale().toString(static_cast<qlonglong>(r))
                                : QLocale().toString(n, 'f', 1);
}

QString tr(const char* text) {
  return QObject::tr(text);
}

}  // namespace

LearnEvictionModel::LearnEvictionModel() {
  m_source.preset = "tiny";
  m_source.layers = 1;
  m_source.context = kContext;
  m_source.seed = kSeed;
  m_source.queries = kSteps;  // one query per decode step, as the Eviction view generates it
  m_landmarks = synthetic_landmarks(m_source);
  auto cache = generate_synthetic(m_source);
  if (cache) {
    m_cache = std::move(cache).value();
  } else {
    m_error = tr("Synthetic source: %1").arg(QString::fromStdString(cache.message()));
  }
  simulate();
}

EvictionConfig LearnEvictionModel::config() const {
  EvictionConfig c;
  c.policy = m_policy;
  c.budget = Budget{m_budget / 100.0, true};
  c.steps = kSteps;
  c.sinks = kSinks;
  c.recent_fraction = kRecentFraction;
  c.needle = m_landmarks.needle;  // as the Eviction view sets it for a synthetic source
  return c;
}

int LearnEvictionModel::kv_heads() const {
  return m_cache.layers.empty() ? 1 : m_cache.shape.kv_heads;
}

void LearnEvictionModel::set_policy(EvictionPolicy policy) {
  if (policy == m_policy && m_report) return;
  m_policy = policy;
  simulate();
}

void LearnEvictionModel::set_budget_percent(int percent) {
  percent = std::clamp(percent, kMinBudget, kMaxBudget);
  if (percent == m_budget && m_report) return;
  m_budget = percent;
  simulate();
}

void LearnEvictionModel::set_kv_head(int head) {
  m_head = std::clamp(head, 0, kv_heads() - 1);
}

void LearnEvictionModel::simulate() {
  m_report.reset();
  if (!m_cache.layers.empty()) {  // else m_error says why the source failed
    auto report = simulate_eviction(m_cache, config());
    if (report) {
      m_report = std::move(report).value();
      m_error.clear();
    } else {
      m_error = tr("Eviction: %1").arg(QString::fromStdString(report.message()));
    }
  }
  m_step = std::clamp(m_step, 0, std::max(0, step_count() - 1));
}

void LearnEvictionModel::step() {
  if (!at_end()) ++m_step;
}

void LearnEvictionModel::reset() {
  m_step = 0;
}

std::optional<EvictionMapData> LearnEvictionModel::map_data() const {
  if (!m_report) return std::nullopt;
  EvictionMapData d = eviction_map_data(*m_report, 0, m_head);
  for (int s = m_step + 1; s < d.steps; ++s) {
    std::fill_n(d.cells.begin() + static_cast<std::ptrdiff_t>(s) * d.positions, d.positions,
                static_cast<std::uint8_t>(CellState::Absent));
  }
  d.title = tr("%1 · KV head %2 · step %3")
                .arg(QString::fromStdString(m_report->label))
                .arg(m_head)
                .arg(m_step);
  return d;
}

LearnEvictionModel::StepTexts LearnEvictionModel::texts() const {
  StepTexts t;
  if (!m_report) return t;
  const EvictionConfig& c = m_report->config;
  const EvictionStep& st = m_report->layers.front().steps[static_cast<std::size_t>(m_step)];
  const EvictionMap& map = m_report->maps.front()[static_cast<std::size_t>(m_head)];
  const int context = st.context;
  t.step = tr("Decode step <b>%1</b> (last: %2) · token %3 arrives · %4 tokens so far")
               .arg(m_step)
               .arg(step_count() - 1)
               .arg(context - 1)
               .arg(context);

  std::vector<int> kept, sinks;  // positions, ascending
  for (int p = 0; p < context; ++p) {
    const CellState s = map.state(m_step, p);
    if (s == CellState::Sink) sinks.push_back(p);
    if (s == CellState::Kept || s == CellState::Sink) kept.push_back(p);
  }
  const bool full = c.policy == EvictionPolicy::Full;
  const int budget = full ? context : c.budget.tokens_at(context);
  t.kept =
      tr("Kept: <b>%1</b> of %2 tokens (budget %3)")
          .arg(count_text(st.kept))
          .arg(context)
          .arg(full ? tr("all") : tr("%1 → %2").arg(format_percent(c.budget.value)).arg(budget));
  t.sinks = sinks.empty() ? tr("Sinks: <b>0</b> (this policy protects no token)")
                          : tr("Sinks: <b>%1</b> (tokens %2, never evicted)")
                                .arg(sinks.size())
                                .arg(range_text(sinks.front(), sinks.back()));

  // The newest entries: the window, or for H2O its recent share of the budget.
  std::vector<int> rest;
  std::set_difference(kept.begin(), kept.end(), sinks.begin(), sinks.end(),
                      std::back_inserter(rest));
  QString mix;
  if (full) {
    mix = tr("every token so far (0–%1)").arg(context - 1);
  } else if (c.policy == EvictionPolicy::H2O) {
    const auto recent =
        std::min(rest.size(), static_cast<std::size_t>(std::floor(c.recent_fraction * budget)));
    const std::size_t heavy = rest.size() - recent;
    mix = recent == 0 ? tr("%1 kept for their accumulated attention").arg(heavy)
                      : tr("the newest %1 (tokens %2) + <b>%3</b> older ones kept for their "
                           "accumulated attention")
                            .arg(recent)
                            .arg(range_text(rest[rest.size() - recent], rest.back()))
                            .arg(heavy);
  } else if (!rest.empty()) {
    mix = tr("%1the newest %2 (tokens %3)")
              .arg(sinks.empty() ? QString() : tr("%1 sinks + ").arg(sinks.size()))
              .arg(rest.size())
              .arg(range_text(rest.front(), rest.back()));
  }
  t.mix = tr("Kept entries: %1").arg(mix);
  t.mass = tr("Attention mass retained: <b>%1</b>").arg(format_percent(st.attention_mass_retained));

  const auto is_kept = [&](int p) { return std::binary_search(kept.begin(), kept.end(), p); };
  int arrived = 0, heavy_kept = 0;
  for (int tok : m_landmarks.heavy_hitters) {
    if (tok >= context) continue;
    ++arrived;
    heavy_kept += is_kept(tok);
  }
  t.landmarks = tr("Planted sink (token %1): <b>%2</b> · heavy hitters kept: <b>%3</b> of %4 · "
                   "needle (token %5): <b>%6</b>")
                    .arg(m_landmarks.sink)
                    .arg(is_kept(m_landmarks.sink) ? tr("kept") : tr("evicted"))
                    .arg(heavy_kept)
                    .arg(arrived)
                    .arg(m_landmarks.needle)
                    .arg(is_kept(m_landmarks.needle) ? tr("kept") : tr("evicted"));
  return t;
}

LearnLink LearnEvictionModel::link() const {
  return LearnLink::to_eviction(m_source, config());
}

}  // namespace kvlab::gui
