// Where a Learn step sends the reader ("Open in the … view"), with the settings to put in place
// there. Each Learn model computes its link; the page's button emits it and the main window
// applies it. Only the fields that the target view uses are read. Also what the Learn models
// share about the planner catalogues: finding an entry by id.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"
#include "kvlab/planners/solvers.h"

namespace kvlab::gui {

struct LearnLink {
  enum class Target { Compression, Eviction, Planner };
  Target target = Target::Compression;
  std::optional<SyntheticConfig> source;   // Compression and Eviction: the synthetic source
  std::optional<MethodConfig> method;      // Compression: the method (and codec)
  std::optional<EvictionConfig> eviction;  // Eviction: the policy
  std::optional<nlohmann::json> planner;   // Planner: params as PlannerView::restore reads
  bool run = true;                         // start the run once the view is set up

  static LearnLink to_compression(const SyntheticConfig& source, const MethodConfig& method);
  static LearnLink to_eviction(const SyntheticConfig& source, const EvictionConfig& eviction);
  // The Planner view with the scenario's model, GPU, context, batch, deployment and efficiencies,
  // and these schemes checked.
  static LearnLink to_planner(const planners::Scenario& s, const std::vector<std::string>& schemes);
};

// The index of the catalogue entry (model or GPU) whose id is `id`, or -1.
template <class T>
int catalog_index(const std::vector<T>& items, const std::string& id) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace kvlab::gui
