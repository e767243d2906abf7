#include "learn/learn_quant_model.h"

#include <algorithm>
#include <cmath>

#include <QObject>

#include "common/gui_format.h"
#include "kvlab/engine/attention/metrics.h"

namespace kvlab::gui {
namespace {

// sqrt(sum err^2 / sum x^2) from the engine's error sums.
double relative_error(const ElementErrorSums& e) {
  return e.sum_sq_signal > 0 ? std::sqrt(e.sum_sq_err / e.sum_sq_signal) : 0.0;
}

}  // namespace

QString LearnQuantModel::grouping_name(Grouping g) {
  switch (g) {
    case Grouping::PerTensor:
      return QObject::tr("per-tensor");
    case Grouping::PerChannel:
      return QObject::tr("per-channel");
    case Grouping::PerToken:
      return QObject::tr("per-token");
  }
  return {};
}

std::vector<float> LearnQuantModel::per_tensor_round_trip(const std::vector<float>& x, int bits) {
  if (x.empty()) return {};
  const auto [lo_it, hi_it] = std::minmax_element(x.begin(), x.end());
  const float lo = *lo_it, hi = *hi_it;
  const float max_code = static_cast<float>((1 << bits) - 1);
  const float step = (hi - lo) / max_code;
  std::vector<float> out(x.size(), lo);
  if (step <= 0.f) return out;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float code = std::min(max_code, std::round((x[i] - lo) / step));
    out[i] = lo + code * step;
  }
  return out;
}

LearnQuantModel::LearnQuantModel() {
  m_source.preset = "llama3-8b";
  m_source.layers = 1;
  m_source.context = kContext;
  m_source.seed = 1;
  generate();
  recompute();
}

void LearnQuantModel::generate() {
  auto cache = generate_synthetic(m_source);
  if (!cache) {
    m_error = QObject::tr("Synthetic source: %1").arg(QString::fromStdString(cache.message()));
    return;
  }
  m_cache = std::move(cache).value();
  const LayerKv& layer = m_cache.layers.front();
  data(TensorRole::Key).original = layer.key.view().to_float();
  data(TensorRole::Value).original = layer.value.view().to_float();
  m_queries = layer.query.view().to_float();
}

int LearnQuantModel::heads() const {
  return m_cache.layers.empty() ? 0 : m_cache.layers.front().key.heads();
}

int LearnQuantModel::dim() const {
  return m_cache.layers.empty() ? 0 : m_cache.layers.front().key.dim();
}

bool LearnQuantModel::set_bits(int bits) {
  if (bits != 2 && bits != 4 && bits != 8) return false;
  if (bits == m_bits && m_error.isEmpty()) return true;
  m_bits = bits;
  recompute();
  return true;
}

bool LearnQuantModel::set_group_size(int group) {
  if (group != 32 && group != 64 && group != 128) return false;
  if (group == m_group && m_error.isEmpty()) return true;
  m_group = group;
  recompute();
  return true;
}

const std::vector<float>& LearnQuantModel::original(TensorRole role) const {
  return data(role).original;
}
const std::vector<float>& LearnQuantModel::reconstructed(TensorRole role, Grouping g) const {
  return data(role).reconstructed[static_cast<std::size_t>(g)];
}
const LearnQuantModel::Errors& LearnQuantModel::errors(TensorRole role, Grouping g) const {
  return data(role).errors[static_cast<std::size_t>(g)];
}

MethodConfig LearnQuantModel::method() const {
  MethodConfig m;
  m.group_size = m_group;
  m.residual = 0;  // every token quantized, as on this page
  if (m_bits == 8) {
    // KIVI offers 2 and 4 bits; the age-tiered quantizer's INT8 tier groups the same way.
    m.kind = MethodKind::Tiered;
    m.int8_tokens = m_source.context;
  } else {
    m.kind = MethodKind::Kivi;
    m.bits = m_bits;
  }
  return m;
}

void LearnQuantModel::recompute() {
  if (m_cache.layers.empty()) return;
  auto quantizer = make_quantizer(method());
  if (!quantizer) {
    m_error = QObject::tr("Method: %1").arg(QString::fromStdString(quantizer.message()));
    return;
  }
  const LayerKv& layer = m_cache.layers.front();
  const int heads = layer.key.heads(), dim = layer.key.dim();
  for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    const Tensor& tensor = role == TensorRole::Key ? layer.key : layer.value;
    RoleData& d = data(role);
    d.reconstructed[0] = per_tensor_round_trip(d.original, m_bits);
    // The engine's KIVI groups: key mode is per channel, value mode per token, whichever
    // tensor it is given.
    for (const auto& [g, mode] : {std::pair{1, TensorRole::Key}, std::pair{2, TensorRole::Value}}) {
      auto q = (*quantizer)->quantize(tensor.view(), mode);
      if (!q) {
        m_error =
            QObject::tr("Quantizing the %1s: %2")
                .arg(QString::fromLatin1(role_name(role)), QString::fromStdString(q.message()));
        return;
      }
      d.reconstructed[g].resize(tensor.elements());
      (*quantizer)->dequantize(*q, d.reconstructed[g]);
    }
  }
  const auto& k = data(TensorRole::Key);
  const auto& v = data(TensorRole::Value);
  const int nq = layer.query.tokens(), q_heads = layer.query.heads();
  for (int g = 0; g < kGroupings; ++g) {
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      RoleData& d = data(role);
      ElementErrorSums sums;
      sums.add(d.original, d.reconstructed[g]);
      Errors& e = d.errors[g];
      e.mse = sums.mse();
      e.rel_error = relative_error(sums);
      const bool key = role == TensorRole::Key;
      e.attention_error =
          nq == 0 ? 0.0
                  : attention_errors(m_queries, TensorView::of_floats(k.original, heads, dim),
                                     TensorView::of_floats(v.original, heads, dim),
                                     key ? k.reconstructed[g] : k.original,
                                     key ? v.original : v.reconstructed[g], {q_heads, heads, dim})
                        .output_rel_error();
    }
  }
  m_error.clear();
}

double LearnQuantModel::value(Grouping g, int column) const {
  const Errors& e = errors(column < 3 ? TensorRole::Key : TensorRole::Value, g);
  const double values[] = {e.mse, e.rel_error, e.attention_error};
  return values[column % 3];
}

LearnQuantModel::Grouping LearnQuantModel::best_in_column(int column) const {
  int best = 0;
  for (int g = 1; g < kGroupings; ++g) {
    if (value(static_cast<Grouping>(g), column) < value(static_cast<Grouping>(best), column)) {
      best = g;
    }
  }
  return static_cast<Grouping>(best);
}

LearnQuantModel::Grouping LearnQuantModel::best(TensorRole role) const {
  return best_in_column(role == TensorRole::Key ? 2 : 5);
}

QString LearnQuantModel::conclusion() const {
  const auto times = [&](TensorRole role, Grouping other, Grouping best) {
    const double b = errors(role, best).attention_error;
    return b > 0 ? format_ratio(errors(role, other).attention_error / b) : QObject::tr("—");
  };
  const Grouping best_k = best(TensorRole::Key), best_v = best(TensorRole::Value);
  return QObject::tr(
             "<p>At %1 bits, G = %2:</p><p><b>keys do best %3</b>: per-token gives %4 the "
             "attention error.</p><p><b>values do best %5</b>: per-channel gives %6 the attention "
             "error.</p>")
      .arg(m_bits)
      .arg(m_group)
      .arg(grouping_name(best_k), times(TensorRole::Key, Grouping::PerToken, best_k),
           grouping_name(best_v), times(TensorRole::Value, Grouping::PerChannel, best_v));
}

LearnQuantModel::Vector LearnQuantModel::vector(TensorRole role, int token, int head,
                                                int quarter) const {
  Vector out;
  const RoleData& d = data(role);
  if (m_cache.layers.empty() || d.reconstructed[0].empty()) return out;
  const Tensor& t = m_cache.layers.front().key;
  const int d_head = t.dim();
  token = std::clamp(token, 0, t.tokens() - 1);
  head = std::clamp(head, 0, t.heads() - 1);
  out.first = quarter < 0 ? 0 : quarter * d_head / 4;
  out.last = quarter < 0 ? d_head : (quarter + 1) * d_head / 4;
  const std::size_t base = (static_cast<std::size_t>(token) * t.heads() + head) * d_head;
  const auto slice = [&](const std::vector<float>& x) {
    return std::vector<float>(x.begin() + static_cast<std::ptrdiff_t>(base + out.first),
                              x.begin() + static_cast<std::ptrdiff_t>(base + out.last));
  };
  out.original = slice(d.original);
  for (int g = 0; g < kGroupings; ++g) out.reconstructed[g] = slice(d.reconstructed[g]);
  return out;
}

LearnLink LearnQuantModel::link() const {
  return LearnLink::to_compression(m_source, method());
}

}  // namespace kvlab::gui
