// `kvlab sweep FILE --slurm DIR`: a sweep as a Slurm array job, one array task per part, each
// making its part into a database of its own under DIR/parts, which `kvlab runs import --sweep
// FILE --parts N` then merges, naming the parts still missing (docs/GUIDES.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kvlab/store/sweep_plan.h"

namespace kvlab::cli {

struct SlurmArrayOptions {
  std::string dir;                        // --slurm: the folder of the script, logs and parts
  std::optional<int> parts;               // --parts; none: one per item, at most kDefaultMaxParts
  bool submit = false;                    // --submit: run sbatch on the script
  std::vector<std::string> sbatch_lines;  // --sbatch: more #SBATCH options, as written
  std::string backend = "auto";           // --backend, passed on to every task
};

// Parts when --parts is not given: one per item, but no more than this many.
inline constexpr int kDefaultMaxParts = 16;

// Writes DIR/sweep.sbatch (and makes DIR/logs and DIR/parts), then with `submit` runs `sbatch
// --parsable` on it; prints what it did (JSON with `json`). Returns the exit code.
int write_slurm_array(const SlurmArrayOptions& o, const std::string& sweep_file,
                      const SweepPlan& plan, bool json);

}  // namespace kvlab::cli
