#include "kvlab/engine/codec/stream_sim.h"
#include "kvlab/engine/codec/stream_sim_json.h"
#include "kvlab/engine/core/threads.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kvlab {

namespace {

// The steps at which a point is recorded: 0, every `every`-th, and the last.
std::vector<int> recorded_steps(int steps, int every) {
  std::vector<int> out;
  for (int s = 0; s <= steps; s += every) out.push_back(s);
  if (out.back() != steps) out.push_back(steps);
  return out;
}

std::vector<float> row_of(const TensorView& t, int token) {
  std::vector<float> r(static_cast<std::size_t>(t.heads()) * t.dim());
  for (int h = 0; h < t.heads(); ++h)
    t.load_row(token, h, std::span(r).subspan(static_cast<std::size_t>(h) * t.dim()));
  return r;
}

void add(CacheMemory& sum, const CacheMemory& m) {
  sum.payload += m.payload;
  sum.metadata += m.metadata;
  sum.codebooks += m.codebooks;
  sum.quant_params += m.quant_params;
  sum.buffer += m.buffer;
}

}  // namespace

Result<CompressedCacheConfig> stream_cache_config(const StreamConfig& config) {
  if (!(config.rel_scale > 0.0 && config.rel_scale <= 1.0)) {
    return make_error(fmt::format("stream: relative scale {} is not in (0, 1]", config.rel_scale));
  }
  CompressedCacheConfig c;
  c.block_size = config.block_size;
  c.buffer_size = config.buffer_size;
  c.rel_scale = config.rel_scale;
  c.codec = config.codec;
  if (config.codec == CodecKind::BitPack) {
    // Codes are round((x - min) / step) with step = rel_scale * (max - min), so at most
    // ceil(1 / rel_scale) whatever block they come from.
    const double levels = std::ceil(1.0 / config.rel_scale - 1e-9) + 1.0;
    if (levels <= 4) {
      c.bitpack_width = 2;
    } else if (levels <= 16) {
      c.bitpack_width = 4;
    } else if (levels <= 256) {
      c.bitpack_width = 8;
    } else {
      return make_error(fmt::format(
          "stream: relative scale {} gives more than 256 codes, too many for bit packing",
          config.rel_scale));
    }
  }
  return c;
}

Result<StreamReport> simulate_stream(const KvCache& cache, const StreamConfig& config,
                                     const ProgressFn& progress) {
  if (Status st = cache.validate(); !st) return make_error("stream: " + st.message());
  const int tokens = cache.tokens();
  if (cache.layers.empty() || tokens == 0) {
    return make_error("stream: the KV cache is empty (no layers or no tokens)");
  }
  if (config.prefill_tokens < 0 || config.prefill_tokens > tokens) {
    return make_error(
        fmt::format("stream: prefill of {} tokens is not in 0..{} (the cache's tokens)",
                    config.prefill_tokens, tokens));
  }
  if (config.record_every < 1) {
    return make_error(fmt::format("stream: record_every {} is not >= 1", config.record_every));
  }
  if (config.max_layers < 0) {
    return make_error(fmt::format("stream: max_layers {} is negative", config.max_layers));
  }
  auto cache_config = stream_cache_config(config);
  if (!cache_config) return cache_config.error();

  const int layers = config.max_layers == 0
                         ? static_cast<int>(cache.layers.size())
                         : std::min(config.max_layers, static_cast<int>(cache.layers.size()));
  const int heads = cache.shape.kv_heads;
  const int dim = cache.shape.head_dim;
  const int steps = tokens - config.prefill_tokens;
  const std::vector<int> record = recorded_steps(steps, config.record_every);

  StreamReport report;
  report.source = cache.source;
  report.config = config;
  report.layers = layers;
  report.kv_heads = heads;
  report.head_dim = dim;
  report.points.resize(record.size());
  const std::uint64_t fp16_per_token = 2ull * 2ull * static_cast<std::uint64_t>(heads) * dim;
  for (std::size_t i = 0; i < record.size(); ++i) {
    StreamPoint& p = report.points[i];
    p.step = record[i];
    p.tokens = config.prefill_tokens + record[i];
    p.fp16_bytes = fp16_per_token * static_cast<std::uint64_t>(p.tokens) * layers;
  }

  // Layers side by side on every core, each into its own memory points, added in layer order.
  std::vector<std::vector<CacheMemory>> per_layer(static_cast<std::size_t>(layers));
  const auto run_layer = [&](int l, ItemProgress& progress) -> Status {
    std::vector<CacheMemory>& points = per_layer[static_cast<std::size_t>(l)];
    auto layer = CompressedKvCache::create(*cache_config, heads, dim);
    if (!layer) return make_error("stream: " + layer.message());
    const TensorView k = cache.layers[static_cast<std::size_t>(l)].key.view();
    const TensorView v = cache.layers[static_cast<std::size_t>(l)].value.view();
    if (Status st = layer->prefill(k.token_range(0, config.prefill_tokens),
                                   v.token_range(0, config.prefill_tokens));
        !st) {
      return make_error(fmt::format("stream: layer {}: {}", l, st.message()));
    }
    std::size_t next = 0;
    for (int step = 0; step <= steps; ++step) {
      if (step > 0) {
        const int t = config.prefill_tokens + step - 1;
        if (Status st = layer->append(row_of(k, t), row_of(v, t)); !st) {
          return make_error(fmt::format("stream: layer {}, token {}: {}", l, t, st.message()));
        }
      }
      if (next < record.size() && record[next] == step) {
        points.push_back(layer->memory());
        ++next;
        // Cancelling is checked at recorded points only: cheap, and often enough.
        KVLAB_TRY(progress.keep_going(static_cast<double>(step) / std::max(steps, 1)));
      }
    }
    return Ok{};
  };
  KVLAB_TRY(for_each_item(layers, with_stage_prefix(progress, "stream: "), "layer", run_layer));
  for (const auto& points : per_layer) {
    for (std::size_t i = 0; i < points.size(); ++i) add(report.points[i].memory, points[i]);
  }
  report_progress(progress, 1.0, "stream: done");
  return report;
}

nlohmann::json stream_config_to_json(const StreamConfig& c) {
  return {{"prefill_tokens", c.prefill_tokens},
          {"block_size", c.block_size},
          {"buffer_size", c.buffer_size},
          {"rel_scale", c.rel_scale},
          {"codec", std::string(codec_id(c.codec))},
          {"record_every", c.record_every},
          {"max_layers", c.max_layers}};
}

nlohmann::json stream_to_json(const StreamReport& r) {
  nlohmann::json points = nlohmann::json::array();
  for (const StreamPoint& p : r.points) {
    points.push_back({{"step", p.step},
                      {"tokens", p.tokens},
                      {"payload", p.memory.payload},
                      {"metadata", p.memory.metadata},
                      {"codebooks", p.memory.codebooks},
                      {"quant_params", p.memory.quant_params},
                      {"buffer", p.memory.buffer},
                      {"total", p.memory.total()},
                      {"fp16_bytes", p.fp16_bytes},
                      {"ratio", p.ratio()}});
  }
  return {{"source", r.source},     {"config", stream_config_to_json(r.config)},
          {"layers", r.layers},     {"kv_heads", r.kv_heads},
          {"head_dim", r.head_dim}, {"points", std::move(points)}};
}

Result<StreamReport> stream_from_json(const nlohmann::json& j) {
  try {
    StreamReport r;
    r.source = j.at("source").get<std::string>();
    const auto& c = j.at("config");
    r.config.prefill_tokens = c.at("prefill_tokens").get<int>();
    r.config.block_size = c.at("block_size").get<int>();
    r.config.buffer_size = c.at("buffer_size").get<int>();
    r.config.rel_scale = c.at("rel_scale").get<double>();
    auto codec = parse_codec(c.at("codec").get<std::string>());
    if (!codec) return make_error("stream JSON: config.codec: " + codec.message());
    r.config.codec = *codec;
    r.config.record_every = c.at("record_every").get<int>();
    r.config.max_layers = c.value("max_layers", 0);
    r.layers = j.at("layers").get<int>();
    r.kv_heads = j.at("kv_heads").get<int>();
    r.head_dim = j.at("head_dim").get<int>();
    for (const auto& p : j.at("points")) {
      StreamPoint s;
      s.step = p.at("step").get<int>();
      s.tokens = p.at("tokens").get<int>();
      s.memory.payload = p.at("payload").get<std::uint64_t>();
      s.memory.metadata = p.at("metadata").get<std::uint64_t>();
      s.memory.codebooks = p.at("codebooks").get<std::uint64_t>();
      s.memory.quant_params = p.at("quant_params").get<std::uint64_t>();
      s.memory.buffer = p.at("buffer").get<std::uint64_t>();
      s.fp16_bytes = p.at("fp16_bytes").get<std::uint64_t>();
      r.points.push_back(s);
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    return make_error(std::string("stream JSON: ") + e.what());
  }
}

}  // namespace kvlab
