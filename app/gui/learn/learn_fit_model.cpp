#include "learn/learn_fit_model.h"

#include <algorithm>

#include <QLocale>
#include <QObject>

#include "common/gui_format.h"
#include "kvlab/planners/catalog.h"

namespace kvlab::gui {
namespace {

QString thousands(qlonglong n) {
  return QLocale().toString(n);
}

}  // namespace

const std::vector<std::string>& LearnFitModel::scheme_ids() {
  static const std::vector<std::string> ids = {"fp16", "fp8", "int8", "int4", "kivi4", "kivi2"};
  return ids;
}

LearnFitModel::LearnFitModel()
    : m_models(planners::builtin_models()), m_gpus(planners::builtin_gpus()) {
  m_model = std::max(0, catalog_index(m_models, "llama-3-8b"));
  m_gpu = std::max(0, catalog_index(m_gpus, "h100-sxm"));
  m_context = clamped_context(m_context);
  recompute();
}

bool LearnFitModel::set_model(const std::string& id) {
  const int i = catalog_index(m_models, id);
  if (i >= 0) set_model(i);
  return i >= 0;
}

// Each setter plans again only when the scenario changed: the page hands the model every
// control's value on any change.
void LearnFitModel::set_model(int index) {
  if (index < 0 || index >= static_cast<int>(m_models.size()) || index == m_model) return;
  m_model = index;
  m_context = clamped_context(m_context);  // within the new model's context length
  recompute();
}

bool LearnFitModel::set_gpu(const std::string& id) {
  const int i = catalog_index(m_gpus, id);
  if (i >= 0) set_gpu(i);
  return i >= 0;
}

void LearnFitModel::set_gpu(int index) {
  if (index < 0 || index >= static_cast<int>(m_gpus.size()) || index == m_gpu) return;
  m_gpu = index;
  recompute();
}

bool LearnFitModel::set_scheme(const std::string& id) {
  if (std::find(scheme_ids().begin(), scheme_ids().end(), id) == scheme_ids().end()) return false;
  if (id != m_scheme) {
    m_scheme = id;
    recompute();
  }
  return true;
}

std::int64_t LearnFitModel::clamped_context(std::int64_t tokens) const {
  const int limit = m_models[static_cast<std::size_t>(m_model)].max_context;
  return std::max<std::int64_t>(1, limit > 0 ? std::min<std::int64_t>(tokens, limit) : tokens);
}

void LearnFitModel::set_context(std::int64_t tokens) {
  tokens = clamped_context(tokens);
  if (tokens == m_context) return;
  m_context = tokens;
  recompute();
}

void LearnFitModel::set_batch(std::int64_t batch) {
  batch = std::max<std::int64_t>(1, batch);
  if (batch == m_batch) return;
  m_batch = batch;
  recompute();
}

planners::Scenario LearnFitModel::scenario() const {
  planners::Scenario s;
  s.model = m_models[static_cast<std::size_t>(m_model)];
  s.gpu = m_gpus[static_cast<std::size_t>(m_gpu)];
  s.scheme = planners::parse_scheme(m_scheme).value();
  s.context = m_context;
  s.batch = m_batch;
  return s;
}

void LearnFitModel::recompute() {
  auto r = planners::plan(scenario());
  m_result.reset();
  if (!r) {
    m_error = QString::fromStdString(r.message());
    return;
  }
  m_error.clear();
  m_result = *r;
}

QString LearnFitModel::answer() const {
  if (!m_result) return QObject::tr("—");
  return m_result->fits ? QObject::tr("✔ Fits") : QObject::tr("✘ Does not fit");
}

QString LearnFitModel::detail() const {
  if (!m_result) return {};
  const planners::PlanResult& p = *m_result;
  const planners::Scenario s = scenario();
  const double used = static_cast<double>(p.weights_bytes_per_gpu + p.reserve_bytes) +
                      static_cast<double>(p.kv_bytes_batch_per_gpu);
  QString sum =
      QObject::tr(
          "%1 weights + %2 reserve + %3 KV (%4 × %5 tokens in %6) = <b>%7</b> of <b>%8</b> "
          "usable (%9 % of the GPU's %10).")
          .arg(format_byte_count(static_cast<double>(p.weights_bytes_per_gpu)),
               format_byte_count(static_cast<double>(p.reserve_bytes)),
               format_byte_count(static_cast<double>(p.kv_bytes_batch_per_gpu)), thousands(s.batch),
               thousands(s.context), QString::fromStdString(s.scheme.label),
               format_byte_count(used), format_byte_count(static_cast<double>(p.usable_bytes)))
          .arg(s.deployment.gpu_memory_utilization * 100, 0, 'f', 0)
          .arg(format_byte_count(static_cast<double>(p.gpu_bytes)));
  if (p.weights_bytes_per_gpu + p.reserve_bytes > p.usable_bytes) {
    sum += QObject::tr(
        " The weights alone leave no room for any KV cache: this model needs more GPUs (tensor "
        "or pipeline parallelism, in the Planner view).");
  }
  return sum;
}

QString LearnFitModel::max_batch_text() const {
  if (!m_result) return {};
  return QObject::tr("Largest batch at %1 tokens<br><span style='font-size:20pt'><b>%2</b></span>")
      .arg(thousands(m_context), thousands(m_result->max_batch));
}

QString LearnFitModel::max_context_text() const {
  if (!m_result) return {};
  const bool capped =
      m_result->max_context >= m_models[static_cast<std::size_t>(m_model)].max_context;
  return QObject::tr(
             "Longest context at batch %1<br><span style='font-size:20pt'><b>%2</b></span> "
             "tokens%3")
      .arg(thousands(m_batch), thousands(m_result->max_context),
           capped ? QObject::tr(" (the model's limit)") : QString());
}

std::vector<LearnFitModel::Part> LearnFitModel::memory_parts() const {
  if (!m_result) return {};
  const planners::PlanResult& r = *m_result;
  const double used =
      static_cast<double>(r.weights_bytes_per_gpu + r.reserve_bytes + r.kv_bytes_batch_per_gpu);
  return {
      {QObject::tr("weights"), static_cast<double>(r.weights_bytes_per_gpu), Part::Kind::Weights},
      {QObject::tr("reserve"), static_cast<double>(r.reserve_bytes), Part::Kind::Reserve},
      {r.fits ? QObject::tr("KV cache") : QObject::tr("KV cache (does not fit)"),
       static_cast<double>(r.kv_bytes_batch_per_gpu), r.fits ? Part::Kind::Kv : Part::Kind::KvOver},
      {QObject::tr("free"), std::max(0.0, static_cast<double>(r.usable_bytes) - used),
       Part::Kind::Free},
  };
}

std::vector<LearnFitModel::SchemeRow> LearnFitModel::scheme_rows() const {
  std::vector<SchemeRow> rows;
  const planners::Scenario s = scenario();
  for (const std::string& id : scheme_ids()) {
    planners::Scenario other = s;
    other.scheme = planners::parse_scheme(id).value();
    const auto r = planners::plan(other);
    SchemeRow row;
    row.current = id == m_scheme;
    const QString label = QString::fromStdString(other.scheme.label);
    if (r) {
      row.cells = {label, format_byte_count(static_cast<double>(r->kv_bytes_batch_per_gpu)),
                   r->fits ? QObject::tr("yes") : QObject::tr("no"), thousands(r->max_batch),
                   thousands(r->max_context)};
      row.fits = r->fits;
    } else {
      row.cells = {label, QString::fromStdString(r.message())};
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

LearnLink LearnFitModel::link() const {
  return LearnLink::to_planner(scenario(), {m_scheme});
}

}  // namespace kvlab::gui
