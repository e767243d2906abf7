#include "learn/learn_link.h"

#include "kvlab/planners/catalog.h"

namespace kvlab::gui {

LearnLink LearnLink::to_compression(const SyntheticConfig& source, const MethodConfig& method) {
  LearnLink link;
  link.target = Target::Compression;
  link.source = source;
  link.method = method;
  return link;
}

LearnLink LearnLink::to_eviction(const SyntheticConfig& source, const EvictionConfig& eviction) {
  LearnLink link;
  link.target = Target::Eviction;
  link.source = source;
  link.eviction = eviction;
  return link;
}

LearnLink LearnLink::to_planner(const planners::Scenario& s,
                                const std::vector<std::string>& schemes) {
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  LearnLink link;
  link.target = Target::Planner;
  link.planner =
      nlohmann::json{{"model", planners::model_to_json(s.model)},
                     {"gpu", planners::gpu_to_json(s.gpu)},
                     {"context", s.context},
                     {"batch", s.batch},
                     {"schemes", schemes},
                     {"evict", "none"},
                     {"tp", s.deployment.tp},
                     {"pp", s.deployment.pp},
                     {"util", s.deployment.gpu_memory_utilization},
                     {"reserve_gib", static_cast<double>(s.deployment.reserve_bytes) / kGiB},
                     {"page_tokens", s.deployment.page_tokens},
                     {"efficiency", s.bandwidth_efficiency},
                     {"compute_efficiency", s.compute_efficiency}};
  return link;
}

}  // namespace kvlab::gui
