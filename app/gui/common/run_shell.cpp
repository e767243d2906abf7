#include "common/run_shell.h"

#include <cmath>

#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "common/gui_style.h"

namespace kvlab::gui {

RunShell::RunShell(const RunShellTexts& texts, QWidget* parent) : QWidget(parent) {
  m_run = new QPushButton(tr("Run"), this);
  m_run->setDefault(true);
  m_run->setToolTip(texts.run_tooltip);
  m_cancel = new QPushButton(tr("Cancel"), this);
  m_cancel->setToolTip(texts.cancel_tooltip);
  m_progress = new QProgressBar(this);
  m_progress->setRange(0, 100);
  m_progress->setValue(0);
  m_progress->setToolTip(texts.progress_tooltip);
  m_stage = style::muted_label(QString(), this);

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_run);
  buttons->addWidget(m_cancel);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(buttons);
  layout->addWidget(m_progress);
  layout->addWidget(m_stage);

  connect(m_run, &QPushButton::clicked, this, &RunShell::run_requested);
  connect(m_cancel, &QPushButton::clicked, this, &RunShell::cancel_requested);
  set_running(false);
}

void RunShell::started(const QString& stage) {
  m_progress->setValue(0);
  set_running(true);
  m_cancelling = false;
  m_clock.start();
  m_stage->setText(stage);
}

QString RunShell::time_left(int percent, qint64 elapsed_ms) {
  // Too early, or nearly done: an estimate would only jump about.
  if (percent < 3 || percent >= 100 || elapsed_ms < 3000) return {};
  const double left_s = elapsed_ms / 1000.0 * (100.0 - percent) / percent;
  if (left_s < 1.5) return tr("about a second left");
  if (left_s < 90) return tr("about %1 s left").arg(std::lround(left_s));
  if (left_s < 90 * 60) return tr("about %1 min left").arg(std::lround(left_s / 60));
  return tr("about %1 h left").arg(left_s / 3600, 0, 'f', 1);
}

void RunShell::progress(int percent, const QString& stage) {
  m_progress->setValue(percent);
  if (m_cancelling) return;  // "Cancelling…" until the worker has stopped
  const QString left = time_left(percent, m_clock.isValid() ? m_clock.elapsed() : 0);
  m_stage->setText(left.isEmpty() ? stage : tr("%1 · %2").arg(stage, left));
}

void RunShell::cancelling() {
  m_cancelling = true;
  m_stage->setText(tr("Cancelling…"));
}

void RunShell::finished(bool succeeded) {
  m_progress->setValue(succeeded ? 100 : 0);
  set_running(false);
}

void RunShell::set_running(bool running) {
  m_running = running;
  m_run->setEnabled(!running);
  m_cancel->setEnabled(running);
  if (!running) m_stage->clear();
  m_stage->setVisible(running);
}

}  // namespace kvlab::gui
