#include "quality/quality_model.h"

#include <algorithm>
#include <utility>

#include <QFileInfo>

#include "common/gui_format.h"
#include "common/gui_style.h"
#include "common/run_controller.h"
#include "kvlab/store/run_records.h"
#include "quality/quality_configs.h"

namespace kvlab::gui {

namespace {

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

QualityModel::QualityModel(std::shared_ptr<RunsStore> store, QObject* parent)
    : QObject(parent), m_store(std::move(store)) {
  m_runner = new QualityRunner(this);
  m_run = new RunController(m_runner, this);
  m_table = new QualityTableModel(this);
  connect(m_runner, &QualityRunner::measured, this, &QualityModel::on_measured);
  connect(m_runner, &QualityRunner::ended, this, &QualityModel::on_ended);
}

const QString& QualityModel::last_error() const {
  return m_run->last_error();
}

void QualityModel::fail(const QString& message) {
  m_run->note_error(message);
  emit error(message);
}

void QualityModel::set_key(const QualityKey& key) {
  if (m_run->running()) return;
  if (m_key && m_key->model == key.model && m_key->text == key.text) return;
  m_key = key;
  reload();
}

void QualityModel::reload() {
  if (!m_store) {
    refresh_table();
    return;
  }
  if (!m_key) {
    auto newest = newest_quality_key(*m_store);
    if (!newest) {
      fail(QString::fromStdString(newest.message()));
      return;
    }
    if (*newest) {
      m_key = **newest;
      emit key_changed(*m_key);
    }
  }
  m_points.clear();
  m_older_duplicates = 0;
  if (m_key) {
    auto stored = load_quality_runs(*m_store, *m_key);
    if (!stored) {
      fail(QString::fromStdString(stored.message()));
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
  refresh_table();
}

void QualityModel::reload_retrieval() {
  auto retrieval = load_retrieval(*m_store, m_key ? m_key->model : std::string());
  if (!retrieval) {
    m_retrieval = {};
    m_retrieval_error = tr("The passkey-retrieval runs could not be read: %1")
                            .arg(QString::fromStdString(retrieval.message()));
    return;
  }
  m_retrieval = std::move(retrieval).value();
  m_retrieval_error.clear();
}

bool QualityModel::show_stored_run(std::int64_t id) {
  if (!m_store) return false;
  auto record = m_store->load_run(id);
  if (!record) {
    fail(QString::fromStdString(record.message()));
    return false;
  }
  const auto point = quality_point(*record);
  if (!point) {
    fail(tr("Run %1 is not a quality run with every number").arg(id));
    return false;
  }
  m_key = point->key;
  emit key_changed(*m_key);
  reload();
  emit status_message(tr("Opened quality run #%1 among the runs of its model and text").arg(id),
                      style::kStatusTimeoutMs);
  return true;
}

void QualityModel::set_axes(QualityX x, QualityY y, bool log_y) {
  m_x = x;
  m_y = y;
  m_log_y = log_y;
  refresh_table();
}

void QualityModel::refresh_table() {
  const std::vector<bool> frontier = quality_frontier(m_points, m_x, m_y);
  m_table->set_points(m_points, frontier, quality_within_noise(m_points, m_x, m_y, frontier));
  emit points_changed();
}

QualityChartData QualityModel::chart_data() const {
  if (m_points.empty()) return {};
  return quality_chart_data(m_points, m_x, m_y, describe(m_points.front().key, true), m_log_y);
}

QString QualityModel::empty_message() const {
  return m_key && !m_key->model.empty()
             ? tr("No quality runs of this model and text yet: Run measures them")
             : tr("No quality runs yet: choose a model and configurations, then Run");
}

QString QualityModel::heading() const {
  if (m_points.empty()) return m_key ? describe(*m_key) : QString();
  const std::vector<bool> frontier = quality_frontier(m_points, m_x, m_y);
  const QualityPoint& first = m_points.front();
  // Runs stopped at a target standard error rest on fewer windows than the text holds: a range.
  const auto [fewest, most] = std::minmax_element(
      m_points.begin(), m_points.end(),
      [](const QualityPoint& a, const QualityPoint& b) { return a.key.windows < b.key.windows; });
  const QString tokens = fewest->key.tokens == most->key.tokens
                             ? QString::number(first.key.tokens)
                             : tr("%1–%2").arg(fewest->key.tokens).arg(most->key.tokens);
  const QString windows = fewest->key.windows == most->key.windows
                              ? count_of(first.key.windows, tr("window"), tr("windows"))
                              : tr("%1–%2 windows").arg(fewest->key.windows).arg(most->key.windows);
  QString heading = tr("%1; %2 tokens predicted in %3; exact perplexity %4; %5 on the Pareto "
                       "frontier")
                        .arg(count_of(static_cast<int>(m_points.size()), tr("configuration"),
                                      tr("configurations")))
                        .arg(tokens)
                        .arg(windows)
                        .arg(first.perplexity_exact, 0, 'f', 3)
                        .arg(std::count(frontier.begin(), frontier.end(), true));
  if (m_older_duplicates > 0) {
    heading += tr(" (the newest run of each; %1 not shown)")
                   .arg(count_of(m_older_duplicates, tr("older repeat"), tr("older repeats")));
  }
  return heading;
}

bool QualityModel::run(const QualityJob& job) {
  if (job.choices.empty()) {
    fail(tr("no configuration is checked: check at least one to measure"));
    return false;
  }
  if (job.text.kind == QualityText::Kind::File && job.text.path.empty()) {
    fail(tr("no text file: choose one, or score the model's own sampled text"));
    return false;
  }
  if (!m_run->start([&] { return m_runner->start(job); }, tr("Loading the model"))) return false;
  m_job = job;
  m_measured = 0;
  m_saved_ids.clear();
  emit status_message(tr("Measuring %1…")
                          .arg(count_of(static_cast<int>(m_job.choices.size()), tr("configuration"),
                                        tr("configurations"))),
                      0);
  return true;
}

void QualityModel::on_measured(const QualityReport& report, int index, int count) {
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
      fail(tr("%1 was measured but could not be saved: %2")
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
    const bool new_key =
        !m_key || m_key->model != point->key.model || m_key->text != point->key.text;
    m_key = point->key;
    if (new_key) emit key_changed(*m_key);
    if (!m_store) {  // the points live here only
      std::erase_if(m_points, [&](const QualityPoint& p) { return p.method == point->method; });
      m_points.push_back(*point);
    }
    reload();
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

void QualityModel::on_ended(const QString& error, bool cancelled, int failed_index) {
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
  emit this->error(tr("The run failed%1: %2").arg(where, error));
}

}  // namespace kvlab::gui
