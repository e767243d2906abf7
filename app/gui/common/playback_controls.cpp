#include "common/playback_controls.h"

#include <QHBoxLayout>
#include <QPushButton>
#include <QTimer>

namespace kvlab::gui {

PlaybackControls::PlaybackControls(const Tips& tips, int tick_ms, QWidget* parent)
    : QWidget(parent) {
  m_play = new QPushButton(tr("▶ Play"));
  m_play->setToolTip(tips.play);
  m_step = new QPushButton(tr("Step"));
  m_step->setToolTip(tips.step);
  m_reset = new QPushButton(tr("Reset"));
  m_reset->setObjectName(QStringLiteral("reset"));
  m_reset->setToolTip(tips.reset);
  m_timer = new QTimer(this);
  m_timer->setObjectName(QStringLiteral("timer"));
  m_timer->setInterval(tick_ms);

  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(0, 0, 0, 0);
  row->addWidget(m_play);
  row->addWidget(m_step);
  row->addWidget(m_reset);

  connect(m_play, &QPushButton::clicked, this, [this] { is_playing() ? pause() : play(); });
  connect(m_step, &QPushButton::clicked, this, &PlaybackControls::step_requested);
  connect(m_reset, &QPushButton::clicked, this, &PlaybackControls::reset_requested);
  connect(m_timer, &QTimer::timeout, this, &PlaybackControls::tick);
}

bool PlaybackControls::is_playing() const {
  return m_timer->isActive();
}

void PlaybackControls::play() {
  if (m_can_play && !m_can_play()) return;
  if (at_end()) emit reset_requested();
  m_timer->start();
  m_play->setText(tr("❚❚ Pause"));
}

void PlaybackControls::pause() {
  m_timer->stop();
  m_play->setText(tr("▶ Play"));
}

void PlaybackControls::run_to_end(int limit) {
  pause();
  for (int i = 0; i < limit && m_at_end && !at_end(); ++i) emit step_requested();
}

void PlaybackControls::tick() {
  emit step_requested();
  if (at_end()) pause();
}

}  // namespace kvlab::gui
