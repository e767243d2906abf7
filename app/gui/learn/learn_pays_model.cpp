#include "learn/learn_pays_model.h"

#include <algorithm>
#include <cmath>

#include <QLocale>
#include <QObject>

#include "common/gui_format.h"
#include "kvlab/planners/catalog.h"

namespace kvlab::gui {
namespace {

QString ms(double seconds) {
  return QStringLiteral("%1 ms").arg(seconds * 1e3, 0, 'f', seconds < 0.01 ? 2 : 1);
}

QString percent(double fraction) {
  return QStringLiteral("%1%2 %").arg(fraction >= 0 ? "+" : "").arg(fraction * 100, 0, 'f', 0);
}

QString tr(const char* text) {
  return QObject::tr(text);
}

}  // namespace

const std::vector<std::string>& LearnPaysModel::scheme_ids() {
  static const std::vector<std::string> ids = {"fp8", "int8", "int4", "kivi4", "kivi2", "kvcomp"};
  return ids;
}

const std::vector<int>& LearnPaysModel::tp_choices() {
  static const std::vector<int> tps = {1, 2, 4, 8};
  return tps;
}

LearnPaysModel::LearnPaysModel()
    : m_models(planners::builtin_models()), m_gpus(planners::builtin_gpus()) {
  for (const std::string& id : scheme_ids())
    m_schemes.push_back(planners::parse_scheme(id).value());
  // The defaults set directly, then one advice: the Learn view builds this page at start-up.
  m_model = std::max(0, catalog_index(m_models, "llama-3-8b"));
  m_gpu = std::max(0, catalog_index(m_gpus, "h100-sxm"));
  m_scheme = static_cast<int>(std::find(scheme_ids().begin(), scheme_ids().end(), "kivi2") -
                              scheme_ids().begin());
  update_contexts(8192);
  recompute();
}

bool LearnPaysModel::set_model(const std::string& id) {
  const int i = catalog_index(m_models, id);
  if (i >= 0) set_model(i);
  return i >= 0;
}

void LearnPaysModel::set_model(int index) {
  if (index < 0 || index >= static_cast<int>(m_models.size())) return;
  const std::int64_t keep = context();
  m_model = index;
  update_contexts(keep);
  recompute();
}

void LearnPaysModel::update_contexts(std::int64_t keep) {
  const auto& m = m_models[static_cast<std::size_t>(m_model)];
  m_contexts.clear();
  for (std::int64_t c = 512; c < m.max_context; c *= 2) m_contexts.push_back(c);
  m_contexts.push_back(m.max_context);
  int best = 0;
  for (int i = 0; i < static_cast<int>(m_contexts.size()); ++i) {
    const auto d = [&](int k) { return std::abs(std::log2(double(m_contexts[k]) / keep)); };
    if (d(i) < d(best)) best = i;
  }
  m_context = best;
}

bool LearnPaysModel::set_gpu(const std::string& id) {
  const int i = catalog_index(m_gpus, id);
  if (i >= 0) set_gpu(i);
  return i >= 0;
}

void LearnPaysModel::set_gpu(int index) {
  if (index < 0 || index >= static_cast<int>(m_gpus.size())) return;
  m_gpu = index;
  recompute();
}

bool LearnPaysModel::set_tp(int tp) {
  if (std::find(tp_choices().begin(), tp_choices().end(), tp) == tp_choices().end()) return false;
  m_tp = tp;
  recompute();
  return true;
}

bool LearnPaysModel::set_scheme(const std::string& id) {
  const auto it = std::find(scheme_ids().begin(), scheme_ids().end(), id);
  if (it == scheme_ids().end()) return false;
  set_scheme(static_cast<int>(it - scheme_ids().begin()));
  return true;
}

void LearnPaysModel::set_scheme(int index) {
  if (index < 0 || index >= static_cast<int>(m_schemes.size())) return;
  m_scheme = index;
  recompute();
}

void LearnPaysModel::set_context(std::int64_t tokens) {
  update_contexts(std::max<std::int64_t>(1, tokens));
  recompute();
}

void LearnPaysModel::set_context_index(int index) {
  m_context = std::clamp(index, 0, static_cast<int>(m_contexts.size()) - 1);
  recompute();
}

void LearnPaysModel::set_users(int users) {
  set_users_log2(static_cast<int>(std::lround(std::log2(std::max(1, users)))));
}

void LearnPaysModel::set_users_log2(int log2) {
  m_users = std::clamp(log2, 0, kMaxUsersLog2);
  recompute();
}

std::int64_t LearnPaysModel::context() const {
  return m_contexts.empty() ? 1 : m_contexts[static_cast<std::size_t>(m_context)];
}

const planners::Scheme& LearnPaysModel::compressed_scheme() const {
  return m_schemes[static_cast<std::size_t>(m_scheme)];
}

planners::Scenario LearnPaysModel::scenario() const {
  planners::Scenario s;
  s.model = m_models[static_cast<std::size_t>(m_model)];
  s.gpu = m_gpus[static_cast<std::size_t>(m_gpu)];
  s.scheme = planners::parse_scheme("fp16").value();
  s.deployment.tp = m_tp;
  s.context = context();
  s.batch = users();
  return s;
}

void LearnPaysModel::recompute() {
  m_cell.reset();
  m_steps.clear();
  if (m_contexts.empty()) return;  // still being set up
  const planners::Scenario s = scenario();
  planners::AdviceSpec spec;
  spec.base = s;
  spec.schemes = {s.scheme, compressed_scheme()};
  spec.contexts = {s.context};
  spec.concurrencies = {users()};
  spec.min_gain = kMinGain;
  auto advice = planners::advise(spec);
  if (!advice) {
    m_error = in_gui_terms(QString::fromStdString(advice.message()));
    return;
  }
  m_error.clear();
  m_cell = advice->cells.front();
  for (std::size_t k = 0; k < spec.schemes.size(); ++k) {
    const planners::SchemeOutcome& o = m_cell->outcomes[k];
    const QString id = QString::fromStdString(spec.schemes[k].id);
    planners::Scenario at = s;
    at.scheme = spec.schemes[k];
    at.batch = std::max(1, o.served);
    const auto r = planners::plan(at);
    StepParts none;  // not one sequence fits: an empty bar group under the scheme's name
    none.scheme = id;
    m_steps.push_back(r && o.served > 0 ? step_parts(id, o.served, r->latency) : none);
  }
}

QString LearnPaysModel::verdict() const {
  if (!m_cell) return tr("—");
  const int rec = m_cell->recommended;
  return rec < 0    ? tr("Nothing fits")
         : rec == 0 ? tr("Don't compress")
                    : tr("Compress with %1").arg(QString::fromStdString(compressed_scheme().id));
}

QString LearnPaysModel::rate_text(int k) const {
  if (!m_cell || k < 0 || k > 1) return {};
  const planners::SchemeOutcome& o = m_cell->outcomes[static_cast<std::size_t>(k)];
  const QString id = QString::fromStdString(k == 0 ? "fp16" : compressed_scheme().id);
  return o.served > 0 ? tr("%1: <span style='font-size:16pt'><b>%2</b></span> tok/s per GPU<br>"
                           "%3 of %4 users at once")
                            .arg(id, QLocale().toString(o.tokens_per_s_per_gpu, 'f', 0),
                                 QLocale().toString(o.served), QLocale().toString(users()))
                      : tr("%1: not one user fits").arg(id);
}

QString LearnPaysModel::sentence() const {
  if (!m_cell || m_steps.size() < 2) return {};
  const planners::AdviceCell& c = *m_cell;
  const QString comp = QString::fromStdString(compressed_scheme().id);
  const auto& fo = c.outcomes[0];
  const auto& co = c.outcomes[1];
  const StepParts& fs = m_steps[0];
  const StepParts& cs = m_steps[1];
  const QString n = QLocale().toString(users());
  const QString tokens = QLocale().toString(qlonglong(context()));
  if (c.recommended < 0) {
    return tr("Not one sequence of %1 tokens fits beside the weights, in fp16 or %2: this model "
              "needs more GPUs here.")
        .arg(tokens, comp);
  }
  if (fo.served == 0) {
    return tr("fp16 cannot hold even one sequence of %1 tokens; %2 holds %3 of the %4 users, "
              "%5 tok/s per GPU: compressing is the only way to serve this context here.")
        .arg(tokens, comp, QLocale().toString(co.served), n)
        .arg(co.tokens_per_s_per_gpu, 0, 'f', 0);
  }
  QString why;
  if (fo.served < users()) {
    // Memory-limited: the larger batch shares each weight read.
    why = tr("fp16's KV for %1 users of %2 tokens would need %3 % of the KV memory, so it holds "
             "only %4 at once; %5 holds %6. Every step reads the weights once for the whole "
             "batch, so the larger batch gets more tokens from each read: %7 against %8 tok/s "
             "per GPU (%9).")
              .arg(n, tokens)
              .arg(c.memory_pressure * 100, 0, 'f', 0)
              .arg(QLocale().toString(fo.served), comp, QLocale().toString(co.served))
              .arg(co.tokens_per_s_per_gpu, 0, 'f', 0)
              .arg(fo.tokens_per_s_per_gpu, 0, 'f', 0)
              .arg(percent(co.gain));
    if (cs.decompression > cs.kv_read) {
      why += tr(" %1's step then waits on its decompression (%2 of its %3 step).")
                 .arg(comp, ms(cs.decompression), ms(cs.step));
    }
  } else {
    // Both hold everyone: the step times decide.
    why = tr("fp16 holds %1 (%2 % of the KV memory). Its step waits on %3: the weights take "
             "%4 and the KV %5 of the %6 step.")
              .arg(users() == 1 ? tr("the one user") : tr("all %1 users").arg(n))
              .arg(c.memory_pressure * 100, 0, 'f', 0)
              .arg(fs.bound_by, ms(fs.weights_read), ms(fs.kv_read), ms(fs.step));
    why += cs.decompression > cs.kv_read
               ? tr(" %1 reads its KV in %2 but then waits %3 on decompressing it, %4 than "
                    "fp16's %5 read,")
                     .arg(comp, ms(cs.kv_read), ms(cs.decompression),
                          cs.decompression < fs.kv_read ? tr("less") : tr("more"), ms(fs.kv_read))
               : tr(" %1 reads its KV in %2 (decompressing, %3, hides under the reads),")
                     .arg(comp, ms(cs.kv_read), ms(cs.decompression));
    why += tr(" so its step takes %1: %2 tok/s per GPU.").arg(ms(cs.step), percent(co.gain));
  }
  if (c.recommended > 0) return why + tr(" Compress.");
  if (co.gain > 0) {
    return why + tr(" Less than the %1 % that pays for the quality cost: don't compress.")
                     .arg(kMinGain * 100, 0, 'f', 0);
  }
  return why + tr(" Compressing loses here: don't compress.");
}

LearnLink LearnPaysModel::link() const {
  return LearnLink::to_planner(scenario(), {"fp16", compressed_scheme().id});
}

}  // namespace kvlab::gui
