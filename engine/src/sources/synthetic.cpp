#include "kvlab/engine/sources/synthetic.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/random.h"

#include "kvlab/engine/core/names.h"

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

// One layer: keys, values and queries, written into `out`.
// `rope`: the cache's key_rope, whose frequencies turn the keys.
void generate_layer(const SyntheticConfig& c, const SyntheticPreset& preset,
                    const SyntheticLandmarks& marks, const RopeSpec& rope, int layer,
                    LayerKv& out) {
  const ModelShape& s = preset.shape;
  const int t_count = c.context, d = s.head_dim, group = s.group_size();
  std::vector<float> row(d);
  std::vector<double> k(d);
  for (int g = 0; g < s.kv_heads; ++g) {
    detail::Rng rng(detail::stream_seed(c.seed, layer, g));
    // Per-channel statistics of the keys before rotation; outliers on low-frequency pairs.
    std::vector<double> mean(d), sd(d);
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
    // Ordinary keys: mean + sd * noise, rotated by position (RoPE on adjacent pairs).
    double sum_proj = 0, sum_proj2 = 0, sum_needle_proj = 0;
    std::vector<float> keys(static_cast<std::size_t>(t_count) * d);
    for (int t = 0; t < t_count; ++t) {
      for (int i = 0; i < d; ++i) k[i] = mean[i] + sd[i] * rng.normal();
      for (int i = 0; i + 1 < d; i += 2) {
        const double a = t * rope.frequencies[static_cast<std::size_t>(i / 2)], cs = std::cos(a),
                     sn = std::sin(a);
        const double x = k[i], y = k[i + 1];
        k[i] = x * cs - y * sn;
        k[i + 1] = x * sn + y * cs;
      }
      double proj = 0;
      for (int i = 0; i < d; ++i) {
        keys[static_cast<std::size_t>(t) * d + i] = static_cast<float>(k[i]);
        proj += k[i] * plan.attention[i];
        sum_needle_proj += k[i] * plan.needle[i];
      }
      sum_proj += proj;
      sum_proj2 += proj * proj;
    }
    // Query strength so ordinary tokens' logits q.k/sqrt(d) spread with std ~1.5.
    const double mean_proj = sum_proj / t_count;
    const double sd_proj = std::sqrt(std::max(1e-6, sum_proj2 / t_count - mean_proj * mean_proj));
    const double q_scale = 1.5 * std::sqrt(static_cast<double>(d)) / sd_proj;
    // A planted token's projection on `dir` is set (not added to) so its logit sits
    // `logit_boost` above an average token's, whatever its own random part was.
    const auto plant = [&](int t, const std::vector<double>& dir, double base, double logit_boost) {
      float* key = keys.data() + static_cast<std::size_t>(t) * d;
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
    for (int t = 0; t < t_count; ++t)
      out.key.store_row(t, g, std::span(keys).subspan(static_cast<std::size_t>(t) * d));

    // Values: no channel outliers, a mild per-token scale. The sink's value is small, as in
    // trained models, where the sink serves as a near no-op target for spare attention
    // (Xiao et al. 2024, Sec. 3; Sun et al. 2024, "Massive Activations", Sec. 4).
    // Each head's values also share a per-channel mean, so attention outputs have a norm well
    // above the noise of averaging random vectors.
    std::vector<double> value_mean(d);
    for (auto& m : value_mean) m = 0.7 * rng.normal();
    for (int t = 0; t < t_count; ++t) {
      const double scale = std::exp(0.2 * rng.normal()) * (t == marks.sink ? 0.1 : 1.0);
      for (int i = 0; i < d; ++i) {
        row[i] = static_cast<float>(scale * (value_mean[i] + rng.normal()));
      }
      out.value.store_row(t, g, row);
    }
    // Decode-time queries for the heads of this group; the last one also looks for the needle.
    const double noise = 0.1 * q_scale / std::sqrt(static_cast<double>(d));
    for (int n = 0; n < c.queries; ++n) {
      for (int h = 0; h < group; ++h) {
        for (int i = 0; i < d; ++i) {
          // Noise at 10% of the query's norm, so the planted directions stay dominant.
          double v = q_scale * plan.attention[i] + noise * rng.normal();
          if (n == c.queries - 1) v += q_scale * plan.needle[i];
          row[i] = static_cast<float>(v);
        }
        out.query.store_row(n, g * group + h, row);
      }
    }
  }
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

Result<KvCache> generate_synthetic(const SyntheticConfig& config, const ProgressFn& progress) {
  auto preset = find_synthetic_preset(config.preset);
  if (!preset) return preset.error();
  const int layers = config.layers > 0 ? config.layers : preset->shape.layers;
  KVLAB_TRY(validate(config, *preset, layers));

  KvCache cache;
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
  cache.layers.resize(layers);
  for (auto& l : cache.layers) {
    l.key = Tensor(config.dtype, config.context, s.kv_heads, s.head_dim);
    l.value = Tensor(config.dtype, config.context, s.kv_heads, s.head_dim);
    if (config.queries > 0) l.query = Tensor(config.dtype, config.queries, s.q_heads, s.head_dim);
  }
  const SyntheticLandmarks marks = synthetic_landmarks(config);

  if (!report_progress(progress, 0.0, "generating")) {
    return make_error(std::string(kCancelledMessage));
  }
  // Layers are independent streams: generate them on every core; the calling thread reports.
  std::atomic<int> next{0}, done{0};
  std::atomic<bool> cancel{false};
  const auto work = [&] {
    for (int l = next++; l < layers && !cancel; l = next++) {
      generate_layer(config, *preset, marks, cache.key_rope, l, cache.layers[l]);
      ++done;
    }
  };
  const unsigned extra = std::min<unsigned>(std::max(1u, std::thread::hardware_concurrency()) - 1,
                                            static_cast<unsigned>(layers - 1));
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < extra; ++i) pool.emplace_back(work);
  for (int l = next++; l < layers && !cancel; l = next++) {
    generate_layer(config, *preset, marks, cache.key_rope, l, cache.layers[l]);
    ++done;
    if (!report_progress(progress, static_cast<double>(done) / layers,
                         fmt::format("generating layer {} of {}", done.load(), layers))) {
      cancel = true;
    }
  }
  for (auto& t : pool) t.join();
  if (cancel) return make_error(std::string(kCancelledMessage));
  return cache;
}

}  // namespace kvlab
