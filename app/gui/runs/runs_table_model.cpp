#include "runs/runs_table_model.h"

#include "common/explain.h"
#include "common/gui_format.h"

namespace kvlab::gui {

namespace {

QString text_of(const std::optional<double>& value, MetricFormat format) {
  return value ? QString::fromStdString(format_metric_value(*value, format)) : QString();
}

QString method_text(const RunRow& row) {
  return method_and_label(row.method, row.label);
}

// "model:SmolLM2-135M-Instruct.Q4_1.gguf" for "model:/home/…/SmolLM2-135M-Instruct.Q4_1.gguf":
// the file's name is what tells runs apart; the tooltip has the whole path.
QString short_source(const std::string& source) {
  const QString s = QString::fromStdString(source);
  for (const QLatin1String kind : {QLatin1String("model:"), QLatin1String("file:")}) {
    if (s.startsWith(kind)) {
      const qsizetype slash = s.lastIndexOf(QLatin1Char('/'));
      if (slash >= kind.size()) return kind + s.mid(slash + 1);
    }
  }
  return s;
}

bool numeric(int column) {
  return column == RunsTableModel::kId || column == RunsTableModel::kContext ||
         (column >= RunsTableModel::kRatio && column <= RunsTableModel::kNeedle);
}

}  // namespace

RunsTableModel::RunsTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunsTableModel::set_runs(const std::vector<RunSummary>& runs) {
  beginResetModel();
  m_entries.clear();
  m_entries.reserve(runs.size());
  for (const RunSummary& run : runs) {
    m_entries.push_back(
        {run_row(run), QString::fromStdString(run.tags), QString::fromStdString(run.notes)});
  }
  endResetModel();
}

int RunsTableModel::row_of(std::int64_t id) const {
  for (std::size_t i = 0; i < m_entries.size(); ++i) {
    if (m_entries[i].row.id == id) return static_cast<int>(i);
  }
  return -1;
}

int RunsTableModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(m_entries.size());
}

int RunsTableModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant RunsTableModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kColumnCount) return {};
  const Entry& e = m_entries[static_cast<std::size_t>(index.row())];
  const RunRow& r = e.row;
  const int column = index.column();
  if (role == kIdRole) return static_cast<qlonglong>(r.id);
  if (role == kFullTextRole) {
    return column == kSource ? QVariant(QString::fromStdString(r.source)) : QVariant();
  }
  if (role == Qt::TextAlignmentRole) {
    return QVariant::fromValue(
        Qt::Alignment((numeric(column) ? Qt::AlignRight : Qt::AlignLeft) | Qt::AlignVCenter));
  }
  if (role == Qt::ToolTipRole) {
    QString tip = QString::fromStdString(r.source) + QLatin1Char('\n') + method_text(r);
    if (!e.tags.isEmpty()) tip += tr("\nTags: %1").arg(e.tags);
    if (!e.notes.isEmpty()) tip += tr("\nNote: %1").arg(e.notes);
    return tip;
  }
  const std::optional<double>* value = nullptr;
  switch (column) {
    case kContext:
      value = &r.context;
      break;
    case kRatio:
      value = &r.ratio;
      break;
    case kBits:
      value = &r.bits_per_value;
      break;
    case kError:
      value = &r.error;
      break;
    case kPerplexityChange:
      value = &r.perplexity_change;
      break;
    case kKl:
      value = &r.kl;
      break;
    case kNeedle:
      value = &r.needle_kept;
      break;
    default:
      break;
  }
  if (role == kSortRole) {
    if (column == kId) return static_cast<qlonglong>(r.id);
    if (column == kWhen) return QString::fromStdString(r.created_at);
    if (value) return *value ? QVariant(**value) : QVariant();
    return data(index, Qt::DisplayRole);
  }
  if (role != Qt::DisplayRole) return {};
  switch (column) {
    case kId:
      return QString::number(r.id);
    case kWhen:
      return format_local_time(r.created_at);
    case kKind:
      return QString::fromStdString(r.kind);
    case kSource:
      return short_source(r.source);
    case kContext:
      return text_of(r.context, MetricFormat::Count);
    case kMethod:
      return method_text(r);
    case kRatio:
      return text_of(r.ratio, MetricFormat::Ratio);
    case kBits:
      return text_of(r.bits_per_value, MetricFormat::Bits);
    case kError:
      return text_of(r.error, MetricFormat::Number);
    case kPerplexityChange:  // ± its standard error in percentage points, where stored
      return r.perplexity_change && r.perplexity_change_se
                 ? QStringLiteral("%1 ± %2").arg(
                       text_of(r.perplexity_change, MetricFormat::SignedPercent),
                       QString::number(100 * *r.perplexity_change_se, 'f', 2))
                 : text_of(r.perplexity_change, MetricFormat::SignedPercent);
    case kKl:
      return text_of(r.kl, MetricFormat::Nats);
    case kNeedle:
      return text_of(r.needle_kept, MetricFormat::Percent);
    case kTags:
      return e.tags;
    default:
      return {};
  }
}

QVariant RunsTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= kColumnCount) {
    return QAbstractTableModel::headerData(section, orientation, role);
  }
  static const char* const kTitles[kColumnCount] = {
      "ID",           "When",  "Kind", "Source", "Context", "Method / label", "Ratio", "Bits/val",
      "Attn-out err", "Δ ppl", "KL",   "Needle", "Tags"};
  if (role == Qt::DisplayRole) return tr(kTitles[section]);
  if (role == Qt::ToolTipRole) return explain::runs_columns().value(section);
  return {};
}

RunsFilterModel::RunsFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(RunsTableModel::kSortRole);
}

void RunsFilterModel::set_search(const QString& text) {
  m_words = text.split(QLatin1Char(' '), Qt::SkipEmptyParts);
  invalidateFilter();
}

void RunsFilterModel::set_kind(std::optional<RunKind> kind) {
  m_kind = kind;
  invalidateFilter();
}

bool RunsFilterModel::filterAcceptsRow(int source_row, const QModelIndex&) const {
  const auto* runs = qobject_cast<const RunsTableModel*>(sourceModel());
  if (!runs || source_row < 0 || source_row >= runs->rowCount()) return false;
  const RunsTableModel::Entry& e = runs->entries()[static_cast<std::size_t>(source_row)];
  if (m_kind && run_kind_from_id(e.row.kind) != m_kind) return false;
  const QString haystack = QStringList{QString::fromStdString(e.row.source),
                                       QString::fromStdString(e.row.method),
                                       QString::fromStdString(e.row.label),
                                       e.tags,
                                       e.notes,
                                       QString::number(e.row.id)}
                               .join(QLatin1Char('\n'));
  for (const QString& word : m_words) {
    if (!haystack.contains(word, Qt::CaseInsensitive)) return false;
  }
  return true;
}

bool RunsFilterModel::lessThan(const QModelIndex& left, const QModelIndex& right) const {
  const QVariant a = left.data(RunsTableModel::kSortRole);
  const QVariant b = right.data(RunsTableModel::kSortRole);
  // Runs without the number sort after those with it, whichever the order.
  if (!a.isValid() || !b.isValid()) {
    if (a.isValid() == b.isValid()) return false;
    const bool ascending = sortOrder() == Qt::AscendingOrder;
    return a.isValid() ? ascending : !ascending;
  }
  if (a.typeId() == QMetaType::Double || a.typeId() == QMetaType::LongLong) {
    return a.toDouble() < b.toDouble();
  }
  return QString::compare(a.toString(), b.toString(), Qt::CaseInsensitive) < 0;
}

}  // namespace kvlab::gui
