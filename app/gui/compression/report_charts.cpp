#include "compression/report_charts.h"

#include "kvlab/planners/memory_formula.h"

namespace kvlab::gui {

namespace {

std::array<double, kByteComponentCount> components(const ByteBreakdown& b) {
  return {static_cast<double>(b.codes), static_cast<double>(b.scales),
          static_cast<double>(b.zero_points), static_cast<double>(b.residual),
          static_cast<double>(b.metadata)};
}

void add_into(std::array<double, kByteComponentCount>& sum, const ByteBreakdown& b) {
  const auto c = components(b);
  for (int i = 0; i < kByteComponentCount; ++i) sum[i] += c[i];
}

std::vector<HistogramData> histograms(const std::vector<CodeHistogram>& in) {
  std::vector<HistogramData> out;
  out.reserve(in.size());
  for (const auto& h : in) {
    out.push_back({QString::fromStdString(h.label), h.bits, h.counts});
  }
  return out;
}

// The 256-bin "uint8" histogram of KVComp's byte codes, or empty.
std::vector<std::uint64_t> byte_code_counts(const std::vector<CodeHistogram>& in) {
  for (const auto& h : in) {
    if (h.counts.size() == 256) return h.counts;
  }
  return {};
}

CodeLengthData code_lengths(const std::vector<CodeHistogram>& histograms,
                            const std::vector<std::uint8_t>& lengths,
                            const std::vector<double>& bits, bool pairs) {
  return {byte_code_counts(histograms), std::vector<int>(lengths.begin(), lengths.end()), bits,
          pairs};
}

bool codec_ran(const LayerReport& l) {
  return l.key_codec.codes + l.value_codec.codes > 0;
}

}  // namespace

const std::array<QString, kCodecCount>& codec_names() {
  static const std::array<QString, kCodecCount> kNames{
      QStringLiteral("bitpack"), QStringLiteral("varwidth"), QStringLiteral("huffman"),
      QStringLiteral("rans")};
  return kNames;
}

const std::array<QString, kByteComponentCount>& byte_component_names() {
  static const std::array<QString, kByteComponentCount> kNames{
      QStringLiteral("codes"), QStringLiteral("scales"), QStringLiteral("zero-points"),
      QStringLiteral("residual fp16"), QStringLiteral("metadata")};
  return kNames;
}

ChartSet chart_set_from_report(const CompressionReport& r) {
  ChartSet set;

  ReportSummary& s = set.summary;
  s.source = QString::fromStdString(r.source);
  s.method_label = QString::fromStdString(r.method_label);
  s.tokens = r.tokens;
  s.layers = static_cast<int>(r.layers.size());
  s.ratio = r.ratio;
  s.bits_per_value = r.bits_per_value;
  s.mse = r.error.mse;
  s.max_abs = r.error.max_abs;
  s.snr_db = r.error.snr_db;
  s.logit_rmse = r.error.logit_rmse;
  s.softmax_kl = r.error.softmax_kl;
  s.attn_output_rel_error = r.error.attn_output_rel_error;
  s.attn_output_cosine = r.error.attn_output_cosine;
  s.total_seconds = r.total_seconds;
  if (!r.backend.empty()) {
    s.backend =
        QString::fromStdString(r.backend) + QStringLiteral(": ") + QString::fromStdString(r.device);
  }
  s.stages = QString::fromStdString(stage_summary(r));
  s.peak_memory_bytes = static_cast<double>(r.memory_peak_bytes);
  s.device_peak_memory_bytes = static_cast<double>(r.device_memory_peak_bytes);
  s.fp16_formula = QString::fromStdString(planners::explain_kv_bytes(r.shape, r.tokens, 16.0));
  s.measured_formula =
      QString::fromStdString(planners::explain_kv_bytes(r.shape, r.tokens, r.bits_per_value));

  const bool any_codec = r.codec.codes > 0;
  const QString ran =
      r.config.codec ? QString::fromUtf8(codec_id(*r.config.codec).data(),
                                         static_cast<qsizetype>(codec_id(*r.config.codec).size()))
                     : QString();
  if (any_codec) {
    s.codec = CodecSummary{ran,
                           r.codec.entropy_bits_per_code,
                           r.codec.payload_bits_per_code,
                           static_cast<double>(r.codec.payload_bytes),
                           static_cast<double>(r.codec.metadata_bytes),
                           static_cast<double>(r.codec.codebook_bytes)};
    set.codec_ratios.ran = ran;
  }

  set.bytes.fp16_bytes = static_cast<double>(r.fp16_bytes);
  set.bytes.total_bytes = static_cast<double>(r.bytes.total());
  for (const auto& l : r.layers) {
    add_into(set.bytes.key_bytes, l.key_bytes);
    add_into(set.bytes.value_bytes, l.value_bytes);

    set.layers.layer.push_back(l.layer);
    set.layers.attn_output_rel_error.push_back(l.error.attn_output_rel_error);
    set.layers.mse.push_back(l.error.mse);
    set.layers.ratio.push_back(l.ratio);

    set.histograms.push_back(
        {l.layer, histograms(l.key_histograms), histograms(l.value_histograms)});

    if (any_codec) {
      set.code_lengths.push_back(
          {l.layer,
           code_lengths(l.key_histograms, l.key_code_lengths, l.key_code_bits, l.key_code_pairs),
           code_lengths(l.value_histograms, l.value_code_lengths, l.value_code_bits,
                        l.value_code_pairs)});
      CodecRatioData& c = set.codec_ratios;
      c.layer.push_back(l.layer);
      for (int k = 0; k < kCodecCount; ++k) {
        c.ratio[k].push_back(codec_ran(l) ? layer_ratio_with_codec(l, static_cast<CodecKind>(k))
                                          : 0.0);
      }
      c.entropy_ratio.push_back(codec_ran(l) ? layer_ratio_at_entropy(l) : 0.0);
    }
  }
  // A report without layers (never from the engine, but possible in a hand-edited record) still
  // shows its totals, counted as key bytes.
  if (r.layers.empty()) add_into(set.bytes.key_bytes, r.bytes);
  return set;
}

StreamSeriesData stream_series_from_report(const StreamReport& r) {
  StreamSeriesData d;
  const StreamConfig& c = r.config;
  d.note = QStringLiteral("%1, prefill %2 tokens, block %3, buffer %4, %5 layer%6")
               .arg(QString::fromLatin1(codec_id(c.codec).data(),
                                        static_cast<int>(codec_id(c.codec).size())))
               .arg(c.prefill_tokens)
               .arg(c.block_size)
               .arg(c.buffer_size)
               .arg(r.layers)
               .arg(r.layers == 1 ? QString() : QStringLiteral("s"));
  for (const StreamPoint& p : r.points) {
    const CacheMemory& m = p.memory;
    d.step.push_back(p.step);
    d.tokens.push_back(p.tokens);
    d.compressed.push_back(
        static_cast<double>(m.payload + m.metadata + m.codebooks + m.quant_params));
    d.buffer.push_back(static_cast<double>(m.buffer));
    d.fp16.push_back(static_cast<double>(p.fp16_bytes));
  }
  return d;
}

}  // namespace kvlab::gui
