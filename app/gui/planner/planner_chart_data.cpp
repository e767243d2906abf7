#include "planner/planner_chart_data.h"

#include <algorithm>
#include <iterator>

#include <QLocale>
#include <QObject>

namespace kvlab::gui {

QColor planner_series_color(int i) {
  static const QColor colors[] = {{52, 101, 164}, {230, 140, 40}, {60, 150, 90},  {120, 80, 170},
                                  {200, 55, 55},  {90, 90, 90},   {40, 160, 170}, {170, 120, 60}};
  return colors[static_cast<std::size_t>(i) % std::size(colors)];
}

double RooflineData::roof(double intensity) const {
  return std::min(peak_tflops, intensity * bandwidth_tbs);
}

double RooflineData::ridge() const {
  return bandwidth_tbs > 0 ? peak_tflops / bandwidth_tbs : 0;
}

QString deployment_title(const planners::Scenario& s) {
  const auto& d = s.deployment;
  return QObject::tr("%1 on %2 × %3 (TP %4, PP %5)")
      .arg(QString::fromStdString(s.model.name))
      .arg(d.tp * d.pp)
      .arg(QString::fromStdString(s.gpu.name))
      .arg(d.tp)
      .arg(d.pp);
}

FrontierChartData frontier_data(const planners::Scenario& base,
                                const std::vector<planners::Scheme>& schemes) {
  FrontierChartData out;
  out.title = QObject::tr("%1\n%2 tokens per sequence; the batch doubles along each curve")
                  .arg(deployment_title(base), QLocale().toString(qlonglong(base.context)));
  planners::Scenario s = base;
  for (const auto& scheme : schemes) {
    s.scheme = scheme;
    FrontierCurve c;
    c.scheme = QString::fromStdString(scheme.id);
    for (const auto& p : planners::frontier(s)) {
      c.batch.push_back(p.batch);
      c.tokens_per_s_per_user.push_back(p.tokens_per_s_per_user);
      c.tokens_per_s_per_gpu.push_back(p.tokens_per_s_per_gpu);
    }
    out.curves.push_back(std::move(c));
  }
  return out;
}

RooflineData roofline_data(const planners::Scenario& s,
                           const std::vector<planners::Scheme>& schemes,
                           const std::vector<planners::PlanResult>& results) {
  RooflineData out;
  out.title = QObject::tr("%1\nbatch %2 × %3 tokens per sequence")
                  .arg(deployment_title(s), QLocale().toString(s.batch),
                       QLocale().toString(qlonglong(s.context)));
  // The attention roof (planners/latency.h: attention_peak = bf16 × compute efficiency).
  out.peak_tflops = s.gpu.tflops.bf16 * s.compute_efficiency;
  out.bandwidth_tbs = s.gpu.bandwidth_gbs * 1e-3 * s.bandwidth_efficiency;
  for (std::size_t i = 0; i < schemes.size() && i < results.size(); ++i) {
    const planners::StepCost& st = results[i].latency.step;
    out.points.push_back({QString::fromStdString(schemes[i].id), st.intensity(),
                          st.achieved_flops() * 1e-12, QString::fromStdString(st.bound_by),
                          results[i].fits});
  }
  return out;
}

StepParts step_parts(const QString& scheme, int served, const planners::Latency& latency) {
  const planners::StepCost& st = latency.step;
  StepParts p;
  p.scheme = scheme;
  p.served = served;
  p.weights_read = st.t_weights;
  p.dense_compute = st.t_dense;
  p.kv_read = st.t_kv;
  p.attention_compute = st.t_attention;
  p.decompression = st.t_decompress;
  p.host_link = st.t_host;
  p.step = st.seconds;
  p.tokens_per_s_per_gpu = latency.tokens_per_s_per_gpu;
  p.tokens_per_s_per_user = latency.tokens_per_s_per_user;
  p.bound_by = QString::fromStdString(st.bound_by);
  return p;
}

}  // namespace kvlab::gui
