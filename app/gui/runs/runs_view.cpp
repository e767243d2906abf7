#include "runs/runs_view.h"

#include <algorithm>
#include <optional>

#include <QAction>
#include <QApplication>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QDir>
#include <QFileSystemWatcher>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QSplitter>
#include <QTableView>
#include <QTimer>
#include <QUndoStack>
#include <QVBoxLayout>

#include "common/chart_export.h"
#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/run_kinds.h"
#include "eviction/eviction_runs.h"
#include "kvlab/engine/io/report_json.h"
#include "runs/delete_run_command.h"
#include "runs/runs_comparison.h"
#include "runs/runs_table_model.h"
#include "window/run_files.h"

namespace kvlab::gui {

namespace {

// Several writes in a row (a sweep saving runs) make one refresh.
constexpr int kWatchDebounceMs = 250;

}  // namespace

RunsView::RunsView(std::shared_ptr<RunsStore> store, const QString& store_error, QWidget* parent)
    : QWidget(parent), m_store(std::move(store)) {
  m_model = new RunsTableModel(this);
  m_filter = new RunsFilterModel(this);
  m_filter->setSourceModel(m_model);
  m_table = new QTableView(this);
  m_table->setModel(m_filter);
  m_table->setSortingEnabled(true);
  m_table->sortByColumn(RunsTableModel::kWhen, Qt::DescendingOrder);  // newest first
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  // Several rows for a comparison; Open, Delete and Tags act on the first selected.
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->setAlternatingRowColors(true);
  m_table->setWordWrap(false);
  m_table->verticalHeader()->setVisible(false);
  // Numbers and dates as wide as they need; the free-text columns get a fixed start width (the
  // full text is in the tooltip) and Tags takes the rest.
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  for (const int column : {RunsTableModel::kSource, RunsTableModel::kMethod}) {
    m_table->horizontalHeader()->setSectionResizeMode(column, QHeaderView::Interactive);
  }
  m_table->setColumnWidth(RunsTableModel::kSource, 170);
  m_table->setColumnWidth(RunsTableModel::kMethod, 230);
  m_table->horizontalHeader()->setStretchLastSection(true);
  m_table->horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);
  m_table->setMinimumHeight(160);

  m_search = new QLineEdit(this);
  m_search->setPlaceholderText(tr("Search source, method, label, tags, note…"));
  m_search->setClearButtonEnabled(true);
  m_search->setToolTip(
      tr("Shows the runs whose source, method, label, tags or note contain "
         "every word typed here"));
  m_kind = new QComboBox(this);
  m_kind->addItem(tr("All kinds"), -1);
  for (const RunKind kind : kListedRunKinds) {
    const QString id = QString::fromLatin1(run_kind_id(kind));
    m_kind->addItem(id, static_cast<int>(kind));
  }
  m_kind->setToolTip(tr("Show only runs of one kind"));

  m_refresh = new QPushButton(tr("Refresh"), this);
  m_refresh->setToolTip(
      tr("Read the database again (it is also watched: runs saved by the "
         "command line or another window appear by themselves)"));
  m_open = new QPushButton(tr("Open"), this);
  m_open->setToolTip(
      tr("Show this run's charts on the Compression or Eviction page, from the stored data"));
  m_tags = new QPushButton(tr("Tags && note…"), this);
  m_tags->setToolTip(
      tr("Give the selected run tags (comma-separated) and a note; both are "
         "searched"));
  m_delete = new QPushButton(tr("Delete…"), this);
  m_delete->setToolTip(tr("Delete the selected run from the database (Edit ▸ Undo puts it back)"));
  m_export = new QPushButton(tr("Export…"), this);
  m_export->setToolTip(
      tr("Save the selected runs: one run as JSON (everything, artifacts included) or CSV "
         "(key,value rows); one or several (Ctrl/Shift-click) as a self-contained HTML report "
         "with their charts, or as a JSON array"));
  m_summary = new QLabel(this);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_summary->setWordWrap(true);

  auto* filters = new QHBoxLayout;
  filters->addWidget(m_search, 2);
  filters->addWidget(m_kind);
  filters->addWidget(m_summary, 3);
  auto* buttons = new QHBoxLayout;
  for (QPushButton* b : {m_refresh, m_open, m_tags, m_delete, m_export}) buttons->addWidget(b);
  buttons->addStretch(1);

  m_compare = new RunsComparePanel(this);
  auto* split = new QSplitter(Qt::Vertical, this);
  split->addWidget(m_table);
  split->addWidget(m_compare);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  split->setChildrenCollapsible(false);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(filters);
  layout->addLayout(buttons);
  layout->addWidget(split, 1);

  connect(m_search, &QLineEdit::textChanged, this, [this](const QString& text) {
    m_filter->set_search(text);
    update_summary();
  });
  connect(m_kind, &QComboBox::currentIndexChanged, this, [this] {
    const int kind = m_kind->currentData().toInt();
    m_filter->set_kind(kind < 0 ? std::nullopt : std::optional(static_cast<RunKind>(kind)));
    update_summary();
  });
  connect(m_refresh, &QPushButton::clicked, this, &RunsView::refresh);
  connect(m_open, &QPushButton::clicked, this, [this] {
    if (const auto id = selected_run_id()) open_run(id);
  });
  connect(m_tags, &QPushButton::clicked, this, &RunsView::edit_tags_dialog);
  connect(m_delete, &QPushButton::clicked, this, [this] {
    if (const auto id = selected_run_id()) delete_run(id);
  });
  connect(m_export, &QPushButton::clicked, this, &RunsView::export_selected_dialog);
  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &RunsView::on_selection_changed);
  m_undo = new QUndoStack(this);
  // The Delete key on the table does what the Delete… button does.
  auto* delete_key = new QAction(tr("Delete run"), m_table);
  delete_key->setShortcut(QKeySequence::Delete);
  delete_key->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  m_table->addAction(delete_key);
  connect(delete_key, &QAction::triggered, this, [this] {
    if (const auto id = selected_run_id()) delete_run(id);
  });
  connect(m_table, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    open_run(index.data(RunsTableModel::kIdRole).toLongLong());
  });

  // Runs saved by another process appear by themselves. The file is watched with inotify, which
  // never opens it (an open and close here would drop SQLite's locks: runs_store.cpp); its
  // changes come with every checkpoint, which SQLite makes when the last connection closes.
  m_watcher = new QFileSystemWatcher(this);
  m_watch_timer = new QTimer(this);
  m_watch_timer->setSingleShot(true);
  m_watch_timer->setInterval(kWatchDebounceMs);
  connect(m_watcher, &QFileSystemWatcher::fileChanged, m_watch_timer, qOverload<>(&QTimer::start));
  connect(m_watch_timer, &QTimer::timeout, this, &RunsView::refresh);

  if (!m_store) {
    m_summary->setText(tr("No runs database: %1").arg(store_error));
    m_refresh->setEnabled(false);
  } else {
    m_watcher->addPath(QString::fromStdString(m_store->path().string()));
  }
  refresh();
}

void RunsView::refresh() {
  if (!m_store) {
    update_buttons();
    return;
  }
  // A file replaced or deleted drops out of the watch list: watch it again.
  const QString path = QString::fromStdString(m_store->path().string());
  if (!m_watcher->files().contains(path)) m_watcher->addPath(path);
  const std::vector<std::int64_t> keep = selected_run_ids();
  auto runs = m_store->list_runs(-1);
  if (!runs) {
    report_error(QString::fromStdString(runs.message()));
    return;
  }
  m_model->set_runs(*runs);
  ++m_refreshes;
  // Keep the selection across refreshes; otherwise select the newest run so Open is one click.
  select_runs(keep);
  if (selected_run_ids().empty() && m_filter->rowCount() > 0) select_row_only(0);
  update_summary();
  update_buttons();
}

void RunsView::update_summary() {
  if (!m_store) return;
  const int all = m_model->rowCount();
  const int shown = m_filter->rowCount();
  const QString path = QString::fromStdString(m_store->path().string());
  QString text = all == 1 ? tr("1 run in %1").arg(path) : tr("%1 runs in %2").arg(all).arg(path);
  if (shown != all) text = tr("%1 of %2").arg(shown).arg(text);
  m_summary->setText(text);
}

int RunsView::row_of(std::int64_t id) const {
  const int source_row = m_model->row_of(id);
  if (source_row < 0) return -1;
  return m_filter->mapFromSource(m_model->index(source_row, 0)).row();
}

int RunsView::row_count() const {
  return m_filter->rowCount();
}

QString RunsView::cell_text(int row, int column) const {
  return m_filter->index(row, column).data().toString();
}

std::int64_t RunsView::selected_run_id() const {
  const auto ids = selected_run_ids();
  return ids.empty() ? 0 : ids.front();
}

std::vector<std::int64_t> RunsView::selected_run_ids() const {
  std::vector<int> rows;
  for (const QModelIndex& index : m_table->selectionModel()->selectedRows()) {
    rows.push_back(index.row());
  }
  std::sort(rows.begin(), rows.end());  // in the table's order
  std::vector<std::int64_t> ids;
  for (const int row : rows) {
    ids.push_back(m_filter->index(row, 0).data(RunsTableModel::kIdRole).toLongLong());
  }
  return ids;
}

void RunsView::select_row_only(int row) {
  // selectRow() would add to the selection in ExtendedSelection mode.
  m_table->selectionModel()->setCurrentIndex(
      m_filter->index(row, 0), QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

void RunsView::select_runs(const std::vector<std::int64_t>& ids) {
  QItemSelection selection;
  for (const std::int64_t id : ids) {
    const int row = row_of(id);
    if (row < 0) continue;
    selection.select(m_filter->index(row, 0),
                     m_filter->index(row, RunsTableModel::kColumnCount - 1));
  }
  m_table->selectionModel()->select(selection, QItemSelectionModel::ClearAndSelect);
}

void RunsView::on_selection_changed() {
  update_buttons();
  const auto ids = selected_run_ids();
  if (!m_store || ids.empty()) {
    m_compare->clear();
    return;
  }
  std::vector<RunRecord> records;
  for (const std::int64_t id : ids) {
    auto record = m_store->load_run(id);
    if (!record) {
      emit status_message(QString::fromStdString(record.message()), style::kStatusTimeoutMs);
      continue;
    }
    records.push_back(std::move(*record));
  }
  m_compare->set_comparison(compare_runs(records));
}

bool RunsView::set_tags_and_note(std::int64_t id, const QString& tags, const QString& note) {
  if (!m_store) return false;
  const QString cleaned =
      tags.split(QLatin1Char(','), Qt::SkipEmptyParts)
          .replaceInStrings(QRegularExpression(QStringLiteral("^\\s+|\\s+$")), QString())
          .join(QStringLiteral(", "));
  if (auto s = m_store->set_tags(id, cleaned.toStdString()); !s) {
    report_error(QString::fromStdString(s.message()));
    return false;
  }
  if (auto s = m_store->set_notes(id, note.toStdString()); !s) {
    report_error(QString::fromStdString(s.message()));
    return false;
  }
  refresh();
  emit status_message(tr("Run %1: tags and note saved").arg(id), style::kStatusTimeoutMs);
  return true;
}

void RunsView::edit_tags_dialog() {
  const std::int64_t id = selected_run_id();
  if (!id) return;
  const int source_row = m_model->row_of(id);
  if (source_row < 0) return;
  const auto& entry = m_model->entries()[static_cast<std::size_t>(source_row)];
  QDialog dialog(this);
  dialog.setWindowTitle(tr("Tags and note of run #%1").arg(id));
  auto* tags = new QLineEdit(entry.tags, &dialog);
  tags->setPlaceholderText(tr("baseline, long context, to publish"));
  auto* note = new QPlainTextEdit(entry.notes, &dialog);
  auto* box = new QDialogButtonBox(QDialogButtonBox::Save | QDialogButtonBox::Cancel, &dialog);
  connect(box, &QDialogButtonBox::accepted, &dialog, &QDialog::accept);
  connect(box, &QDialogButtonBox::rejected, &dialog, &QDialog::reject);
  auto* form = new QFormLayout(&dialog);
  form->addRow(tr("Tags (comma-separated)"), tags);
  form->addRow(tr("Note"), note);
  form->addRow(box);
  if (dialog.exec() == QDialog::Accepted) {
    set_tags_and_note(id, tags->text(), note->toPlainText());
  }
}

QString RunsView::export_selected(const QString& path) {
  if (!m_store) return tr("No runs database to export from");
  const QString error = save_runs(*m_store, selected_run_ids(), path);
  if (error.isEmpty()) {
    emit status_message(tr("Saved %1").arg(QDir::toNativeSeparators(path)),
                        style::kStatusTimeoutMs);
  }
  return error;
}

void RunsView::export_selected_dialog() {
  const auto ids = selected_run_ids();
  if (ids.empty()) return;
  const QString base = ids.size() == 1 ? QStringLiteral("kvlab-run-%1.html").arg(ids.front())
                                       : QStringLiteral("kvlab-runs-report.html");
  const QString path =
      ask_save_path(this, tr("Export runs"), base,
                    ids.size() == 1 ? tr("HTML report (*.html);;JSON (*.json);;CSV (*.csv)")
                                    : tr("HTML comparison report (*.html);;JSON array (*.json)"));
  if (path.isEmpty()) return;
  if (const QString error = export_selected(path); !error.isEmpty()) report_error(error);
}

void RunsView::update_buttons() {
  const std::int64_t id = selected_run_id();
  const int row = row_of(id);
  const bool selected = m_store && row >= 0;
  m_open->setEnabled(selected && opens_on_a_page(std::string_view(
                                     m_model->entries()[static_cast<std::size_t>(row)].row.kind)));
  m_delete->setEnabled(selected);
  m_tags->setEnabled(selected);
  m_export->setEnabled(selected);
  const auto count = selected_run_ids().size();
  m_export->setText(count > 1 ? tr("Export %1 runs…").arg(count) : tr("Export…"));
}

void RunsView::report_error(const QString& message) {
  emit status_message(message, 0);
  auto* box = new QMessageBox(QMessageBox::Warning, tr("kvlab"), message, QMessageBox::Ok, this);
  box->setAttribute(Qt::WA_DeleteOnClose);
  box->open();
}

bool RunsView::open_run(std::int64_t id) {
  if (!m_store) return false;
  auto record = m_store->load_run(id);
  if (!record) {
    report_error(QString::fromStdString(record.message()));
    return false;
  }
  const QString origin =
      tr("stored run #%1 from %2").arg(id).arg(format_local_time(record->created_at));
  const std::optional<RunKind> kind = run_kind_from_id(record->kind);
  if (kind == RunKind::Eviction) return open_eviction_run(id, origin);
  if (kind == RunKind::Quality) {
    emit quality_run_opened(id);
    return true;
  }
  if (kind == RunKind::Plan) {
    emit plan_run_opened(record->params);
    emit status_message(tr("Opened planner scenario #%1").arg(id), style::kStatusTimeoutMs);
    return true;
  }
  if (kind != RunKind::Compression) {
    report_error(tr("Run %1 is a %2 run; compression, eviction, quality and plan runs open.")
                     .arg(id)
                     .arg(QString::fromStdString(record->kind)));
    return false;
  }
  const auto hist = record->artifacts.find(kHistogramsArtifact);
  auto report =
      report_from_json(record->metrics, hist != record->artifacts.end() ? &hist->second : nullptr);
  if (!report) {
    report_error(
        tr("Run %1 cannot be shown: %2").arg(id).arg(QString::fromStdString(report.message())));
    return false;
  }
  emit compression_run_opened(*report, origin);
  emit status_message(tr("Opened run #%1 (redrawn from the stored data)").arg(id),
                      style::kStatusTimeoutMs);
  return true;
}

bool RunsView::open_eviction_run(std::int64_t id, const QString& origin) {
  auto stored = load_eviction_run(*m_store, id);
  if (!stored) {
    report_error(
        tr("Run %1 cannot be shown: %2").arg(id).arg(QString::fromStdString(stored.message())));
    return false;
  }
  const QString shown =
      stored->compare_id ? origin + tr(", compared with run #%1").arg(stored->compare_id) : origin;
  emit eviction_run_opened(stored->report, stored->compare, shown);
  emit status_message(tr("Opened eviction run #%1 (redrawn from the stored data)").arg(id),
                      style::kStatusTimeoutMs);
  return true;
}

bool RunsView::delete_run(std::int64_t id) {
  if (!m_auto_confirm) {
    const QString undo_key = undo_shortcut().toString(QKeySequence::NativeText);
    const auto answer = QMessageBox::question(
        this, tr("Delete run"),
        tr("Delete run #%1 and its stored charts?\n\nEdit ▸ Undo (%2) puts it back until "
           "kvlab is closed.")
            .arg(id)
            .arg(undo_key),
        QMessageBox::Yes | QMessageBox::No, QMessageBox::No);
    if (answer != QMessageBox::Yes) return false;
  }
  return delete_run_confirmed(id);
}

bool RunsView::delete_run_confirmed(std::int64_t id) {
  if (!m_store) return false;
  // Read the whole run first: it is what Undo puts back.
  auto record = m_store->load_run(id);
  if (auto s = m_store->delete_run(id); !s) {
    report_error(QString::fromStdString(s.message()));
    return false;
  }
  refresh();
  if (!record) {
    emit status_message(tr("Run %1 deleted; it could not be read, so it cannot be undone: %2")
                            .arg(id)
                            .arg(QString::fromStdString(record.message())),
                        0);
    return true;
  }
  m_undo->push(new DeleteRunCommand(this, std::move(*record)));
  // The focus was on the Delete… button (or the question box) and would go nowhere: the button
  // is disabled with nothing selected, and a window whose focus widget is gone lets Ctrl+Z fall
  // through. The table takes it, so the Undo the message announces answers the key at once.
  m_table->setFocus(Qt::OtherFocusReason);
  const QString undo_key = undo_shortcut().toString(QKeySequence::NativeText);
  emit status_message(tr("Run %1 deleted — %2 to undo").arg(id).arg(undo_key),
                      style::kStatusTimeoutMs);
  return true;
}

bool RunsView::restore_deleted_run(const RunRecord& record) {
  if (!m_store) return false;
  if (auto s = m_store->restore_run(record); !s) {
    report_error(tr("Run %1 cannot be put back: %2")
                     .arg(record.id)
                     .arg(QString::fromStdString(s.message())));
    return false;
  }
  refresh();
  if (const int row = row_of(record.id); row >= 0) select_row_only(row);
  emit status_message(tr("Run %1 restored").arg(record.id), style::kStatusTimeoutMs);
  return true;
}

bool RunsView::erase_run(std::int64_t id) {
  if (!m_store) return false;
  if (auto s = m_store->delete_run(id); !s) {
    report_error(QString::fromStdString(s.message()));
    return false;
  }
  refresh();
  emit status_message(tr("Run %1 deleted again").arg(id), style::kStatusTimeoutMs);
  return true;
}

}  // namespace kvlab::gui
