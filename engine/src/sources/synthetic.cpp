#include "kvlab/engine/sources/synthetic.h"

#include <algorithm>
#include <cmath>
#include <span>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include <fmt/format.h>

#include "core/random.h"
#include "sources/normal_stream.h"

#include "kvlab/engine/core/names.h"
#include "kvlab/engine/core/process_memory.h"
#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/sources/cache_file.h"

namespace kvlab {

namespace {

std::vector<SyntheticPreset> build_presets() {
  // Shapes from each model's published config.json.
  return {
      {"llama2-7b", {"llama2-7b", 32, 32, 32, 128}, 10000.0, 4096},
      {"llama3-8b", {"llama3-8b", 32, 32, 8, 128}, 500000.0, 8192},
      {"mistral-7b", {"mistral-7b", 32, 32, 8, 128}, 1000000.0, 32768},
      {"qwen2.5-7b", {"qwen2.5-7b", 28, 28, 4, 128}, 1000000.0, 32768},
      {"tiny", {"tiny", 2, 4, 2, 16}, 10000.0, 4096},
  };
}

struct HeadPlan {
  std::vector<double> attention;  // unit direction queries share with the sink and heavy hitters
  std::vector<double> needle;     // unit direction orthogonal to it, for the needle
};

std::vector<double> random_unit(detail::Rng& rng, int d) {
  std::vector<double> v(d);
  double n = 0;
  for (auto& x : v) {
    x = rng.normal();
    n += x * x;
  }
  n = std::sqrt(n);
  for (auto& x : v) x /= n;
  return v;
}

HeadPlan plan_head(detail::Rng& rng, int d) {
  HeadPlan p{random_unit(rng, d), random_unit(rng, d)};
  double dot = 0;
  for (int i = 0; i < d; ++i) dot += p.needle[i] * p.attention[i];
  double n = 0;
  for (int i = 0; i < d; ++i) {
    p.needle[i] -= dot * p.attention[i];
    n += p.needle[i] * p.needle[i];
  }
  n = std::sqrt(n);
  for (auto& x : p.needle) x = n > 0 ? x / n : 0.0;
  return p;
}

// The dot products of a key row with two directions, in 16 lanes: element i is multiplied and
// added into lane i % 16 in one rounding (fma), in order, then the lanes are added in order.
// Vectorised, where one float sum would be added element by element.
std::pair<float, float> two_dots(const float* k, const float* a, const float* b, int d) {
  alignas(64) float lanes[16] = {}, b_lanes[16] = {};
#if defined(__AVX512F__)
  __m512 acc = _mm512_setzero_ps(), b_acc = _mm512_setzero_ps();
  for (int i = 0; i < d; i += 16) {  // the tail's missing elements add 0 * 0 to their lanes
    const __mmask16 m = d - i >= 16 ? __mmask16{0xffff} : __mmask16((1u << (d - i)) - 1);
    const __m512 x = _mm512_maskz_loadu_ps(m, k + i);
    acc = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, a + i), acc);
    b_acc = _mm512_fmadd_ps(x, _mm512_maskz_loadu_ps(m, b + i), b_acc);
  }
  _mm512_store_ps(lanes, acc);
  _mm512_store_ps(b_lanes, b_acc);
#else
  for (int i = 0; i < d; ++i) {
    lanes[i % 16] = std::fma(k[i], a[i], lanes[i % 16]);
    b_lanes[i % 16] = std::fma(k[i], b[i], b_lanes[i % 16]);
  }
#endif
  float da = 0, db = 0;
  for (int j = 0; j < 16; ++j) {
    da += lanes[j];
    db += b_lanes[j];
  }
  return {da, db};
}

// One KV head's random draws: its statistics and plan from a detail::Rng, its bulk noise (a
// normal for every key and value element) from a detail::NormalStream, both seeded by (seed,
// layer, head).
struct HeadDraws {
  detail::Rng rng;
  detail::NormalStream noise;
  std::vector<float> mean, sd, attention, needle;  // the key statistics and plan in float
  HeadPlan plan;
  double sum_proj = 0, sum_proj2 = 0, sum_needle_proj = 0;  // over tokens, in double
  double q_scale = 0;                                       // set once the keys are made
  std::vector<float> value_mean{};                          // drawn once the keys are made
};

// One layer: keys, values and queries, written into `out`. Layers are independent streams, so
// any number of threads gives the same cache. Keys and values are made a tile of tokens at a
// time for all KV heads (noise, statistics, RoPE, projections, fp16), in cache, and written
// once; each head's streams are drawn in the same order as head by head over whole tensors, so
// the values do not depend on the tiling.
Status generate_layer(const SyntheticConfig& c, const SyntheticPreset& preset,
                      const SyntheticLandmarks& marks, const RopeSpec& rope, int layer,
                      LayerKv& out, ItemProgress& progress) {
  const ModelShape& s = preset.shape;
  const int t_count = c.context, d = s.head_dim, group = s.group_size(), heads = s.kv_heads;
  const std::size_t ud = static_cast<std::size_t>(d);
  const std::size_t token_floats = static_cast<std::size_t>(heads) * ud;

  std::vector<HeadDraws> draws;
  draws.reserve(static_cast<std::size_t>(heads));
  for (int g = 0; g < heads; ++g) {
    detail::Rng rng(detail::stream_seed(c.seed, layer, g));
    // Per-channel statistics of the keys before rotation; outliers on low-frequency pairs.
    std::vector<double> mean(ud), sd(ud);
    for (int i = 0; i < d; ++i) {
      mean[i] = 0.5 * rng.normal();
      sd[i] = std::exp(0.3 * rng.normal());
    }
    const int low_freq_begin = d - std::max(2, d / 4);
    for (int o = 0; o < c.outlier_channels; ++o) {
      const int ch = low_freq_begin + static_cast<int>(rng.below(d - low_freq_begin));
      mean[ch] = c.outlier_scale * (rng.uniform() < 0.5 ? -1.0 : 1.0);
      sd[ch] = 0.3 * c.outlier_scale;
    }
    HeadPlan plan = plan_head(rng, d);
    const auto to_float = [](const std::vector<double>& v) {
      return std::vector<float>(v.begin(), v.end());
    };
    draws.push_back({rng,
                     detail::NormalStream(detail::stream_seed(c.seed, layer, g) ^ 0x5eedf00dull),
                     to_float(mean), to_float(sd), to_float(plan.attention), to_float(plan.needle),
                     std::move(plan)});
  }

  // The tokens whose keys are planted below keep their rows in float until then.
  std::vector<int> planted = marks.heavy_hitters;
  planted.push_back(marks.sink);
  if (t_count > 1) planted.push_back(marks.needle);
  std::sort(planted.begin(), planted.end());
  planted.erase(std::unique(planted.begin(), planted.end()), planted.end());
  std::vector<float> planted_rows(planted.size() * token_floats);
  const auto planted_row = [&](int t, int g) {
    const auto at = std::lower_bound(planted.begin(), planted.end(), t) - planted.begin();
    return planted_rows.data() + static_cast<std::size_t>(at) * token_floats +
           static_cast<std::size_t>(g) * ud;
  };

  // Makes a tensor a tile of tokens at a time: each token's rows head by head by make_row(t,
  // head's draws, row), then finish_tile(t0, t1) does the rest of the tile and writes it. A tile is
  // a multiple of RoPE's anchor interval, so tiles turn keys as one pass would. `part` is where
  // the tensor's half of the layer's progress begins.
  constexpr int kTile = kRopeAnchor;
  std::vector<float> tile(kTile * token_floats);
  const auto make_tiles = [&](double part, const auto& make_row,
                              const auto& finish_tile) -> Status {
    for (int t0 = 0; t0 < t_count; t0 += kTile) {
      if ((t0 & 8191) == 0) KVLAB_TRY(progress.keep_going(part + 0.5 * t0 / t_count));
      const int t1 = std::min(t_count, t0 + kTile);
      for (int t = t0; t < t1; ++t) {
        for (int g = 0; g < heads; ++g) {
          make_row(t, draws[static_cast<std::size_t>(g)],
                   tile.data() + static_cast<std::size_t>(t - t0) * token_floats + g * ud);
        }
      }
      finish_tile(t0, t1);
    }
    return Ok{};
  };

  auto next_planted = planted.begin();
  // Ordinary keys: mean + sd * noise, turned by position by the cache's own RoPE (adjacent pairs,
  // apply_rope_rows). Sums over tokens in double; each token's dot products in float.
  const auto make_key = [&](int, HeadDraws& h, float* k) {
    h.noise.fill({k, ud});
    for (int i = 0; i < d; ++i) k[i] = h.mean[i] + h.sd[i] * k[i];
  };
  const auto finish_keys = [&](int t0, int t1) {
    apply_rope_rows(tile.data(), t0, t1, heads, d, rope);
    for (int t = t0; t < t1; ++t) {
      const float* row = tile.data() + static_cast<std::size_t>(t - t0) * token_floats;
      for (int g = 0; g < heads; ++g) {
        HeadDraws& h = draws[static_cast<std::size_t>(g)];
        const auto [proj, needle_proj] =
            two_dots(row + g * ud, h.attention.data(), h.needle.data(), d);
        h.sum_proj += proj;
        h.sum_proj2 += static_cast<double>(proj) * proj;
        h.sum_needle_proj += needle_proj;
      }
      if (next_planted != planted.end() && *next_planted == t) {
        std::copy_n(row, token_floats, planted_row(t, 0));
        ++next_planted;
      }
    }
    out.key.store_tokens(t0, {tile.data(), static_cast<std::size_t>(t1 - t0) * token_floats});
  };
  KVLAB_TRY(make_tiles(0.0, make_key, finish_keys));

  for (int g = 0; g < heads; ++g) {
    HeadDraws& h = draws[static_cast<std::size_t>(g)];
    // Query strength so ordinary tokens' logits q.k/sqrt(d) spread with std ~1.5.
    const double mean_proj = h.sum_proj / t_count;
    const double sd_proj = std::sqrt(std::max(1e-6, h.sum_proj2 / t_count - mean_proj * mean_proj));
    const double q_scale = 1.5 * std::sqrt(static_cast<double>(d)) / sd_proj;
    h.q_scale = q_scale;
    // A planted token's projection on `dir` is set (not added to) so its logit sits
    // `logit_boost` above an average token's, whatever its own random part was.
    const auto plant = [&](int t, const std::vector<double>& dir, double base, double logit_boost) {
      float* key = planted_row(t, g);
      double proj = 0;
      for (int i = 0; i < d; ++i) proj += key[i] * dir[i];
      const double target = base + logit_boost * std::sqrt(static_cast<double>(d)) / q_scale;
      for (int i = 0; i < d; ++i) key[i] += static_cast<float>((target - proj) * dir[i]);
    };
    plant(marks.sink, h.plan.attention, mean_proj, c.sink_strength);
    for (int t : marks.heavy_hitters)
      plant(t, h.plan.attention, mean_proj, c.heavy_hitter_strength);
    if (t_count > 1) {  // an average token for ordinary queries, a strong match for the last
      plant(marks.needle, h.plan.attention, mean_proj, 0.0);
      plant(marks.needle, h.plan.needle, h.sum_needle_proj / t_count, c.needle_strength);
    }
  }
  for (int t : planted) out.key.store_tokens(t, {planted_row(t, 0), token_floats});

  // Values: no channel outliers, a mild per-token scale. The sink's value is small, as in
  // trained models, where the sink serves as a near no-op target for spare attention
  // (Xiao et al. 2024, Sec. 3; Sun et al. 2024, "Massive Activations", Sec. 4).
  // Each head's values also share a per-channel mean, so attention outputs have a norm well
  // above the noise of averaging random vectors.
  for (HeadDraws& h : draws) {
    h.value_mean.resize(ud);
    for (auto& m : h.value_mean) m = static_cast<float>(0.7 * h.rng.normal());
  }
  const auto make_value = [&](int t, HeadDraws& h, float* row) {
    const float scale =
        static_cast<float>(std::exp(0.2 * h.noise.next())) * (t == marks.sink ? 0.1f : 1.0f);
    h.noise.fill({row, ud});
    for (int i = 0; i < d; ++i) row[i] = scale * (h.value_mean[i] + row[i]);
  };
  KVLAB_TRY(make_tiles(0.5, make_value, [&](int t0, int t1) {
    out.value.store_tokens(t0, {tile.data(), static_cast<std::size_t>(t1 - t0) * token_floats});
  }));

  // Decode-time queries for the heads of each group; the last one also looks for the needle.
  std::vector<float> row(ud);
  for (int g = 0; g < heads; ++g) {
    HeadDraws& h = draws[static_cast<std::size_t>(g)];
    const double q_scale = h.q_scale;
    const double noise_sd = 0.1 * q_scale / std::sqrt(static_cast<double>(d));
    for (int n = 0; n < c.queries; ++n) {
      for (int k = 0; k < group; ++k) {
        for (int i = 0; i < d; ++i) {
          // Noise at 10% of the query's norm, so the planted directions stay dominant.
          double v = q_scale * h.plan.attention[i] + noise_sd * h.rng.normal();
          if (n == c.queries - 1) v += q_scale * h.plan.needle[i];
          row[i] = static_cast<float>(v);
        }
        out.query.store_row(n, g * group + k, row);
      }
    }
  }
  return Ok{};
}

Status validate(const SyntheticConfig& c, const SyntheticPreset& p, int layers) {
  const auto range = [](std::string_view what, long long v, long long lo, long long hi) -> Status {
    if (v < lo || v > hi) {
      return make_error(
          fmt::format("synthetic source: {} must be between {} and {} (got {})", what, lo, hi, v));
    }
    return Ok{};
  };
  KVLAB_TRY(range("--layers", layers, 1, 1024));
  KVLAB_TRY(range("--context", c.context, 1, kMaxSyntheticContext));
  KVLAB_TRY(range("--queries", c.queries, 0, 4096));
  KVLAB_TRY(range("outlier channels", c.outlier_channels, 0, p.shape.head_dim));
  KVLAB_TRY(range("heavy hitters", c.heavy_hitters, 0, 1024));
  if (!(c.needle_position >= 0.0 && c.needle_position <= 1.0)) {
    return make_error("synthetic source: needle position must be a fraction between 0 and 1");
  }
  for (double v : {c.outlier_scale, c.sink_strength, c.heavy_hitter_strength, c.needle_strength}) {
    if (!std::isfinite(v) || std::fabs(v) > 1e4) {
      return make_error("synthetic source: strengths and scales must be finite and below 1e4");
    }
  }
  const std::uint64_t bytes = 2ull * layers * p.shape.kv_heads * p.shape.head_dim *
                              static_cast<std::uint64_t>(c.context) * dtype_size(c.dtype);
  if (bytes > kMaxSyntheticCacheBytes) {
    return make_error(fmt::format(
        "synthetic source: {} layers x {} tokens of {} would take {:.1f} GiB, more than the "
        "{} GiB limit; use fewer layers or a shorter context",
        layers, c.context, p.name, bytes / double(1ull << 30), kMaxSyntheticCacheBytes >> 30));
  }
  return Ok{};
}

}  // namespace

const std::vector<SyntheticPreset>& synthetic_presets() {
  static const std::vector<SyntheticPreset> presets = build_presets();
  return presets;
}

Result<SyntheticPreset> find_synthetic_preset(std::string_view name) {
  // "llama3-8b" and the model catalogue's "llama-3-8b" name one preset.
  const std::string want = canonical_id(name);
  std::vector<std::string> names;
  for (const auto& p : synthetic_presets()) {
    if (canonical_id(p.name) == want) return p;
    names.push_back(p.name);
  }
  return make_error(unknown_name_message("synthetic preset", name, names));
}

SyntheticLandmarks synthetic_landmarks(const SyntheticConfig& c) {
  SyntheticLandmarks m;
  const int t = std::max(1, c.context);
  m.needle = std::clamp(static_cast<int>(c.needle_position * t), std::min(1, t - 1), t - 1);
  detail::Rng rng(detail::stream_seed(c.seed, 0xfeed, 0xbeef));
  const int candidates = t - 2;  // tokens other than the sink and the needle
  const int wanted = std::min(c.heavy_hitters, std::max(0, candidates));
  while (static_cast<int>(m.heavy_hitters.size()) < wanted) {
    const int pos = 1 + static_cast<int>(rng.below(t - 1));
    if (pos == m.needle ||
        std::find(m.heavy_hitters.begin(), m.heavy_hitters.end(), pos) != m.heavy_hitters.end()) {
      continue;
    }
    m.heavy_hitters.push_back(pos);
  }
  std::sort(m.heavy_hitters.begin(), m.heavy_hitters.end());
  return m;
}

namespace {

// Everything about a synthetic cache but its tensors: shape, source, RoPE (layers empty).
struct SyntheticPlan {
  SyntheticPreset preset;
  KvCache skeleton;
  SyntheticLandmarks marks;
};

Result<SyntheticPlan> plan_synthetic(const SyntheticConfig& config) {
  auto preset = find_synthetic_preset(config.preset);
  if (!preset) return preset.error();
  const int layers = config.layers > 0 ? config.layers : preset->shape.layers;
  KVLAB_TRY(validate(config, *preset, layers));

  SyntheticPlan plan{*preset, KvCache{}, synthetic_landmarks(config)};
  KvCache& cache = plan.skeleton;
  cache.shape = preset->shape;
  cache.shape.layers = layers;
  cache.source = fmt::format("synthetic:{}", preset->name);
  const ModelShape& s = cache.shape;
  // The RoPE generate_layer turns the keys by (it reads these frequencies): pair j of adjacent
  // dims at theta^(-2j/d) per position, from position 0.
  cache.key_rope.rotary_dims = s.head_dim;
  for (int j = 0; j < s.head_dim / 2; ++j) {
    cache.key_rope.frequencies.push_back(
        std::pow(preset->rope_theta, -2.0 * static_cast<double>(j) / s.head_dim));
  }
  return plan;
}

// Generates layers [first, first + out.size()) on every core (layers are independent streams).
Status generate_layers(const SyntheticConfig& config, const SyntheticPlan& plan, int first,
                       std::span<LayerKv> out, const ProgressFn& progress) {
  const ModelShape& s = plan.skeleton.shape;
  for (LayerKv& l : out) {
    // Every element is written by generate_layer: no zero-fill first.
    l.key = Tensor::uninitialized(config.dtype, config.context, s.kv_heads, s.head_dim);
    l.value = Tensor::uninitialized(config.dtype, config.context, s.kv_heads, s.head_dim);
    if (config.queries > 0) {
      l.query = Tensor::uninitialized(config.dtype, config.queries, s.q_heads, s.head_dim);
    }
  }
  return for_each_item(
      static_cast<int>(out.size()), progress, "layer", [&](int i, ItemProgress& p) {
        return generate_layer(config, plan.preset, plan.marks, plan.skeleton.key_rope, first + i,
                              out[static_cast<std::size_t>(i)], p);
      });
}

}  // namespace

Result<KvCache> generate_synthetic(const SyntheticConfig& config, const ProgressFn& progress) {
  auto plan = plan_synthetic(config);
  if (!plan) return plan.error();
  // In memory the cache must fit in what the machine has free, or the kernel ends the process.
  const ModelShape& s = plan->skeleton.shape;
  const std::uint64_t bytes =
      static_cast<std::uint64_t>(s.layers) * dtype_size(config.dtype) *
      (2ull * static_cast<std::uint64_t>(config.context) * s.kv_heads * s.head_dim +
       static_cast<std::uint64_t>(config.queries) * s.q_heads * s.head_dim);
  const std::uint64_t available = available_memory_bytes();
  if (available > 0 && bytes > available) {
    return make_error(fmt::format(
        "synthetic source: {} layers x {} tokens of {} take {:.1f} GiB, more than the {:.1f} GiB "
        "of memory available now; use fewer layers or a shorter context, or write the cache to a "
        "file (kvlab sources export --source synthetic:{} --context {} --out CACHE.safetensors) "
        "and compress it from there",
        s.layers, config.context, plan->preset.name, bytes / double(1ull << 30),
        available / double(1ull << 30), plan->preset.name, config.context));
  }
  KvCache cache = plan->skeleton;
  cache.layers.resize(static_cast<std::size_t>(cache.shape.layers));
  KVLAB_TRY(generate_layers(config, *plan, 0, cache.layers, progress));
  return cache;
}

Status save_synthetic_file(const SyntheticConfig& config, const std::filesystem::path& path,
                           const ProgressFn& progress) {
  auto plan = plan_synthetic(config);
  if (!plan) return plan.error();
  const KvCache& c = plan->skeleton;
  const CacheFileLayout layout{c.shape,  config.context, config.queries, config.dtype,
                               c.source, c.key_rope,     c.keys_pre_rope};
  // One layer per thread at a time: memory holds worker_threads() layers, not the cache.
  return save_cache_file_by_layer(
      layout, path, worker_threads(),
      [&](int first, std::span<LayerKv> out) {
        return generate_layers(config, *plan, first, out, {});
      },
      progress);
}

}  // namespace kvlab
