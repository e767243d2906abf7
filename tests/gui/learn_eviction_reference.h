// The Learn eviction step's cache and policies written out in the test, and the engine's own
// simulation of them: the reference both the model test (tests/gui/models) and the page test
// compare with.
#pragma once

#include <gtest/gtest.h>

#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::gui::learn_eviction {

constexpr int kContext = 160, kSteps = 64, kPrompt = kContext - kSteps;

// The page's cache, written out here: preset tiny, one layer, 160 tokens, one query per step.
inline SyntheticConfig tiny_layer() {
  SyntheticConfig c;
  c.preset = "tiny";
  c.layers = 1;
  c.context = kContext;
  c.seed = 1;
  c.queries = kSteps;
  return c;
}

inline EvictionConfig policy(EvictionPolicy p, double budget) {
  EvictionConfig c;
  c.policy = p;
  c.budget = Budget{budget, true};
  c.steps = kSteps;
  c.sinks = 4;
  c.recent_fraction = 0.5;
  return c;
}

inline EvictionReport reference(EvictionPolicy p, double budget) {
  auto cache = generate_synthetic(tiny_layer());
  EXPECT_TRUE(cache.ok()) << cache.message();
  auto report = simulate_eviction(*cache, policy(p, budget));
  EXPECT_TRUE(report.ok()) << report.message();
  return *report;
}

}  // namespace kvlab::gui::learn_eviction
