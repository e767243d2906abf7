// A self-contained HTML report of one run or a comparison of several: parameters, metrics and
// charts (inline SVG, drawn here), with no script, stylesheet or image loaded from anywhere else,
// so the file can be mailed, archived or opened offline.
#pragma once

#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/store/runs_store.h"

namespace kvlab {

struct ReportOptions {
  std::string title;         // empty: "kvlab run N" or "kvlab comparison of N runs"
  std::string generated_at;  // shown in the footer; empty: left out (tests compare bytes)
};

// Per run: a heading, its parameters and headline metrics as tables, and charts of whatever
// series it has (per-layer ratio, bits per value and error for compression runs; memory, kept
// tokens, attention mass and error over the decode steps for eviction runs). With two or more
// runs a comparison table and grouped bar charts of the headline metrics come first. Metrics are
// written as the app writes them (run_records.h). An error when `runs` is empty or holds a run
// twice.
Result<std::string> runs_html_report(const std::vector<RunRecord>& runs,
                                     const ReportOptions& options = {});

}  // namespace kvlab
