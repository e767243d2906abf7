#include "learn/learn_huffman_model.h"

#include <algorithm>
#include <bit>

#include <QLocale>
#include <QObject>

#include "common/gui_format.h"
#include "kvlab/engine/quant/method.h"

namespace kvlab::gui {
namespace {

// Bits of the binary number `v` (at least 1): the narrowest fixed width that stores 0..v.
int width_of(int v) {
  return std::max(1, static_cast<int>(std::bit_width(static_cast<unsigned>(v))));
}

}  // namespace

const std::vector<double>& LearnHuffmanModel::rel_scales() {
  static const std::vector<double> scales = {0.5, 0.3, 0.2, 0.1, 0.05, 0.02};
  return scales;
}

LearnHuffmanModel::LearnHuffmanModel() {
  m_source.preset = "llama3-8b";
  m_source.layers = 1;
  m_source.context = kContext;
  m_source.seed = 1;
  auto cache = generate_synthetic(m_source);
  if (cache) {
    m_cache = std::move(cache).value();
  } else {
    m_error = QObject::tr("Synthetic source: %1").arg(QString::fromStdString(cache.message()));
  }
  recompute();
}

MethodConfig LearnHuffmanModel::method() const {
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.rel_scale = m_rel_scale;
  m.codec = CodecKind::Huffman;
  return m;
}

bool LearnHuffmanModel::set_rel_scale(double rel_scale) {
  if (std::find(rel_scales().begin(), rel_scales().end(), rel_scale) == rel_scales().end()) {
    return false;
  }
  if (rel_scale == m_rel_scale && m_error.isEmpty()) return true;
  m_rel_scale = rel_scale;
  recompute();
  return true;
}

void LearnHuffmanModel::set_role(TensorRole role) {
  if (role == m_role && m_error.isEmpty()) return;
  m_role = role;
  recompute();
}

int LearnHuffmanModel::distinct_codes() const {
  return static_cast<int>(
      std::count_if(m_counts.begin(), m_counts.end(), [](auto c) { return c; }));
}

void LearnHuffmanModel::recompute() {
  m_merges = 0;
  if (m_cache.layers.empty()) return;
  const auto fail = [this](const QString& what, const std::string& message) {
    m_error = QObject::tr("%1: %2").arg(what, QString::fromStdString(message));
  };
  auto quantizer = make_quantizer(method());
  if (!quantizer) return fail(QObject::tr("Method"), quantizer.message());
  const LayerKv& layer = m_cache.layers.front();
  const Tensor& tensor = m_role == TensorRole::Key ? layer.key : layer.value;
  auto q = (*quantizer)->quantize(tensor.view(), m_role);
  if (!q) {
    return fail(QObject::tr("Quantizing the %1s").arg(QString::fromLatin1(role_name(m_role))),
                q.message());
  }
  m_counts = count_codes(q->codes);
  m_codes = q->codes.size();
  auto book = HuffmanCodebook::from_histogram(m_counts);
  if (!book) return fail(QObject::tr("Engine codebook"), book.message());
  m_book = std::move(book).value();
  m_lengths = huffman_lengths(m_counts);

  // Bits per code: every average is weighted by how often each code occurs.
  std::uint64_t tree_bits = 0, engine_bits = 0;
  int largest = 0;
  for (int v = 0; v < 256; ++v) {
    const std::uint64_t c = m_counts[static_cast<std::size_t>(v)];
    if (c == 0) continue;
    largest = v;
    tree_bits += c * static_cast<std::uint64_t>(m_lengths[static_cast<std::size_t>(v)]);
    engine_bits += c * static_cast<std::uint64_t>(m_book.cost_bits(static_cast<std::uint8_t>(v)));
  }
  const double n = std::max<double>(1.0, static_cast<double>(m_codes));
  m_bits = BitsPerCode{8.0, width_of(largest), tree_bits / n, engine_bits / n,
                       shannon_entropy_bits(m_counts)};
  // The tree: over every code that occurs, or the most frequent and one "other".
  m_steps = HuffmanSteps::from_counts(m_counts, kMaxTreeLeaves);
  m_error.clear();
}

CodeLengthData LearnHuffmanModel::chart_data() const {
  CodeLengthData data;
  data.counts.assign(m_counts.begin(), m_counts.end());
  data.lengths = m_lengths;
  return data;
}

QStringList LearnHuffmanModel::row_names() const {
  return {QObject::tr("8-bit codes"), QObject::tr("%1-bit fixed").arg(m_bits.fixed_width),
          QObject::tr("Huffman (tree)"), QObject::tr("engine codebook"), QObject::tr("entropy")};
}

QStringList LearnHuffmanModel::row_cells(int row) const {
  const double n = static_cast<double>(m_codes);
  const double values[] = {m_bits.fixed8, static_cast<double>(m_bits.fixed_width), m_bits.huffman,
                           m_bits.engine, m_bits.entropy};
  const auto saved = [&](double bits, double against) {
    if (bits >= against) return QObject::tr("—");
    return QObject::tr("%1\n%2").arg(format_percent(1 - bits / against),
                                     format_byte_count((against - bits) * n / 8));
  };
  const double v = values[std::clamp(row, 0, kRows - 1)];
  return {QString::number(v, 'f', 3), format_byte_count(v * n / 8), saved(v, 8.0),
          saved(v, m_bits.fixed_width)};
}

QString LearnHuffmanModel::headline() const {
  const double n = static_cast<double>(m_codes);
  return QObject::tr(
             "Huffman stores these %1 codes in <b>%2 bits</b> each on average: <b>%3</b> smaller "
             "than 8-bit codes (%4 saved) and %5 smaller than %6-bit fixed width, %7 bits above "
             "the entropy.")
      .arg(QLocale().toString(static_cast<qulonglong>(m_codes)))
      .arg(QString::number(m_bits.huffman, 'f', 2), format_percent(1 - m_bits.huffman / 8),
           format_byte_count((8 - m_bits.huffman) * n / 8),
           format_percent(1 - m_bits.huffman / m_bits.fixed_width))
      .arg(m_bits.fixed_width)
      .arg(QString::number(m_bits.huffman - m_bits.entropy, 'f', 3));
}

QString LearnHuffmanModel::tree_note() const {
  const int distinct = distinct_codes();
  if (other_codes() == 0) {
    return QObject::tr("%1 code values occur; each is a leaf of the tree.").arg(distinct);
  }
  const double n = std::max<double>(1.0, static_cast<double>(m_codes));
  const std::uint64_t other_weight =
      m_steps.nodes()[static_cast<std::size_t>(m_steps.leaf_count() - 1)].weight;
  return QObject::tr(
             "%1 code values occur: the tree shows the %2 most frequent and one \"other\" leaf "
             "for the remaining %3 (%4 of the codes). Lengths and bits use the full code.")
      .arg(distinct)
      .arg(kMaxTreeLeaves - 1)
      .arg(other_codes())
      .arg(format_percent(static_cast<double>(other_weight) / n));
}

void LearnHuffmanModel::step() {
  if (!at_end()) ++m_merges;
}

void LearnHuffmanModel::reset() {
  m_merges = 0;
}

QString LearnHuffmanModel::step_text() const {
  return QObject::tr("Merge %1 of %2").arg(m_merges).arg(step_count());
}

LearnLink LearnHuffmanModel::link() const {
  return LearnLink::to_compression(m_source, method());
}

}  // namespace kvlab::gui
