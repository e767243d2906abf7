// Play / Pause, Step and Reset for a Learn page that advances one step at a time (the cache
// growing, Huffman merges, eviction steps). The page says what a step is and when the end is
// reached; the controls own the timer and the buttons: a tick asks for one step and pauses at the
// end, Play from the end asks for a reset first, the Play button toggles.
#pragma once

#include <functional>

#include <QString>
#include <QWidget>

class QPushButton;
class QTimer;

namespace kvlab::gui {

class PlaybackControls : public QWidget {
  Q_OBJECT

 public:
  struct Tips {
    QString play, step, reset;  // what each button does on this page
  };
  PlaybackControls(const Tips& tips, int tick_ms, QWidget* parent = nullptr);

  // Whether the page is at its last step (asked after each tick and when Play is pressed), and
  // whether it can play at all (no data: Play does nothing).
  void set_at_end(std::function<bool()> at_end) { m_at_end = std::move(at_end); }
  void set_can_play(std::function<bool()> can_play) { m_can_play = std::move(can_play); }

  bool is_playing() const;
  void play();
  void pause();
  void tick();  // what the timer does: one step, then pause at the end
  // Steps until the end without the timer (screenshots); stops after `limit` steps in any case.
  void run_to_end(int limit = 100000);

  QPushButton* play_button() const { return m_play; }
  QPushButton* step_button() const { return m_step; }

 signals:
  void step_requested();   // Step pressed, or a tick
  void reset_requested();  // Reset pressed, or Play pressed at the end

 private:
  bool at_end() const { return m_at_end && m_at_end(); }

  std::function<bool()> m_at_end, m_can_play;
  QPushButton *m_play = nullptr, *m_step = nullptr, *m_reset = nullptr;
  QTimer* m_timer = nullptr;
};

}  // namespace kvlab::gui
