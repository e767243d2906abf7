#include "kvlab/gui/runs_view.h"

#include <algorithm>
#include <optional>

#include <QAction>
#include <QDateTime>
#include <QDir>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QTableWidget>
#include <QUndoStack>
#include <QVBoxLayout>

#include "kvlab/engine/report_json.h"
#include "kvlab/gui/chart_export.h"
#include "kvlab/gui/delete_run_command.h"
#include "kvlab/gui/eviction_runs.h"
#include "kvlab/gui/gui_format.h"
#include "kvlab/gui/run_files.h"

namespace kvlab::gui {

namespace {

constexpr int kStatusTimeoutMs = 8000;

// The store keeps UTC ISO-8601; people read local time.
QString local_time(const std::string& created_at) {
  const QDateTime t = QDateTime::fromString(QString::fromStdString(created_at), Qt::ISODateWithMs);
  if (!t.isValid()) return QString::fromStdString(created_at);
  return t.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm:ss"));
}

// A number from the metrics JSON, or nothing when the run kind has no such metric.
std::optional<double> json_number(const nlohmann::json& metrics, const char* key,
                                  const char* sub = nullptr) {
  const nlohmann::json* j = &metrics;
  if (!j->is_object() || !j->contains(key)) return std::nullopt;
  j = &(*j)[key];
  if (sub) {
    if (!j->is_object() || !j->contains(sub)) return std::nullopt;
    j = &(*j)[sub];
  }
  if (!j->is_number()) return std::nullopt;
  return j->get<double>();
}

QTableWidgetItem* item(const QString& text, Qt::Alignment align = Qt::AlignLeft) {
  auto* it = new QTableWidgetItem(text);
  it->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  it->setTextAlignment(align | Qt::AlignVCenter);
  return it;
}

}  // namespace

RunsView::RunsView(std::shared_ptr<RunsStore> store, const QString& store_error, QWidget* parent)
    : QWidget(parent), m_store(std::move(store)) {
  m_table = new QTableWidget(0, kColumnCount, this);
  m_table->setHorizontalHeaderLabels({tr("ID"), tr("When"), tr("Kind"), tr("Source"),
                                      tr("Method / label"), tr("Ratio"), tr("Bits/value"),
                                      tr("Attn-out rel. error")});
  m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
  // Several rows for a comparison report; Open and Delete act on the first selected.
  m_table->setSelectionMode(QAbstractItemView::ExtendedSelection);
  m_table->setAlternatingRowColors(true);
  m_table->verticalHeader()->setVisible(false);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->horizontalHeader()->setSectionResizeMode(kMethod, QHeaderView::Stretch);
  m_table->horizontalHeader()->setDefaultAlignment(Qt::AlignLeft | Qt::AlignVCenter);

  m_refresh = new QPushButton(tr("Refresh"), this);
  m_open = new QPushButton(tr("Open"), this);
  m_open->setToolTip(
      tr("Show this run's charts on the Compression or Eviction page, from the stored data"));
  m_delete = new QPushButton(tr("Delete…"), this);
  m_delete->setToolTip(tr("Delete the selected run from the database (Edit ▸ Undo puts it back)"));
  m_export = new QPushButton(tr("Export…"), this);
  m_export->setToolTip(
      tr("Save the selected runs: one run as JSON (everything, artifacts included) or CSV "
         "(key,value rows); one or several (Ctrl/Shift-click) as a self-contained HTML report "
         "with their charts, or as a JSON array"));
  m_summary = new QLabel(this);
  m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* hint = new QLabel(tr("Open (or double-click) redraws a compression or eviction run's "
                             "charts from what was stored, without recomputing."),
                          this);
  QPalette muted = hint->palette();
  muted.setColor(QPalette::WindowText, QColor(90, 90, 90));
  hint->setPalette(muted);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_refresh);
  buttons->addWidget(m_open);
  buttons->addWidget(m_delete);
  buttons->addWidget(m_export);
  buttons->addSpacing(12);
  buttons->addWidget(m_summary, 1);

  auto* layout = new QVBoxLayout(this);
  layout->addLayout(buttons);
  layout->addWidget(m_table, 1);
  layout->addWidget(hint);

  connect(m_refresh, &QPushButton::clicked, this, &RunsView::refresh);
  connect(m_open, &QPushButton::clicked, this, [this] {
    if (const auto id = selected_run_id()) open_run(id);
  });
  connect(m_delete, &QPushButton::clicked, this, [this] {
    if (const auto id = selected_run_id()) delete_run(id);
  });
  connect(m_export, &QPushButton::clicked, this, &RunsView::export_selected_dialog);
  connect(m_table, &QTableWidget::itemSelectionChanged, this, &RunsView::update_buttons);
  m_undo = new QUndoStack(this);
  // The Delete key on the table does what the Delete… button does.
  auto* delete_key = new QAction(tr("Delete run"), m_table);
  delete_key->setShortcut(QKeySequence::Delete);
  delete_key->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  m_table->addAction(delete_key);
  connect(delete_key, &QAction::triggered, this, [this] {
    if (const auto id = selected_run_id()) delete_run(id);
  });
  connect(m_table, &QTableWidget::cellDoubleClicked, this, [this](int row, int) {
    if (auto* it = m_table->item(row, kId)) open_run(it->data(Qt::UserRole).toLongLong());
  });

  if (!m_store) {
    m_summary->setText(tr("No runs database: %1").arg(store_error));
    m_refresh->setEnabled(false);
  }
  refresh();
}

void RunsView::refresh() {
  if (!m_store) {
    update_buttons();
    return;
  }
  const std::int64_t keep = selected_run_id();
  auto runs = m_store->list_runs(-1);
  if (!runs) {
    report_error(QString::fromStdString(runs.message()));
    return;
  }
  m_table->setRowCount(0);
  m_table->setRowCount(static_cast<int>(runs->size()));
  int row = 0;
  for (const RunSummary& r : *runs) {
    auto* id = item(QString::number(r.id), Qt::AlignRight);
    id->setData(Qt::UserRole, static_cast<qlonglong>(r.id));
    m_table->setItem(row, kId, id);
    m_table->setItem(row, kWhen, item(local_time(r.created_at)));
    m_table->setItem(row, kKind, item(QString::fromStdString(r.kind)));
    m_table->setItem(row, kSource, item(QString::fromStdString(r.source)));
    m_table->setItem(row, kMethod,
                     item(QStringLiteral("%1 · %2").arg(QString::fromStdString(r.method),
                                                        QString::fromStdString(r.label))));
    // Compression runs keep "ratio" and error.attn_output_rel_error; eviction runs keep the
    // memory ratio and the error at the top level.
    auto ratio = json_number(r.metrics, "ratio");
    if (!ratio) ratio = json_number(r.metrics, "memory_ratio");
    const auto bits = json_number(r.metrics, "bits_per_value");
    auto attn = json_number(r.metrics, "error", "attn_output_rel_error");
    if (!attn) attn = json_number(r.metrics, "attn_output_rel_error");
    m_table->setItem(row, kRatio, item(ratio ? format_ratio(*ratio) : QString(), Qt::AlignRight));
    m_table->setItem(row, kBits,
                     item(bits ? format_bits_per_value(*bits) : QString(), Qt::AlignRight));
    m_table->setItem(row, kAttnError,
                     item(attn ? format_percent(*attn) : QString(), Qt::AlignRight));
    ++row;
  }
  // Keep the selection across refreshes; otherwise select the newest run so Open is one click.
  if (const int r = row_of(keep); r >= 0) {
    select_row_only(r);
  } else if (m_table->rowCount() > 0) {
    select_row_only(0);
  }
  const auto count = static_cast<int>(runs->size());
  const QString path = QString::fromStdString(m_store->path().string());
  m_summary->setText(count == 1 ? tr("1 run in %1").arg(path)
                                : tr("%1 runs in %2").arg(count).arg(path));
  update_buttons();
}

int RunsView::row_of(std::int64_t id) const {
  for (int row = 0; row < m_table->rowCount(); ++row) {
    const auto* it = m_table->item(row, kId);
    if (it && it->data(Qt::UserRole).toLongLong() == id) return row;
  }
  return -1;
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
  std::sort(rows.begin(), rows.end());  // in the table's order, newest first
  std::vector<std::int64_t> ids;
  for (const int row : rows) {
    if (const auto* it = m_table->item(row, kId))
      ids.push_back(it->data(Qt::UserRole).toLongLong());
  }
  return ids;
}

void RunsView::select_row_only(int row) {
  // selectRow() would add to the selection in ExtendedSelection mode.
  m_table->selectionModel()->setCurrentIndex(
      m_table->model()->index(row, 0),
      QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
}

void RunsView::select_runs(const std::vector<std::int64_t>& ids) {
  m_table->clearSelection();
  for (const std::int64_t id : ids) {
    const int row = row_of(id);
    if (row < 0) continue;
    m_table->selectionModel()->select(m_table->model()->index(row, 0),
                                      QItemSelectionModel::Select | QItemSelectionModel::Rows);
  }
}

QString RunsView::export_selected(const QString& path) {
  if (!m_store) return tr("No runs database to export from");
  const QString error = save_runs(*m_store, selected_run_ids(), path);
  if (error.isEmpty()) {
    emit status_message(tr("Saved %1").arg(QDir::toNativeSeparators(path)), kStatusTimeoutMs);
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
  const int row = row_of(selected_run_id());
  const bool selected = m_store && row >= 0;
  const auto* kind = selected ? m_table->item(row, kKind) : nullptr;
  m_open->setEnabled(kind && (kind->text() == QStringLiteral("compression") ||
                              kind->text() == QStringLiteral("eviction") ||
                              kind->text() == QStringLiteral("quality") ||
                              kind->text() == QStringLiteral("plan")));
  m_delete->setEnabled(selected);
  m_export->setEnabled(selected);
  m_export->setText(selected_run_ids().size() > 1
                        ? tr("Export %1 runs…").arg(selected_run_ids().size())
                        : tr("Export…"));
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
  const QString origin = tr("stored run #%1 from %2").arg(id).arg(local_time(record->created_at));
  if (record->kind == "eviction") return open_eviction_run(id, origin);
  if (record->kind == "quality") {
    emit quality_run_opened(id);
    return true;
  }
  if (record->kind == "plan") {
    emit plan_run_opened(record->params);
    emit status_message(tr("Opened planner scenario #%1").arg(id), kStatusTimeoutMs);
    return true;
  }
  if (record->kind != "compression") {
    report_error(tr("Run %1 is a %2 run; compression, eviction, quality and plan runs open.")
                     .arg(id)
                     .arg(QString::fromStdString(record->kind)));
    return false;
  }
  const auto hist = record->artifacts.find("histograms");
  auto report =
      report_from_json(record->metrics, hist != record->artifacts.end() ? &hist->second : nullptr);
  if (!report) {
    report_error(
        tr("Run %1 cannot be shown: %2").arg(id).arg(QString::fromStdString(report.message())));
    return false;
  }
  emit compression_run_opened(*report, origin);
  emit status_message(tr("Opened run #%1 (redrawn from the stored data)").arg(id),
                      kStatusTimeoutMs);
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
                      kStatusTimeoutMs);
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
  const QString undo_key = undo_shortcut().toString(QKeySequence::NativeText);
  emit status_message(tr("Run %1 deleted — %2 to undo").arg(id).arg(undo_key), kStatusTimeoutMs);
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
  emit status_message(tr("Run %1 restored").arg(record.id), kStatusTimeoutMs);
  return true;
}

bool RunsView::erase_run(std::int64_t id) {
  if (!m_store) return false;
  if (auto s = m_store->delete_run(id); !s) {
    report_error(QString::fromStdString(s.message()));
    return false;
  }
  refresh();
  emit status_message(tr("Run %1 deleted again").arg(id), kStatusTimeoutMs);
  return true;
}

}  // namespace kvlab::gui
