// How the GUI writes numbers, in one place so labels, tables and tests agree; the same rules as
// the command line and the HTML report (format_metric_value in kvlab/store/run_records.h).
#pragma once

#include <string>

#include <QString>

namespace kvlab::gui {

// A cell shortened for the screen (a path by its file name) gives its whole text in this role;
// exports of a table write it (chart_export.h) instead of the shortened one.
inline constexpr int kFullTextRole = 0x0100 + 0x4B0;  // Qt::UserRole + 1200

QString format_ratio(double ratio);              // "4.27×"
QString format_bits_per_value(double bits);      // "3.75"
QString format_metric(double value);             // 3 significant digits: "0.0123", "1.2e-05"
QString format_snr_db(double db);                // "24.1 dB"
QString format_percent(double fraction);         // 0.0123 -> "1.23 %"
QString format_signed_percent(double fraction);  // a change: 7.207 -> "+721 %"
QString format_byte_count(double bytes);         // "1.5 MiB" (binary units)
QString format_seconds(double seconds);          // "0.84 s", "12 ms"
// A stored UTC ISO-8601 time ("2024-05-01T12:34:56.789Z") in local time, "2024-05-01 14:34:56"
// (or without seconds); the text as it is when it does not parse.
QString format_local_time(const std::string& created_at, bool seconds = true);

// An engine message in the app's words: the command line's option names ("--group-size 0: ...")
// become the names of the fields that set them ("Group size 0: ...").
QString in_gui_terms(const QString& message);

// A run's method and label, each said once: a label that already holds the method ("kvcomp B=64
// …" for kvcomp) alone, not "kvcomp · kvcomp B=64 …"; else "method · label".
QString method_and_label(const std::string& method, const std::string& label);

}  // namespace kvlab::gui
