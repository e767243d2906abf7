// The Planner page's results table: one row per chosen scheme, then the pinned rows of an
// earlier scenario to compare with, each a scheme and its planners::PlanResult as plain values.
// Every column says what it counts: the whole model, one sequence, one GPU (of the most loaded
// pipeline stage) or the whole deployment (all TP × PP GPUs).
#pragma once

#include <vector>

#include <QAbstractTableModel>
#include <QString>

#include "kvlab/planners/solvers.h"

namespace kvlab::gui {

enum PlannerColumn {
  // The answer first (fits, latency, throughput), then capacity, then the memory detail.
  kPlannerScheme,
  kPlannerFits,
  kPlannerTpot,
  kPlannerTokensPerUser,
  kPlannerTokensPerGpu,
  kPlannerTtft,
  kPlannerMaxBatch,
  kPlannerMaxContext,
  kPlannerFewestGpus,
  kPlannerPerSequence,
  kPlannerBatch,
  kPlannerBatchDeployment,
  kPlannerBytesPerToken,
  kPlannerTokensDeployment,
  kPlannerWaitsOn,
  kPlannerColumnCount
};

class PlannerTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  using QAbstractTableModel::QAbstractTableModel;

  struct Row {
    planners::Scheme scheme;
    planners::PlanResult result;
    bool pinned = false;  // from the pinned scenario named pinned_title
  };
  void set_rows(std::vector<Row> rows, const QString& pinned_title);
  const std::vector<Row>& rows() const { return m_rows; }

  // A latency as the command line writes it: "1.23 ms", "350 ms", "2.10 s".
  static QString millis(double seconds);
  // "weights read (memory-bound)".
  static QString waits_on(const planners::StepCost& step);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  QString text(const Row& row, int column) const;
  // False for the decode columns (TPOT, tokens/s, what the step waits on) of a batch that does
  // not fit: it does not run, so they read "does not fit".
  static bool runs_as_asked(const Row& row, int column);

  std::vector<Row> m_rows;
  QString m_pinned_title;
};

}  // namespace kvlab::gui
