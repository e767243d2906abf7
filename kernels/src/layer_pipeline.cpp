// The GPU's whole-run pipeline (layer_pipeline.h).
#include "layer_pipeline.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "code_encode.cuh"
#include "device_quantizer.cuh"
#include "kvlab/engine/codec/huffman_book.h"
#include "kvlab/engine/core/threads.h"
#include "run_metrics.cuh"
#include "varwidth_size.cuh"

namespace kvlab::cuda {

namespace {

// ---- RAII handles --------------------------------------------------------------------------

struct StreamHandle {
  cudaStream_t s = nullptr;
  StreamHandle() = default;
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  ~StreamHandle() {
    if (s) cudaStreamDestroy(s);
  }
  Status create() {
    KVLAB_CUDA_TRY(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "GPU run: a stream");
    return Ok{};
  }
};

struct EventHandle {
  cudaEvent_t e = nullptr;
  EventHandle() = default;
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  ~EventHandle() {
    if (e) cudaEventDestroy(e);
  }
  Status create(bool timing) {
    KVLAB_CUDA_TRY(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
                   "GPU run: an event");
    return Ok{};
  }
};

struct PinnedBytes {
  std::byte* p = nullptr;
  std::size_t n = 0;
  PinnedBytes() = default;
  PinnedBytes(const PinnedBytes&) = delete;
  PinnedBytes& operator=(const PinnedBytes&) = delete;
  ~PinnedBytes() {
    if (p) cudaFreeHost(p);
  }
  Status allocate(std::size_t bytes) {
    if (bytes <= n) return Ok{};
    if (p) cudaFreeHost(p);
    p = nullptr;
    n = 0;
    void* q = nullptr;
    KVLAB_CUDA_TRY(cudaMallocHost(&q, std::max<std::size_t>(bytes, 1)), "GPU run: pinned buffer");
    p = static_cast<std::byte*>(q);
    n = bytes;
    return Ok{};
  }
};

// A stage's device time: events around its launches, summed once the layer is done.
struct StageTimer {
  EventHandle start, stop;
  bool used = false;
  Status create() {
    KVLAB_TRY(start.create(true));
    return stop.create(true);
  }
  void begin(cudaStream_t s) {
    cudaEventRecord(start.e, s);
    used = true;
  }
  void end(cudaStream_t s) { cudaEventRecord(stop.e, s); }
  double take_seconds() {
    if (!used) return 0;
    used = false;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, start.e, stop.e) != cudaSuccess) return 0;
    return ms / 1000.0;
  }
};

// One layer as stored (K, V, queries), on the host (pinned) and on the device.
struct Slot {
  PinnedBytes host;
  DeviceArray<std::byte> device;
  EventHandle uploaded, released;
  std::size_t k_bytes = 0, v_bytes = 0, q_bytes = 0;
};

constexpr std::size_t kCopyChunk = std::size_t{4} << 20;

const Tensor& tensor_of(const LayerKv& l, int which) {
  return which == 0 ? l.key : which == 1 ? l.value : l.query;
}

class Pipeline {
 public:
  Pipeline(const LayerRunRequest& r, std::span<LayerOutcome> outcomes)
      : m_req(r), m_cache(r.cache), m_config(r.config), m_out(outcomes) {}
  // However the run ends (done, cancelled, failed): nothing in flight reads or writes a buffer
  // when the members free it.
  ~Pipeline() {
    if (m_copy.s) cudaStreamSynchronize(m_copy.s);
    if (m_compute.s) cudaStreamSynchronize(m_compute.s);
    if (m_host_sums) cudaFreeHost(m_host_sums);
  }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  Status run(std::uint64_t& peak);

 private:
  Status setup();
  Status stage(int l);
  Status launch(int l);
  Status finish(int l);
  Status code_tensor(int which, int l, LayerReport& lr, ByteBreakdown& bytes, CodecStats& stats);
  DeviceTensor device_tensor(int l, int which) const;
  // "SOURCE: layers.L.key" (which 0) or ".value", as the CPU's run names a tensor in its errors.
  std::string tensor_name(int l, int which) const;
  void note_memory();

  const LayerRunRequest& m_req;
  const KvCache& m_cache;
  const MethodConfig& m_config;
  std::span<LayerOutcome> m_out;

  StreamHandle m_compute, m_copy;
  std::array<Slot, 2> m_slots;
  std::array<std::unique_ptr<DeviceQuantizer>, 2> m_quantizers;
  std::array<DeviceArray<float>, 2> m_recon;
  DeviceArray<DeviceLayerSums> m_sums;
  DeviceLayerSums* m_host_sums = nullptr;  // pinned
  AttentionScratch m_attention;
  DeviceArray<unsigned long long> m_varwidth;
  GpuBook m_book;
  GpuCodes m_encoded;
  EncodeScratch m_encode_scratch;
  StageTimer m_quantize, m_dequantize, m_metrics, m_code;
  EventHandle m_done;
  std::size_t m_free_at_start = 0, m_least_free = 0;
};

Status Pipeline::setup() {
  KVLAB_TRY(m_compute.create());
  KVLAB_TRY(m_copy.create());
  for (Slot& s : m_slots) {
    KVLAB_TRY(s.uploaded.create(false));
    KVLAB_TRY(s.released.create(false));
  }
  for (StageTimer* t : {&m_quantize, &m_dequantize, &m_metrics, &m_code}) KVLAB_TRY(t->create());
  KVLAB_TRY(m_done.create(false));
  for (auto& q : m_quantizers) {
    auto made = make_device_quantizer(m_config);
    if (!made) return made.error();
    if (!*made) return make_error("GPU run: no GPU quantizer for " + method_label(m_config));
    q = std::move(*made);
  }
  // Each part of a slot as large as the largest layer's (layers may differ in queries), the
  // parts 256-byte aligned (fp16 keys of an odd count would leave float values misaligned).
  const auto aligned = [](std::size_t n) { return (n + 255) / 256 * 256; };
  std::size_t k_bytes = 0, v_bytes = 0, q_bytes = 0, elements = 0;
  for (const LayerKv& l : m_cache.layers) {
    k_bytes = std::max(k_bytes, aligned(l.key.nbytes()));
    v_bytes = std::max(v_bytes, aligned(l.value.nbytes()));
    q_bytes = std::max(q_bytes, l.query.nbytes());
    elements = std::max({elements, l.key.elements(), l.value.elements()});
  }
  for (Slot& s : m_slots) {
    s.k_bytes = k_bytes;
    s.v_bytes = v_bytes;
    s.q_bytes = q_bytes;
    const std::size_t all = s.k_bytes + s.v_bytes + s.q_bytes;
    KVLAB_TRY(s.host.allocate(all));
    KVLAB_TRY_STATUS(s.device.allocate(std::max<std::size_t>(all, 1), "GPU run: a layer's slot"));
  }
  for (auto& r : m_recon) {
    KVLAB_TRY_STATUS(r.allocate(std::max<std::size_t>(elements, 1), "GPU run: reconstructions"));
  }
  KVLAB_TRY_STATUS(m_sums.allocate(1, "GPU run: sums"));
  void* pinned = nullptr;
  KVLAB_CUDA_TRY(cudaMallocHost(&pinned, sizeof(DeviceLayerSums)), "GPU run: pinned sums");
  m_host_sums = static_cast<DeviceLayerSums*>(pinned);
  return Ok{};
}

std::string Pipeline::tensor_name(int l, int which) const {
  return fmt::format("{}: layers.{}.{}", m_cache.source, l, which == 0 ? "key" : "value");
}

void Pipeline::note_memory() {
  std::size_t free = 0, total = 0;
  if (cudaMemGetInfo(&free, &total) == cudaSuccess) m_least_free = std::min(m_least_free, free);
}

DeviceTensor Pipeline::device_tensor(int l, int which) const {
  const Slot& s = m_slots[static_cast<std::size_t>(l % 2)];
  const Tensor& t = tensor_of(m_cache.layers[static_cast<std::size_t>(l)], which);
  const std::size_t at = which == 0 ? 0 : which == 1 ? s.k_bytes : s.k_bytes + s.v_bytes;
  return DeviceTensor{s.device.get() + at, t.dtype(), t.tokens(), t.heads(), t.dim()};
}

// Layer l into its slot: the host copy on the engine's threads once the slot's last layer is
// done with it, then the upload on the copy stream.
Status Pipeline::stage(int l) {
  Slot& s = m_slots[static_cast<std::size_t>(l % 2)];
  KVLAB_CUDA_TRY(cudaEventSynchronize(s.released.e), "GPU run: waiting for a slot");
  const LayerKv& layer = m_cache.layers[static_cast<std::size_t>(l)];
  const std::array<std::size_t, 3> at{0, s.k_bytes, s.k_bytes + s.v_bytes};
  std::array<std::size_t, 3> chunks{};
  for (int w = 0; w < 3; ++w) {
    chunks[static_cast<std::size_t>(w)] =
        (tensor_of(layer, w).nbytes() + kCopyChunk - 1) / kCopyChunk;
  }
  const int items = static_cast<int>(chunks[0] + chunks[1] + chunks[2]);
  KVLAB_TRY(for_each_item(items, {}, "chunk", [&](int i, ItemProgress&) -> Status {
    int w = 0;
    std::size_t c = static_cast<std::size_t>(i);
    while (c >= chunks[static_cast<std::size_t>(w)]) c -= chunks[static_cast<std::size_t>(w++)];
    const Tensor& t = tensor_of(layer, w);
    const std::size_t from = c * kCopyChunk, n = std::min(kCopyChunk, t.nbytes() - from);
    std::memcpy(s.host.p + at[static_cast<std::size_t>(w)] + from, t.data() + from, n);
    return Ok{};
  }));
  for (const Tensor* t : {&layer.key, &layer.value, &layer.query}) t->release_pages();
  for (int w = 0; w < 3; ++w) {
    const std::size_t n = tensor_of(layer, w).nbytes();
    if (n == 0) continue;
    KVLAB_CUDA_TRY(cudaMemcpyAsync(s.device.get() + at[static_cast<std::size_t>(w)],
                                   s.host.p + at[static_cast<std::size_t>(w)], n,
                                   cudaMemcpyHostToDevice, m_copy.s),
                   "GPU run: uploading a layer");
  }
  KVLAB_CUDA_TRY(cudaEventRecord(s.uploaded.e, m_copy.s), "GPU run: uploading a layer");
  return Ok{};
}

// Every stage of layer l that needs no host decision, queued on the compute stream.
Status Pipeline::launch(int l) {
  Slot& s = m_slots[static_cast<std::size_t>(l % 2)];
  cudaStream_t cs = m_compute.s;
  KVLAB_CUDA_TRY(cudaStreamWaitEvent(cs, s.uploaded.e, 0), "GPU run: waiting for an upload");
  KVLAB_CUDA_TRY(cudaMemsetAsync(m_sums.get(), 0, sizeof(DeviceLayerSums), cs), "GPU run: sums");
  const std::array<TensorRole, 2> roles{TensorRole::Key, TensorRole::Value};
  m_quantize.begin(cs);
  for (int w = 0; w < 2; ++w) {
    KVLAB_TRY(m_quantizers[static_cast<std::size_t>(w)]->quantize(
        device_tensor(l, w), roles[static_cast<std::size_t>(w)], cs));
  }
  m_quantize.end(cs);
  m_dequantize.begin(cs);
  for (int w = 0; w < 2; ++w) {
    KVLAB_TRY(m_quantizers[static_cast<std::size_t>(w)]->dequantize(
        m_recon[static_cast<std::size_t>(w)].get(), cs));
  }
  m_dequantize.end(cs);
  m_metrics.begin(cs);
  for (int w = 0; w < 2; ++w) {
    KVLAB_CUDA_TRY(
        launch_element_errors(device_tensor(l, w), m_recon[static_cast<std::size_t>(w)].get(), w,
                              m_sums.get(), cs),
        "GPU run: element errors");
  }
  if (m_cache.has_queries()) {
    const ModelShape& shape = m_cache.shape;
    const AttentionDims dims{m_cache.tokens(),
                             m_cache.layers[static_cast<std::size_t>(l)].query.tokens(),
                             shape.q_heads, shape.kv_heads, shape.head_dim};
    KVLAB_TRY(attention_errors(device_tensor(l, 2), device_tensor(l, 0), device_tensor(l, 1),
                               m_recon[0].get(), m_recon[1].get(), dims, m_attention, m_sums.get(),
                               cs));
  }
  m_metrics.end(cs);
  // The stored layer is read no more: its slot may take the next but one.
  KVLAB_CUDA_TRY(cudaEventRecord(s.released.e, cs), "GPU run: releasing a slot");
  KVLAB_CUDA_TRY(cudaMemcpyAsync(m_host_sums, m_sums.get(), sizeof(DeviceLayerSums),
                                 cudaMemcpyDeviceToHost, cs),
                 "GPU run: reading the sums");
  KVLAB_CUDA_TRY(cudaEventRecord(m_done.e, cs), "GPU run");
  return Ok{};
}

// The entropy coder over tensor `which`'s device codes, as compress.cpp's entropy_code does on
// the CPU: a single-code book from the histogram, the chosen codec encoded on the GPU, the two
// others sized there.
Status Pipeline::code_tensor(int which, int l, LayerReport& lr, ByteBreakdown& bytes,
                             CodecStats& stats) {
  const bool key = which == 0;
  const std::vector<CodeHistogram>& histograms = key ? lr.key_histograms : lr.value_histograms;
  const Tensor& t = tensor_of(m_cache.layers[static_cast<std::size_t>(l)], which);
  const std::string name = tensor_name(l, which);
  CodeCounts counts{};
  if (histograms.size() != 1 || histograms[0].counts.size() != counts.size()) {
    return make_error(name + ": entropy coding needs one histogram of 256 byte codes");
  }
  std::copy(histograms[0].counts.begin(), histograms[0].counts.end(), counts.begin());
  stats.codes = t.elements();
  stats.entropy_bits_per_code = shannon_entropy_bits(counts);
  stats.entropy_bound_bytes = static_cast<std::uint64_t>(
      std::ceil(stats.entropy_bits_per_code * static_cast<double>(stats.codes) / 8.0));
  // Single codes (the GPU's Huffman kernels), with the rANS table of the same histogram: every
  // codec is sized, and rANS may be the one chosen.
  auto book = choose_codebook({}, t.dim(), 255, counts, true);
  if (!book) return make_error(fmt::format("{}: codebook: {}", name, book.message()));
  (key ? lr.key_code_lengths : lr.value_code_lengths)
      .assign(book->lengths().begin(), book->lengths().end());
  (key ? lr.key_code_pairs : lr.value_code_pairs) = false;
  const std::array<double, 256> bits = mean_code_bits({}, t.dim(), *book, counts);
  (key ? lr.key_code_bits : lr.value_code_bits).assign(bits.begin(), bits.end());

  const std::uint8_t* codes = m_quantizers[static_cast<std::size_t>(which)]->byte_codes();
  if (codes == nullptr) return make_error(name + ": the GPU quantizer keeps no byte codes");
  const int block = m_config.block_size;
  cudaStream_t cs = m_compute.s;
  const CodecKind chosen = *m_config.codec;
  // The chosen codec's stream, encoded.
  KVLAB_TRY(m_book.upload(*book, {CodecKind::Huffman, CodecKind::Rans}));
  // The tables went up by cudaMemcpy on the legacy stream, which the compute stream (non-
  // blocking) does not wait for; a copy from pageable memory may return before it lands.
  KVLAB_CUDA_TRY(cudaStreamSynchronize(cudaStreamLegacy), "GPU run: codebook upload");
  const int pack_width = bitpack_width(counts);
  // Every codec in the CPU's order (kCodecKinds), so a tensor no stream can hold fails on the
  // codec the CPU's run names: the chosen one encoded, the others sized (BitPack by its formula,
  // VarWidth, Huffman and rANS on the GPU).
  for (CodecKind kind : kCodecKinds) {
    std::uint64_t size = 0;
    if (kind == chosen) {
      KVLAB_TRY(gpu_encode(codes, t.tokens(), t.heads(), t.dim(), block, chosen, pack_width,
                           &m_book, m_encoded, m_encode_scratch, cs));
      size = m_encoded.payload_bytes + m_encoded.metadata_bytes();
    } else if (kind == CodecKind::BitPack) {
      size = bitpack_payload_bytes(t.tokens(), t.heads(), t.dim(), block, pack_width) +
             EncodedCodes::kHeaderBytes;
    } else if (kind == CodecKind::VarWidth) {
      auto v = varwidth_bytes(codes, t.tokens(), t.heads(), t.dim(), block, m_varwidth, cs);
      if (!v) return make_error(fmt::format("{}: varwidth sizing: {}", name, v.message()));
      size = *v;
    } else {
      GpuCodes sized;
      KVLAB_TRY(gpu_encode(codes, t.tokens(), t.heads(), t.dim(), block, kind, pack_width, &m_book,
                           sized, m_encode_scratch, cs));
      size = sized.payload_bytes + sized.metadata_bytes();
      note_memory();  // the sizing's stream is held beside the chosen one's (kept between layers)
    }
    stats.codec_bytes[static_cast<std::size_t>(kind)] = size + codebook_bytes(kind);
  }
  stats.codebook_bytes = codebook_bytes(chosen);
  stats.payload_bytes = m_encoded.payload_bytes;
  stats.metadata_bytes = m_encoded.metadata_bytes();
  stats.payload_bits_per_code =
      stats.codes ? 8.0 * static_cast<double>(stats.payload_bytes) / stats.codes : 0.0;
  bytes.codes = stats.payload_bytes;
  bytes.metadata += stats.metadata_bytes + stats.codebook_bytes;
  return Ok{};
}

Status Pipeline::finish(int l) {
  KVLAB_CUDA_TRY(cudaEventSynchronize(m_done.e), "GPU run: waiting for a layer");
  KVLAB_CUDA_TRY(cudaGetLastError(), "GPU run");
  LayerOutcome& out = m_out[static_cast<std::size_t>(l)];
  LayerReport& lr = out.report;
  lr.layer = l;
  out.quantize += m_quantize.take_seconds();
  out.dequantize += m_dequantize.take_seconds();
  out.metrics += m_metrics.take_seconds();
  const DeviceLayerSums sums = *m_host_sums;
  for (int w = 0; w < 2; ++w) {
    if (!sums.not_finite[w]) continue;
    // The CPU's check names the token, head and channel, as a CPU run does.
    const std::string name = tensor_name(l, w);
    KVLAB_TRY(check_tensor_finite(tensor_of(m_cache.layers[static_cast<std::size_t>(l)], w), name));
    return make_error(name + " holds a NaN or an infinity");
  }
  m_metrics.begin(m_compute.s);
  for (int w = 0; w < 2; ++w) {
    auto h = m_quantizers[static_cast<std::size_t>(w)]->histograms(m_compute.s);
    if (!h) {  // named as the CPU's run names it (a quantizer's own check, TurboQuant's norms)
      return make_error(tensor_name(l, w) + ": " + h.message());
    }
    (w == 0 ? lr.key_histograms : lr.value_histograms) = std::move(*h);
  }
  m_metrics.end(m_compute.s);
  lr.key_bytes = m_quantizers[0]->bytes();
  lr.value_bytes = m_quantizers[1]->bytes();
  if (m_config.codec) {
    m_code.begin(m_compute.s);
    KVLAB_TRY(code_tensor(0, l, lr, lr.key_bytes, lr.key_codec));
    KVLAB_TRY(code_tensor(1, l, lr, lr.value_bytes, lr.value_codec));
    m_code.end(m_compute.s);
    out.codec = CodecStats{};  // summed as the CPU sums them, bit for bit
    out.codec += lr.key_codec;
    out.codec += lr.value_codec;
  }
  KVLAB_CUDA_TRY(cudaStreamSynchronize(m_compute.s), "GPU run");
  out.metrics += m_metrics.take_seconds();
  out.code += m_code.take_seconds();

  const LayerKv& layer = m_cache.layers[static_cast<std::size_t>(l)];
  std::array<ElementErrorSums, 2> element;
  for (int w = 0; w < 2; ++w) {
    ElementErrorSums& e = element[static_cast<std::size_t>(w)];
    e.sum_sq_err = sums.sum_sq_err[w];
    e.sum_sq_signal = sums.sum_sq_signal[w];
    double mx = 0;
    std::memcpy(&mx, &sums.max_abs_bits[w], sizeof(double));
    e.max_abs = mx;
    e.count = tensor_of(layer, w).elements();
  }
  if (m_cache.has_queries() && m_cache.tokens() > 0) {  // no tokens: no sums, as the CPU's
    AttentionErrorSums& a = out.attention;
    const int group = m_cache.shape.q_heads / m_cache.shape.kv_heads;
    const std::size_t rows =
        static_cast<std::size_t>(layer.query.tokens()) * group * m_cache.shape.kv_heads;
    a.sum_sq_logit_err = sums.sum_sq_logit_err;
    a.logit_count = rows * static_cast<std::size_t>(m_cache.tokens());
    a.sum_kl = sums.sum_kl;
    a.sum_sq_out_err = sums.sum_sq_out_err;
    a.sum_sq_out = sums.sum_sq_out;
    a.sum_cosine = sums.sum_cosine;
    a.rows = rows;
  }
  finish_layer(out, element[0], element[1], m_cache.has_queries(),
               layer.key.elements() + layer.value.elements());
  note_memory();
  return Ok{};
}

Status Pipeline::run(std::uint64_t& peak) {
  std::size_t total = 0;
  KVLAB_CUDA_TRY(cudaMemGetInfo(&m_free_at_start, &total), "GPU run: device memory");
  m_least_free = m_free_at_start;
  KVLAB_TRY(setup());
  const int layers = static_cast<int>(m_cache.layers.size());
  const auto cancelled = [&](double done, int l) {
    return !report_progress(m_req.progress, done,
                            fmt::format("{} of {} layers on the GPU", l, layers));
  };
  if (layers > 0) KVLAB_TRY(stage(0));
  for (int l = 0; l < layers; ++l) {
    KVLAB_TRY(launch(l));
    if (l + 1 < layers) KVLAB_TRY(stage(l + 1));
    if (cancelled((l + 0.5) / layers, l)) {
      cudaStreamSynchronize(m_compute.s);
      return make_error(std::string(kCancelledMessage));
    }
    KVLAB_TRY(finish(l));
    if (cancelled(static_cast<double>(l + 1) / layers, l + 1)) {
      return make_error(std::string(kCancelledMessage));
    }
  }
  peak = m_free_at_start - m_least_free;
  return Ok{};
}

}  // namespace

std::string gpu_stage_gap(Stage stage, const MethodConfig& config, const KvCache& cache) {
  switch (stage) {
    case Stage::Quantize:
    case Stage::Dequantize: {
      if (wraps_rotation(config)) {
        return fmt::format("{} rotation runs on the CPU", rotation_id(config.rotation));
      }
      auto q = make_device_quantizer(config);
      if (!q) return q.message();
      return *q ? std::string() : fmt::format("no GPU quantizer for {}", method_label(config));
    }
    case Stage::Code:
      if (!config.codec) return "the run has no codec";
      if (*config.codec == CodecKind::VarWidth) return "no GPU encoder for varwidth";
      if (config.kind != MethodKind::KvComp) return "the GPU entropy-codes KVComp codes only";
      return {};
    case Stage::Metrics:
      if (cache.keys_pre_rope) return "attention metrics of keys stored before RoPE";
      if (cache.shape.kv_heads <= 0 || cache.shape.q_heads % cache.shape.kv_heads != 0) {
        return "query heads not a multiple of the KV heads";
      }
      if (cache.shape.head_dim > kMaxMetricsDim) {
        return fmt::format("head_dim {} above {}", cache.shape.head_dim, kMaxMetricsDim);
      }
      return {};
  }
  return "unknown stage";
}

Status run_layers_on_gpu(const LayerRunRequest& request, std::span<LayerOutcome> outcomes,
                         std::uint64_t& device_peak_bytes) {
  device_peak_bytes = 0;
  if (request.cache.layers.empty()) return Ok{};
  if (outcomes.size() != request.cache.layers.size()) {
    return make_error("GPU run: one outcome per layer is needed");
  }
  Pipeline pipeline(request, outcomes);
  return pipeline.run(device_peak_bytes);
}

}  // namespace kvlab::cuda
