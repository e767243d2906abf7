#include "eviction/eviction_chart_data.h"

#include <QObject>

namespace kvlab::gui {

namespace {

const EvictionLayerResult* find_layer(const EvictionReport& report, int layer) {
  if (layer < 0 || layer >= static_cast<int>(report.layers.size())) return nullptr;
  return &report.layers[static_cast<std::size_t>(layer)];
}

}  // namespace

QString wrapped_label(const std::string& label, int width) {
  QString out, line;
  for (const QString& word : QString::fromStdString(label).split(QLatin1Char(' '))) {
    if (!line.isEmpty() && line.size() + 1 + word.size() > width) {
      out += line + QLatin1Char('\n');
      line.clear();
    }
    line += (line.isEmpty() ? QString() : QStringLiteral(" ")) + word;
  }
  return out + line;
}

EvictionMapData eviction_map_data(const EvictionReport& report, int layer, int kv_head) {
  EvictionMapData d;
  d.needle = report.config.needle;
  if (layer < 0 || layer >= static_cast<int>(report.maps.size())) return d;
  const auto& heads = report.maps[static_cast<std::size_t>(layer)];
  if (kv_head < 0 || kv_head >= static_cast<int>(heads.size())) return d;
  const EvictionMap& map = heads[static_cast<std::size_t>(kv_head)];
  // Two lines: a long policy label on one would be cut at both ends of a narrow map.
  d.title = QObject::tr("%1\nlayer %2, KV head %3")
                .arg(wrapped_label(report.label))
                .arg(find_layer(report, layer) ? find_layer(report, layer)->layer : layer)
                .arg(kv_head);
  d.steps = map.steps;
  d.positions = map.positions;
  d.prompt = map.prompt;
  d.cells.resize(static_cast<std::size_t>(map.steps) * map.positions);
  for (int s = 0; s < map.steps; ++s) {
    for (int p = 0; p < map.positions; ++p) {
      d.cells[static_cast<std::size_t>(s) * map.positions + p] =
          static_cast<std::uint8_t>(map.state(s, p));
    }
  }
  return d;
}

EvictionSeriesData eviction_series_data(const EvictionReport& report, int layer) {
  EvictionSeriesData d;
  d.label = QString::fromStdString(report.label);
  const EvictionLayerResult* l = find_layer(report, layer);
  if (layer >= 0 && !l) return d;
  const std::vector<EvictionStep>& steps = l ? l->steps : report.steps_total;
  d.last_step_is_needle = report.mass_without_needle_step.has_value() && !steps.empty();
  for (std::size_t i = 0; i < steps.size(); ++i) {
    d.step.push_back(static_cast<double>(i));
    d.mass_retained.push_back(steps[i].attention_mass_retained);
    d.rel_error.push_back(steps[i].attn_output_rel_error);
  }
  return d;
}

EvictionSummary eviction_summary(const EvictionReport& report, int layer) {
  EvictionSummary s;
  s.label = QString::fromStdString(report.label);
  s.context = report.tokens;
  s.seconds = report.seconds;
  if (const EvictionLayerResult* l = find_layer(report, layer)) {
    s.scope = QObject::tr("layer %1").arg(l->layer);
    s.kept_tokens = l->kept_tokens;
    s.memory_bytes = l->memory_bytes;
    s.full_memory_bytes = l->full_memory_bytes;
    s.mass_retained = l->attention_mass_retained;
    s.rel_error = l->attn_output_rel_error;
    s.cosine = l->attn_output_cosine;
    if (report.needle_retained) s.needle_retained = l->needle_retained;
    if (report.needle_in_top_k) s.needle_in_top_k = l->needle_in_top_k;
    return s;
  }
  s.scope = QObject::tr("all layers");
  s.kept_tokens = report.kept_tokens;
  s.memory_bytes = report.memory_bytes;
  s.full_memory_bytes = report.full_memory_bytes;
  s.mass_retained = report.attention_mass_retained;
  s.rel_error = report.attn_output_rel_error;
  s.cosine = report.attn_output_cosine;
  s.mass_without_needle_step = report.mass_without_needle_step;
  s.rel_error_without_needle_step = report.rel_error_without_needle_step;
  s.needle_retained = report.needle_retained;
  s.needle_in_top_k = report.needle_in_top_k;
  return s;
}

}  // namespace kvlab::gui
