// Plain value structs the Planner page's serving charts and the Learn page's "When does
// compression pay?" step draw from, and the functions that fill them from the planners' latency
// model: the one place those charts meet the planners (as report_charts.h is for the engine).
//
// Every number says what it counts: tokens/s "per user" is one sequence's decode rate, "per GPU"
// the deployment's tokens/s over its TP × PP GPUs; a decode step's times are one GPU of the most
// loaded pipeline stage, the whole batch (planners/latency.h).
#pragma once

#include <optional>
#include <vector>

#include <QColor>
#include <QString>

#include "kvlab/planners/serving.h"

namespace kvlab::gui {

// One scheme's frontier: the batch grows along the curve (planners::frontier).
struct FrontierCurve {
  QString scheme;  // the scheme's id: "fp16", "kivi2"
  std::vector<int> batch;
  std::vector<double> tokens_per_s_per_user, tokens_per_s_per_gpu;
};

// A marked point: the scenario's own batch, or the best choice under the targets.
struct FrontierMark {
  int curve = -1;  // index into curves
  double tokens_per_s_per_user = 0, tokens_per_s_per_gpu = 0;
  QString text;
};

struct FrontierChartData {
  QString title;  // "Llama-3-8B on 1 × H100, 8,192 tokens per sequence"
  std::vector<FrontierCurve> curves;
  double tpot_target_ms = 0;  // 0: none; else a line at 1000 ÷ target tokens/s per user
  std::optional<FrontierMark> chosen;
};

// One scheme's decode step on the roofline (Williams, Waterman and Patterson, CACM 2009).
struct RooflinePoint {
  QString scheme;
  double intensity = 0;  // FLOP per byte read, the step's (StepCost::intensity())
  double tflops = 0;     // TFLOP/s achieved per GPU (StepCost::achieved_flops())
  QString bound_by;      // what the step waits on
  bool fits = true;
};

struct RooflineData {
  QString title;
  double peak_tflops = 0;    // bf16 dense peak × compute efficiency, per GPU
  double bandwidth_tbs = 0;  // memory bandwidth × bandwidth efficiency, TB/s per GPU
  std::vector<RooflinePoint> points;
  // The roof at `intensity`: min(peak, intensity × bandwidth), TFLOP/s.
  double roof(double intensity) const;
  double ridge() const;  // the intensity where the two meet, FLOP/byte
};

// One decode step split into the parts the latency model charges, seconds.
struct StepParts {
  QString scheme;
  int served = 0;  // sequences in the batch
  double weights_read = 0, dense_compute = 0, kv_read = 0, attention_compute = 0;
  double decompression = 0, host_link = 0;
  double step = 0;  // PP × (max(weights, dense) + max(KV, attention + decompression, host))
  double tokens_per_s_per_gpu = 0, tokens_per_s_per_user = 0;
  QString bound_by;
};

// Curves for each scheme at the scenario's context (the scenario's scheme is replaced).
FrontierChartData frontier_data(const planners::Scenario& base,
                                const std::vector<planners::Scheme>& schemes);
// Points for each (scheme, result) at the scenario's context and batch.
RooflineData roofline_data(const planners::Scenario& s,
                           const std::vector<planners::Scheme>& schemes,
                           const std::vector<planners::PlanResult>& results);
StepParts step_parts(const QString& scheme, int served, const planners::Latency& latency);

// The colour of the i-th scheme on every Planner chart, so a scheme looks the same on each.
QColor planner_series_color(int i);

// "Llama-3-8B on 4 × NVIDIA H100 (TP 4, PP 1)".
QString deployment_title(const planners::Scenario& s);

}  // namespace kvlab::gui
