// Issue 20, part 8: a sweep file becomes items in a fixed order; shards partition them; an
// item's key depends on what it measures and on nothing else; bad files are refused naming the
// file and the place.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include <fmt/format.h>

#include "kvlab/store/sweep_plan.h"
#include "store_test_support.h"

namespace kvlab {
namespace {

nlohmann::json quality_sweep() {
  return nlohmann::json::parse(R"({
    "kind": "quality",
    "models": ["a.gguf", "dir/b.bin"],
    "texts": ["/usr/share/common-licenses/GPL-3", "sampled:256"],
    "max_tokens": 512,
    "methods": [
      {"method": "int8"},
      {"method": "kivi", "bits": 4, "group_size": 32, "residual": 64},
      {"eviction": {"policy": "h2o", "budget": 0.5}},
      {"method": "int4", "eviction": {"policy": "streaming", "budget": "25%", "sinks": 4}}
    ]})");
}

TEST(SweepPlan, QualityItemsAreModelsTimesTextsTimesMethodsInOrder) {
  auto plan = parse_sweep(quality_sweep(), "s.json");
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->kind, SweepKind::Quality);
  EXPECT_EQ(plan->max_tokens, 512);
  ASSERT_EQ(plan->items.size(), 2u * 2u * 4u);
  const SweepItem& first = plan->items[0];
  EXPECT_EQ(first.model, "a.gguf");
  EXPECT_EQ(first.text, "file:/usr/share/common-licenses/GPL-3");
  ASSERT_TRUE(first.method.has_value());
  EXPECT_EQ(first.method->kind, MethodKind::Int8);
  EXPECT_FALSE(first.eviction.has_value());
  const SweepItem& h2o = plan->items[2];
  EXPECT_FALSE(h2o.method.has_value());
  ASSERT_TRUE(h2o.eviction.has_value());
  EXPECT_EQ(h2o.eviction->policy, EvictionPolicy::H2O);
  EXPECT_EQ(plan->items[3].method->kind, MethodKind::Int4);
  EXPECT_EQ(plan->items[3].eviction->policy, EvictionPolicy::Streaming);
  EXPECT_EQ(plan->items[5].text, "sampled:256");
  EXPECT_EQ(plan->items.back().model, "dir/b.bin");
  for (std::size_t i = 0; i < plan->items.size(); ++i) EXPECT_EQ(plan->items[i].index, int(i));
  EXPECT_NE(first.title.find("a.gguf"), std::string::npos) << first.title;
  EXPECT_NE(first.title.find("GPL-3"), std::string::npos) << first.title;
}

// Issue 48, parts 2 and 4: every method and policy parameter `kvlab quality` takes can be written
// in a sweep (KVQuant's calibration, ThinK's key channels, SnapKV's window), and a stride; a
// stride of 0 leaves the item's key as sweeps before strides wrote it.
TEST(SweepPlan, EveryParameterOfAMethodOrPolicyAndAStride) {
  auto j = nlohmann::json::parse(R"({
    "kind": "quality", "models": ["m.gguf"], "texts": ["sampled:600"], "window": 128,
    "stride": 32,
    "methods": [
      {"method": "kvquant", "bits": 3, "calib_tokens": 64, "pre_rope": false},
      {"method": "int4", "rotation": "hadamard", "rotation_seed": 3},
      {"eviction": {"policy": "think", "key_channels": 0.25}},
      {"eviction": {"policy": "snapkv", "budget": "25%", "window": 16, "pool": 3}}
    ]})");
  auto plan = parse_sweep(j, "s.json");
  ASSERT_TRUE(plan.ok()) << plan.message();
  EXPECT_EQ(plan->stride, 32);
  ASSERT_EQ(plan->items.size(), 4u);
  EXPECT_EQ(plan->items[0].method->calib_tokens, 64);
  EXPECT_EQ(plan->items[0].method->bits, 3);
  EXPECT_EQ(plan->items[1].method->rotation_seed, 3u);
  EXPECT_DOUBLE_EQ(plan->items[2].eviction->key_channels, 0.25);
  EXPECT_EQ(plan->items[3].eviction->window, 16);
  EXPECT_EQ(plan->items[3].eviction->pool, 3);
  EXPECT_EQ(plan->items[0].spec.at("stride"), 32);
  j["stride"] = 0;
  const auto side = parse_sweep(j, "s.json").value();
  EXPECT_FALSE(side.items[0].spec.contains("stride"));
  EXPECT_NE(side.items[0].uid, plan->items[0].uid);
  j["methods"][0]["calib_tokenz"] = 1;
  const auto typo = parse_sweep(j, "s.json");
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.message().find("calib_tokenz"), std::string::npos) << typo.message();
}

TEST(SweepPlan, KeysAreDistinctAndDependOnlyOnWhatIsMeasured) {
  auto plan = parse_sweep(quality_sweep(), "s.json");
  ASSERT_TRUE(plan.ok()) << plan.message();
  std::set<std::string> keys;
  for (const auto& item : plan->items) {
    EXPECT_EQ(item.uid.rfind("sweep-", 0), 0u) << item.uid;
    EXPECT_EQ(item.uid.size(), 6u + 32u) << item.uid;
    keys.insert(item.uid);
  }
  EXPECT_EQ(keys.size(), plan->items.size());

  // Another file with the methods in another order and written differently (defaults spelled
  // out, the budget as text) gives the same keys to the same measurements.
  nlohmann::json other = quality_sweep();
  other["methods"] = nlohmann::json::parse(R"([
      {"eviction": {"policy": "h2o", "budget": "0.5", "recent_fraction": 0.5}},
      {"method": "int8"}])");
  other["models"] = {"a.gguf"};
  auto plan2 = parse_sweep(other, "t.json");
  ASSERT_TRUE(plan2.ok()) << plan2.message();
  EXPECT_EQ(plan2->items[0].uid, plan->items[2].uid);
  EXPECT_EQ(plan2->items[1].uid, plan->items[0].uid);

  // What is measured changes the key: the token limit, the window, a method parameter.
  for (const auto& change :
       {nlohmann::json{{"max_tokens", 513}}, nlohmann::json{{"window", 128}}}) {
    nlohmann::json changed = quality_sweep();
    changed.update(change);
    auto p = parse_sweep(changed, "c.json");
    ASSERT_TRUE(p.ok()) << p.message();
    for (std::size_t i = 0; i < p->items.size(); ++i) {
      EXPECT_NE(p->items[i].uid, plan->items[i].uid) << change.dump();
    }
  }
  nlohmann::json kivi2 = quality_sweep();
  kivi2["methods"][1]["bits"] = 2;
  EXPECT_NE(parse_sweep(kivi2, "k.json")->items[1].uid, plan->items[1].uid);
}

TEST(SweepPlan, ShardsPartitionTheItemsForAnyCount) {
  auto plan = parse_sweep(quality_sweep(), "s.json");
  ASSERT_TRUE(plan.ok()) << plan.message();
  for (int n : {1, 2, 3, 5, 16, 17, 40}) {
    std::multiset<int> seen;
    std::size_t largest = 0, smallest = plan->items.size();
    for (int i = 1; i <= n; ++i) {
      auto shard = SweepShard::parse(fmt::format("{}/{}", i, n));
      ASSERT_TRUE(shard.ok()) << shard.message();
      const auto items = shard_items(*plan, *shard);
      largest = std::max(largest, items.size());
      smallest = std::min(smallest, items.size());
      for (const SweepItem* item : items) seen.insert(item->index);
    }
    ASSERT_EQ(seen.size(), plan->items.size()) << n;
    for (int i = 0; i < int(plan->items.size()); ++i) EXPECT_EQ(seen.count(i), 1u) << n;
    EXPECT_LE(largest - smallest, 1u) << n;  // balanced
  }
  for (const char* bad : {"0/2", "3/2", "1/0", "2", "a/b", "1/2/3", "-1/2", ""}) {
    auto shard = SweepShard::parse(bad);
    ASSERT_FALSE(shard.ok()) << bad;
    EXPECT_NE(shard.message().find("--shard"), std::string::npos) << shard.message();
  }
}

TEST(SweepPlan, CompressionSweepsTakeSourcesAndSyntheticKnobs) {
  auto plan = parse_sweep(nlohmann::json::parse(R"({
    "kind": "compression", "sources": ["synthetic:tiny", "file:kv.safetensors"],
    "context": 96, "seed": 7,
    "methods": [{"method": "int8"}, {"method": "kvcomp", "rel_scale": 0.1, "codec": "huffman"}]})"),
                          "c.json");
  ASSERT_TRUE(plan.ok()) << plan.message();
  ASSERT_EQ(plan->items.size(), 4u);
  ASSERT_TRUE(plan->items[0].synthetic.has_value());
  EXPECT_EQ(plan->items[0].synthetic->preset, "tiny");
  EXPECT_EQ(plan->items[0].synthetic->context, 96);
  EXPECT_EQ(plan->items[0].synthetic->seed, 7u);
  EXPECT_FALSE(plan->items[2].synthetic.has_value());
  EXPECT_EQ(plan->items[3].source, "file:kv.safetensors");
  EXPECT_EQ(plan->items[3].method->kind, MethodKind::KvComp);
}

TEST(SweepPlan, BadFilesAreRefusedNamingTheFileAndThePlace) {
  const auto dir = store_test::fresh_dir();
  struct Case {
    const char* text;
    const char* expect;
  };
  const Case cases[] = {
      {"[1, 2]", "JSON object"},
      {"{\"kind\": \"quality\"", "not a JSON file"},
      {R"({"kind": "speed", "methods": [{"method": "int8"}]})", "speed"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": []})", "methods"},
      {R"({"kind": "quality", "models": [], "texts": ["t"], "methods": [{"method": "int8"}]})",
       "models"},
      {R"({"kind": "quality", "models": ["m"], "methods": [{"method": "int8"}]})", "texts"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "method": [{"method": "int8"}]})",
       "unknown key \"method\""},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": [{"method": "int9"}]})",
       "methods[0]"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": [{"method": "kivi", "bitz": 2}]})",
       "bitz"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": [{"method": "kivi", "bits": 3}]})",
       "methods[0]"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": [{"bits": 2}]})",
       "without a method"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": [{"method": "none"}]})",
       "nothing to measure"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": [{"eviction": {"policy": "lru"}}]})",
       "methods[0].eviction"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "methods": [{"eviction": {"policy": "h2o", "steps": 9}}]})",
       "steps"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["sampled:x"], "methods": [{"method": "int8"}]})",
       "sampled:x"},
      {R"({"kind": "quality", "models": ["m"], "texts": ["t"], "max_tokens": -1, "methods": [{"method": "int8"}]})",
       "max_tokens"},
      {R"({"kind": "compression", "sources": ["tiny"], "methods": [{"method": "int8"}]})",
       "synthetic:PRESET"},
      {R"({"kind": "compression", "sources": ["synthetic:tiny"], "methods": [{"eviction": {"policy": "h2o"}}]})",
       "quality sweeps"},
  };
  for (std::size_t i = 0; i < std::size(cases); ++i) {
    const auto path = dir / fmt::format("sweep{}.json", i);
    std::ofstream(path) << cases[i].text;
    auto plan = load_sweep_file(path);
    ASSERT_FALSE(plan.ok()) << cases[i].text;
    EXPECT_NE(plan.message().find(path.string()), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find(cases[i].expect), std::string::npos) << plan.message();
  }
  auto missing = load_sweep_file(dir / "none.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("none.json"), std::string::npos) << missing.message();
}

// A sweep file is a new parser: every value of a valid file swapped for one of every JSON type,
// and seeded byte flips of its text, give a plan or an error, never an exception or a crash.
TEST(SweepPlan, FuzzedFilesGiveAPlanOrAnErrorNeverAThrow) {
  const nlohmann::json valid = quality_sweep();
  const nlohmann::json kinds[] = {
      nullptr, 1,           -1, 1.5, "x", nlohmann::json::array(), nlohmann::json::object(),
      true,    4294967296.0};
  std::size_t cases = 0;
  const nlohmann::json flat = valid.flatten();
  for (const auto& [pointer, value] : flat.items()) {
    for (const auto& replacement : kinds) {
      nlohmann::json changed = valid;
      changed[nlohmann::json::json_pointer(pointer)] = replacement;
      EXPECT_NO_THROW({ (void)parse_sweep(changed, "f.json"); }) << pointer;
      ++cases;
    }
  }
  const auto dir = store_test::fresh_dir();
  const std::string text = valid.dump();
  std::uint64_t state = 12345;
  const auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (int i = 0; i < 300; ++i) {
    std::string bytes = text;
    for (int flips = 1 + static_cast<int>(next() % 4); flips > 0; --flips) {
      bytes[next() % bytes.size()] = static_cast<char>(next() & 0xFF);
    }
    const auto path = dir / "fuzz.json";
    std::ofstream(path, std::ios::binary) << bytes;
    EXPECT_NO_THROW({ (void)load_sweep_file(path); }) << bytes;
    ++cases;
  }
  EXPECT_GT(cases, 400u);
}

}  // namespace
}  // namespace kvlab
