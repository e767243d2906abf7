// The eviction simulator against a plain double-precision reference written here: explicit
// per-entry key and value vectors (merged ones averaged for real, not as weights over tokens),
// softmax in double, no matrix products. Both follow the policy rules in eviction.h; the test
// checks that the kept sets, the eviction maps and the per-step attention numbers agree.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include <fmt/format.h>

#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/eviction/eviction_json.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab {
namespace {

KvCache tiny_cache(int context, int queries, std::uint64_t seed = 3) {
  SyntheticConfig s;
  s.preset = "tiny";
  s.context = context;
  s.queries = queries;
  s.seed = seed;
  s.heavy_hitters = 3;
  auto c = generate_synthetic(s);
  EXPECT_TRUE(c.ok()) << c.message();
  return std::move(c).value();
}

// The llama3-8b preset cut to `layers` layers.
KvCache llama_cache(int layers, int context, int queries) {
  SyntheticConfig s;
  s.preset = "llama3-8b";
  s.layers = layers;
  s.context = context;
  s.queries = queries;
  return generate_synthetic(s).value();
}

std::vector<double> row(const Tensor& t, int token, int head) {
  std::vector<float> f(static_cast<std::size_t>(t.dim()));
  t.view().load_row(token, head, f);
  return {f.begin(), f.end()};
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---- The reference -------------------------------------------------------------------------

struct RefEntry {
  int pos = 0;
  std::vector<double> k, v;
  int count = 1;
  double acc = 0;
  double step = 0;          // attention received in the current step (TOVA)
  std::vector<int> tokens;  // every position whose information the entry holds
};

struct RefStep {
  double mass = 0, err2 = 0, out2 = 0, cosine = 0, rows = 0, kept = 0;
};

struct RefHead {
  std::vector<RefStep> steps;
  std::vector<std::vector<CellState>> map;  // [step][position]
  std::vector<int> final_kept;
};

// `prompt_kept`: for a prefill policy, the prompt positions its press kept (the presses' own
// scores are checked against NumPy in tests/python/press_reference.py); the reference then
// drops the rest before the first step and evicts nothing after it.
RefHead reference_head(const KvCache& cache, int l, int h, const EvictionConfig& c,
                       const std::vector<int>& prompt_kept = {}) {
  const bool prefill = eviction_schedule(c.policy) == EvictionSchedule::Prefill;
  const LayerKv& lkv = cache.layers[l];
  const int T = cache.tokens(), S = c.steps, P = T - S;
  const int D = cache.shape.head_dim, G = cache.shape.q_heads / cache.shape.kv_heads;
  const int Q = lkv.query.tokens();
  const Budget& budget = c.layer_budgets.empty() ? c.budget : c.layer_budgets[l];
  std::vector<RefEntry> kept;
  std::vector<CellState> state(T, CellState::Absent);
  std::set<int> statics;
  if (c.policy == EvictionPolicy::Streaming) {
    for (int t = 0; t < c.sinks; ++t) statics.insert(t);
  }
  if (c.policy == EvictionPolicy::Importance)
    statics.insert(c.protected_tokens.begin(), c.protected_tokens.end());
  const auto admit = [&](int t) {
    RefEntry e;
    e.pos = t;
    e.k = row(lkv.key, t, h);
    e.v = row(lkv.value, t, h);
    e.tokens = {t};
    kept.push_back(e);
    state[t] = statics.count(t) ? CellState::Sink : CellState::Kept;
  };
  for (int t = 0; t < P; ++t) admit(t);
  if (prefill) {
    std::vector<RefEntry> pressed;
    for (auto& e : kept) {
      if (std::binary_search(prompt_kept.begin(), prompt_kept.end(), e.pos)) {
        pressed.push_back(std::move(e));
      } else {
        state[e.pos] = CellState::Evicted;
      }
    }
    kept = std::move(pressed);
  }
  RefHead out;
  for (int s = 0; s < S; ++s) {
    const int context = P + s + 1;
    admit(P + s);
    RefStep st;
    const int qi = Q - 1 - (S - 1 - s) % Q;
    for (auto& e : kept) e.step = 0;
    for (int g = 0; g < G; ++g) {
      std::vector<double> q = row(lkv.query, qi, h * G + g);
      for (double& x : q) x /= std::sqrt(static_cast<double>(D));
      // Full cache.
      std::vector<double> pf(context);
      double m = -INFINITY;
      for (int t = 0; t < context; ++t) m = std::max(m, pf[t] = dot(q, row(lkv.key, t, h)));
      double sum = 0;
      for (double& p : pf) sum += (p = std::exp(p - m));
      std::vector<double> of(D, 0.0), ok(D, 0.0);
      for (int t = 0; t < context; ++t) {
        pf[t] /= sum;
        const auto v = row(lkv.value, t, h);
        for (int d = 0; d < D; ++d) of[d] += pf[t] * v[d];
      }
      for (const auto& e : kept) {
        for (int t : e.tokens) st.mass += pf[t];
      }
      // Kept entries.
      std::vector<double> pk(kept.size());
      m = -INFINITY;
      for (std::size_t i = 0; i < kept.size(); ++i) {
        pk[i] = dot(q, kept[i].k) + std::log(static_cast<double>(kept[i].count));
        m = std::max(m, pk[i]);
      }
      sum = 0;
      for (double& p : pk) sum += (p = std::exp(p - m));
      for (std::size_t i = 0; i < kept.size(); ++i) {
        pk[i] /= sum;
        kept[i].acc += pk[i];
        kept[i].step += pk[i];
        for (int d = 0; d < D; ++d) ok[d] += pk[i] * kept[i].v[d];
      }
      double e2 = 0, o2 = 0, k2 = 0, ko = 0;
      for (int d = 0; d < D; ++d) {
        e2 += (of[d] - ok[d]) * (of[d] - ok[d]);
        o2 += of[d] * of[d];
        k2 += ok[d] * ok[d];
        ko += of[d] * ok[d];
      }
      st.err2 += e2, st.out2 += o2, st.cosine += ko / std::sqrt(o2 * k2), st.rows += 1;
    }
    // Eviction, as eviction.h describes it.
    if (c.policy != EvictionPolicy::Full && !prefill) {
      const int b = budget.tokens_at(context);
      const std::size_t n = kept.size();
      const std::size_t recent =
          (c.policy == EvictionPolicy::H2O || c.policy == EvictionPolicy::Merge)
              ? static_cast<std::size_t>(std::floor(c.recent_fraction * b))
              : 0;
      const auto seen = [&](const RefEntry& e) { return context - std::max(P, e.pos); };
      const auto mean_rel = [&](const RefEntry& e) { return e.acc / (seen(e) * G) * n; };
      std::vector<double> score(n);
      std::vector<bool> safe(n);
      std::vector<std::size_t> victims, candidates;
      for (std::size_t i = 0; i < n; ++i) {
        const RefEntry& e = kept[i];
        safe[i] = statics.count(e.pos) || i + recent >= n;
        switch (c.policy) {
          case EvictionPolicy::Window:
          case EvictionPolicy::Streaming:
            score[i] = e.pos;
            break;
          case EvictionPolicy::H2O:
          case EvictionPolicy::Merge:
            score[i] = e.acc;
            break;
          case EvictionPolicy::Threshold:
            safe[i] = safe[i] || (e.pos >= P && seen(e) <= c.recent);
            score[i] = mean_rel(e);
            break;
          case EvictionPolicy::Importance:
            score[i] = c.w_attention * mean_rel(e) +
                       c.w_recency * (1.0 - static_cast<double>(context - 1 - e.pos) / context);
            break;
          case EvictionPolicy::TOVA:
            score[i] = e.step;
            break;
          default:
            break;
        }
        if (safe[i]) continue;
        (c.policy == EvictionPolicy::Threshold && score[i] < c.threshold ? victims : candidates)
            .push_back(i);
      }
      const auto lower = [&](std::size_t a, std::size_t b2) {
        return score[a] != score[b2] ? score[a] < score[b2] : kept[a].pos < kept[b2].pos;
      };
      std::sort(candidates.begin(), candidates.end(), lower);
      const std::size_t remaining = n - victims.size();
      if (remaining > static_cast<std::size_t>(b)) {
        const std::size_t excess = std::min(remaining - b, candidates.size());
        victims.insert(victims.end(), candidates.begin(), candidates.begin() + excess);
      }
      std::vector<bool> going(n, false);
      for (auto i : victims) going[i] = true;
      for (auto i : victims) {
        int into = -1;
        if (c.policy == EvictionPolicy::Merge) {
          double best = c.merge_similarity;
          const auto consider = [&](std::size_t j) {
            const double cs = dot(kept[i].k, kept[j].k) /
                              std::sqrt(dot(kept[i].k, kept[i].k) * dot(kept[j].k, kept[j].k));
            if (cs >= best) best = cs, into = static_cast<int>(j);
          };
          int seen_n = 0;
          for (std::size_t j = i; j-- > 0 && seen_n < c.merge_window;) {
            if (!going[j]) consider(j), ++seen_n;
          }
          seen_n = 0;
          for (std::size_t j = i + 1; j < n && seen_n < c.merge_window; ++j) {
            if (!going[j]) consider(j), ++seen_n;
          }
        }
        RefEntry& e = kept[i];
        if (into >= 0) {
          RefEntry& u = kept[into];
          double wf = e.acc, wi = u.acc;
          if (!(wf + wi > 0)) wf = e.count, wi = u.count;
          const double a = wf / (wf + wi);
          for (int d = 0; d < D; ++d) {
            u.k[d] = (1 - a) * u.k[d] + a * e.k[d];
            u.v[d] = (1 - a) * u.v[d] + a * e.v[d];
          }
          u.count += e.count;
          u.acc += e.acc;
          u.tokens.insert(u.tokens.end(), e.tokens.begin(), e.tokens.end());
          state[e.pos] = CellState::Merged;
        } else {
          for (int t : e.tokens) {
            if (state[t] == CellState::Kept || state[t] == CellState::Sink) {
              state[t] = CellState::Evicted;
            }
          }
        }
      }
      std::vector<RefEntry> next;
      for (std::size_t i = 0; i < n; ++i) {
        if (!going[i]) next.push_back(std::move(kept[i]));
      }
      kept = std::move(next);
    }
    st.kept = static_cast<double>(kept.size());
    out.steps.push_back(st);
    out.map.push_back(state);
  }
  for (const auto& e : kept) out.final_kept.push_back(e.pos);
  return out;
}

// Runs both and compares everything they both compute.
void expect_matches_reference(const KvCache& cache, const EvictionConfig& c) {
  auto rep = simulate_eviction(cache, c);
  ASSERT_TRUE(rep.ok()) << rep.message();
  const int L = static_cast<int>(cache.layers.size()), H = cache.shape.kv_heads;
  std::vector<RefStep> total(c.steps);
  for (int l = 0; l < L; ++l) {
    for (int h = 0; h < H; ++h) {
      const EvictionMap& map = rep->maps[l][h];
      std::vector<int> prompt_kept;
      for (int t = 0; t < rep->prompt; ++t) {
        if (map.state(0, t) != CellState::Evicted) prompt_kept.push_back(t);
      }
      if (eviction_schedule(c.policy) == EvictionSchedule::Prefill) {
        EXPECT_EQ(rep->layers[l].heads[h].prompt_kept, static_cast<int>(prompt_kept.size()));
      }
      const RefHead ref = reference_head(cache, l, h, c, prompt_kept);
      for (int s = 0; s < c.steps; ++s) {
        for (int t = 0; t < cache.tokens(); ++t) {
          ASSERT_EQ(static_cast<int>(map.state(s, t)), static_cast<int>(ref.map[s][t]))
              << "layer " << l << " head " << h << " step " << s << " position " << t;
        }
        total[s].mass += ref.steps[s].mass;
        total[s].err2 += ref.steps[s].err2;
        total[s].out2 += ref.steps[s].out2;
        total[s].cosine += ref.steps[s].cosine;
        total[s].rows += ref.steps[s].rows;
        total[s].kept += ref.steps[s].kept;
      }
      EXPECT_EQ(rep->layers[l].heads[h].kept_tokens, static_cast<int>(ref.final_kept.size()));
    }
  }
  for (int s = 0; s < c.steps; ++s) {
    const EvictionStep& got = rep->steps_total[s];
    const RefStep& want = total[s];
    EXPECT_NEAR(got.attention_mass_retained, want.mass / want.rows, 1e-5) << "step " << s;
    EXPECT_NEAR(got.attn_output_rel_error, std::sqrt(want.err2 / want.out2), 1e-4) << "step " << s;
    EXPECT_NEAR(got.attn_output_cosine, want.cosine / want.rows, 1e-5) << "step " << s;
    EXPECT_DOUBLE_EQ(got.kept, want.kept / (L * H)) << "step " << s;
  }
}

EvictionConfig config_for(EvictionPolicy p, const char* budget, int steps) {
  EvictionConfig c;
  c.policy = p;
  c.budget = Budget::parse(budget).value();
  c.steps = steps;
  return c;
}

class AgainstReference : public ::testing::TestWithParam<EvictionPolicy> {};

TEST_P(AgainstReference, FractionBudget) {
  const KvCache cache = tiny_cache(160, 48);
  EvictionConfig c = config_for(GetParam(), "0.3", 48);
  c.sinks = 3;
  c.recent = 8;
  c.merge_similarity = 0.2;
  c.merge_window = 4;
  expect_matches_reference(cache, c);
}

TEST_P(AgainstReference, CountBudgetFewerQueriesThanSteps) {
  const KvCache cache = tiny_cache(97, 5, 11);
  EvictionConfig c = config_for(GetParam(), "40", 33);
  c.window = 4;  // the source's 5 queries but the last
  c.pool = 3;
  c.threshold = 0.5;
  c.protected_tokens = {0, 17};
  c.merge_similarity = -1.0;  // every victim merges
  expect_matches_reference(cache, c);
}

INSTANTIATE_TEST_SUITE_P(Policies, AgainstReference,
                         ::testing::Values(EvictionPolicy::Full, EvictionPolicy::Window,
                                           EvictionPolicy::Streaming, EvictionPolicy::H2O,
                                           EvictionPolicy::Threshold, EvictionPolicy::Importance,
                                           EvictionPolicy::Merge, EvictionPolicy::TOVA,
                                           EvictionPolicy::SnapKV, EvictionPolicy::PyramidKV,
                                           EvictionPolicy::KNorm, EvictionPolicy::KeyDiff,
                                           EvictionPolicy::ExpectedAttention, EvictionPolicy::AdaKV,
                                           EvictionPolicy::ChunkKV),
                         [](const auto& info) {
                           std::string id(eviction_policy_id(info.param));
                           std::replace(id.begin(), id.end(), '-', '_');
                           return id;
                         });

TEST(Eviction, FullCacheIsExactAndKeepsTheNeedle) {
  SyntheticConfig s;
  s.preset = "tiny";
  s.context = 256;
  s.queries = 16;
  auto cache = generate_synthetic(s).value();
  EvictionConfig c = config_for(EvictionPolicy::Full, "1", 16);
  c.needle = synthetic_landmarks(s).needle;
  auto r = simulate_eviction(cache, c).value();
  EXPECT_NEAR(r.attention_mass_retained, 1.0, 1e-6);
  EXPECT_NEAR(r.attn_output_rel_error, 0.0, 1e-6);
  EXPECT_DOUBLE_EQ(r.kept_tokens, 256);
  EXPECT_DOUBLE_EQ(r.memory_bytes, r.full_memory_bytes);
  EXPECT_DOUBLE_EQ(*r.needle_retained, 1.0);
  EXPECT_DOUBLE_EQ(*r.needle_in_top_k, 1.0);
}

TEST(Eviction, WindowLosesTheNeedleAndH2OKeepsMoreMass) {
  SyntheticConfig s;
  s.preset = "tiny";
  s.context = 512;
  s.queries = 32;
  auto cache = generate_synthetic(s).value();
  EvictionConfig c = config_for(EvictionPolicy::Window, "0.2", 32);
  c.needle = synthetic_landmarks(s).needle;
  auto w = simulate_eviction(cache, c).value();
  EXPECT_DOUBLE_EQ(*w.needle_retained, 0.0);  // at 37% of the context, outside the window
  EXPECT_NEAR(w.kept_tokens, std::round(0.2 * 512), 1e-9);
  c.policy = EvictionPolicy::H2O;
  auto h = simulate_eviction(cache, c).value();
  EXPECT_GT(h.attention_mass_retained, w.attention_mass_retained);
  EXPECT_LT(h.attn_output_rel_error, w.attn_output_rel_error);
  EXPECT_LT(h.memory_bytes, 0.25 * h.full_memory_bytes);
}

TEST(Eviction, MapsCostUnderOneBitPerCell) {
  const KvCache cache = tiny_cache(300, 64);
  auto r = simulate_eviction(cache, config_for(EvictionPolicy::H2O, "0.25", 64)).value();
  for (const auto& layer : r.maps) {
    for (const auto& m : layer) {
      EXPECT_LE(m.bytes() * 8.0, 1.0 * m.steps * m.positions);
    }
  }
}

TEST(Eviction, QuantizationComposesAndIsCounted) {
  const KvCache cache = tiny_cache(200, 20);
  EvictionConfig c = config_for(EvictionPolicy::Full, "1", 20);
  MethodConfig m;
  m.kind = MethodKind::Int8;
  c.quant = m;
  auto r = simulate_eviction(cache, c).value();
  // int8 per tensor: one byte per value plus a small header.
  EXPECT_GT(r.quant_bytes_per_token, 2.0 * 16);
  EXPECT_LT(r.quant_bytes_per_token, 2.0 * 16 * 1.1);
  EXPECT_NEAR(r.memory_bytes, r.kept_tokens * r.quant_bytes_per_token * 2 * 2, 1e-6);
  EXPECT_GT(r.attn_output_rel_error, 0.0);
  EXPECT_LT(r.attn_output_rel_error, 0.05);
}

TEST(Eviction, ReportAndMapsSurviveJson) {
  const KvCache cache = tiny_cache(120, 8);
  EvictionConfig c = config_for(EvictionPolicy::Merge, "50", 24);
  c.needle = 40;
  auto r = simulate_eviction(cache, c).value();
  auto back = eviction_report_from_json(eviction_report_to_json(r));
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->steps_total.size(), r.steps_total.size());
  EXPECT_DOUBLE_EQ(back->attn_output_rel_error, r.attn_output_rel_error);
  EXPECT_EQ(back->layers.size(), r.layers.size());
  EXPECT_EQ(back->needle_retained, r.needle_retained);
  auto maps = eviction_maps_from_json(eviction_maps_to_json(r));
  ASSERT_TRUE(maps.ok()) << maps.message();
  for (std::size_t l = 0; l < r.maps.size(); ++l) {
    for (std::size_t h = 0; h < r.maps[l].size(); ++h) {
      EXPECT_EQ((*maps)[l][h].cells, r.maps[l][h].cells);
    }
  }
  auto params = eviction_config_from_json(eviction_params_json(c));
  ASSERT_TRUE(params.ok()) << params.message();
  EXPECT_EQ(eviction_label(*params), eviction_label(c));
}

TEST(Eviction, ParametersOfTheWrongTypeNameTheField) {
  const auto message = [](nlohmann::json j) {
    auto c = eviction_config_from_json(j);
    return c ? std::string("accepted") : c.message();
  };
  nlohmann::json j = eviction_params_json(config_for(EvictionPolicy::H2O, "0.5", 8));
  j["recent_fraction"] = "half";
  EXPECT_EQ(message(j), "eviction parameters: \"recent_fraction\" must be a number, not \"half\"");
  j = eviction_params_json(config_for(EvictionPolicy::H2O, "0.5", 8));
  j["steps"] = 2.5;
  EXPECT_EQ(message(j), "eviction parameters: \"steps\" must be a whole number, not 2.5");
  j["steps"] = 8;
  j["budget"] = 0.5;
  EXPECT_EQ(message(j), "eviction parameters: \"budget\" must be a string, not 0.5");
  EXPECT_EQ(message(nlohmann::json::array()),
            "eviction parameters: an object is needed, not []");
  for (const std::string& m : {message(j), message(nlohmann::json::array())}) {
    EXPECT_EQ(m.find("json.exception"), std::string::npos) << m;
  }
}

TEST(Eviction, CorruptMapsAreErrors) {
  const KvCache cache = tiny_cache(64, 4);
  auto r = simulate_eviction(cache, config_for(EvictionPolicy::H2O, "0.5", 8)).value();
  nlohmann::json j = eviction_maps_to_json(r);
  auto bad = j;
  bad["layers"][0][0] = "abc";
  EXPECT_FALSE(eviction_maps_from_json(bad).ok());
  bad = j;
  bad["layers"][0][0] = "AAAA";
  auto e = eviction_maps_from_json(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.message().find("layer 0 head 0"), std::string::npos) << e.message();
  bad = j;
  bad["steps"] = -3;
  EXPECT_FALSE(eviction_maps_from_json(bad).ok());
  bad = j;
  bad.erase("prompt");
  EXPECT_FALSE(eviction_maps_from_json(bad).ok());
}

TEST(Eviction, BudgetsParse) {
  EXPECT_TRUE(Budget::parse("0.25")->fraction);
  EXPECT_DOUBLE_EQ(Budget::parse("25%")->value, 0.25);
  EXPECT_FALSE(Budget::parse("512")->fraction);
  EXPECT_EQ(Budget::parse("512")->tokens_at(100), 100);
  EXPECT_EQ(Budget::parse("0.1")->tokens_at(1000), 100);
  EXPECT_EQ(Budget::parse("0.001")->tokens_at(10), 1);
  for (const char* bad :
       {"", "abc", "-3", "0", "1.5", "150%", "nan", "12x", "1.0", "512.", "1e3"}) {
    auto b = Budget::parse(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.message().find("budget"), std::string::npos);
  }
}

TEST(Eviction, BadConfigsNameTheOption) {
  const KvCache cache = tiny_cache(64, 4);
  const auto message = [&](EvictionConfig c) {
    auto r = simulate_eviction(cache, c);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.message();
  };
  EvictionConfig c = config_for(EvictionPolicy::H2O, "0.5", 64);
  EXPECT_NE(message(c).find("--steps"), std::string::npos);
  c.steps = 8;
  c.layer_budgets = {Budget{}};
  EXPECT_NE(message(c).find("--layer-budgets"), std::string::npos);
  c.layer_budgets.clear();
  c.needle = 64;
  EXPECT_NE(message(c).find("--needle"), std::string::npos);
  c.needle.reset();
  c.merge_similarity = 2;
  EXPECT_NE(message(c).find("--merge-similarity"), std::string::npos);
  KvCache no_queries = cache;
  for (auto& l : no_queries.layers) l.query = Tensor();
  auto r = simulate_eviction(no_queries, config_for(EvictionPolicy::H2O, "0.5", 8));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("queries"), std::string::npos);
}

TEST(Eviction, PerLayerBudgets) {
  const KvCache cache = tiny_cache(100, 10);
  EvictionConfig c = config_for(EvictionPolicy::Window, "0.5", 10);
  c.layer_budgets = {Budget::parse("10").value(), Budget::parse("0.5").value()};
  auto r = simulate_eviction(cache, c).value();
  EXPECT_DOUBLE_EQ(r.layers[0].kept_tokens, 10);
  EXPECT_DOUBLE_EQ(r.layers[1].kept_tokens, 50);
}

TEST(Eviction, CancelStops) {
  const KvCache cache = tiny_cache(100, 10);
  auto r = simulate_eviction(cache, config_for(EvictionPolicy::H2O, "0.5", 10),
                             [](double, std::string_view) { return false; });
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(), kCancelledMessage);
}

TEST(Eviction, PrefillOptionsThatCannotWorkNameTheOption) {
  const KvCache cache = tiny_cache(64, 40);  // 24 prompt tokens with 40 decode steps
  const auto message = [&](EvictionConfig c) {
    auto r = simulate_eviction(cache, c);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.message();
  };
  EvictionConfig c = config_for(EvictionPolicy::SnapKV, "0.5", 40);
  c.window = 39;  // the source has 39 queries before its last, but the prompt only 24 tokens
  EXPECT_NE(message(c).find("--obs-window 39: longer than the prompt"), std::string::npos)
      << message(c);
  c.window = 16;
  c.pool = 17;
  EXPECT_NE(message(c).find("--pool 17: wider than the observation window"), std::string::npos);
  c.pool = 4;
  EXPECT_NE(message(c).find("--pool 4"), std::string::npos);
  c.pool = 5;
  c.budget = Budget::parse("30").value();  // a count above the prompt's 24 tokens
  EXPECT_NE(message(c).find("--budget 30: above the prompt's 24 tokens"), std::string::npos)
      << message(c);
  c.policy = EvictionPolicy::H2O;  // a decode policy's count is of the sequence
  EXPECT_TRUE(simulate_eviction(cache, c).ok());
  c.budget = Budget::parse("65").value();
  EXPECT_NE(message(c).find("--budget 65: above the sequence's 64 tokens"), std::string::npos);
  c = config_for(EvictionPolicy::AdaKV, "0.5", 40);
  c.window = 16;
  c.scorer = EvictionPolicy::H2O;
  EXPECT_NE(message(c).find("--scorer h2o"), std::string::npos);
  c.scorer = EvictionPolicy::KNorm;
  EXPECT_TRUE(simulate_eviction(cache, c).ok());
  // A query per position (as a model capture has): SnapKV keeps its window whole inside the
  // budget, ChunkKV the window's chunks, so a budget they would fill names itself.
  const KvCache per_position = tiny_cache(100, 100);
  c = config_for(EvictionPolicy::SnapKV, "8%", 20);  // 6 of the 80 prompt tokens
  c.window = 8;
  c.pool = 3;
  EXPECT_NE(
      simulate_eviction(per_position, c).message().find("--budget 8%: 6 tokens of the prompt"),
      std::string::npos);
  c.policy = EvictionPolicy::ChunkKV;
  c.budget = Budget::parse("20%").value();  // 16 tokens: 1 chunk of 10, the window's
  EXPECT_NE(simulate_eviction(per_position, c).message().find("1 chunks of 10 tokens, all taken"),
            std::string::npos)
      << simulate_eviction(per_position, c).message();
  c.budget = Budget::parse("40%").value();
  EXPECT_TRUE(simulate_eviction(per_position, c).ok());
  const KvCache few = tiny_cache(200, 8);
  c = config_for(EvictionPolicy::SnapKV, "0.5", 40);
  c.window = 16;  // only 7 decode-time queries before the last
  auto r = simulate_eviction(few, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("--obs-window 16: the source has 7 queries"), std::string::npos)
      << r.message();
}

TEST(Eviction, LabelsSayWhatAPolicyKeepsWhenItIsNotTheBudget) {
  SyntheticConfig s;
  s.preset = "tiny";
  s.context = 1024;
  s.queries = 64;
  const KvCache cache = generate_synthetic(s).value();
  EvictionConfig c = config_for(EvictionPolicy::Threshold, "25%", 64);
  auto r = simulate_eviction(cache, c).value();
  ASSERT_LT(r.kept_tokens, 0.2 * 1024);  // the threshold, not the cap, decides its size
  EXPECT_NE(r.label.find(fmt::format("keeps {:.0f} of 1024", r.kept_tokens)), std::string::npos)
      << r.label;
  EXPECT_EQ(r.label.find("budget"), std::string::npos) << r.label;
  c.policy = EvictionPolicy::H2O;  // it keeps exactly its budget: no correction
  r = simulate_eviction(cache, c).value();
  EXPECT_EQ(r.label, "h2o budget 25% recent 50%");
  c.policy = EvictionPolicy::SnapKV;
  r = simulate_eviction(cache, c).value();
  EXPECT_EQ(r.label, "snapkv budget 25% of prompt window 32 pool 5");
}

TEST(Eviction, TheNeedleQueryStepIsReportedApart) {
  SyntheticConfig s;
  s.preset = "tiny";
  s.context = 512;
  s.queries = 32;
  const KvCache cache = generate_synthetic(s).value();
  EvictionConfig c = config_for(EvictionPolicy::H2O, "20%", 32);
  c.needle = synthetic_landmarks(s).needle;
  const auto r = simulate_eviction(cache, c).value();
  ASSERT_TRUE(r.rel_error_without_needle_step && r.mass_without_needle_step);
  // The needle query finds little of its mass in a cache that dropped the needle.
  EXPECT_LT(r.steps_total.back().attention_mass_retained, 0.5);
  EXPECT_GT(*r.mass_without_needle_step, r.attention_mass_retained);
  EXPECT_LT(*r.rel_error_without_needle_step, r.attn_output_rel_error);
  c.needle.reset();  // no needle known: no second set of totals
  const auto plain = simulate_eviction(cache, c).value();
  EXPECT_FALSE(plain.rel_error_without_needle_step);
}

TEST(Eviction, PyramidBudgetsFallWithDepthAndAverageTheUniformOne) {
  const KvCache cache = llama_cache(8, 1024, 64);
  EvictionConfig c = config_for(EvictionPolicy::PyramidKV, "25%", 64);
  const auto r = simulate_eviction(cache, c).value();
  const int prompt = 1024 - 64, uniform = 240;  // round(0.25 × 960)
  double sum = 0;
  for (std::size_t l = 0; l + 1 < r.layers.size(); ++l) {
    EXPECT_GT(r.layers[l].budget_tokens, r.layers[l + 1].budget_tokens);
  }
  for (const auto& l : r.layers) {
    sum += l.budget_tokens - 64;
    EXPECT_DOUBLE_EQ(l.heads[0].prompt_kept, l.budget_tokens - 64);
  }
  EXPECT_NEAR(sum / r.layers.size(), uniform, 1.0);
  // beta: the top layer keeps about uniform / beta.
  EXPECT_NEAR(r.layers.back().budget_tokens - 64, uniform / c.pyramid_beta, 1.0);
  EXPECT_LT(r.layers.front().budget_tokens - 64, prompt);
}

TEST(Eviction, AdaKVSpreadsTheLayerBudgetOverItsHeads) {
  const KvCache cache = llama_cache(2, 1024, 64);
  EvictionConfig c = config_for(EvictionPolicy::AdaKV, "10%", 64);
  const auto r = simulate_eviction(cache, c).value();
  const int budget = 96;  // round(0.1 × 960) per head on average
  for (const auto& l : r.layers) {
    int total = 0, least = 1 << 30, most = 0;
    for (const auto& h : l.heads) {
      total += h.prompt_kept;
      least = std::min(least, h.prompt_kept);
      most = std::max(most, h.prompt_kept);
    }
    EXPECT_EQ(total, budget * static_cast<int>(l.heads.size()));
    EXPECT_GE(least, static_cast<int>(budget * c.ada_safeguard));
    EXPECT_GT(most, least);  // the heads differ
  }
}

TEST(Eviction, ThinKPrunesKeyChannelsAndCountsTheBytes) {
  const KvCache cache = tiny_cache(300, 40);
  EvictionConfig c = config_for(EvictionPolicy::ThinK, "1", 40);
  c.key_channels = 0.25;
  const auto r = simulate_eviction(cache, c).value();
  const int D = cache.shape.head_dim;
  for (const auto& l : r.layers) {
    EXPECT_EQ(l.key_channels, D / 4);
    ASSERT_EQ(l.channel_masks.size(), static_cast<std::size_t>(cache.shape.kv_heads));
    for (const auto& m : l.channel_masks) {
      EXPECT_EQ(std::count(m.begin(), m.end(), 1), D / 4);
    }
    EXPECT_DOUBLE_EQ(l.kept_tokens, 300);
  }
  // Keys at a quarter of their channels: (1 + 1/4) / 2 of the prompt's bytes, plus the masks.
  const double prompt_bytes = 260.0 * 2 * D * 2 * (1.0 + 0.25) / 2 + D / 8.0;
  const double decode_bytes = 40.0 * 2 * D * 2;
  EXPECT_NEAR(r.layers[0].memory_bytes, cache.shape.kv_heads * (prompt_bytes + decode_bytes), 1e-6);
  EXPECT_GT(r.attn_output_rel_error, 0.0);
  EXPECT_NEAR(r.attention_mass_retained, 1.0, 1e-9);
}

TEST(Eviction, MiniCacheMergesTheUpperHalfAndRetainsOutliers) {
  const KvCache cache = llama_cache(6, 512, 32);
  EvictionConfig c = config_for(EvictionPolicy::MiniCache, "1", 32);
  const auto r = simulate_eviction(cache, c).value();
  for (const auto& l : r.layers) {
    EXPECT_EQ(l.merged, l.layer >= 3 && l.layer <= 4) << l.layer;  // (3, 4); 5 has no partner
    if (l.merged) {
      EXPECT_GT(l.retained, 0.0);
      EXPECT_LT(l.retained, 0.5);
      EXPECT_LT(l.memory_bytes, 0.8 * l.full_memory_bytes);
      EXPECT_GT(l.attn_output_rel_error, 0.0);
    } else {
      EXPECT_DOUBLE_EQ(l.memory_bytes, l.full_memory_bytes);
      EXPECT_LT(l.attn_output_rel_error, 1e-6);
    }
  }
  c.retain = 1.0;  // every token retained: nothing changes
  const auto all = simulate_eviction(cache, c).value();
  EXPECT_LT(all.attn_output_rel_error, 1e-6);
}

// Every policy with a quantizer and every quantizer with a policy (the methods at their
// defaults; the lists are walked side by side, the shorter one cycled, since quantization enters
// the simulation in one place for every policy, load_layer): the kept tokens are read back
// quantized, memory counts the method's measured bytes, and the label names both.
TEST(Eviction, EveryPolicyComposesWithEveryQuantizer) {
  const KvCache cache = llama_cache(2, 192, 16);  // head_dim 128: every block type fits
  const auto policies = eviction_policy_ids();
  const auto methods = method_ids();
  for (std::size_t i = 0; i < std::max(policies.size(), methods.size()); ++i) {
    const auto policy_id = policies[i % policies.size()];
    const auto method_id = methods[i % methods.size()];
    EvictionConfig c = config_for(parse_eviction_policy(policy_id).value(), "0.5", 16);
    c.window = 12;
    c.pool = 3;
    const auto plain = simulate_eviction(cache, c);
    ASSERT_TRUE(plain.ok()) << policy_id << ": " << plain.message();
    MethodConfig m;
    m.kind = parse_method(method_id).value();
    c.quant = m;
    const auto r = simulate_eviction(cache, c);
    ASSERT_TRUE(r.ok()) << policy_id << " + " << method_id << ": " << r.message();
    EXPECT_GT(r->quant_bytes_per_token, 0) << policy_id << " + " << method_id;
    EXPECT_LT(r->memory_bytes, plain->memory_bytes) << policy_id << " + " << method_id;
    EXPECT_NE(r->label.find(" + "), std::string::npos) << r->label;
  }
}

}  // namespace
}  // namespace kvlab
