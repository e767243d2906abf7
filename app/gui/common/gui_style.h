// The app's shared look outside the charts (chart_style.h has theirs): how long a status-bar
// message stays, and the muted, error and banner text every page uses.
#pragma once

#include <QColor>
#include <QString>

class QFormLayout;
class QLabel;
class QWidget;

namespace kvlab::gui::style {

// A status-bar message that reports something done stays this long.
inline constexpr int kStatusTimeoutMs = 8000;

inline const QColor kMutedText{90, 90, 90};    // notes, captions, citations, stages
inline const QColor kFits{30, 120, 50};        // a planner answer: it fits
inline const QColor kDoesNotFit{190, 30, 30};  // a planner answer: it does not

// Grey text for a note beside the controls.
void make_muted(QLabel* label);
// A word-wrapped muted label.
QLabel* muted_label(const QString& text, QWidget* parent);
// Dark red text: why a page could not compute its numbers.
void make_error_text(QLabel* label);
// A boxed red banner above a page's results: what went wrong with the last run.
void make_error_banner(QLabel* label);

// Gives every caption of `form` that has none its field's tooltip (or, for a row of several
// widgets, the first tooltip among them), so hovering the caption explains the field too.
void share_with_captions(QFormLayout* form);
// The tooltip of `w`, or of its first descendant that has one.
QString tooltip_of(const QWidget* w);

}  // namespace kvlab::gui::style
