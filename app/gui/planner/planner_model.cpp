#include "planner/planner_model.h"

#include <algorithm>

#include <QLocale>

#include "common/gui_format.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/store/plan_inputs.h"
#include "planner/planner_chart_data.h"
#include "planner/planner_table_model.h"

namespace kvlab::gui {

PlannerModel::PlannerModel(std::shared_ptr<RunsStore> store, QObject* parent)
    : QObject(parent), m_store(std::move(store)), m_table(new PlannerTableModel(this)) {
  reload_catalogues();
}

void PlannerModel::reload_catalogues() {
  m_models = planners::builtin_models();
  m_gpus = planners::builtin_gpus();
  m_measured.clear();
  if (m_store) {
    if (auto entries = m_store->list_catalog_entries("model")) {
      for (const auto& j : *entries) {
        if (auto m = planners::model_from_json(j)) m_models.push_back(*m);
      }
    }
    if (auto entries = m_store->list_catalog_entries("gpu")) {
      for (const auto& j : *entries) {
        if (auto g = planners::gpu_from_json(j)) m_gpus.push_back(*g);
      }
    }
    if (auto runs = m_store->list_runs(50)) {
      for (const auto& r : *runs) {
        const auto& m = r.metrics;
        if (run_kind_from_id(r.kind) != RunKind::Compression || !m.contains("bits_per_value") ||
            !m["bits_per_value"].is_number()) {
          continue;
        }
        m_measured.push_back(planners::measured_scheme(
            "run:" + std::to_string(r.id), "run " + std::to_string(r.id) + " (" + r.method + ")",
            m["bits_per_value"].get<double>()));
      }
    }
  }
  emit catalogues_changed();
}

bool PlannerModel::add_model_if_new(const planners::ModelSpec& model) {
  if (std::any_of(m_models.begin(), m_models.end(),
                  [&](const planners::ModelSpec& m) { return m.id == model.id; })) {
    return false;
  }
  m_models.push_back(model);
  return true;
}

bool PlannerModel::add_gpu_if_new(const planners::GpuSpec& gpu) {
  if (std::any_of(m_gpus.begin(), m_gpus.end(),
                  [&](const planners::GpuSpec& g) { return g.id == gpu.id; })) {
    return false;
  }
  m_gpus.push_back(gpu);
  return true;
}

std::vector<planners::Scheme> PlannerModel::schemes_for(const QStringList& ids,
                                                        const QString& evict) const {
  std::vector<planners::Scheme> out;
  for (const QString& qid : ids) {
    const std::string id = qid.toStdString();
    std::optional<planners::Scheme> s;
    if (id.rfind("run:", 0) == 0) {
      for (const auto& m : m_measured) {
        if (m.id == id) s = m;
      }
    } else {
      const std::string full =
          evict == QLatin1String("none") ? id : id + "+evict:" + evict.toStdString();
      if (auto parsed = planners::parse_scheme(full)) s = *parsed;
    }
    if (s && s->kind == planners::SchemeKind::Measured && evict != QLatin1String("none")) {
      s->evict_fraction = evict.chopped(1).toDouble() / 100;
      s->label += " + evict to " + evict.toStdString();
    }
    if (s) out.push_back(*s);
  }
  return out;
}

const planners::KernelRates& PlannerModel::rates_for(const planners::GpuSpec& gpu) const {
  if (auto it = m_rates.find(gpu.id); it != m_rates.end()) return it->second;
  planners::KernelRates rates = planners::default_kernel_rates();
  if (m_store) {
    // A stored run that cannot give rates leaves the default (the CLI names the run's error).
    if (auto stored = stored_kernel_rates(*m_store, gpu); stored && *stored) rates = **stored;
  }
  return m_rates.emplace(gpu.id, std::move(rates)).first->second;
}

void PlannerModel::recompute(const PlannerInputs& inputs) {
  m_scenario = inputs.scenario;
  m_scenario.rates = rates_for(m_scenario.gpu);
  m_shown_schemes = inputs.schemes;
  m_results.clear();
  m_error.clear();
  if (m_shown_schemes.empty()) m_error = tr("Check at least one scheme.");
  planners::Scenario s = m_scenario;
  for (const auto& scheme : m_shown_schemes) {
    s.scheme = scheme;
    auto r = planners::plan(s);
    if (!r) {
      m_error = in_gui_terms(QString::fromStdString(r.message()));
      m_results.clear();
      break;
    }
    m_results.push_back(*r);
  }
  if (m_results.empty()) m_shown_schemes.clear();
  fill_table();
  update_slo(inputs.ttft_target_ms, inputs.tpot_target_ms);
  update_advice(inputs);
  emit recomputed();
}

void PlannerModel::fill_table() {
  std::vector<PlannerTableModel::Row> rows;
  for (std::size_t i = 0; i < m_results.size(); ++i) {
    rows.push_back({m_shown_schemes[i], m_results[i], false});
  }
  for (const auto& [s, r] : m_pinned) rows.push_back({s, r, true});
  m_table->set_rows(std::move(rows), m_pinned_title);
}

void PlannerModel::update_slo(double ttft, double tpot) {
  m_slo.reset();
  if (m_results.empty()) {
    m_slo_text = m_error;
    return;
  }
  if (ttft <= 0 && tpot <= 0) {
    m_slo_text = tr("No targets: set a TTFT or TPOT target to pick the best scheme and batch.");
    return;
  }
  auto c = planners::best_under_slo(m_scenario, m_shown_schemes, {ttft, tpot});
  if (!c) {
    m_slo_text = in_gui_terms(QString::fromStdString(c.message()));
    return;
  }
  m_slo = *c;
  m_slo_text = tr("Best under the targets: %1").arg(QString::fromStdString(c->reason));
}

void PlannerModel::update_advice(const PlannerInputs& in) {
  const planners::Scenario& s = m_scenario;
  const auto& d = s.deployment;
  // The grid answers the page's question: its checked schemes (fp16 first, the baseline, checked
  // or not), and its context and batch beside the usual ones. Computed again only when one of
  // those, the model, GPU, deployment or efficiencies changes.
  planners::AdviceSpec spec;
  spec.base = s;
  spec.schemes.push_back(planners::parse_scheme("fp16").value());
  for (const auto& sc : m_shown_schemes) {
    if (sc.id != "fp16" && sc.id != "bf16") spec.schemes.push_back(sc);
  }
  std::vector<std::string> scheme_ids;
  for (const auto& sc : spec.schemes) scheme_ids.push_back(sc.id);
  const auto with = [](auto values, auto value) {  // sorted, without repeats
    values.push_back(value);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    return values;
  };
  const std::vector<std::int64_t> contexts =
      with(planners::kDefaultAdviceContexts, std::int64_t{s.context});
  const std::vector<int> concurrencies =
      with(planners::kDefaultAdviceConcurrencies, static_cast<int>(s.batch));
  const std::string key = json_text(nlohmann::json{
      planners::model_to_json(s.model), planners::gpu_to_json(s.gpu), d.tp, d.pp,
      d.gpu_memory_utilization, d.reserve_bytes, d.page_tokens, s.bandwidth_efficiency,
      s.compute_efficiency, s.rates.source, in.advice_min_gain,
      in.advice_max_perplexity_change.value_or(-1), scheme_ids, contexts, concurrencies});
  if (key == m_advice_key) return;
  m_advice_key = key;
  ++m_advice_version;
  m_advice_question = tr("Should %1 compress its KV cache?").arg(deployment_title(s));
  QStringList dropped;
  for (const std::int64_t c : contexts) {
    if (c <= s.model.max_context) {
      spec.contexts.push_back(c);
    } else {
      dropped << QLocale().toString(qlonglong(c));
    }
  }
  if (spec.contexts.empty()) spec.contexts.push_back(s.model.max_context);
  spec.concurrencies = concurrencies;
  spec.min_gain = in.advice_min_gain;
  spec.max_perplexity_change = in.advice_max_perplexity_change;
  if (m_store) {
    if (auto q = scheme_quality(*m_store, s.model, spec.schemes)) {
      for (const auto& e : *q) {
        spec.quality.push_back(e.text);
        spec.perplexity_change.push_back(e.perplexity_change);
        spec.perplexity_change_se.push_back(e.perplexity_change_se);
      }
    }
  }
  auto advice = planners::advise(spec);
  if (!advice) {
    m_advice.reset();
    m_advice_error = in_gui_terms(QString::fromStdString(advice.message()));
    return;
  }
  m_advice = std::move(*advice);
  m_advice_error.clear();
  m_advice_note = dropped.isEmpty()
                      ? QString()
                      : tr("Left out, beyond %1's %2 tokens: %3.")
                            .arg(QString::fromStdString(s.model.name),
                                 QLocale().toString(s.model.max_context), dropped.join(", "));
}

Result<std::string> PlannerModel::import_config(const QString& path) {
  auto m = planners::import_model_file(path.toStdString());
  if (!m) return make_error(m.message());
  if (m_store) {
    if (auto s = m_store->save_catalog_entry("model", m->id, planners::model_to_json(*m)); !s) {
      return make_error(s.message());
    }
    reload_catalogues();
  } else {
    m_models.push_back(*m);
    emit catalogues_changed();
  }
  emit status_message(tr("Imported %1 from %2").arg(QString::fromStdString(m->id), path), 5000);
  return m->id;
}

Result<std::string> PlannerModel::add_gpu(const planners::GpuSpec& gpu) {
  if (auto v = gpu.validate(); !v) return make_error(v.message());
  if (m_store) {
    if (auto s = m_store->save_catalog_entry("gpu", gpu.id, planners::gpu_to_json(gpu)); !s) {
      return make_error(s.message());
    }
    reload_catalogues();
  } else {
    m_gpus.push_back(gpu);
    emit catalogues_changed();
  }
  return gpu.id;
}

Result<std::int64_t> PlannerModel::save(const PlanRunContext& context) {
  if (!m_store) return make_error("No runs database: the scenario cannot be saved.");
  if (m_results.empty()) return make_error("There are no results to save.");
  std::vector<std::pair<planners::Scheme, planners::PlanResult>> results;
  for (std::size_t i = 0; i < m_results.size(); ++i) {
    results.emplace_back(m_shown_schemes[i], m_results[i]);
  }
  NewRun run = plan_run(m_scenario, results, context);
  run.params["compute_efficiency"] = m_scenario.compute_efficiency;  // restore() reads it back
  auto id = m_store->save_run(run);
  if (!id) return id;
  emit status_message(tr("Scenario saved as run #%1").arg(*id), 5000);
  emit run_saved(*id);
  return *id;
}

void PlannerModel::pin() {
  const planners::Scenario& s = m_scenario;
  m_pinned.clear();
  for (std::size_t i = 0; i < m_results.size(); ++i) {
    m_pinned.emplace_back(m_shown_schemes[i], m_results[i]);
  }
  m_pinned_title = tr("%1 on %2, %3 tokens × %4")
                       .arg(QString::fromStdString(s.model.name), QString::fromStdString(s.gpu.id))
                       .arg(s.context)
                       .arg(s.batch);
  fill_table();
}

}  // namespace kvlab::gui
