// The configurations the Quality page offers to compare: quantization methods (INT8, INT4,
// KIVI-4, KIVI-2 with fp16 and fp32 parameters, FP8, llama.cpp's q8_0, q4_0 and iq4_nl, NVFP4,
// MXFP4, KVQuant-3, TurboQuant-3, KVComp + Huffman at three step sizes) and eviction policies (H2O
// and StreamingLLM at 50% and 20% of the tokens), each the QualityConfig that `kvlab quality
// --method M --policy P` with the same options builds.
#pragma once

#include <string>
#include <vector>

#include <QString>

#include "kvlab/engine/model/model_quality.h"

namespace kvlab::gui {

struct QualityChoice {
  QString id;    // stable: "int8", "kivi-2", "kvcomp-0.05", "h2o-50", ...
  QString name;  // shown in the checklist and next to the point: "KIVI-2", "H2O 50%"
  QualityConfig config;
  // Checked when the page opens: the original comparison; the block formats (which need a head
  // size that is a multiple of 32, unlike stories260K's 8) and the newer methods are opt-in.
  bool checked_at_start = true;
};

const std::vector<QualityChoice>& quality_choices();
// The choice with this id, or null.
const QualityChoice* find_quality_choice(const QString& id);

// What a quality run is called in the runs store (its `method` column), as the CLI names it:
// "kivi-2 G=32 R=128", "h2o budget 50% recent 50%", or "POLICY + METHOD" for both.
std::string quality_run_method(const QualityConfig& config);

// The choice's tooltip: its full label and what attention reads with it.
QString quality_choice_tooltip(const QualityChoice& choice);

// The short name of a stored run's method: the choice's name when one of the choices makes
// it, else the stored text itself (a run from the CLI with other options).
QString quality_short_name(const std::string& run_method);

}  // namespace kvlab::gui
