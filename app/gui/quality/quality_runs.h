// Quality runs in the runs store: saved with the shape `kvlab quality --save` gives them (kind
// "quality", metrics = the report's JSON plus "model" and "text"), so `kvlab runs list` shows
// the GUI's runs and the GUI charts the CLI's; and read back as plain points for the chart.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/model/model_quality.h"
#include "kvlab/store/runs_store.h"

namespace kvlab::gui {

// The text a model is scored on: its own sampled text, or a file.
struct QualityText {
  enum class Kind { Sampled, File };
  Kind kind = Kind::Sampled;
  int tokens = 1024;
  std::uint64_t seed = 1;
  std::string path;
  // As the CLI records it: "sampled:1024 tokens, seed 1" or "file:PATH".
  std::string describe() const;
  static std::optional<QualityText> parse(const std::string& text);
};

// Which runs belong on one chart: the same model and text, scored in the same windows (so the
// exact perplexity every change is measured against is the same) — or, where a run stopped at a
// target standard error (`--target-se`), in windows of the same length: each such run's change
// is against its own exact run over the windows it scored, and its interval says how far that
// goes.
struct QualityKey {
  std::string model;  // the model path as stored
  std::string text;   // QualityText::describe()
  int tokens = 0, windows = 0;
  int window = 0;                  // positions per window (0: not stored, runs before issue 48)
  bool reached_target_se = false;  // the run stopped before the text ended
  // Paths (the model's, a text file's) are compared after resolving them.
  bool matches(const QualityKey& other) const;
};

// Whether two stored model paths name the same file (compared after resolving them).
bool same_model_path(const std::string& a, const std::string& b);

// One quality run as the chart and the table read it.
struct QualityPoint {
  std::int64_t run_id = 0;
  std::string created_at;
  std::string method;  // the run's method column: "kivi-2 G=32 R=128", "h2o budget 50% ..."
  QualityKey key;
  double ratio = 1, bits_per_value = 16, kept_fraction = 1;
  double perplexity_exact = 0, perplexity = 0, perplexity_change = 0;
  double next_token_agreement = 0, kl_mean = 0, seconds = 0;
  // The uncertainty (model_quality.h); NaN for runs stored before it was measured.
  double perplexity_change_se = std::numeric_limits<double>::quiet_NaN();
  double kl_mean_se = std::numeric_limits<double>::quiet_NaN();
  double agreement_low = std::numeric_limits<double>::quiet_NaN();
  double agreement_high = std::numeric_limits<double>::quiet_NaN();
  // What the cache holds against fp16 with eviction counted: a policy keeping half the tokens
  // halves the memory (kept_fraction is the mean over steps of kept / tokens so far).
  double memory_ratio() const { return kept_fraction > 0 ? ratio / kept_fraction : ratio; }
  double memory_bits_per_value() const { return bits_per_value * kept_fraction; }
};

// The point of a stored run, or nothing when it is not a quality run with every number.
std::optional<QualityPoint> quality_point(const RunSummary& run);

struct StoredQuality {
  std::vector<QualityPoint> points;  // newest run of each configuration, newest first
  int older_duplicates = 0;          // older runs of a configuration already shown
};

// Every stored quality run matching `key`, one per configuration (the newest). A key with no
// tokens and windows takes them from the newest run of its model and text.
Result<StoredQuality> load_quality_runs(const RunsStore& store, const QualityKey& key);
// The key of the newest quality run in the store, if there is one.
Result<std::optional<QualityKey>> newest_quality_key(const RunsStore& store);

}  // namespace kvlab::gui
