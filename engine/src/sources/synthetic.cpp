#include "kvlab/engine/sources/synthetic.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>

#include <fmt/format.h>

#include "core/random.h"
#include "sources/normal_stream.h"

#include "kvlab/engine/core/names.h"
#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/sources/cache_file.h"

namespace kvlab {

namespace {

constexpr int kMaxContext = 1 << 20;
constexpr std::uint64_t kMaxCacheBytes = 64ull << 30;  // refuse to build more than 64 GiB

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

// One layer: keys, values and queries, written into `out`. Each (layer, KV head) draws its
// statistics from a detail::Rng and its bulk noise (a normal for every key and value element)
// from a detail::NormalStream, both seeded by (seed, layer, head): layers are independent, so
// any number of threads gives the same cache.
Status generate_layer(const SyntheticConfig& c, const SyntheticPreset& preset,
                      const SyntheticLandmarks& marks, const RopeSpec& rope, int layer,
                      LayerKv& out, ItemProgress& progress) {
  const ModelShape& s = preset.shape;
  const int t_count = c.context, d = s.head_dim, group = s.group_size();
  const std::size_t ud = static_cast<std::size_t>(d);
  std::vector<float> row(ud), mean_f(ud), sd_f(ud), att_f(ud), needle_f(ud);
  // Every element is written before it is read: no zero-filling of 16 bytes a token-head.
  const std::unique_ptr<float[]> keys(new float[static_cast<std::size_t>(t_count) * ud]);
  for (int g = 0; g < s.kv_heads; ++g) {
    KVLAB_TRY(progress.keep_going(static_cast<double>(g) / s.kv_heads));
    detail::Rng rng(detail::stream_seed(c.seed, layer, g));
    detail::NormalStream noise(detail::stream_seed(c.seed, layer, g) ^ 0x5eedf00dull);
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
    const HeadPlan plan = plan_head(rng, d);
    for (int i = 0; i < d; ++i) {
      mean_f[i] = static_cast<float>(mean[i]);
      sd_f[i] = static_cast<float>(sd[i]);
      att_f[i] = static_cast<float>(plan.attention[i]);
      needle_f[i] = static_cast<float>(plan.needle[i]);
    }
    // Ordinary keys: mean + sd * noise, rotated by position by the cache's own RoPE (adjacent
    // pairs, apply_rope_rows). Sums over tokens in double; each token's dot products in float.
    for (int t = 0; t < t_count; ++t) {
      float* k = keys.get() + static_cast<std::size_t>(t) * ud;
      noise.fill({k, ud});
      for (int i = 0; i < d; ++i) k[i] = mean_f[i] + sd_f[i] * k[i];
      if ((t & 8191) == 8191) {
        KVLAB_TRY(progress.keep_going((g + 0.5 * t / t_count) / static_cast<double>(s.kv_heads)));
      }
    }
    apply_rope_rows(keys.get(), 0, t_count, 1, d, rope);
    double sum_proj = 0, sum_proj2 = 0, sum_needle_proj = 0;
    for (int t = 0; t < t_count; ++t) {
      const float* k = keys.get() + static_cast<std::size_t>(t) * ud;
      // Dot products in 16 lanes (vectorised; a single float sum would be added in order).
      float lanes[16] = {}, needle_lanes[16] = {};
      for (int i = 0; i < d; ++i) {
        lanes[i & 15] += k[i] * att_f[i];
        needle_lanes[i & 15] += k[i] * needle_f[i];
      }
      float proj = 0, needle_proj = 0;
      for (int j = 0; j < 16; ++j) {
        proj += lanes[j];
        needle_proj += needle_lanes[j];
      }
      sum_proj += proj;
      sum_proj2 += static_cast<double>(proj) * proj;
      sum_needle_proj += needle_proj;
    }
    // Query strength so ordinary tokens' logits q.k/sqrt(d) spread with std ~1.5.
    const double mean_proj = sum_proj / t_count;
    const double sd_proj = std::sqrt(std::max(1e-6, sum_proj2 / t_count - mean_proj * mean_proj));
    const double q_scale = 1.5 * std::sqrt(static_cast<double>(d)) / sd_proj;
    // A planted token's projection on `dir` is set (not added to) so its logit sits
    // `logit_boost` above an average token's, whatever its own random part was.
    const auto plant = [&](int t, const std::vector<double>& dir, double base, double logit_boost) {
      float* key = keys.get() + static_cast<std::size_t>(t) * ud;
      double proj = 0;
      for (int i = 0; i < d; ++i) proj += key[i] * dir[i];
      const double target = base + logit_boost * std::sqrt(static_cast<double>(d)) / q_scale;
      for (int i = 0; i < d; ++i) key[i] += static_cast<float>((target - proj) * dir[i]);
    };
    plant(marks.sink, plan.attention, mean_proj, c.sink_strength);
    for (int t : marks.heavy_hitters) plant(t, plan.attention, mean_proj, c.heavy_hitter_strength);
    if (t_count > 1) {  // an average token for ordinary queries, a strong match for the last
      plant(marks.needle, plan.attention, mean_proj, 0.0);
      plant(marks.needle, plan.needle, sum_needle_proj / t_count, c.needle_strength);
    }
    for (int t = 0; t < t_count; ++t) {
      out.key.store_row(t, g, {keys.get() + static_cast<std::size_t>(t) * ud, ud});
    }

    // Values: no channel outliers, a mild per-token scale. The sink's value is small, as in
    // trained models, where the sink serves as a near no-op target for spare attention
    // (Xiao et al. 2024, Sec. 3; Sun et al. 2024, "Massive Activations", Sec. 4).
    // Each head's values also share a per-channel mean, so attention outputs have a norm well
    // above the noise of averaging random vectors.
    std::vector<float> value_mean(ud);
    for (auto& m : value_mean) m = static_cast<float>(0.7 * rng.normal());
    for (int t = 0; t < t_count; ++t) {
      const float scale =
          static_cast<float>(std::exp(0.2 * noise.next())) * (t == marks.sink ? 0.1f : 1.0f);
      noise.fill(row);
      for (int i = 0; i < d; ++i) row[i] = scale * (value_mean[i] + row[i]);
      out.value.store_row(t, g, row);
    }
    // Decode-time queries for the heads of this group; the last one also looks for the needle.
    const double noise_sd = 0.1 * q_scale / std::sqrt(static_cast<double>(d));
    for (int n = 0; n < c.queries; ++n) {
      for (int h = 0; h < group; ++h) {
        for (int i = 0; i < d; ++i) {
          // Noise at 10% of the query's norm, so the planted directions stay dominant.
          double v = q_scale * plan.attention[i] + noise_sd * rng.normal();
          if (n == c.queries - 1) v += q_scale * plan.needle[i];
          row[i] = static_cast<float>(v);
        }
        out.query.store_row(n, g * group + h, row);
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
  KVLAB_TRY(range("--context", c.context, 1, kMaxContext));
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
  if (bytes > kMaxCacheBytes) {
    return make_error(fmt::format(
        "synthetic source: {} layers x {} tokens of {} would take {:.1f} GiB, more than the "
        "{} GiB limit; use fewer layers or a shorter context",
        layers, c.context, p.name, bytes / double(1ull << 30), kMaxCacheBytes >> 30));
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
