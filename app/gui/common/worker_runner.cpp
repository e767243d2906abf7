#include "common/worker_runner.h"

#include <memory>
#include <string>
#include <utility>

#include <QEventLoop>
#include <QTimer>

namespace kvlab::gui {

WorkerRunner::WorkerRunner(QObject* parent) : QObject(parent) {}

WorkerRunner::~WorkerRunner() {
  m_cancel = true;
  if (m_thread.joinable()) m_thread.join();
}

bool WorkerRunner::launch(std::function<Completion()> work) {
  if (m_busy) return false;
  if (m_thread.joinable()) m_thread.join();
  m_busy = true;
  m_cancel = false;
  m_thread = std::thread([this, work = std::move(work)] {
    Completion completion = work();
    // Queued on this object: dropped if the runner is destroyed first (it joins before that).
    QMetaObject::invokeMethod(
        this, [this, completion = std::move(completion)] { complete(completion); },
        Qt::QueuedConnection);
  });
  return true;
}

void WorkerRunner::complete(const Completion& completion) {
  if (m_thread.joinable()) m_thread.join();
  m_busy = false;
  if (completion) completion();
  emit finished();
}

bool WorkerRunner::wait_until_done(int timeout_ms) {
  if (!m_busy) return true;
  QEventLoop loop;
  QTimer timer;
  timer.setSingleShot(true);
  connect(this, &WorkerRunner::finished, &loop, &QEventLoop::quit);
  connect(&timer, &QTimer::timeout, &loop, &QEventLoop::quit);
  timer.start(timeout_ms);
  loop.exec();
  return !m_busy;
}

ProgressFn WorkerRunner::progress_fn(double base, double span) {
  auto last_percent = std::make_shared<int>(-1);
  auto last_stage = std::make_shared<std::string>();
  return [this, base, span, last_percent, last_stage](double fraction, std::string_view stage) {
    const int percent = static_cast<int>(100.0 * (base + span * fraction));
    if (percent != *last_percent || stage != *last_stage) {
      *last_percent = percent;
      *last_stage = std::string(stage);
      const QString text = QString::fromUtf8(stage.data(), static_cast<int>(stage.size()));
      QMetaObject::invokeMethod(
          this, [this, percent, text] { emit progress(percent, text); }, Qt::QueuedConnection);
    }
    return !m_cancel.load();
  };
}

}  // namespace kvlab::gui
