#include "planner/planner_table_model.h"

#include <array>
#include <cmath>

#include <QBrush>
#include <QColor>

#include "common/explain.h"
#include "common/gui_format.h"
#include "common/gui_style.h"

namespace kvlab::gui {

void PlannerTableModel::set_rows(std::vector<Row> rows, const QString& pinned_title) {
  beginResetModel();
  m_rows = std::move(rows);
  m_pinned_title = pinned_title;
  endResetModel();
}

int PlannerTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_rows.size());
}

int PlannerTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kPlannerColumnCount;
}

QString PlannerTableModel::millis(double seconds) {
  if (!std::isfinite(seconds)) return QStringLiteral("∞");
  if (seconds >= 1) return QStringLiteral("%1 s").arg(seconds, 0, 'f', 2);
  if (seconds >= 0.01) return QStringLiteral("%1 ms").arg(seconds * 1e3, 0, 'f', 0);
  return QStringLiteral("%1 ms").arg(seconds * 1e3, 0, 'f', 2);
}

QString PlannerTableModel::waits_on(const planners::StepCost& step) {
  return tr("%1 (%2-bound)")
      .arg(QString::fromStdString(step.bound_by),
           step.compute_bound ? tr("compute") : tr("memory"));
}

bool PlannerTableModel::runs_as_asked(const Row& row, int column) {
  switch (column) {
    case kPlannerTpot:
    case kPlannerTokensPerUser:
    case kPlannerTokensPerGpu:
    case kPlannerTokensDeployment:
    case kPlannerWaitsOn:
      return row.result.fits;
    default:
      return true;
  }
}

QString PlannerTableModel::text(const Row& row, int column) const {
  const planners::PlanResult& r = row.result;
  // A batch that does not fit does not decode: no step time or tokens/s as if it ran.
  if (!runs_as_asked(row, column)) return tr("does not fit");
  switch (column) {
    case kPlannerScheme: {
      const QString label = QString::fromStdString(row.scheme.label);
      return row.pinned ? tr("pinned: %1 · %2").arg(m_pinned_title, label) : label;
    }
    case kPlannerBytesPerToken:
      return QString::number(r.kv_bytes_per_token_model, 'f', 0);
    case kPlannerPerSequence:
      return format_byte_count(static_cast<double>(r.kv_bytes_per_sequence_per_gpu));
    case kPlannerBatch:
      return format_byte_count(static_cast<double>(r.kv_bytes_batch_per_gpu));
    case kPlannerFits:
      return r.fits ? tr("yes") : tr("no");
    case kPlannerMaxBatch:
      return QString::number(r.max_batch);
    case kPlannerMaxContext:
      return QString::number(r.max_context);
    case kPlannerFewestGpus:
      return r.min_gpus
                 ? QStringLiteral("%1 (TP %2 × PP %3)").arg(r.min_gpus).arg(r.min_tp).arg(r.min_pp)
                 : tr("none up to 64");
    case kPlannerBatchDeployment:
      return format_byte_count(static_cast<double>(r.kv_bytes_batch_deployment));
    case kPlannerTtft:
      return millis(r.ttft_s);
    case kPlannerTpot:
      return millis(r.tpot_s);
    case kPlannerTokensPerUser:
      return QString::number(r.tokens_per_s_per_user, 'f', 1);
    case kPlannerTokensPerGpu:
      return QString::number(r.tokens_per_s_per_gpu, 'f', 0);
    case kPlannerTokensDeployment:
      return QString::number(r.tokens_per_s_deployment, 'f', 0);
    case kPlannerWaitsOn:
      return waits_on(r.latency.step);
    default:
      return {};
  }
}

QVariant PlannerTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kPlannerColumnCount)
    return {};
  const Row& row = m_rows[static_cast<std::size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return text(row, index.column());
    case Qt::ForegroundRole:
      if (index.column() == kPlannerFits || !runs_as_asked(row, index.column())) {
        return QBrush(row.result.fits ? style::kFits : style::kDoesNotFit);
      }
      return {};
    case Qt::ToolTipRole:
      if (runs_as_asked(row, index.column())) return {};
      return tr("The batch does not fit, so it does not decode: at most %1 sequences of this "
                "context fit (the max batch column); lower the batch or pick a smaller scheme")
          .arg(row.result.max_batch);
    case Qt::BackgroundRole:
      return row.pinned ? QVariant(QBrush(QColor(238, 238, 246))) : QVariant();
    default:
      return {};
  }
}

QVariant PlannerTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  // Rows are headed by their scheme, so the view can keep it in sight while it scrolls sideways.
  if (orientation == Qt::Vertical) {
    if (section < 0 || section >= rowCount() || role != Qt::DisplayRole) return {};
    return text(m_rows[static_cast<std::size_t>(section)], kPlannerScheme);
  }
  if (section < 0 || section >= kPlannerColumnCount) return {};
  // Same order as PlannerColumn.
  // Two lines each, the second saying what the number counts, so the table stays narrow.
  static const std::array<const char*, kPlannerColumnCount> kNames{"scheme",
                                                                   "fits",
                                                                   "TPOT",
                                                                   "tok/s\nper user",
                                                                   "tok/s\nper GPU",
                                                                   "TTFT",
                                                                   "max batch",
                                                                   "max context",
                                                                   "min GPUs",
                                                                   "KV per sequence\n(per GPU)",
                                                                   "KV batch\n(per GPU)",
                                                                   "KV batch\n(deployment)",
                                                                   "KV B/token\n(whole model)",
                                                                   "tok/s\n(deployment)",
                                                                   "decode step\nwaits on"};
  if (role == Qt::DisplayRole) return tr(kNames[static_cast<std::size_t>(section)]);
  if (role == Qt::ToolTipRole) {
    const QStringList tips = explain::planner_columns();
    return section < tips.size() ? tips[section] : QString();
  }
  return {};
}

}  // namespace kvlab::gui
