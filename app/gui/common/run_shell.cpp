#include "common/run_shell.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "common/gui_style.h"
#include "common/run_controller.h"

namespace kvlab::gui {

RunShell::RunShell(const RunShellTexts& texts, RunController* controller, QWidget* parent)
    : QWidget(parent) {
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
  m_stage->setObjectName(QStringLiteral("stage"));

  auto* buttons = new QHBoxLayout;
  buttons->addWidget(m_run);
  buttons->addWidget(m_cancel);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addLayout(buttons);
  layout->addWidget(m_progress);
  layout->addWidget(m_stage);

  connect(m_run, &QPushButton::clicked, this, &RunShell::run_requested);
  connect(m_cancel, &QPushButton::clicked, controller, &RunController::cancel);
  connect(controller, &RunController::running_changed, this, &RunShell::set_running);
  connect(controller, &RunController::progress_changed, this, &RunShell::show_progress);
  set_running(controller->running());
}

void RunShell::show_progress(int percent, const QString& stage) {
  m_progress->setValue(percent);
  m_stage->setText(stage);
}

void RunShell::set_running(bool running) {
  m_run->setEnabled(!running);
  m_cancel->setEnabled(running);
  m_stage->setVisible(running);
}

}  // namespace kvlab::gui
