// "Should I compress?": the planners' advice matrix (planners::advise) as a table, one row per
// context, one column per number of concurrent users. A cell shows the recommended scheme and
// its gain in tokens/s per GPU over fp16 ("fp8 +58%", or "fp16" for don't compress); its
// background says the verdict (grey: don't compress, green: compress, red: nothing fits); its
// tooltip is the planner's reason, then the quality cost of the recommended scheme from the
// stored quality runs.
#pragma once

#include <QAbstractTableModel>
#include <QColor>
#include <QString>

#include "kvlab/planners/serving.h"

namespace kvlab::gui {

class PlannerAdviceModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  using QAbstractTableModel::QAbstractTableModel;

  // The verdict of a cell ("don't compress", "compress: fp8", "nothing fits"), as a role.
  static constexpr int kVerdictRole = Qt::UserRole + 1;
  // The verdicts' colours (the legend beside the table uses them too).
  static QColor dont_compress_color();
  static QColor compress_color();
  static QColor nothing_fits_color();

  void set_advice(planners::Advice advice);
  const planners::Advice& advice() const { return m_advice; }
  // The cell of (context row, concurrency column).
  const planners::AdviceCell* cell(int row, int column) const;
  // What a cell shows: "fp8 +58%", "fp16", "nothing fits".
  static QString cell_text(const planners::Advice& a, const planners::AdviceCell& c);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QString tooltip(const planners::AdviceCell& c) const;

  planners::Advice m_advice;
};

}  // namespace kvlab::gui
