// Reading a chart's series the way a test finds a field: by name. A chart names each series (its
// objectName, stated in the chart's header); a family drawn once per scheme or policy shares one
// name and comes back in the order drawn, so no chart hands out its plottables for tests.
#pragma once

#include <vector>

#include <qcustomplot.h>
#include <QString>

namespace kvlab::gui_test {

// The plottables of type P under `plot` named `name`, in the order the chart added them.
template <class P>
std::vector<P*> plottables(const QCustomPlot* plot, const char* name) {
  std::vector<P*> out;
  for (P* p : plot->findChildren<P*>(QString::fromLatin1(name), Qt::FindDirectChildrenOnly)) {
    out.push_back(p);
  }
  return out;
}

// The one of them whose legend text (QCPAbstractPlottable::name()) is `legend`; null if none.
template <class P>
P* plottable_in_legend(const QCustomPlot* plot, const char* name, const QString& legend) {
  for (P* p : plottables<P>(plot, name)) {
    if (p->name() == legend) return p;
  }
  return nullptr;
}

}  // namespace kvlab::gui_test
