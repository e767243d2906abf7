// Fuzz target: Hugging Face config.json files (planners' import_hf_config, catalog.h), parsed as
// import_hf_config_file parses them, then taken where `kvlab plan --hf` takes them: the memory
// model at the model's own context, and back and forth through the catalogue's JSON.
#include <algorithm>

#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "kvlab/planners/catalog.h"
#include "kvlab/planners/kv_memory.h"

using namespace kvlab;

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  const auto json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return 0;
  auto spec = planners::import_hf_config(json, "fuzz-model");
  if (!spec) return 0;
  const planners::Deployment deployment;
  if (deployment.validate(*spec).ok()) {
    const auto scheme = planners::parse_scheme("fp16");
    FUZZ_REQUIRE(scheme.ok(), scheme.message());
    const std::int64_t context = std::clamp(spec->max_context, 1, 1 << 20);
    (void)planners::kv_layout(*spec, *scheme, deployment, context);
    (void)planners::kv_bytes_per_token(*spec, *scheme);
    (void)planners::weights_bytes_total(*spec, deployment);
  }
  auto again = planners::model_from_json(planners::model_to_json(*spec));
  FUZZ_REQUIRE(again.ok(), again.message());
  return 0;
}
