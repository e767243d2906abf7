#include "planner/planner_advice_model.h"

#include <cmath>

#include <QBrush>
#include <QLocale>

namespace kvlab::gui {

QColor PlannerAdviceModel::dont_compress_color() {
  return {228, 228, 228};
}
QColor PlannerAdviceModel::compress_color() {
  return {190, 228, 190};
}
QColor PlannerAdviceModel::nothing_fits_color() {
  return {240, 190, 185};
}

void PlannerAdviceModel::set_advice(planners::Advice advice) {
  beginResetModel();
  m_advice = std::move(advice);
  endResetModel();
}

const planners::AdviceCell* PlannerAdviceModel::cell(int row, int column) const {
  if (row < 0 || column < 0 || row >= rowCount() || column >= columnCount()) return nullptr;
  const std::size_t i = static_cast<std::size_t>(row) * m_advice.concurrencies.size() +
                        static_cast<std::size_t>(column);
  return i < m_advice.cells.size() ? &m_advice.cells[i] : nullptr;
}

QString PlannerAdviceModel::cell_text(const planners::Advice& a, const planners::AdviceCell& c) {
  if (c.recommended < 0) return tr("nothing fits");
  if (c.recommended == 0) return QStringLiteral("fp16");
  const auto k = static_cast<std::size_t>(c.recommended);
  const QString scheme = QString::fromStdString(a.scheme_ids[k]);
  const double gain = c.outcomes[k].gain;
  // fp16 serving nobody makes any gain infinite: the scheme is the only one that serves.
  return std::isfinite(gain) ? QStringLiteral("%1 %2%3%")
                                   .arg(scheme, gain >= 0 ? QStringLiteral("+") : QString())
                                   .arg(gain * 100, 0, 'f', 0)
                             : tr("%1 (fp16: none)").arg(scheme);
}

int PlannerAdviceModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_advice.contexts.size());
}

int PlannerAdviceModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_advice.concurrencies.size());
}

QString PlannerAdviceModel::tooltip(const planners::AdviceCell& c) const {
  QString tip = QString::fromStdString(c.reason);
  if (c.recommended < 0) return tip;
  const auto k = static_cast<std::size_t>(c.recommended);
  const QString scheme = QString::fromStdString(m_advice.scheme_ids[k]);
  const QString quality =
      k < m_advice.quality.size() ? QString::fromStdString(m_advice.quality[k]) : QString();
  tip += QStringLiteral("\n\n") +
         (quality.isEmpty()
              ? tr("Quality cost of %1: no stored quality run of this model with this method "
                   "(measure it on the Quality page).")
                    .arg(scheme)
              : tr("Quality cost of %1: %2.").arg(scheme, quality));
  return tip;
}

QVariant PlannerAdviceModel::data(const QModelIndex& index, int role) const {
  const planners::AdviceCell* c = index.isValid() ? cell(index.row(), index.column()) : nullptr;
  if (!c) return {};
  switch (role) {
    case Qt::DisplayRole:
      return cell_text(m_advice, *c);
    case Qt::ToolTipRole:
      return tooltip(*c);
    case kVerdictRole:
      return QString::fromStdString(c->verdict);
    case Qt::BackgroundRole:
      return QBrush(c->recommended < 0    ? nothing_fits_color()
                    : c->recommended == 0 ? dont_compress_color()
                                          : compress_color());
    case Qt::ForegroundRole:
      return QBrush(Qt::black);  // readable on the light backgrounds in any theme
    case Qt::TextAlignmentRole:
      return int(Qt::AlignCenter);
    default:
      return {};
  }
}

QVariant PlannerAdviceModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (section < 0) return {};
  if (orientation == Qt::Horizontal) {
    if (section >= columnCount()) return {};
    const int users = m_advice.concurrencies[static_cast<std::size_t>(section)];
    if (role == Qt::DisplayRole) {
      return users == 1 ? tr("1 user") : tr("%1 users").arg(QLocale().toString(users));
    }
    if (role == Qt::ToolTipRole) {
      return tr("%1 concurrent sequences on the whole deployment (as many as fit are held at "
                "once; the rest wait). Each cell: the scheme with the most tokens/s per GPU "
                "(within 2%, the earlier, whose quality cost is smaller), and its gain over "
                "fp16.")
          .arg(users);
    }
    return {};
  }
  if (section >= rowCount()) return {};
  const qlonglong ctx = m_advice.contexts[static_cast<std::size_t>(section)];
  if (role == Qt::DisplayRole) return tr("%1 tokens").arg(QLocale().toString(ctx));
  if (role == Qt::ToolTipRole) return tr("Tokens per sequence (prompt and generated)");
  return {};
}

}  // namespace kvlab::gui
