#include "kvlab/engine/quant/compress.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <fmt/format.h>
#include <tbb/enumerable_thread_specific.h>

#include "kvlab/engine/core/aligned.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/core/process_memory.h"
#include "kvlab/engine/core/rope.h"
#include "kvlab/engine/core/threads.h"

namespace kvlab {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A NaN or infinity would poison every statistic downstream: the error names where it is. The
// check reads the stored bits, without converting them: in fp16, bf16 and float alike a value is
// not finite exactly when its bits without the sign reach those of infinity. Each slice's largest
// is a loop the compiler vectorises; only a slice that holds one is searched.
template <class Bits>
Status find_not_finite(const Tensor& t, Bits infinity, const std::string& name) {
  const auto* bits = reinterpret_cast<const Bits*>(t.data());
  const std::size_t n = t.elements();
  constexpr Bits magnitude = std::numeric_limits<Bits>::max() >> 1;  // all but the sign
  constexpr std::size_t kSlice = std::size_t{1} << 16;
  for (std::size_t at = 0; at < n; at += kSlice) {
    const std::size_t end = std::min(n, at + kSlice);
    Bits largest = 0;
    for (std::size_t i = at; i < end; ++i) {
      largest = std::max(largest, static_cast<Bits>(bits[i] & magnitude));
    }
    if (largest < infinity) continue;
    for (std::size_t i = at; i < end; ++i) {
      if (static_cast<Bits>(bits[i] & magnitude) < infinity) continue;
      const std::size_t row = i / t.dim();
      const int token = static_cast<int>(row / t.heads()), head = static_cast<int>(row % t.heads());
      const int channel = static_cast<int>(i % t.dim());
      return make_error(fmt::format("{} holds {} at token {}, head {}, channel {}", name,
                                    t.at(token, head, channel), token, head, channel));
    }
  }
  return Ok{};
}

Status check_finite(const Tensor& t, const std::string& name) {
  switch (t.dtype()) {
    case DType::F16:
      return find_not_finite<std::uint16_t>(t, 0x7c00, name);
    case DType::BF16:
      return find_not_finite<std::uint16_t>(t, 0x7f80, name);
    case DType::F32:
      return find_not_finite<std::uint32_t>(t, 0x7f800000u, name);
  }
  return Ok{};
}

// Entropy-codes a KVComp tensor's byte codes with a codebook built from its own histogram (the
// prefill), then decodes them back into `q.codes`, so the reconstruction is computed from what
// the codec stored. Counts the payload as codes and the offsets, bit counts and codebook as
// metadata. The chosen codec runs on `backend`; the three others are sized on the CPU without
// writing their streams (encoded_bytes(): the bytes encode_codes would give), for the
// side-by-side comparison. Before each, and before decoding, it stops if `progress` was
// cancelled (at `part` of the item). The book is chosen as the streaming cache chooses it
// (choose_codebook), with pair symbols only where the backend's kernels read them.
Result<CodecStats> entropy_code(QuantizedTensor& q, const MethodConfig& config, Backend& backend,
                                const std::string& name, LayerReport& layer, bool key,
                                ItemProgress& progress, double part) {
  CodecStats stats;
  // The quantizer's histogram of its byte codes (KVComp's one "uint8" histogram), already in
  // the report: the codes are counted once, for it and for everything below.
  const std::vector<CodeHistogram>& histograms =
      key ? layer.key_histograms : layer.value_histograms;
  CodeCounts counts{};
  if (histograms.size() != 1 || histograms[0].counts.size() != counts.size()) {
    return make_error(
        fmt::format("{}: entropy coding needs one histogram of 256 byte codes", name));
  }
  std::copy(histograms[0].counts.begin(), histograms[0].counts.end(), counts.begin());
  stats.codes = q.codes.size();
  stats.entropy_bits_per_code = shannon_entropy_bits(counts);
  stats.entropy_bound_bytes = static_cast<std::uint64_t>(
      std::ceil(stats.entropy_bits_per_code * static_cast<double>(stats.codes) / 8.0));
  // With its rANS table: every run sizes all four codecs.
  auto book = choose_codebook(q.codes, q.dim,
                              backend.huffman_pairs() ? kvcomp_max_code(config.rel_scale) : 255,
                              counts, true);
  if (!book) return make_error(fmt::format("{}: codebook: {}", name, book.message()));
  (key ? layer.key_code_lengths : layer.value_code_lengths)
      .assign(book->lengths().begin(), book->lengths().end());
  (key ? layer.key_code_pairs : layer.value_code_pairs) = book->pairs();
  const std::array<double, 256> bits = mean_code_bits(q.codes, q.dim, *book, counts);
  (key ? layer.key_code_bits : layer.value_code_bits).assign(bits.begin(), bits.end());
  std::optional<EncodedCodes> chosen;
  for (CodecKind kind : kCodecKinds) {
    KVLAB_TRY(progress.keep_going(part));
    const CodecConfig codec{kind, config.block_size, 0};
    const std::uint64_t book_bytes = codebook_bytes(kind);
    Result<std::uint64_t> size = std::uint64_t{0};
    if (kind == *config.codec) {
      auto encoded = backend.encode_codes(q.codes, q.tokens, q.heads, q.dim, codec, &*book);
      if (encoded) {
        stats.codebook_bytes = book_bytes;
        size = encoded->total_bytes();
        chosen = std::move(*encoded);
      } else {
        size = encoded.error();
      }
    } else {
      size = encoded_bytes(q.codes, q.tokens, q.heads, q.dim, codec, &*book);
    }
    if (!size) {
      return make_error(fmt::format("{}: {} encoding: {}", name, codec_id(kind), size.message()));
    }
    stats.codec_bytes[static_cast<std::size_t>(kind)] = *size + book_bytes;
  }
  KVLAB_TRY(progress.keep_going(part));
  if (auto s = decode_codes(*chosen, &*book, q.codes); !s) {
    return make_error(fmt::format("{}: decoding: {}", name, s.message()));
  }
  stats.payload_bytes = chosen->payload_bytes();
  stats.metadata_bytes = chosen->metadata_bytes();
  stats.payload_bits_per_code =
      stats.codes ? 8.0 * static_cast<double>(stats.payload_bytes) / stats.codes : 0.0;
  q.bytes.codes = stats.payload_bytes;
  q.bytes.metadata += stats.metadata_bytes + stats.codebook_bytes;
  return stats;
}

void fill_element(ErrorMetrics& m, const ElementErrorSums& s) {
  m.mse = s.mse();
  m.max_abs = s.max_abs;
  m.snr_db = s.snr_db();
}

void fill_attention(ErrorMetrics& m, const AttentionErrorSums& a) {
  m.logit_rmse = a.logit_rmse();
  m.softmax_kl = a.softmax_kl();
  m.attn_output_rel_error = a.output_rel_error();
  m.attn_output_cosine = a.output_cosine();
}

// A thread's working memory, kept from layer to layer of one run. A layer's reconstructions are
// made a tile of tokens at a time, into buffers that stay in the core's cache, and read there by
// the element and attention errors at once, beside the same tile of the originals converted to
// floats: no layer-sized float buffer is written. Quantizers that reconstruct only whole
// tensors fill `whole` instead (134 MB each at 32K context; kept, as fresh ones would be
// zero-filled and page-faulted in again for every layer; huge pages make the first touch and the
// freeing at the end quicker).
struct LayerBuffers {
  std::array<AlignedFloats, 2> tiles;      // one tile of the reconstructions of K and V
  std::array<AlignedFloats, 2> originals;  // and of K and V as floats
  std::array<HugePageFloats, 2> whole;
};

// Tokens per tile: about 256 KiB of floats a tensor, so the four tiles of K, V and their
// reconstructions stay in a core's L2; whole multiples of kRopeAnchor, so keys turned a tile at a
// time are bit for bit those of one pass.
int tile_tokens(std::size_t row_floats) {
  const std::size_t rows = (std::size_t{64} << 10) / std::max<std::size_t>(1, row_floats);
  return static_cast<int>(std::max<std::size_t>(1, rows / kRopeAnchor)) * kRopeAnchor;
}

// Sizes a whole-tensor buffer to n floats. New memory is touched a slice at a time with a cancel
// check between: the kernel's first touch of fresh pages (zeroing them, at times compacting
// memory for huge pages) makes a thread's first layer at long context its slowest, and a cancel
// must not wait for it.
Status size_buffer(HugePageFloats& buffer, std::size_t n, ItemProgress& progress) {
  if (buffer.capacity() < n) {
    buffer = HugePageFloats();
    buffer.reserve(n);
    constexpr std::size_t kSlice = std::size_t{4} << 20;  // floats: 16 MiB
    for (std::size_t at = 0; at < n; at += kSlice) {
      KVLAB_TRY(progress.keep_going(0));
      std::memset(buffer.data() + at, 0, std::min(kSlice, n - at) * sizeof(float));
    }
  }
  buffer.resize(n);  // no zero-fill (HugePageAllocator)
  return Ok{};
}

Status compress_layer(const KvCache& cache, int l, const MethodConfig& config,
                      const Quantizer& quantizer, Backend& backend, ItemProgress& progress,
                      LayerBuffers& buffers, LayerOutcome& out) {
  const LayerKv& lkv = cache.layers[static_cast<std::size_t>(l)];
  LayerReport& lr = out.report;
  lr.layer = l;
  const Tensor* tensors[2] = {&lkv.key, &lkv.value};
  std::array<QuantizedTensor, 2> quantized;
  // Quantized, counted and coded: K in the first quarter of the layer's progress, V in the second.
  for (int r = 0; r < 2; ++r) {
    const double part = 0.25 * r;
    KVLAB_TRY(progress.keep_going(part));
    const TensorRole role = r == 0 ? TensorRole::Key : TensorRole::Value;
    const std::string name = fmt::format("{}: layers.{}.{}", cache.source, l, role_name(role));
    auto t0 = Clock::now();
    KVLAB_TRY(check_finite(*tensors[r], name));
    KVLAB_TRY(progress.keep_going(part + 0.02));
    Result<QuantizedTensor> q = [&] {
      // A slow quantizer (KVQuant's calibration at long context) moves the bar and sees a
      // cancel from inside (inner_progress).
      const InnerProgressScope inner(progress, part + 0.02, part + 0.2);
      return quantizer.quantize(tensors[r]->view(), role);
    }();
    if (!q) {
      if (q.message() == kCancelledMessage) return q.error();
      return make_error(fmt::format("{}: {}", name, q.message()));
    }
    out.quantize += seconds_since(t0);
    KVLAB_TRY(progress.keep_going(part + 0.2));
    t0 = Clock::now();
    (r == 0 ? lr.key_histograms : lr.value_histograms) = quantizer.histograms(*q);
    out.metrics += seconds_since(t0);
    if (config.codec) {
      t0 = Clock::now();
      auto stats = entropy_code(*q, config, backend, name, lr, r == 0, progress, part + 0.21);
      if (!stats) return stats.error();
      (r == 0 ? lr.key_codec : lr.value_codec) = *stats;
      out.codec += *stats;
      out.code += seconds_since(t0);
    }
    (r == 0 ? lr.key_bytes : lr.value_bytes) = q->bytes;
    quantized[static_cast<std::size_t>(r)] = std::move(*q);
  }

  // Reconstructed a tile at a time (an empty range asks the quantizer whether it can), or whole.
  const int tokens = lkv.key.tokens();
  const std::size_t hd = static_cast<std::size_t>(lkv.key.heads()) * lkv.key.dim();
  const int tile = tile_tokens(hd);
  std::array<bool, 2> by_tile{};
  for (std::size_t r = 0; r < 2; ++r) {
    KVLAB_TRY(progress.keep_going(0.5));
    buffers.originals[r].resize(static_cast<std::size_t>(tile) * hd);
    by_tile[r] = quantizer.dequantize_tokens(quantized[r], 0, 0, {});
    if (by_tile[r]) {
      buffers.tiles[r].resize(static_cast<std::size_t>(tile) * hd);
    } else {
      KVLAB_TRY(size_buffer(buffers.whole[r], lkv.key.elements(), progress));
      const auto t0 = Clock::now();
      quantizer.dequantize(quantized[r], buffers.whole[r]);
      out.dequantize += seconds_since(t0);
    }
  }
  std::optional<AttentionErrorAccumulator> attention;
  std::vector<float> queries;
  if (cache.has_queries()) {
    queries = lkv.query.view().to_float();
    attention.emplace(
        queries, AttentionShape{cache.shape.q_heads, cache.shape.kv_heads, cache.shape.head_dim});
  }
  // Each tile's errors as it is reconstructed, while it is in the cache: element-wise, then the
  // attention of the queries over it.
  ElementErrorSums elem[2];
  for (int first = 0; first < tokens; first += tile) {
    KVLAB_TRY(progress.keep_going(0.5 + 0.49 * first / tokens));
    const int last = std::min(tokens, first + tile);
    const std::size_t at = static_cast<std::size_t>(first) * hd;
    const std::size_t n = static_cast<std::size_t>(last - first) * hd;
    std::array<std::span<float>, 2> hats;
    auto t0 = Clock::now();
    for (std::size_t r = 0; r < 2; ++r) {
      if (by_tile[r]) {
        hats[r] = std::span<float>(buffers.tiles[r]).first(n);
        quantizer.dequantize_tokens(quantized[r], first, last, hats[r]);
      } else {
        hats[r] = std::span<float>(buffers.whole[r]).subspan(at, n);
      }
    }
    out.dequantize += seconds_since(t0);
    t0 = Clock::now();
    // The originals' tile in float once, for both measures.
    std::array<std::span<float>, 2> originals;
    for (std::size_t r = 0; r < 2; ++r) {
      originals[r] = std::span<float>(buffers.originals[r]).first(n);
      tensors[r]->view().token_range(first, last).to_float(originals[r]);
      elem[r].add(originals[r], hats[r]);
    }
    if (attention) {
      if (cache.keys_pre_rope) {  // the queries are post-RoPE: turn the keys to meet them
        for (std::span<float> k : {originals[0], hats[0]}) {
          apply_rope_rows(k.data(), first, last, cache.shape.kv_heads, cache.shape.head_dim,
                          cache.key_rope);
        }
      }
      const int heads = cache.shape.kv_heads, dim = cache.shape.head_dim;
      attention->add(TensorView::of_floats(originals[0], heads, dim),
                     TensorView::of_floats(originals[1], heads, dim), hats[0], hats[1]);
    }
    out.metrics += seconds_since(t0);
  }
  KVLAB_TRY(progress.keep_going(0.99));
  const auto t0 = Clock::now();
  if (attention) out.attention = attention->sums();
  finish_layer(out, elem[0], elem[1], attention.has_value(),
               lkv.key.elements() + lkv.value.elements());
  out.metrics += seconds_since(t0);
  // Read through: a source mapped from its file gives its pages back, so a run holds the layers
  // in flight, not the whole cache (the next run reads them from the page cache again).
  for (const Tensor* t : {&lkv.key, &lkv.value, &lkv.query}) t->release_pages();
  return Ok{};
}

}  // namespace

Status check_tensor_finite(const Tensor& t, const std::string& name) {
  return check_finite(t, name);
}

void finish_layer(LayerOutcome& out, const ElementErrorSums& key, const ElementErrorSums& value,
                  bool has_queries, std::uint64_t layer_values) {
  LayerReport& lr = out.report;
  fill_element(lr.key_error, key);
  fill_element(lr.value_error, value);
  out.element = key;
  out.element += value;
  fill_element(lr.error, out.element);
  if (has_queries) fill_attention(lr.error, out.attention);
  out.bytes = lr.key_bytes;
  out.bytes += lr.value_bytes;
  lr.ratio = out.bytes.total() ? 2.0 * layer_values / out.bytes.total() : 0.0;
  lr.bits_per_value = layer_values ? 8.0 * out.bytes.total() / layer_values : 0.0;
}

Result<CompressionReport> compress_cache(const KvCache& cache, const MethodConfig& requested,
                                         const ProgressFn& progress, Backend* backend) {
  const auto start = Clock::now();
  reset_peak_resident();
  const std::uint64_t memory_start = process_memory().resident_bytes;
  KVLAB_TRY(cache.validate());
  const MethodConfig config = method_for_cache(requested, cache);
  auto quantizer = make_quantizer(config);
  if (!quantizer) return quantizer.error();
  std::unique_ptr<Backend> cpu;
  if (backend == nullptr) {
    cpu = make_cpu_backend();
    backend = cpu.get();
  }

  CompressionReport report;
  report.source = cache.source;
  report.method = std::string(method_id(config.kind));
  report.method_label = method_label(config);
  report.config = config;
  report.shape = cache.shape;
  report.tokens = cache.tokens();
  report.values = cache.values_count();
  report.fp16_bytes = report.values * 2;
  report.backend = backend->id();
  report.device = backend->device_name();

  const int layers = static_cast<int>(cache.layers.size());
  std::vector<LayerOutcome> outcomes(static_cast<std::size_t>(layers));
  const bool on_device = backend->runs_layers(config, cache);
  for (Stage stage : kStages) {
    if (stage == Stage::Code && !config.codec) continue;
    report.stage_backends[static_cast<std::size_t>(stage)] =
        on_device && backend->has_stage(stage, config, cache) ? backend->id() : "cpu";
    // A device backend that leaves the run to the CPU: the first stage it lacks, and why.
    if (!on_device && backend->id() != "cpu" && report.backend_fallback.empty()) {
      if (std::string gap = backend->stage_gap(stage, config, cache); !gap.empty()) {
        report.backend_fallback = fmt::format("{}: {}: {}", backend->id(), stage_id(stage), gap);
      }
    }
  }
  if (on_device) {
    report.threads = 1;
    KVLAB_TRY(backend->run_layers(LayerRunRequest{cache, config, **quantizer, progress}, outcomes));
    report.device_memory_peak_bytes = backend->last_run_device_bytes();
  } else {
    // Every stage on the CPU, on all its threads: a device backend that cannot take the layers
    // (its kernels lack this method) leaves the whole run to the CPU rather than one stage of
    // each layer to a device with the rest pinned to one thread.
    if (backend->id() != "cpu") {
      cpu = make_cpu_backend();
      backend = cpu.get();
    }
    report.threads = std::min(worker_threads(), std::max(1, layers));
    // Each layer frees codes and streams of the lengths the next asks for: kept, not faulted in
    // and zeroed again (about 2 GiB at 32K context); given back when the run ends.
    const detail::KeepFreedBuffers keep_freed;
    tbb::enumerable_thread_specific<LayerBuffers> buffers;  // freed when the run ends
    KVLAB_TRY(for_each_item(layers, progress, "layer", [&](int l, ItemProgress& p) {
      return compress_layer(cache, l, config, **quantizer, *backend, p, buffers.local(),
                            outcomes[static_cast<std::size_t>(l)]);
    }));
  }

  ElementErrorSums total_elem;
  AttentionErrorSums total_attn;
  for (LayerOutcome& o : outcomes) {  // in layer order: the same sums on any number of threads
    report.codec += o.codec;
    report.bytes += o.bytes;
    total_elem += o.element;
    total_attn += o.attention;
    report.quantize_seconds += o.quantize;
    report.code_seconds += o.code;
    report.dequantize_seconds += o.dequantize;
    report.metrics_seconds += o.metrics;
    report.layers.push_back(std::move(o.report));
  }
  fill_element(report.error, total_elem);
  if (cache.has_queries()) fill_attention(report.error, total_attn);
  report.ratio =
      report.bytes.total() ? static_cast<double>(report.fp16_bytes) / report.bytes.total() : 0.0;
  report.bits_per_value = report.values ? 8.0 * report.bytes.total() / report.values : 0.0;
  report.memory_start_bytes = memory_start;
  report.memory_peak_bytes = std::max(memory_start, process_memory().peak_resident_bytes);
  report.total_seconds = seconds_since(start);
  report.wall_seconds = report.total_seconds;
  report_progress(progress, 1.0, "done");
  return report;
}

std::string stage_summary(const CompressionReport& r) {
  const std::array<double, 4> seconds{r.quantize_seconds, r.code_seconds, r.dequantize_seconds,
                                      r.metrics_seconds};
  std::string out;
  for (Stage stage : kStages) {
    const auto i = static_cast<std::size_t>(stage);
    if (r.stage_backends[i].empty()) continue;
    if (!out.empty()) out += ", ";
    out += fmt::format("{}: {} {:.2f} s", stage_id(stage), r.stage_backends[i], seconds[i]);
  }
  if (!r.backend_fallback.empty()) out += fmt::format(" (not on {})", r.backend_fallback);
  return out;
}

Result<MethodConfig> run_bench_method(std::string_view id) {
  MethodConfig m;
  if (id == "int8") {
    m.kind = MethodKind::Int8;
  } else if (id == "int4") {
    m.kind = MethodKind::Int4;
  } else if (id == "kivi-2" || id == "kivi-4") {
    m.kind = MethodKind::Kivi;
    m.bits = id == "kivi-2" ? 2 : 4;
  } else if (id == "kvcomp-huffman" || id == "kvcomp-bitpack") {
    m.kind = MethodKind::KvComp;
    m.codec = id == "kvcomp-huffman" ? CodecKind::Huffman : CodecKind::BitPack;
  } else if (id == "fp8-e4m3") {
    m.kind = MethodKind::Fp8E4M3;
  } else if (id == "q4_0") {
    m.kind = MethodKind::Q4_0;
  } else if (id == "nvfp4") {
    m.kind = MethodKind::Nvfp4;
  } else {
    return make_error(
        fmt::format("unknown method '{}' (expected int8, int4, kivi-2, kivi-4, fp8-e4m3, q4_0, "
                    "nvfp4, kvcomp-huffman or kvcomp-bitpack)",
                    id));
  }
  return m;
}

double memory_floor_seconds(const KvCache& cache, std::uint64_t write_bytes) {
  std::vector<const Tensor*> tensors;
  for (const LayerKv& l : cache.layers) tensors.insert(tensors.end(), {&l.key, &l.value});
  const std::uint64_t source_bytes = cache.stored_bytes();
  const double share =
      source_bytes ? static_cast<double>(write_bytes) / static_cast<double>(source_bytes) : 0.0;
  std::vector<std::uint64_t> sums(tensors.size());
  const auto start = Clock::now();
  const Status s = for_each_item(
      static_cast<int>(tensors.size()), {}, "tensor", [&](int i, ItemProgress&) -> Status {
        const Tensor& t = *tensors[static_cast<std::size_t>(i)];
        std::uint64_t sum = 0;
        for (std::size_t at = 0; at + 8 <= t.nbytes(); at += 8) {
          std::uint64_t word;
          std::memcpy(&word, t.data() + at, 8);
          sum += word;
        }
        sums[static_cast<std::size_t>(i)] = sum;  // kept: the reads cannot be optimised away
        const auto out_bytes = static_cast<std::size_t>(static_cast<double>(t.nbytes()) * share);
        // Allocated as a run's buffers are; every float of it written (never less than one).
        HugePageFloats out(
            std::max<std::size_t>(1, (out_bytes + sizeof(float) - 1) / sizeof(float)));
        std::memset(out.data(), 1, out.size() * sizeof(float));
        // The written bytes are read back in one word, or the stores could be dropped.
        sums[static_cast<std::size_t>(i)] += static_cast<std::uint64_t>(out[out.size() / 2]);
        t.release_pages();
        return Ok{};
      });
  (void)s;  // no callback, nothing fails
  const double seconds = seconds_since(start);
  volatile std::uint64_t total = 0;
  for (std::uint64_t v : sums) total = total + v;
  return seconds;
}

CodecStats& CodecStats::operator+=(const CodecStats& o) {
  const std::uint64_t n = codes + o.codes;
  if (n > 0) {
    entropy_bits_per_code = (entropy_bits_per_code * static_cast<double>(codes) +
                             o.entropy_bits_per_code * static_cast<double>(o.codes)) /
                            static_cast<double>(n);
  }
  codes = n;
  payload_bytes += o.payload_bytes;
  metadata_bytes += o.metadata_bytes;
  codebook_bytes += o.codebook_bytes;
  payload_bits_per_code = n ? 8.0 * static_cast<double>(payload_bytes) / n : 0.0;
  for (std::size_t i = 0; i < codec_bytes.size(); ++i) codec_bytes[i] += o.codec_bytes[i];
  entropy_bound_bytes += o.entropy_bound_bytes;
  return *this;
}

namespace {

// fp16 bytes over the layer's bytes with its coded codes (payload, metadata and codebook of the
// codec that ran) swapped for `coded` bytes.
double layer_ratio_with_coded_bytes(const LayerReport& l, std::uint64_t coded) {
  if (l.key_codec.codes + l.value_codec.codes == 0) return 0.0;
  ByteBreakdown b = l.key_bytes;
  b += l.value_bytes;
  const std::uint64_t ran = l.key_codec.payload_bytes + l.key_codec.metadata_bytes +
                            l.key_codec.codebook_bytes + l.value_codec.payload_bytes +
                            l.value_codec.metadata_bytes + l.value_codec.codebook_bytes;
  const double bytes = static_cast<double>(b.total() - ran + coded);
  return bytes > 0 ? 2.0 * static_cast<double>(l.key_codec.codes + l.value_codec.codes) / bytes
                   : 0.0;
}

}  // namespace

double layer_ratio_with_codec(const LayerReport& l, CodecKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return layer_ratio_with_coded_bytes(l, l.key_codec.codec_bytes[i] + l.value_codec.codec_bytes[i]);
}

double layer_ratio_at_entropy(const LayerReport& l) {
  return layer_ratio_with_coded_bytes(
      l, l.key_codec.entropy_bound_bytes + l.value_codec.entropy_bound_bytes);
}

ByteBreakdown& ByteBreakdown::operator+=(const ByteBreakdown& o) {
  codes += o.codes;
  scales += o.scales;
  zero_points += o.zero_points;
  residual += o.residual;
  metadata += o.metadata;
  return *this;
}

}  // namespace kvlab
