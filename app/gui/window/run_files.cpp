#include "window/run_files.h"

#include <string>

#include <QDateTime>
#include <QFileInfo>

#include "common/chart_export.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/store/run_export.h"
#include "kvlab/store/run_report.h"

namespace kvlab::gui {

QString save_runs(const RunsStore& store, const std::vector<std::int64_t>& ids,
                  const QString& path) {
  if (ids.empty()) return QObject::tr("'%1': no run selected to export").arg(path);
  const QString suffix = QFileInfo(path).suffix().toLower();
  const bool html = suffix == QLatin1String("html") || suffix == QLatin1String("htm");
  const bool json = suffix == QLatin1String("json"), csv = suffix == QLatin1String("csv");
  if (!html && !json && !csv) {
    return QObject::tr("'%1': unknown format '%2' (use .html, .json or .csv)")
        .arg(path, suffix.isEmpty() ? QObject::tr("no suffix") : suffix);
  }
  if (csv && ids.size() > 1) {
    return QObject::tr("'%1': CSV holds one run; choose .html or .json for %2 runs")
        .arg(path)
        .arg(ids.size());
  }
  std::vector<RunRecord> runs;
  for (const std::int64_t id : ids) {
    auto run = store.load_run(id);
    if (!run) return QString::fromStdString(run.message());
    runs.push_back(std::move(run).value());
  }
  std::string text;
  if (html) {
    ReportOptions options;
    options.generated_at = QDateTime::currentDateTime().toString(Qt::ISODate).toStdString();
    auto report = runs_html_report(runs, options);
    if (!report) return QString::fromStdString(report.message());
    text = std::move(report).value();
  } else if (csv) {
    text = run_to_csv(runs.front());
  } else if (runs.size() == 1) {
    text = json_text(run_to_json(runs.front()), 2) + "\n";
  } else {
    nlohmann::json all = nlohmann::json::array();
    for (const RunRecord& run : runs) all.push_back(run_to_json(run));
    text = json_text(all, 2) + "\n";
  }
  return write_file_whole(path, QByteArray::fromStdString(text));
}

}  // namespace kvlab::gui
