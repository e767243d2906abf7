// Writing stored runs to files from the Runs page, as `kvlab runs export` and `kvlab runs report`
// do on the command line: one run as JSON (everything, artifacts included) or CSV (fields, params
// and metrics as key,value rows), and one or several runs as a self-contained HTML report.
#pragma once

#include <cstdint>
#include <vector>

#include <QString>

#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

// The format follows the suffix of `path`: .json, .csv or .html (.htm). Several ids go only to
// .html (a comparison) or .json (an array of runs). Returns an empty string when the file was
// written whole (it replaces `path` at the end, so a failure leaves an old file as it was), else a
// one-line message naming the file or run and the problem.
QString save_runs(const RunsStore& store, const std::vector<std::int64_t>& ids,
                  const QString& path);

}  // namespace kvlab::gui
