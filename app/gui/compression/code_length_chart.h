// Huffman code length vs frequency for one tensor (one layer, K or V): bars of how often each
// uint8 code value occurs (left axis) and, on the right axis, the bits of its Huffman code, for
// the values that occur; the escape's length is noted under the title.
#pragma once

#include <qcustomplot.h>

#include "common/chart_data.h"

namespace kvlab::gui {

class CodeLengthChart : public QCustomPlot {
  Q_OBJECT

 public:
  explicit CodeLengthChart(QWidget* parent = nullptr);

  void set_data(const CodeLengthData& data, const QString& title);
  void clear_data(const QString& message);

  // What is drawn, for tests: key = code value, value = count or code length in bits.
  // Code length of the escape (0 when none was drawn), and the note under the title.
  int escape_length() const { return m_escape_length; }
  QString note() const;

 private:
  QCPTextElement* m_title = nullptr;
  QCPTextElement* m_note = nullptr;
  QCPBars* m_counts = nullptr;
  QCPGraph* m_lengths = nullptr;
  int m_escape_length = 0;
};

}  // namespace kvlab::gui
