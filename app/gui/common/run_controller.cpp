#include "common/run_controller.h"

#include <cmath>

#include "common/worker_runner.h"

namespace kvlab::gui {

RunController::RunController(WorkerRunner* runner, QObject* parent)
    : QObject(parent), m_runner(runner) {
  connect(m_runner, &WorkerRunner::progress, this, &RunController::on_progress);
  // A job whose completion named no outcome (it should not happen) still ends the run.
  connect(m_runner, &WorkerRunner::finished, this, [this] {
    if (m_running) failed(tr("the run ended without a result"), m_cancelling);
  });
}

bool RunController::start(const std::function<bool()>& launch, const QString& first_stage) {
  if (m_running || !launch()) return false;
  m_running = true;
  m_cancelling = false;
  m_last_ok = false;
  m_last_error.clear();
  m_percent = 0;
  m_stage = first_stage;
  m_clock.start();
  emit running_changed(true);
  emit progress_changed(m_percent, m_stage);
  return true;
}

void RunController::note_error(const QString& message) {
  m_last_error = message;
}

void RunController::cancel() {
  if (!m_running || m_cancelling) return;
  m_cancelling = true;
  m_runner->cancel();
  m_stage = tr("Cancelling…");
  emit progress_changed(m_percent, m_stage);
}

QString RunController::time_left(int percent, qint64 elapsed_ms) {
  // Too early, or nearly done: an estimate would only jump about.
  if (percent < 3 || percent >= 100 || elapsed_ms < 3000) return {};
  const double left_s = elapsed_ms / 1000.0 * (100.0 - percent) / percent;
  if (left_s < 1.5) return tr("about a second left");
  if (left_s < 90) return tr("about %1 s left").arg(std::lround(left_s));
  if (left_s < 90 * 60) return tr("about %1 min left").arg(std::lround(left_s / 60));
  return tr("about %1 h left").arg(left_s / 3600, 0, 'f', 1);
}

void RunController::on_progress(int percent, const QString& stage) {
  if (!m_running) return;
  m_percent = percent;
  if (!m_cancelling) {
    const QString left = time_left(percent, m_clock.isValid() ? m_clock.elapsed() : 0);
    m_stage = left.isEmpty() ? stage : tr("%1 · %2").arg(stage, left);
  }
  emit progress_changed(m_percent, m_stage);
}

void RunController::succeeded() {
  m_last_ok = true;
  m_last_error.clear();
  end(true);
}

void RunController::failed(const QString& message, bool cancelled) {
  m_last_ok = false;
  m_last_error = message.isEmpty() && cancelled ? tr("the run was cancelled") : message;
  end(false);
}

void RunController::end(bool succeeded) {
  if (!m_running) return;
  m_running = false;
  m_cancelling = false;
  m_percent = succeeded ? 100 : 0;
  m_stage.clear();
  emit progress_changed(m_percent, m_stage);
  emit running_changed(false);
  emit ended(succeeded);
}

bool RunController::run_and_wait(const std::function<bool()>& run, int timeout_ms) {
  if (!run()) return false;
  if (!wait_until_done(timeout_ms)) {
    cancel();
    wait_until_done(timeout_ms);
    m_last_ok = false;
    m_last_error = tr("the run did not finish within %1 s").arg(timeout_ms / 1000);
    return false;
  }
  return m_last_ok;
}

bool RunController::wait_until_done(int timeout_ms) {
  if (!m_runner->wait_until_done(timeout_ms)) return false;
  return !m_running;
}

void RunController::results_shown() {
  m_has_results = true;
  set_stale(false);
}

void RunController::results_cleared() {
  m_has_results = false;
  set_stale(false);
}

void RunController::input_changed() {
  if (m_has_results) set_stale(true);
}

void RunController::set_stale(bool stale) {
  if (stale == m_stale) return;
  m_stale = stale;
  emit stale_changed(stale);
}

}  // namespace kvlab::gui
