// The Quality page's behaviour: running, saving, and reading the stored runs back (the widgets
// are built in quality_view.cpp).
#include <algorithm>

#include <QCheckBox>
#include <QFileInfo>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QProgressBar>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QTableWidget>

#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/run_controller.h"
#include "kvlab/store/run_records.h"
#include "quality/quality_chart.h"
#include "quality/quality_configs.h"
#include "quality/quality_results.h"
#include "quality/quality_view.h"
#include "quality/retrieval_chart.h"

namespace kvlab::gui {

namespace {

QString absolute(const QString& path) {
  return path.trimmed().isEmpty() ? QString() : QFileInfo(path.trimmed()).absoluteFilePath();
}

// "1 window", "2 windows"
QString count_of(int n, const QString& one, const QString& many) {
  return QStringLiteral("%1 %2").arg(n).arg(n == 1 ? one : many);
}

// "stories260K.bin on its own sampled text (1024 tokens, seed 1)"
// "MODEL on TEXT"; on two lines for a chart title that must fit half a laptop's window.
QString describe(const QualityKey& key, bool two_lines = false) {
  const QString on = two_lines ? QObject::tr("\non") : QObject::tr(" on");
  const QString model = QFileInfo(QString::fromStdString(key.model)).fileName();
  const auto text = QualityText::parse(key.text);
  if (!text) return model + QStringLiteral(", ") + QString::fromStdString(key.text);
  if (text->kind == QualityText::Kind::File) {
    return QObject::tr("%1%2 %3").arg(model, on,
                                      QFileInfo(QString::fromStdString(text->path)).fileName());
  }
  return QObject::tr("%1%2 its own sampled text (%3 tokens, seed %4)")
      .arg(model, on)
      .arg(text->tokens)
      .arg(text->seed);
}

}  // namespace

void QualityView::set_model_path(const QString& path) {
  m_model->setText(path);
  controls_changed();
}

void QualityView::offer_model_path(const QString& path) {
  const QString now = m_model->text().trimmed();
  if (path.isEmpty() || (!now.isEmpty() && now != m_offered_model)) return;
  m_offered_model = path;
  set_model_path(path);
}

void QualityView::set_sampled_text(int tokens, std::uint64_t seed) {
  m_syncing = true;
  m_sample_tokens->setValue(tokens);
  m_seed->setValue(static_cast<int>(seed));
  m_sampled->setChecked(true);
  m_syncing = false;
  controls_changed();
}

void QualityView::set_text_file(const QString& path) {
  m_syncing = true;
  m_text_file->setText(path);
  m_file->setChecked(true);
  m_syncing = false;
  controls_changed();
}

void QualityView::set_window(int tokens) {
  m_window->setValue(tokens);
}

void QualityView::set_checked(const QStringList& ids) {
  for (int i = 0; i < m_methods->count(); ++i) {
    QListWidgetItem* item = m_methods->item(i);
    item->setCheckState(ids.contains(item->data(Qt::UserRole).toString()) ? Qt::Checked
                                                                          : Qt::Unchecked);
  }
}

QStringList QualityView::checked_ids() const {
  QStringList ids;
  for (int i = 0; i < m_methods->count(); ++i) {
    const QListWidgetItem* item = m_methods->item(i);
    if (item->checkState() == Qt::Checked) ids << item->data(Qt::UserRole).toString();
  }
  return ids;
}

QualityText QualityView::controls_text() const {
  QualityText text;
  if (m_file->isChecked()) {
    text.kind = QualityText::Kind::File;
    text.path = absolute(m_text_file->text()).toStdString();
  } else {
    text.tokens = m_sample_tokens->value();
    text.seed = static_cast<std::uint64_t>(m_seed->value());
  }
  return text;
}

QualityKey QualityView::controls_key() const {
  QualityKey key;
  key.model = absolute(m_model->text()).toStdString();
  key.text = controls_text().describe();
  return key;
}

void QualityView::set_controls(const QualityKey& key) {
  m_syncing = true;
  m_model->setText(QString::fromStdString(key.model));
  if (const auto text = QualityText::parse(key.text)) {
    if (text->kind == QualityText::Kind::File) {
      m_text_file->setText(QString::fromStdString(text->path));
      m_file->setChecked(true);
    } else {
      m_sample_tokens->setValue(text->tokens);
      m_seed->setValue(static_cast<int>(text->seed));
      m_sampled->setChecked(true);
    }
  }
  m_syncing = false;
}

// The chart follows the controls: the stored runs of the model and text they name.
void QualityView::controls_changed() {
  if (m_syncing || is_running()) return;
  const QualityKey key = controls_key();
  if (m_key && m_key->model == key.model && m_key->text == key.text) return;
  m_key = key;
  reload_from_store();
}

void QualityView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (!is_running()) reload_from_store();  // runs the CLI saved meanwhile
}

void QualityView::reload_from_store() {
  if (!m_store) {
    redraw();
    return;
  }
  if (!m_key) {
    auto newest = newest_quality_key(*m_store);
    if (!newest) {
      show_error(QString::fromStdString(newest.message()));
      return;
    }
    if (*newest) {
      m_key = **newest;
      set_controls(*m_key);
    }
  }
  m_points.clear();
  m_older_duplicates = 0;
  if (m_key) {
    auto stored = load_quality_runs(*m_store, *m_key);
    if (!stored) {
      show_error(QString::fromStdString(stored.message()));
      return;
    }
    m_points = std::move(stored->points);
    m_older_duplicates = stored->older_duplicates;
  }
  std::stable_sort(m_points.begin(), m_points.end(),
                   [](const QualityPoint& a, const QualityPoint& b) {
                     return a.memory_ratio() < b.memory_ratio();
                   });
  reload_retrieval();
  redraw();
}

void QualityView::reload_retrieval() {
  auto retrieval = load_retrieval(*m_store, m_key ? m_key->model : std::string());
  if (!retrieval) {
    m_retrieval->clear_data(tr("The passkey-retrieval runs could not be read: %1")
                                .arg(QString::fromStdString(retrieval.message())));
    return;
  }
  m_retrieval->set_data(*retrieval);
}

bool QualityView::show_stored_run(std::int64_t id) {
  if (!m_store) return false;
  auto record = m_store->load_run(id);
  if (!record) {
    show_error(QString::fromStdString(record.message()));
    return false;
  }
  const auto point = quality_point(*record);
  if (!point) {
    show_error(tr("Run %1 is not a quality run with every number").arg(id));
    return false;
  }
  m_key = point->key;
  set_controls(*m_key);
  m_error->setVisible(false);
  reload_from_store();
  if (const int row = m_table_model->row_of_run(id); row >= 0) m_table->selectRow(row);
  emit status_message(tr("Opened quality run #%1 among the runs of its model and text").arg(id),
                      style::kStatusTimeoutMs);
  return true;
}

void QualityView::redraw() {
  const auto x = static_cast<QualityX>(m_x->currentIndex());
  const auto y = static_cast<QualityY>(m_y->currentIndex());
  const std::int64_t selected = [this]() -> std::int64_t {
    const auto rows = m_table->selectionModel()->selectedRows();
    if (rows.isEmpty()) return 0;
    return m_table_model->run_at(rows.front().row());
  }();
  const std::vector<bool> frontier = quality_frontier(m_points, x, y);
  m_table_model->set_points(m_points, frontier, quality_within_noise(m_points, x, y, frontier));
  if (m_points.empty()) {
    m_chart->clear_data(m_key && !m_key->model.empty()
                            ? tr("No quality runs of this model and text yet: Run measures them")
                            : tr("No quality runs yet: choose a model and configurations, then "
                                 "Run"));
    m_heading->setText(m_key ? describe(*m_key) : QString());
    return;
  }
  const QString title = describe(m_points.front().key, true);
  m_chart->set_data(quality_chart_data(m_points, x, y, title, m_log_y->isChecked()));
  const QualityPoint& first = m_points.front();
  QString heading = tr("%1; %2 tokens predicted in %3; exact perplexity %4; %5 on the Pareto "
                       "frontier")
                        .arg(count_of(static_cast<int>(m_points.size()), tr("configuration"),
                                      tr("configurations")))
                        .arg(first.key.tokens)
                        .arg(count_of(first.key.windows, tr("window"), tr("windows")))
                        .arg(first.perplexity_exact, 0, 'f', 3)
                        .arg(std::count(frontier.begin(), frontier.end(), true));
  if (m_older_duplicates > 0) {
    heading += tr(" (the newest run of each; %1 not shown)")
                   .arg(count_of(m_older_duplicates, tr("older repeat"), tr("older repeats")));
  }
  m_heading->setText(heading);
  if (const int row = m_table_model->row_of_run(selected); selected && row >= 0) {
    m_table->selectRow(row);
  }
}

void QualityView::set_running(bool running) {
  for (QWidget* w : std::initializer_list<QWidget*>{m_model, m_sampled, m_file, m_sample_tokens,
                                                    m_seed, m_text_file, m_window, m_methods}) {
    w->setEnabled(!running);
  }
}

bool QualityView::is_running() const {
  return m_run->running();
}

bool QualityView::run() {
  QualityJob job;
  job.model = absolute(m_model->text()).toStdString();
  job.text = controls_text();
  job.window = m_window->value();
  for (const QString& id : checked_ids()) {
    if (const QualityChoice* c = find_quality_choice(id)) job.choices.push_back(*c);
  }
  if (job.choices.empty()) {
    m_run->note_error(tr("no configuration is checked: check at least one to measure"));
    show_error(m_run->last_error());
    return false;
  }
  if (job.text.kind == QualityText::Kind::File && job.text.path.empty()) {
    m_run->note_error(tr("no text file: choose one, or score the model's own sampled text"));
    show_error(m_run->last_error());
    return false;
  }
  if (!m_run->start([&] { return m_runner->start(job); }, tr("Loading the model"))) return false;
  m_job = std::move(job);
  m_measured = 0;
  m_saved_ids.clear();
  m_error->setVisible(false);
  emit status_message(tr("Measuring %1…")
                          .arg(count_of(static_cast<int>(m_job.choices.size()), tr("configuration"),
                                        tr("configurations"))),
                      0);
  return true;
}

void QualityView::cancel() {
  m_run->cancel();
}

bool QualityView::run_and_wait(int timeout_ms) {
  return m_run->run_and_wait([this] { return run(); }, timeout_ms);
}

bool QualityView::wait_until_done(int timeout_ms) {
  return m_run->wait_until_done(timeout_ms);
}

const QString& QualityView::last_error() const {
  return m_run->last_error();
}

void QualityView::on_measured(const QualityReport& report, int index, int count) {
  m_measured = index + 1;
  const QualityConfig& config = m_job.choices[static_cast<std::size_t>(index)].config;
  const NewRun run =
      quality_run(report, config, {m_job.model, m_job.text.describe(), m_job.window, {}});
  RunSummary summary;
  summary.kind = run.kind;
  summary.method = run.method;
  summary.metrics = run.metrics;
  QString saved_note = tr(" (not saved: no runs database)");
  if (m_store) {
    auto id = m_store->save_run(run);
    if (!id) {
      show_error(
          tr("%1 was measured but could not be saved: %2")
              .arg(QString::fromStdString(run.method), QString::fromStdString(id.message())));
    } else {
      summary.id = *id;
      m_saved_ids.push_back(*id);
      saved_note = tr(", saved as run #%1").arg(*id);
      emit run_saved(*id);
    }
  }
  auto point = quality_point(summary);
  if (point) {
    m_key = point->key;
    if (!m_store) {  // the points live here only
      std::erase_if(m_points, [&](const QualityPoint& p) { return p.method == point->method; });
      m_points.push_back(*point);
    }
    reload_from_store();
  }
  emit status_message(tr("%1 of %2: %3 perplexity %4 at %5%6")
                          .arg(index + 1)
                          .arg(count)
                          .arg(quality_short_name(run.method))
                          .arg(format_percent(report.perplexity_change))
                          .arg(format_ratio(point ? point->memory_ratio() : report.ratio))
                          .arg(saved_note),
                      style::kStatusTimeoutMs);
}

void QualityView::on_ended(const QString& error, bool cancelled, int failed_index) {
  if (error.isEmpty()) {
    m_run->succeeded();
  } else {
    m_run->failed(error, cancelled);
  }
  const int count = static_cast<int>(m_job.choices.size());
  if (error.isEmpty()) {
    emit status_message(
        tr("Measured %1").arg(count_of(count, tr("configuration"), tr("configurations"))) +
            (m_store ? tr("; each saved as a quality run") : QString()),
        style::kStatusTimeoutMs);
    return;
  }
  if (cancelled) {
    emit status_message(
        tr("Cancelled after %1 of %2 configurations (those are kept)").arg(m_measured).arg(count),
        style::kStatusTimeoutMs);
    return;
  }
  const QString where = failed_index >= 0 && failed_index < count
                            ? tr(" at %1 (%2 of %3)")
                                  .arg(m_job.choices[static_cast<std::size_t>(failed_index)].name)
                                  .arg(failed_index + 1)
                                  .arg(count)
                            : QString();
  show_error(tr("The run failed%1: %2").arg(where, error));
}

void QualityView::show_error(const QString& engine_message) {
  const QString message = in_gui_terms(engine_message);
  m_error->setText(message);
  m_error->setVisible(true);
  emit status_message(message, 0);
}

}  // namespace kvlab::gui
