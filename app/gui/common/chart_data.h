// Plain value structs the charts and panels draw from. The charts never call the engine: the
// Compression view turns a CompressionReport (fresh or reloaded from the runs store) into these
// with chart_set_from_report() and hands each widget its part.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include <QString>
#include <QStringList>

#include "kvlab/engine/codec/code_codec.h"

namespace kvlab::gui {

// The five byte components every quantizer accounts for, in this order.
inline constexpr int kByteComponentCount = 5;
const std::array<QString, kByteComponentCount>& byte_component_names();

// Compressed bytes by component, keys and values apart (summed over layers).
struct ByteBarsData {
  std::array<double, kByteComponentCount> key_bytes{};
  std::array<double, kByteComponentCount> value_bytes{};
  double fp16_bytes = 0;  // the baseline, for the title
  double total_bytes = 0;
};

// One point per layer.
struct LayerSeriesData {
  std::vector<double> layer;
  std::vector<double> attn_output_rel_error;
  std::vector<double> mse;
  std::vector<double> ratio;
};

// Counts of each quantized code in one group of codes of equal width.
struct HistogramData {
  QString label;
  int bits = 0;
  std::vector<std::uint64_t> counts;
};

struct LayerHistograms {
  int layer = 0;
  std::vector<HistogramData> key;
  std::vector<HistogramData> value;
};

// What entropy coding of the byte codes did, K and V together (present only when a codec ran).
struct CodecSummary {
  QString codec;  // "bitpack", "varwidth" or "huffman"
  double entropy_bits_per_code = 0;
  double payload_bits_per_code = 0;
  double payload_bytes = 0;
  double metadata_bytes = 0;  // block offsets, vector bit counts, codec header
  double codebook_bytes = 0;
};

// One K or V tensor's Huffman code: how often each uint8 code value occurs (256 counts) and the
// code length of each symbol (257: the 256 values, then the escape; 0 = no code of its own).
struct CodeLengthData {
  std::vector<std::uint64_t> counts;
  std::vector<int> lengths;  // the codebook's 257 symbol lengths (escape last)
  // Mean bits a code of each value took (LayerReport::key_code_bits); empty for runs saved
  // before it was recorded, where a symbol's length is a code's.
  std::vector<double> bits;
  bool pairs = false;  // the book's symbols are pairs of codes
};

struct LayerCodeLengths {
  int layer = 0;
  CodeLengthData key, value;
};

// Every codec, in CodecKind order.
inline constexpr int kCodecCount = static_cast<int>(kCodecKinds.size());
const std::array<QString, kCodecCount>& codec_names();  // "bitpack", "varwidth", "huffman", "rans"

// Per layer: the compression ratio had the codes been coded with each codec, and with codes at
// their order-0 entropy bound.
struct CodecRatioData {
  QString ran;  // the codec the run used
  std::vector<double> layer;
  std::array<std::vector<double>, kCodecCount> ratio;
  std::vector<double> entropy_ratio;
};

// The numbers of the results panel, already computed.
struct ReportSummary {
  QString source;
  QString method_label;
  int tokens = 0;
  int layers = 0;
  double ratio = 0;
  double bits_per_value = 0;
  double mse = 0, max_abs = 0, snr_db = 0;
  double logit_rmse = 0, softmax_kl = 0, attn_output_rel_error = 0, attn_output_cosine = 1;
  double total_seconds = 0;
  // Where it ran, "cpu: <CPU model>" or "cuda: <GPU name>"; empty for runs saved before backends.
  QString backend;
  // Where each stage ran and its seconds (stage_summary()); empty for runs saved before stages.
  QString stages;
  // The most memory the process held while compressing; 0 for runs saved before it was measured.
  double peak_memory_bytes = 0;
  // The most GPU memory a device backend's run held; 0 when the layers ran on the CPU.
  double device_peak_memory_bytes = 0;
  // The memory formula with the run's numbers: in fp16, and at the measured bits/value.
  QString fp16_formula;
  QString measured_formula;
  std::optional<CodecSummary> codec;  // empty when no codec ran
};

// Memory of the streaming compressed cache over decode steps, summed over the simulated layers,
// in bytes: one entry per recorded step.
struct StreamSeriesData {
  QString note;  // "huffman, prefill 512, block 64, buffer 128, 32 layers"
  std::vector<double> step;
  std::vector<double> tokens;
  std::vector<double> compressed;  // payload + metadata + codebooks + quantization parameters
  std::vector<double> buffer;      // the fp16 buffer
  std::vector<double> fp16;        // the same tokens uncompressed: the reference line
};

struct ChartSet {
  ReportSummary summary;
  ByteBarsData bytes;
  LayerSeriesData layers;
  std::vector<LayerHistograms> histograms;
  // Both empty when no codec ran.
  std::vector<LayerCodeLengths> code_lengths;
  CodecRatioData codec_ratios;
};

}  // namespace kvlab::gui
