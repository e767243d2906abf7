// The engine's one parallel loop (for_each_item on oneTBB): every item once, progress only on
// the calling thread, the lowest failing item's error, a cancel that stops the other items, and
// whole runs whose reports are bit-identical on one thread and on several.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/engine/io/report_json.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab {
namespace {

TEST(Threads, EveryItemRunsOnceAndProgressStaysOnTheCallingThread) {
  const auto caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> runs(64);
  std::mutex mutex;
  std::set<std::thread::id> threads;
  double last = -1;
  bool monotonic = true, off_thread = false;
  const ProgressFn progress = [&](double f, std::string_view) {
    off_thread = off_thread || std::this_thread::get_id() != caller;
    monotonic = monotonic && f >= last;
    last = f;
    return true;
  };
  const Status s = for_each_item(64, progress, "item", [&](int i, ItemProgress& p) {
    ++runs[static_cast<std::size_t>(i)];
    {
      std::lock_guard lock(mutex);
      threads.insert(std::this_thread::get_id());
    }
    // Some work (2 ms, long enough for the other threads to take items), with the checks a
    // long item makes.
    for (int k = 0; k < 4; ++k) {
      if (!p.keep_going(k / 4.0)) return Status(Ok{});
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return Status(Ok{});
  });
  ASSERT_TRUE(s.ok()) << s.message();
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
  EXPECT_FALSE(off_thread);
  EXPECT_TRUE(monotonic);
  if (std::thread::hardware_concurrency() > 1 && worker_threads() > 1) {
    EXPECT_GT(threads.size(), 1u) << "the items ran on one thread";
  }
}

TEST(Threads, TheLowestFailingItemsErrorIsReturned) {
  const Status s = for_each_item(40, {}, "item", [&](int i, ItemProgress&) -> Status {
    if (i == 7 || i == 31) return make_error("item " + std::to_string(i) + " is bad");
    return Ok{};
  });
  ASSERT_FALSE(s.ok());
  // Item 31 may fail first on another thread, but 7 is reported when it ran; if 31 stopped the
  // loop before 7 started, 31 is the error.
  EXPECT_TRUE(s.message() == "item 7 is bad" || s.message() == "item 31 is bad") << s.message();

  const Status one = for_each_item(40, {}, "item", [&](int i, ItemProgress&) -> Status {
    if (i == 12) return make_error("item 12 is bad");
    return Ok{};
  });
  ASSERT_FALSE(one.ok());
  EXPECT_EQ(one.message(), "item 12 is bad");
}

TEST(Threads, ACancelStopsTheLoopAndSaysSo) {
  std::atomic<int> started{0};
  int calls = 0;
  // The first report comes before any item, the next 50 ms later: that one cancels.
  const ProgressFn progress = [&](double, std::string_view) { return ++calls < 2; };
  const Status s = for_each_item(1000, progress, "item", [&](int, ItemProgress& p) -> Status {
    ++started;
    for (int k = 0; k < 100; ++k) {  // 100 ms of work, checking every millisecond
      KVLAB_TRY(p.keep_going(k / 100.0));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return Ok{};
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), kCancelledMessage);
  EXPECT_EQ(calls, 2);
  EXPECT_LE(started.load(), 2 * std::max(1, worker_threads())) << "items went on after the cancel";
}

// Progress counts the parts of items in flight, not only finished ones, and names them.
TEST(Threads, ProgressCountsPartsOfItemsInFlight) {
  std::vector<std::pair<double, std::string>> seen;
  const ProgressFn progress = [&](double f, std::string_view what) {
    seen.emplace_back(f, std::string(what));
    return true;
  };
  const Status s = for_each_item(1, progress, "layer", [&](int, ItemProgress& p) -> Status {
    for (int k = 0; k < 40; ++k) {
      KVLAB_TRY(p.keep_going(k / 40.0));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Ok{};
  });
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_GE(seen.size(), 3u);
  EXPECT_EQ(seen.front().second, "0 of 1 layers");
  EXPECT_EQ(seen.back().second, "1 of 1 layers");
  EXPECT_EQ(seen.back().first, 1.0);
  const bool partial = std::any_of(seen.begin(), seen.end(),
                                   [](const auto& p) { return p.first > 0.1 && p.first < 0.95; });
  EXPECT_TRUE(partial) << "no report between the start and the end of the one item";
}

// The whole report (sizes, errors, histograms, code lengths, per-layer numbers) written as JSON,
// timings and memory left out.
nlohmann::json without_timings(const CompressionReport& r) {
  nlohmann::json j = report_to_json(r);
  j.erase("timings");
  j.erase("memory");
  return j;
}

TEST(Threads, CompressionIsBitIdenticalOnOneThreadAndOnSeveral) {
  SyntheticConfig c;
  c.preset = "llama3-8b";
  c.layers = 6;
  c.context = 700;
  auto cache = generate_synthetic(c);
  ASSERT_TRUE(cache.ok()) << cache.message();
  std::vector<MethodConfig> methods(3);
  methods[0].kind = MethodKind::Kivi;
  methods[1].kind = MethodKind::KvComp;
  methods[1].codec = CodecKind::Huffman;
  methods[2].kind = MethodKind::Int8;
  for (const MethodConfig& m : methods) {
    std::optional<CompressionReport> one, many;
    {
      const auto limit = limit_threads(1);
      auto r = compress_cache(*cache, m);
      ASSERT_TRUE(r.ok()) << r.message();
      EXPECT_EQ(r->threads, 1);
      one = std::move(*r);
    }
    {
      const auto limit = limit_threads(4);
      auto r = compress_cache(*cache, m);
      ASSERT_TRUE(r.ok()) << r.message();
      many = std::move(*r);
    }
    EXPECT_EQ(without_timings(*one).dump(), without_timings(*many).dump()) << method_label(m);
    EXPECT_EQ(one->error.mse, many->error.mse);  // the same doubles, not close ones
    EXPECT_EQ(one->error.softmax_kl, many->error.softmax_kl);
  }
}

// The eviction simulation's layers side by side: a decode policy and a prefill press, their maps
// included, the same on one thread and on several.
TEST(Threads, EvictionIsBitIdenticalOnOneThreadAndOnSeveral) {
  SyntheticConfig c;
  c.preset = "llama3-8b";
  c.layers = 4;
  c.context = 600;
  c.queries = 64;
  auto cache = generate_synthetic(c);
  ASSERT_TRUE(cache.ok()) << cache.message();
  for (EvictionPolicy p : {EvictionPolicy::H2O, EvictionPolicy::SnapKV}) {
    EvictionConfig e;
    e.policy = p;
    e.budget = Budget{0.25, true};
    e.steps = 64;
    nlohmann::json one, one_maps;
    {
      const auto limit = limit_threads(1);
      auto r = simulate_eviction(*cache, e);
      ASSERT_TRUE(r.ok()) << r.message();
      one = eviction_report_to_json(*r);
      one_maps = eviction_maps_to_json(*r);
    }
    auto r = simulate_eviction(*cache, e);
    ASSERT_TRUE(r.ok()) << r.message();
    nlohmann::json many = eviction_report_to_json(*r);
    for (auto* j : {&one, &many}) {  // timings
      j->erase("seconds");
      j->erase("matmul_gflops");
    }
    for (auto it = one.begin(); it != one.end(); ++it) {
      EXPECT_EQ(it.value().dump(), many[it.key()].dump())
          << eviction_policy_id(p) << " " << it.key();
    }
    EXPECT_EQ(one_maps.dump(), eviction_maps_to_json(*r).dump());
  }
}

}  // namespace
}  // namespace kvlab
