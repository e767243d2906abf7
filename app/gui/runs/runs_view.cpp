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
    : QWidget(parent) {
  m_runs = new RunsModel(std::move(store), this);
  m_filter = m_runs->filter();
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

  m_search->setObjectName(QStringLiteral("search"));
  m_search->setPlaceholderText(tr("Search source, method, label, tags, note…"));
  m_search->setClearButtonEnabled(true);
  m_search->setToolTip(
      tr("Shows the runs whose source, method, label, tags or note contain "
         "every word typed here"));
  m_kind = new QComboBox(this);
  m_kind->setObjectName(QStringLiteral("kind"));
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
  m_export->setObjectName(QStringLiteral("export"));
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

  m_compare->setObjectName(QStringLiteral("compare"));
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
    if (const auto id = selected_run_id()) m_runs->open_run(id);
  });
  connect(m_tags, &QPushButton::clicked, this, &RunsView::edit_tags_dialog);
  connect(m_delete, &QPushButton::clicked, this, [this] {
    if (const auto id = selected_run_id()) delete_run(id);
  });
  connect(m_export, &QPushButton::clicked, this, &RunsView::export_selected_dialog);
  connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this,
          &RunsView::on_selection_changed);
  // The Delete key on the table does what the Delete… button does.
  auto* delete_key = new QAction(tr("Delete run"), m_table);
  delete_key->setShortcut(QKeySequence::Delete);
  delete_key->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  m_table->addAction(delete_key);
  connect(delete_key, &QAction::triggered, this, [this] {
    if (const auto id = selected_run_id()) delete_run(id);
  });
  connect(m_table, &QTableView::doubleClicked, this, [this](const QModelIndex& index) {
    m_runs->open_run(index.data(RunsTableModel::kIdRole).toLongLong());
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
  // Whoever reads the runs again (Refresh, the watcher, a delete, an undo, new tags), the
  // selection is kept; otherwise the newest run is selected so Open is one click.
  connect(m_runs->table(), &QAbstractItemModel::modelAboutToBeReset, this,
          [this] { m_keep_selected = selected_run_ids(); });
  connect(m_runs->table(), &QAbstractItemModel::modelReset, this, [this] {
    select_runs(m_keep_selected);
    if (selected_run_ids().empty() && m_filter->rowCount() > 0) select_row_only(0);
    update_summary();
    update_buttons();
  });
  connect(m_runs, &RunsModel::error, this, &RunsView::report_error);
  connect(m_runs, &RunsModel::status_message, this, &RunsView::status_message);
  connect(m_runs, &RunsModel::run_restored, this, [this](qint64 id) {
    if (const int row = row_of(id); row >= 0) select_row_only(row);
  });

  if (!m_runs->store()) {
    m_summary->setText(tr("No runs database: %1").arg(store_error));
    m_refresh->setEnabled(false);
  } else {
    m_watcher->addPath(QString::fromStdString(m_runs->store()->path().string()));
  }
  refresh();
}

void RunsView::refresh() {
  if (!m_runs->store()) {
    update_buttons();
    return;
  }
  // A file replaced or deleted drops out of the watch list: watch it again.
  const QString path = QString::fromStdString(m_runs->store()->path().string());
  if (!m_watcher->files().contains(path)) m_watcher->addPath(path);
  m_runs->refresh();
}

void RunsView::update_summary() {
  if (m_runs->store()) m_summary->setText(m_runs->summary());
}

int RunsView::row_of(std::int64_t id) const {
  const int source_row = m_runs->table()->row_of(id);
  if (source_row < 0) return -1;
  return m_filter->mapFromSource(m_runs->table()->index(source_row, 0)).row();
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
  RunsStore* store = m_runs->store();
  if (!store || ids.empty()) {
    m_compare->clear();
    return;
  }
  std::vector<RunRecord> records;
  for (const std::int64_t id : ids) {
    auto record = store->load_run(id);
    if (!record) {
      emit status_message(QString::fromStdString(record.message()), style::kStatusTimeoutMs);
      continue;
    }
    records.push_back(std::move(*record));
  }
  m_compare->set_comparison(compare_runs(records));
}

void RunsView::edit_tags_dialog() {
  const std::int64_t id = selected_run_id();
  if (!id) return;
  const int source_row = m_runs->table()->row_of(id);
  if (source_row < 0) return;
  const auto& entry = m_runs->table()->entries()[static_cast<std::size_t>(source_row)];
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
    m_runs->set_tags_and_note(id, tags->text(), note->toPlainText());
  }
}

QString RunsView::export_selected(const QString& path) {
  if (!m_runs->store()) return tr("No runs database to export from");
  const QString error = save_runs(*m_runs->store(), selected_run_ids(), path);
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
  const bool selected = m_runs->store() && row >= 0;
  m_open->setEnabled(selected &&
                     opens_on_a_page(std::string_view(
                         m_runs->table()->entries()[static_cast<std::size_t>(row)].row.kind)));
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
  return m_runs->open_run(id);
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
  if (!m_runs->delete_run(id)) return false;
  // The focus was on the Delete… button (or the question box) and would go nowhere: the button
  // is disabled with nothing selected, and a window whose focus widget is gone lets Ctrl+Z fall
  // through. The table takes it, so the Undo the message announces answers the key at once.
  m_table->setFocus(Qt::OtherFocusReason);
  return true;
}

}  // namespace kvlab::gui
