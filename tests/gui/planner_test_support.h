// Scenarios and plan() results computed in the test, shared by the Planner page test and the
// Planner model test.
#pragma once

#include <QAbstractItemModel>
#include <QString>

#include "kvlab/planners/catalog.h"
#include "kvlab/planners/solvers.h"

namespace kvlab::gui_test {

inline planners::Scenario scenario_of(const char* model, const char* gpu, const char* scheme,
                                      int context, int batch, int tp = 1) {
  planners::Scenario s;
  s.model = planners::find_model(model).value();
  s.gpu = planners::find_gpu(gpu).value();
  s.scheme = planners::parse_scheme(scheme).value();
  s.context = context;
  s.batch = batch;
  s.deployment.tp = tp;
  return s;
}

inline planners::PlanResult expected(const char* model, const char* gpu, const char* scheme,
                                     int context, int batch, int tp = 1) {
  return planners::plan(scenario_of(model, gpu, scheme, context, batch, tp)).value();
}

inline QString header(const QAbstractItemModel* m, int column) {
  return m->headerData(column, Qt::Horizontal).toString();
}

}  // namespace kvlab::gui_test
