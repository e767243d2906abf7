// The Runs page's table: a QAbstractTableModel over plain values (RunRow from the store's run
// records, with the run's tags and note), and a proxy that filters by kind and by a search over
// source, method, label, tags and note, and sorts numbers as numbers.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <QString>

#include "kvlab/store/run_records.h"

namespace kvlab::gui {

class RunsTableModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kId,
    kWhen,
    kKind,
    kSource,
    kContext,
    kMethod,
    kRatio,
    kBits,
    kError,
    kPerplexityChange,
    kKl,
    kNeedle,
    kTags,
    kColumnCount
  };
  // Data roles beside Qt's: the run id (any column), and the value a column sorts by.
  static constexpr int kIdRole = Qt::UserRole;
  static constexpr int kSortRole = Qt::UserRole + 1;

  struct Entry {
    RunRow row;
    QString tags, notes;
  };

  explicit RunsTableModel(QObject* parent = nullptr);

  // Replaces every row (newest first, as the store lists them).
  void set_runs(const std::vector<RunSummary>& runs);
  const std::vector<Entry>& entries() const { return m_entries; }
  int row_of(std::int64_t id) const;  // -1 when not shown

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation,
                      int role = Qt::DisplayRole) const override;

 private:
  std::vector<Entry> m_entries;
};

class RunsFilterModel : public QSortFilterProxyModel {
  Q_OBJECT

 public:
  explicit RunsFilterModel(QObject* parent = nullptr);
  // Words that must all appear (case-insensitive) in the source, method, label, tags or note.
  void set_search(const QString& text);
  // Only runs of this kind; none: every kind.
  void set_kind(std::optional<RunKind> kind);

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;
  bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

 private:
  QStringList m_words;
  std::optional<RunKind> m_kind;
};

}  // namespace kvlab::gui
