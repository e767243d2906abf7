// Fuzz target: sweep plans (sweep_plan.h), parsed as load_sweep_file parses them (JSON with
// comments), then cut into shards: every item must land in exactly one of three shards.
#include <nlohmann/json.hpp>

#include "fuzz_target.h"
#include "kvlab/store/sweep_plan.h"

using namespace kvlab;

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  const auto json = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false,
                                          /*ignore_comments=*/true);
  if (json.is_discarded()) return 0;
  auto plan = parse_sweep(json, "fuzz-sweep.json");
  if (!plan) {
    FUZZ_REQUIRE(plan.message().find("fuzz-sweep.json") != std::string::npos, plan.message());
    return 0;
  }
  std::size_t sharded = 0;
  for (int i = 1; i <= 3; ++i) sharded += shard_items(*plan, {i, 3}).size();
  FUZZ_REQUIRE(sharded == plan->items.size(), "shards");
  for (const SweepItem& item : plan->items)
    FUZZ_REQUIRE(item.uid.rfind("sweep-", 0) == 0, item.uid);
  return 0;
}
