#include "compression/key_channel_data.h"

#include <algorithm>

#include <QObject>

#include "kvlab/engine/quant/channel_stats.h"
#include "kvlab/engine/quant/rotation.h"

namespace kvlab::gui {

namespace {

QString rotation_name(RotationKind kind) {
  const auto id = rotation_id(kind);
  return QString::fromUtf8(id.data(), static_cast<qsizetype>(id.size()));
}

double series_max(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

}  // namespace

RotationKind shown_rotation(RotationKind chosen, int dim) {
  if (chosen != RotationKind::None) return chosen;
  return is_power_of_two(dim) ? RotationKind::Hadamard : RotationKind::Orthogonal;
}

Result<KeyChannelStats> compute_key_channel_stats(const KvCache& cache, int layer,
                                                  RotationKind chosen, std::uint64_t seed) {
  if (layer < 0 || layer >= static_cast<int>(cache.layers.size())) {
    return make_error("layer " + std::to_string(layer) + ": the cache has " +
                      std::to_string(cache.layers.size()) + " layers");
  }
  const TensorView keys = cache.layers[static_cast<std::size_t>(layer)].key.view();
  KeyChannelStats s;
  s.layer = layer;
  s.heads = keys.heads();
  s.dim = keys.dim();
  s.rotation = shown_rotation(chosen, keys.dim());
  s.seed = seed;
  s.chosen = chosen != RotationKind::None;
  auto before = key_channel_absmax(keys, RotationKind::None, seed);
  if (!before) return make_error("layer " + std::to_string(layer) + " keys: " + before.message());
  auto after = key_channel_absmax(keys, s.rotation, seed);
  if (!after) return make_error("layer " + std::to_string(layer) + " keys: " + after.message());
  s.before = std::move(before).value();
  s.after = std::move(after).value();
  return s;
}

KeyChannelSeries key_channel_series(const KeyChannelStats& stats, int heads_pick) {
  KeyChannelSeries out;
  const int dim = stats.dim;
  const int heads = stats.heads;
  const bool one_head = heads_pick >= 0 && heads_pick < heads;
  for (int d = 0; d < dim; ++d) {
    double before = 0, after = 0;
    for (int h = 0; h < heads; ++h) {
      if (one_head && h != heads_pick) continue;
      const std::size_t i = static_cast<std::size_t>(h) * dim + d;
      if (heads_pick == kMeanOverHeads) {
        before += stats.before[i] / heads;
        after += stats.after[i] / heads;
      } else {
        before = std::max(before, static_cast<double>(stats.before[i]));
        after = std::max(after, static_cast<double>(stats.after[i]));
      }
    }
    out.channel.push_back(d);
    out.before.push_back(before);
    out.after.push_back(after);
  }
  QString which;
  if (one_head) {
    which = QObject::tr("KV head %1").arg(heads_pick);
  } else if (heads_pick == kMeanOverHeads) {
    which = QObject::tr("mean of %1 heads").arg(heads);
  } else {
    which = QObject::tr("max of %1 heads").arg(heads);
  }
  out.title = QObject::tr("Key channels: layer %1, %2").arg(stats.layer).arg(which);
  out.before_name = QObject::tr("unrotated, max %1").arg(series_max(out.before), 0, 'g', 3);
  out.after_name = QObject::tr("%1%2, max %3")
                       .arg(rotation_name(stats.rotation),
                            stats.chosen ? QString() : QObject::tr(" (none chosen)"))
                       .arg(series_max(out.after), 0, 'g', 3);
  return out;
}

}  // namespace kvlab::gui
