// The Planner page's serving tabs (see planner_view.h): the throughput frontier with optional
// TTFT / TPOT targets, the roofline, and "Should I compress?" (planners::advise), with the same
// defaults as `kvlab plan advise` plus the page's schemes, context and batch; and the decompression
// rates, as the command line finds them.
#include <algorithm>

#include <fmt/format.h>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QVBoxLayout>

#include "common/explain.h"
#include "common/gui_format.h"
#include "common/number_fields.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/store/plan_inputs.h"
#include "planner/planner_advice_panel.h"
#include "planner/planner_chart_data.h"
#include "planner/planner_frontier_chart.h"
#include "planner/planner_roofline_chart.h"
#include "planner/planner_view.h"

namespace kvlab::gui {
namespace {

// `kvlab plan advise`'s defaults (app/cli/cli_plan_advise.cpp): fp16 first, then in order of
// quality cost; contexts beyond the model's limit are left out.

QDoubleSpinBox* target_spin(const QString& tip) {
  auto* s = new RealField;
  s->setRange(0, 1e6);
  s->setDecimals(0);
  s->setSingleStep(10);
  s->setValue(0);
  s->setSuffix(QObject::tr(" ms"));
  s->setSpecialValueText(QObject::tr("none"));
  s->setKeyboardTracking(false);
  s->setToolTip(tip);
  return s;
}

}  // namespace

QWidget* PlannerView::make_frontier_tab() {
  m_ttft_target = target_spin(
      tr("Time to first token target: a scheme whose prefill of one prompt of this context "
         "takes longer is ruled out (none: no target)"));
  m_tpot_target = target_spin(
      tr("Time per output token target: the largest batch whose decode step is at most this "
         "long (each user then gets at least 1000 ÷ target tokens/s; none: no target)"));
  m_slo_label = new QLabel;
  m_slo_label->setWordWrap(true);
  m_slo_label->setToolTip(
      tr("Among the checked schemes, the scheme and batch with the most tokens/s per GPU that "
         "fit memory and meet both targets (planners' best_under_slo)"));
  auto* row = new QHBoxLayout;
  for (auto [caption, spin] :
       {std::pair{tr("TTFT ≤"), m_ttft_target}, std::pair{tr("TPOT ≤"), m_tpot_target}}) {
    auto* label = new QLabel(caption);
    label->setBuddy(spin);
    label->setToolTip(spin->toolTip());
    row->addWidget(label);
    row->addWidget(spin);
  }
  row->addStretch(1);
  auto* tab = new QWidget;
  auto* layout = new QVBoxLayout(tab);
  layout->setContentsMargins(0, 4, 0, 0);
  layout->addLayout(row);
  layout->addWidget(m_slo_label);
  layout->addWidget(m_frontier_chart, 1);
  for (auto* s : {m_ttft_target, m_tpot_target}) {
    connect(s, &QDoubleSpinBox::valueChanged, this, &PlannerView::recompute);
  }
  return tab;
}

void PlannerView::set_compute_efficiency(double fraction) {
  m_compute_efficiency->setValue(fraction);
}

void PlannerView::set_targets(double ttft_ms, double tpot_ms) {
  {
    const QSignalBlocker b(m_ttft_target);
    m_ttft_target->setValue(ttft_ms);
  }
  m_tpot_target->setValue(tpot_ms);
  recompute();
}

const planners::KernelRates& PlannerView::rates_for(const planners::GpuSpec& gpu) const {
  if (auto it = m_rates.find(gpu.id); it != m_rates.end()) return it->second;
  planners::KernelRates rates = planners::default_kernel_rates();
  if (m_store) {
    // A stored run that cannot give rates leaves the default (the CLI names the run's error).
    if (auto stored = stored_kernel_rates(*m_store, gpu); stored && *stored) rates = **stored;
  }
  return m_rates.emplace(gpu.id, std::move(rates)).first->second;
}

void PlannerView::update_serving(const planners::Scenario& s) {
  const double ttft = m_ttft_target->value(), tpot = m_tpot_target->value();
  m_slo.reset();
  if (m_results.empty()) {
    m_frontier_chart->set_data({});
    m_roofline_chart->set_data({});
    m_slo_label->setText(m_error->text());
  } else {
    FrontierChartData frontier = frontier_data(s, m_shown_schemes);
    frontier.tpot_target_ms = tpot;
    if (ttft > 0 || tpot > 0) {
      auto c = planners::best_under_slo(s, m_shown_schemes, {ttft, tpot});
      if (!c) {
        m_slo_label->setText(in_gui_terms(QString::fromStdString(c.message())));
      } else {
        m_slo = *c;
        m_slo_label->setText(
            tr("Best under the targets: %1").arg(QString::fromStdString(c->reason)));
        if (c->found) {
          frontier.chosen =
              FrontierMark{c->scheme, c->tokens_per_s_per_user, c->tokens_per_s_per_gpu, QString()};
        }
      }
    } else {
      m_slo_label->setText(
          tr("No targets: set a TTFT or TPOT target to pick the best scheme and batch."));
    }
    m_frontier_chart->set_data(frontier);
    m_roofline_chart->set_data(roofline_data(s, m_shown_schemes, m_results));
  }
  update_advice(s);
}

void PlannerView::update_advice(const planners::Scenario& s) {
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
      with(planners::kDefaultAdviceContexts, std::int64_t{m_context->value()});
  const std::vector<int> concurrencies =
      with(planners::kDefaultAdviceConcurrencies, m_batch->value());
  const std::string key = json_text(nlohmann::json{
      planners::model_to_json(s.model), planners::gpu_to_json(s.gpu), d.tp, d.pp,
      d.gpu_memory_utilization, d.reserve_bytes, d.page_tokens, s.bandwidth_efficiency,
      s.compute_efficiency, s.rates.source, m_advice_panel->min_gain(),
      m_advice_panel->max_perplexity_change().value_or(-1), scheme_ids, contexts, concurrencies});
  if (key == m_advice_key) return;
  m_advice_key = key;
  const QString question = tr("Should %1 compress its KV cache?").arg(deployment_title(s));
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
  spec.min_gain = m_advice_panel->min_gain();
  spec.max_perplexity_change = m_advice_panel->max_perplexity_change();
  if (m_store) {
    if (auto q = scheme_quality(*m_store, s.model, spec.schemes)) {
      for (const auto& e : *q) {
        spec.quality.push_back(e.text);
        spec.perplexity_change.push_back(e.perplexity_change);
      }
    }
  }
  auto advice = planners::advise(spec);
  if (!advice) {
    m_advice_panel->set_error(question, in_gui_terms(QString::fromStdString(advice.message())));
    return;
  }
  const QString note = dropped.isEmpty()
                           ? QString()
                           : tr("Left out, beyond %1's %2 tokens: %3.")
                                 .arg(QString::fromStdString(s.model.name),
                                      QLocale().toString(s.model.max_context), dropped.join(", "));
  m_advice_panel->set_advice(std::move(*advice), question, note);
}

}  // namespace kvlab::gui
