// `kvlab bench gpu` (gpu_bench.h): every fused kernel and its baselines on one Llama-3-8B-shaped
// layer of the synthetic llama3-8b preset, timed with CUDA events around many launches. Each
// kernel cycles through enough copies of its inputs that they never fit the L2 cache together,
// so the times are memory times, not cache times. Reported per kernel: the median time per launch
// over several batches, the bytes it must read (compressed streams, metadata and parameters
// included), the bandwidth that makes, the fp16-equivalent bandwidth, and the speed-up over the
// cuBLAS fp16 baseline of the same op and over the fused fp16 decode kernel. KVComp's codes run
// twice: as Huffman streams and as rANS streams of the same codes.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "code_encode.cuh"
#include "decode_attention.cuh"
#include "fp16_baseline.cuh"
#include "fp8_attention.cuh"
#include "fused_attention.cuh"
#include "group_quantize.cuh"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/model/ggml_types.h"
#include "kvlab/engine/quant/fp8.h"
#include "kvlab/engine/sources/synthetic.h"
#include "kvlab/kernels/cuda_device.h"
#include "kvlab/kernels/gpu_bench.h"
#include "quant/fp4_quantizer.h"
#include "quant/quantizers.h"

namespace kvlab::cuda {

namespace {

// Median time per call of `launch(i)` (i = call number), in microseconds.
Result<double> time_launches(const std::function<cudaError_t(int)>& launch, int repeats) {
  for (int i = 0; i < 3; ++i) KVLAB_CUDA_TRY(launch(i), "bench warm-up");
  KVLAB_CUDA_TRY(cudaDeviceSynchronize(), "bench warm-up");
  cudaEvent_t start, stop;
  KVLAB_CUDA_TRY(cudaEventCreate(&start), "bench events");
  KVLAB_CUDA_TRY(cudaEventCreate(&stop), "bench events");
  const int batches = 7;
  const int per = std::max(1, repeats / batches);
  std::vector<double> us;
  int call = 0;
  for (int b = 0; b < batches; ++b) {
    cudaEventRecord(start);
    for (int i = 0; i < per; ++i) {
      if (cudaError_t e = launch(call++); e != cudaSuccess) {
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        return cuda_status(e, "bench launch").error();
      }
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    us.push_back(1000.0 * ms / per);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  KVLAB_CUDA_TRY(cudaGetLastError(), "bench");
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

template <class T>
Status clone_array(const DeviceArray<T>& from, DeviceArray<T>& to) {
  KVLAB_TRY_STATUS(to.allocate(from.size(), "bench copy"));
  if (from.size()) {
    KVLAB_CUDA_TRY(cudaMemcpy(to.get(), from.get(), from.bytes(), cudaMemcpyDeviceToDevice),
                   "bench copy");
  }
  return Ok{};
}

Status clone_codes(const GpuCodes& from, GpuCodes& to) {
  to.kind = from.kind;
  to.tokens = from.tokens;
  to.heads = from.heads;
  to.dim = from.dim;
  to.block_size = from.block_size;
  to.width = from.width;
  to.payload_bytes = from.payload_bytes;
  KVLAB_TRY_STATUS(clone_array(from.payload, to.payload));
  KVLAB_TRY_STATUS(clone_array(from.block_offsets, to.block_offsets));
  KVLAB_TRY_STATUS(clone_array(from.vector_bits, to.vector_bits));
  return Ok{};
}

Result<std::unique_ptr<GpuLayer::Impl>> clone_layer(const GpuLayer::Impl& g) {
  auto c = std::make_unique<GpuLayer::Impl>();
  c->kv_heads = g.kv_heads;
  c->head_dim = g.head_dim;
  c->block_size = g.block_size;
  c->tokens = g.tokens;
  c->codec = g.codec;
  KVLAB_TRY_STATUS(clone_codes(g.keys, c->keys));
  KVLAB_TRY_STATUS(clone_codes(g.values, c->values));
  if (needs_book(g.codec)) {
    KVLAB_TRY_STATUS(c->key_book.upload(g.key_book.host, {g.codec}));
    KVLAB_TRY_STATUS(c->value_book.upload(g.value_book.host, {g.codec}));
  }
  KVLAB_TRY_STATUS(clone_array(g.key_steps, c->key_steps));
  KVLAB_TRY_STATUS(clone_array(g.key_mins, c->key_mins));
  KVLAB_TRY_STATUS(clone_array(g.value_steps, c->value_steps));
  KVLAB_TRY_STATUS(clone_array(g.value_mins, c->value_mins));
  return c;
}

double key_bytes(const GpuLayer::Impl& g) {
  return static_cast<double>(g.keys.payload_bytes + g.keys.metadata_bytes() +
                             (g.key_steps.size() + g.key_mins.size()) * sizeof(float));
}
double value_bytes(const GpuLayer::Impl& g) {
  return static_cast<double>(g.values.payload_bytes + g.values.metadata_bytes() +
                             (g.value_steps.size() + g.value_mins.size()) * sizeof(float));
}

// The Huffman layer's codes again as rANS streams (docs/FORMAT.md, "rANS streams"), coded on the
// host (there is no GPU rANS encoder) with the book the CPU engine would choose for them (pairs
// where the codes fit 4 bits and pairs code smaller) and its rANS table: the same codes, steps
// and minimums, so the two codecs are timed on the same data.
Result<GpuLayer> as_rans(const GpuLayer& huffman) {
  auto host = download_layer(huffman);
  if (!host) return host.error();
  for (int r = 0; r < 2; ++r) {
    EncodedCodes& e = r == 0 ? host->keys : host->values;
    HuffmanCodebook& book = r == 0 ? host->key_book : host->value_book;
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(e.tokens) * e.heads * e.dim);
    KVLAB_TRY_STATUS(decode_codes(e, &book, codes));
    const CodeCounts counts = count_codes(codes);
    int max_code = 0;
    for (int c = 0; c < 256; ++c) {
      if (counts[static_cast<std::size_t>(c)] > 0) max_code = c;
    }
    auto rb = choose_codebook(codes, e.dim, max_code, counts, true);
    if (!rb) return rb.error();
    auto re = kvlab::encode_codes(codes, e.tokens, e.heads, e.dim,
                                  CodecConfig{CodecKind::Rans, e.block_size, 0}, &*rb);
    if (!re) return re.error();
    e = std::move(*re);
    book = std::move(*rb);
  }
  return upload_layer(host->view());
}

// One sequence's K and V in a row format the fused decode kernel reads (decode_attention.cuh).
struct StoredRows {
  DecodeFormat format = DecodeFormat::Fp16;
  std::vector<std::uint8_t> k, v, k_scales, v_scales;   // scales: NVFP4's block scales
  std::vector<float> k_heads, v_heads;                  // FP8's scale per KV head
  float k_global = 1.f, v_global = 1.f;                 // NVFP4
  std::vector<float> k_steps, k_mins, v_steps, v_mins;  // Packed4 (KVComp BitPack), KIVI
  int block_size = 0;
  int tokens = -1;                         // KIVI: quantized tokens (-1: every token)
  int group_channels = 0;                  // KIVI values
  std::vector<std::uint8_t> k_win, v_win;  // KIVI: the fp16 window's rows
};

// The fp16 layer quantized on the host as the engine stores the format: llama.cpp's blocks
// (ggml_quantize, no rotation), NVFP4 (one global scale per tensor) or KIVI (its quantizer).
Result<StoredRows> stored_rows(DecodeFormat f, std::span<const std::uint16_t> k,
                               std::span<const std::uint16_t> v, int T, int H, int D) {
  StoredRows sr;
  sr.format = f;
  if (f == DecodeFormat::Kivi2 || f == DecodeFormat::Kivi4) {
    // The KIVI quantizer's tensors: group 32, residual 128, fp16 parameters (KIVI's defaults).
    constexpr int kGroup = 32, kResidual = 128;
    const auto quantizer = detail::make_kivi_quantizer("kivi", f == DecodeFormat::Kivi2 ? 2 : 4,
                                                       kGroup, kResidual, DType::F16);
    sr.tokens = std::max(0, T - kResidual) / kGroup * kGroup;
    sr.block_size = sr.group_channels = kGroup;
    for (int r = 0; r < 2; ++r) {
      const TensorView view(reinterpret_cast<const std::byte*>((r == 0 ? k : v).data()), DType::F16,
                            T, H, D, static_cast<std::ptrdiff_t>(H) * D, D);
      auto q = quantizer->quantize(view, r == 0 ? TensorRole::Key : TensorRole::Value);
      if (!q) return make_error("bench gpu: KIVI quantization: " + q.message());
      const std::size_t units = q->params.size() / 2;
      (r == 0 ? sr.k : sr.v).assign(q->codes.begin(), q->codes.end());
      (r == 0 ? sr.k_steps : sr.v_steps).assign(q->params.begin(), q->params.begin() + units);
      (r == 0 ? sr.k_mins : sr.v_mins).assign(q->params.begin() + units, q->params.end());
      const auto* w = reinterpret_cast<const std::uint8_t*>(q->residual.data());
      (r == 0 ? sr.k_win : sr.v_win).assign(w, w + 2 * q->residual.size());
    }
    return sr;
  }
  const std::size_t n = static_cast<std::size_t>(T) * H * D;
  std::vector<float> x(n);
  for (int r = 0; r < 2; ++r) {
    fp16_to_float(r == 0 ? k : v, x);
    std::vector<std::uint8_t>& out = r == 0 ? sr.k : sr.v;
    if (f == DecodeFormat::Nvfp4) {
      float amax = 0.f;
      for (float e : x) amax = std::max(amax, std::abs(e));
      const float global = detail::nvfp4_global_scale(amax);
      std::vector<std::uint8_t>& scales = r == 0 ? sr.k_scales : sr.v_scales;
      out.resize(n / 2);
      scales.resize(n / 16);
      detail::nvfp4_quantize_row(x.data(), static_cast<int>(n), global, out.data(), scales.data());
      (r == 0 ? sr.k_global : sr.v_global) = global;
    } else {
      const GgmlType type = f == DecodeFormat::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q4_0;
      out.resize(n / 32 * static_cast<std::size_t>(row_decode::row_bytes(f, 32)));
      if (!ggml_quantize(type, x.data(), static_cast<std::int64_t>(n), out.data())) {
        return make_error(
            fmt::format("bench gpu: {} quantization failed", row_decode::format_name(f)));
      }
    }
  }
  return sr;
}

// Copies of something `bytes` large that together pass four times the L2 cache.
int copies_for(double bytes, int l2_bytes) {
  return static_cast<int>(std::clamp(std::ceil(4.0 * l2_bytes / std::max(bytes, 1.0)), 1.0, 64.0));
}

}  // namespace

Result<GpuBenchReport> run_gpu_bench(const GpuBenchOptions& o) {
  KVLAB_TRY_STATUS(require_gpu());
  if (o.q_heads % o.kv_heads != 0 || !supported_group(o.q_heads / o.kv_heads)) {
    return make_error("bench gpu: q_heads / kv_heads must be 1, 2, 4 or 8");
  }
  GpuBenchReport report;
  auto devices = list_devices();
  if (!devices) return devices.error();
  report.device = devices->at(0).name;
  int l2 = 0;
  KVLAB_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0), "bench: L2 size");

  // The bandwidth ceiling: a large device-to-device copy, bytes read plus written.
  {
    const std::size_t n = std::size_t{1} << 30;
    DeviceArray<std::uint8_t> a, b;
    KVLAB_TRY_STATUS(a.allocate(n, "bench copy buffer"));
    KVLAB_TRY_STATUS(b.allocate(n, "bench copy buffer"));
    KVLAB_CUDA_TRY(cudaMemset(a.get(), 1, n), "bench copy buffer");
    auto us = time_launches(
        [&](int) { return cudaMemcpyAsync(b.get(), a.get(), n, cudaMemcpyDeviceToDevice); }, 20);
    if (!us) return us.error();
    report.copy_gbps = 2.0 * n / (*us * 1e3);
  }

  const int H = o.kv_heads, D = o.head_dim, QH = o.q_heads, G = QH / H;
  for (int T : o.contexts) {
    SyntheticConfig sc;
    sc.preset = "llama3-8b";
    sc.layers = 1;
    sc.context = T;
    sc.seed = o.seed;
    sc.queries = 1;
    auto cache = generate_synthetic(sc);
    if (!cache) return make_error("bench gpu: synthetic data: " + cache.message());
    const LayerKv& layer = cache->layers[0];
    if (layer.key.dtype() != DType::F16 || layer.key.heads() != H || layer.key.dim() != D) {
      return make_error("bench gpu: the llama3-8b preset does not have the benchmark's shape");
    }
    const std::size_t n = static_cast<std::size_t>(T) * H * D;
    const std::span<const std::uint16_t> k(reinterpret_cast<const std::uint16_t*>(layer.key.data()),
                                           n);
    const std::span<const std::uint16_t> v(
        reinterpret_cast<const std::uint16_t*>(layer.value.data()), n);
    std::vector<float> q(static_cast<std::size_t>(QH) * D);
    {
      const std::vector<float> all = layer.query.view().to_float();
      if (all.size() < q.size()) return make_error("bench gpu: the preset has too few queries");
      std::copy(all.end() - static_cast<std::ptrdiff_t>(q.size()), all.end(), q.begin());
    }
    // Softmax weights: any positive rows do; uniform keeps them simple.
    std::vector<float> probs(static_cast<std::size_t>(QH) * T, 1.0f / T);
    DeviceArray<float> d_q, d_probs, d_logits, d_out;
    DeviceArray<int> d_err;
    KVLAB_TRY_STATUS(d_q.upload(q.data(), q.size(), "bench"));
    KVLAB_TRY_STATUS(d_probs.upload(probs.data(), probs.size(), "bench"));
    KVLAB_TRY_STATUS(d_logits.allocate(static_cast<std::size_t>(QH) * T, "bench"));
    KVLAB_TRY_STATUS(d_out.allocate(static_cast<std::size_t>(QH) * D, "bench"));
    KVLAB_TRY_STATUS(d_err.allocate(1, "bench"));
    const double fp16_bytes = 2.0 * n;

    std::vector<GpuBenchRow> rows;
    auto add = [&](const std::string& kernel, double us, double bytes, double fp16 = 0,
                   int batch = 1) {
      GpuBenchRow r;
      r.kernel = kernel;
      r.context = T;
      r.batch = batch;
      r.microseconds = us;
      r.bytes_read = bytes;
      r.fp16_bytes = fp16 > 0 ? fp16 : fp16_bytes;
      r.gbps_read = bytes / (us * 1e3);
      r.gbps_fp16_equiv = r.fp16_bytes / (us * 1e3);
      r.copy_fraction = r.gbps_read / report.copy_gbps;
      rows.push_back(r);
    };
    // One part of the bench (a baseline, a format, a codec): where its kernels fail (a first
    // launch on a device they never ran on, a shape one refuses), the part is left out and named
    // in report.skipped, so that the other parts' rows still come back; an error the context
    // cannot recover from (the device lost) ends the bench.
    const auto part = [&](const std::string& what, const std::function<Status()>& body) -> Status {
      const Status st = body();
      if (st) return Ok{};
      (void)cudaGetLastError();
      if (const cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
        return make_error(fmt::format("bench gpu: {} at {} tokens: {}; then {}", what, T,
                                      st.message(), cudaGetErrorString(e)));
      }
      report.skipped.push_back(fmt::format("{} at {} tokens: {}", what, T, st.message()));
      return Ok{};
    };

    // cuBLAS fp16 baseline.
    KVLAB_TRY_STATUS(part("cublas fp16", [&]() -> Status {
      std::vector<DeviceArray<std::uint16_t>> ks, vs;
      const int copies = copies_for(fp16_bytes, l2);
      for (int c = 0; c < copies; ++c) {
        ks.emplace_back();
        vs.emplace_back();
        KVLAB_TRY_STATUS(ks.back().upload(k.data(), n, "bench fp16 keys"));
        KVLAB_TRY_STATUS(vs.back().upload(v.data(), n, "bench fp16 values"));
      }
      auto blas = Fp16Baseline::create();
      if (!blas) return blas.error();
      auto qk = time_launches(
          [&](int i) {
            return blas->logits(ks[i % copies].get(), T, H, D, d_q.get(), QH, d_logits.get());
          },
          o.repeats);
      if (!qk) return qk.error();
      add("cublas_fp16_qk", *qk, fp16_bytes);
      auto sv = time_launches(
          [&](int i) {
            return blas->values(vs[i % copies].get(), T, H, D, d_probs.get(), QH, d_out.get());
          },
          o.repeats);
      if (!sv) return sv.error();
      add("cublas_fp16_sv", *sv, fp16_bytes);
      return Ok{};
    }));

    // The FlashAttention-class decode kernel: K and V read once, for B sequences per launch
    // (each its own copy of the layer, as a batch of requests has), over fp16 (the baseline) and
    // over the row formats it reads in place (issue 46 part 2).
    std::map<int, double> fused_us;  // fp16_fused time by batch
    const auto fused = [&](const StoredRows& sr, const std::string& name) -> Status {
      for (int B : o.batches) {
        const double bytes =
            2.0 * B * static_cast<double>(sr.k.size() + sr.k_scales.size() + sr.k_win.size()) +
            B * sizeof(float) *
                static_cast<double>(sr.k_steps.size() + sr.k_mins.size() + sr.v_steps.size() +
                                    sr.v_mins.size());
        const int copies = copies_for(bytes, l2);
        struct Copy {
          DeviceArray<std::uint8_t> k, v, ks, vs, kw, vw;
          DeviceArray<float> kst, kmn, vst, vmn;
        };
        std::vector<Copy> cs(static_cast<std::size_t>(copies));
        const auto repeat = [B](const auto& x) {
          std::remove_cvref_t<decltype(x)> r;
          r.reserve(x.size() * B);
          for (int b = 0; b < B; ++b) r.insert(r.end(), x.begin(), x.end());
          return r;
        };
        const auto up = [](auto& d, const auto& x) -> Status {
          if (x.empty()) return Ok{};
          return d.upload(x.data(), x.size(), "bench fused");
        };
        {
          const auto kb = repeat(sr.k), vb = repeat(sr.v);
          const auto ksb = repeat(sr.k_scales), vsb = repeat(sr.v_scales);
          const auto kst = repeat(sr.k_steps), kmn = repeat(sr.k_mins);
          const auto vst = repeat(sr.v_steps), vmn = repeat(sr.v_mins);
          const auto kw = repeat(sr.k_win), vw = repeat(sr.v_win);
          for (Copy& c : cs) {
            KVLAB_TRY_STATUS(up(c.kw, kw));
            KVLAB_TRY_STATUS(up(c.vw, vw));
            KVLAB_TRY_STATUS(up(c.k, kb));
            KVLAB_TRY_STATUS(up(c.v, vb));
            KVLAB_TRY_STATUS(up(c.ks, ksb));
            KVLAB_TRY_STATUS(up(c.vs, vsb));
            KVLAB_TRY_STATUS(up(c.kst, kst));
            KVLAB_TRY_STATUS(up(c.kmn, kmn));
            KVLAB_TRY_STATUS(up(c.vst, vst));
            KVLAB_TRY_STATUS(up(c.vmn, vmn));
          }
        }
        DeviceArray<float> dkh, dvh;
        if (!sr.k_heads.empty()) {
          KVLAB_TRY_STATUS(dkh.upload(sr.k_heads.data(), sr.k_heads.size(), "bench fused"));
          KVLAB_TRY_STATUS(dvh.upload(sr.v_heads.data(), sr.v_heads.size(), "bench fused"));
        }
        std::vector<float> qb(q.size() * B);
        for (int b = 0; b < B; ++b) std::copy(q.begin(), q.end(), qb.begin() + b * q.size());
        DeviceArray<float> dqb, doutb;
        KVLAB_TRY_STATUS(dqb.upload(qb.data(), qb.size(), "bench fused"));
        KVLAB_TRY_STATUS(doutb.allocate(qb.size(), "bench fused"));
        auto fa = DecodeAttentionArgs::of_shape(sr.format, B, T, H, QH, D);
        fa.q = dqb.get();
        fa.out = doutb.get();
        fa.k.head_scales = dkh.get();
        fa.v.head_scales = dvh.get();
        fa.k.global = sr.k_global;
        fa.v.global = sr.v_global;
        fa.k.block_size = fa.v.block_size = sr.block_size;
        fa.k.group_channels = fa.v.group_channels = sr.group_channels;
        if (sr.tokens >= 0) {
          fa.tokens = sr.tokens;
          fa.window = T - sr.tokens;
        }
        fa.k.batch_bytes = sr.k.size();
        fa.v.batch_bytes = sr.v.size();
        const auto use = [&](int i) {
          Copy& c = cs[static_cast<std::size_t>(i % copies)];
          fa.k.data = c.k.get();
          fa.v.data = c.v.get();
          fa.k.scales = c.ks.get();
          fa.v.scales = c.vs.get();
          fa.k.steps = c.kst.get();
          fa.k.mins = c.kmn.get();
          fa.v.steps = c.vst.get();
          fa.v.mins = c.vmn.get();
          fa.k_window.data = c.kw.get();
          fa.v_window.data = c.vw.get();
        };
        use(0);
        DecodeAttention dec;
        KVLAB_TRY_STATUS(dec.prepare(fa));
        auto us = time_launches(
            [&](int i) {
              use(i);
              return dec.launch(fa, nullptr);
            },
            o.repeats);
        if (!us) return us.error();
        if (sr.format == DecodeFormat::Fp16) fused_us[B] = *us;
        add(B == 1 ? name : fmt::format("{}_b{}", name, B), *us, bytes, 2.0 * fp16_bytes * B, B);
      }
      return Ok{};
    };
    KVLAB_TRY_STATUS(part("fp16_fused", [&]() -> Status {
      StoredRows sr;
      const auto* kb = reinterpret_cast<const std::uint8_t*>(k.data());
      const auto* vb = reinterpret_cast<const std::uint8_t*>(v.data());
      sr.k.assign(kb, kb + 2 * n);
      sr.v.assign(vb, vb + 2 * n);
      return fused(sr, "fp16_fused");
    }));
    for (const DecodeFormat f : {DecodeFormat::Q8_0, DecodeFormat::Q4_0, DecodeFormat::Nvfp4,
                                 DecodeFormat::Kivi2, DecodeFormat::Kivi4}) {
      const std::string name = fmt::format("{}_fused", row_decode::format_name(f));
      KVLAB_TRY_STATUS(part(name, [&]() -> Status {
        auto sr = stored_rows(f, k, v, T, H, D);
        if (!sr) return sr.error();
        return fused(*sr, name);
      }));
    }

    // Compressed layers: KVComp + Huffman, the same codes as rANS, and 4-bit packing (rel_scale
    // 1/15 so codes fit).
    std::optional<GpuLayer> huffman_layer;
    for (const int kind : {0, 1, 2}) {
      const bool huffman = kind == 0, rans = kind == 1;
      const std::string name = huffman ? "huffman" : rans ? "rans" : "packed4";
      KVLAB_TRY_STATUS(part(name, [&]() -> Status {
        if (rans && !huffman_layer)
          return make_error("no Huffman layer to re-encode (its part failed)");
        GpuCompressOptions opt;
        opt.block_size = o.block_size;
        opt.rel_scale = huffman ? o.rel_scale : 1.0 / 15.0;
        opt.codec = huffman ? CodecKind::Huffman : CodecKind::BitPack;
        opt.bitpack_width = huffman ? 0 : 4;
        auto gl = rans ? as_rans(*huffman_layer) : compress_layer(k, v, T, H, D, opt);
        if (!gl) return gl.error();
        const double kb = key_bytes(gl->impl()), vb = value_bytes(gl->impl());
        const int copies = copies_for(kb + vb, l2);
        std::vector<std::unique_ptr<GpuLayer::Impl>> layers;
        for (int c = 0; c < copies; ++c) {
          auto cl = clone_layer(gl->impl());
          if (!cl) return cl.error();
          layers.push_back(std::move(*cl));
        }
        // B sequences a step: these kernels take one layer a launch, so B launches back to back
        // over B copies of the layer (each sequence's own memory, as in a batch of requests),
        // against the fused fp16 kernel's one launch of B sequences. B = 1 cycles the copies made
        // to pass the L2.
        const auto time_batch = [&](int B, bool keys) {
          while (static_cast<int>(layers.size()) < B) {
            auto cl = clone_layer(gl->impl());
            if (!cl) return Result<double>(cl.error());
            layers.push_back(std::move(*cl));
          }
          const int held = static_cast<int>(layers.size());
          return time_launches(
              [&](int i) {
                for (int b = 0; b < B; ++b) {
                  const GpuLayer::Impl& layer = *layers[(i * B + b) % held];
                  const cudaError_t e =
                      keys ? launch_fused_logits(layer, d_q.get(), G, d_logits.get(), d_err.get(),
                                                 nullptr)
                           : launch_fused_values(layer, d_probs.get(), G, d_out.get(), d_err.get(),
                                                 nullptr);
                  if (e != cudaSuccess) return e;
                }
                return cudaSuccess;
              },
              B == 1 ? o.repeats : std::max(3, o.repeats / B));
        };
        auto qk = time_batch(1, true);
        if (!qk) return qk.error();
        add(name + "_qk", *qk, kb);
        auto sv = time_batch(1, false);
        if (!sv) return sv.error();
        add(name + "_sv", *sv, vb);
        add(name + "_attn", *qk + *sv, kb + vb, 2.0 * fp16_bytes);
        for (const int B : o.batches) {
          if (B < 2) continue;
          auto bqk = time_batch(B, true);
          if (!bqk) return bqk.error();
          auto bsv = time_batch(B, false);
          if (!bsv) return bsv.error();
          add(name + "_attn_b" + std::to_string(B), *bqk + *bsv, B * (kb + vb),
              2.0 * B * fp16_bytes, B);
        }
        if (kind == 2) {
          // The same packed 4-bit layer through the one-pass fused kernel.
          auto host = download_layer(*gl);
          if (!host) return host.error();
          StoredRows sr;
          sr.format = DecodeFormat::Packed4;
          sr.block_size = o.block_size;
          sr.k.assign(host->keys.payload.begin(), host->keys.payload.end());
          sr.v.assign(host->values.payload.begin(), host->values.payload.end());
          sr.k_steps = std::move(host->key_steps);
          sr.k_mins = std::move(host->key_mins);
          sr.v_steps = std::move(host->value_steps);
          sr.v_mins = std::move(host->value_mins);
          KVLAB_TRY_STATUS(fused(sr, "packed4_fused"));
        }

        if (huffman) {
          // Encode throughput: quantize + Huffman-encode K and V from fp16 on the device, with
          // the codebooks already built (the prefill's books are reused for every later block).
          DeviceArray<std::uint16_t> dk, dv;
          DeviceArray<std::uint8_t> codes;
          DeviceArray<float> steps, mins;
          KVLAB_TRY_STATUS(dk.upload(k.data(), n, "bench encode"));
          KVLAB_TRY_STATUS(dv.upload(v.data(), n, "bench encode"));
          KVLAB_TRY_STATUS(codes.allocate(n, "bench encode"));
          GroupArgs qa =
              group_args(detail::kvcomp_group_spec(o.block_size, o.rel_scale), DType::F16, T, H, D);
          // Room for the larger pass: keys have a unit per channel of each token block, values
          // one per token and head (more where the block is longer than a head is wide).
          const std::size_t units =
              std::max(group_units(qa, TensorRole::Key), group_units(qa, TensorRole::Value));
          KVLAB_TRY_STATUS(steps.allocate(units, "bench encode"));
          KVLAB_TRY_STATUS(mins.allocate(units, "bench encode"));
          qa.codes = codes.get();
          qa.steps = steps.get();
          qa.mins = mins.get();
          EncodeScratch scratch;
          GpuCodes out;
          Status failed = Ok{};
          auto enc = time_launches(
              [&](int) -> cudaError_t {
                for (int r = 0; r < 2; ++r) {
                  qa.x = r == 0 ? dk.get() : dv.get();
                  cudaError_t e = launch_group_quantize(
                      qa, r == 0 ? TensorRole::Key : TensorRole::Value, nullptr);
                  if (e != cudaSuccess) return e;
                  const GpuBook& book = r == 0 ? gl->impl().key_book : gl->impl().value_book;
                  if (Status st = gpu_encode(codes.get(), T, H, D, o.block_size, CodecKind::Huffman,
                                             0, &book, out, scratch, nullptr);
                      !st) {
                    failed = st;
                    return cudaErrorUnknown;
                  }
                }
                return cudaSuccess;
              },
              std::max(7, o.repeats / 10));
          if (!failed) return failed.error();
          if (!enc) return enc.error();
          report.encode_gbps.emplace_back(T, 2.0 * fp16_bytes / (*enc * 1e3));
          huffman_layer = std::move(*gl);
        }
        return Ok{};
      }));
    }

    // FP8 (E4M3, one scale per KV head).
    KVLAB_TRY_STATUS(part("fp8", [&]() -> Status {
      std::vector<std::uint8_t> k8(n), v8(n);
      std::vector<float> ksc(H), vsc(H);
      for (int r = 0; r < 2; ++r) {
        const auto& x = r == 0 ? k : v;
        auto& out = r == 0 ? k8 : v8;
        auto& sc = r == 0 ? ksc : vsc;
        for (int h = 0; h < H; ++h) {
          float amax = 0.f;
          for (int t = 0; t < T; ++t) {
            for (int c = 0; c < D; ++c) {
              amax = std::max(
                  amax, std::abs(fp16_to_float(x[(static_cast<std::size_t>(t) * H + h) * D + c])));
            }
          }
          sc[h] = amax > 0.f ? amax / fp8_max(Fp8Format::E4M3) : 1.f;
        }
        for (std::size_t i = 0; i < n; ++i) {
          out[i] = float_to_fp8(fp16_to_float(x[i]) / sc[(i / D) % H], Fp8Format::E4M3);
        }
      }
      const double bytes = static_cast<double>(n) + H * sizeof(float);
      const int copies = copies_for(bytes, l2);
      std::vector<DeviceArray<std::uint8_t>> ks(copies), vs(copies);
      DeviceArray<float> dks, dvs;
      KVLAB_TRY_STATUS(dks.upload(ksc.data(), H, "bench fp8"));
      KVLAB_TRY_STATUS(dvs.upload(vsc.data(), H, "bench fp8"));
      for (int c = 0; c < copies; ++c) {
        KVLAB_TRY_STATUS(ks[c].upload(k8.data(), n, "bench fp8"));
        KVLAB_TRY_STATUS(vs[c].upload(v8.data(), n, "bench fp8"));
      }
      auto dev = [&](int i, bool keys) {
        Fp8Device d;
        d.tokens = T;
        d.kv_heads = H;
        d.head_dim = D;
        d.format = Fp8Format::E4M3;
        d.codes = (keys ? ks : vs)[i % copies].get();
        d.scales = keys ? dks.get() : dvs.get();
        return d;
      };
      auto qk = time_launches(
          [&](int i) {
            return launch_fp8_logits(dev(i, true), d_q.get(), QH, d_logits.get(), nullptr);
          },
          o.repeats);
      if (!qk) return qk.error();
      add("fp8_qk", *qk, bytes);
      auto sv = time_launches(
          [&](int i) {
            return launch_fp8_values(dev(i, false), d_probs.get(), QH, d_out.get(), nullptr);
          },
          o.repeats);
      if (!sv) return sv.error();
      add("fp8_sv", *sv, bytes);
      add("fp8_attn", *qk + *sv, 2.0 * bytes, 2.0 * fp16_bytes);
      // The same codes and scales through the one-pass fused kernel.
      StoredRows sr;
      sr.format = DecodeFormat::Fp8E4M3;
      sr.k = std::move(k8);
      sr.v = std::move(v8);
      sr.k_heads = ksc;
      sr.v_heads = vsc;
      return fused(sr, "fp8_fused");
    }));

    // Against cuBLAS (0 where its part was left out).
    double base_qk = 0, base_sv = 0;
    for (const GpuBenchRow& r : rows) {
      if (r.kernel == "cublas_fp16_qk") base_qk = r.microseconds;
      if (r.kernel == "cublas_fp16_sv") base_sv = r.microseconds;
    }
    for (GpuBenchRow& r : rows) {
      if (r.kernel.ends_with("_qk") || r.kernel.ends_with("_sv")) {
        r.speedup_vs_fp16 = (r.kernel.ends_with("_qk") ? base_qk : base_sv) / r.microseconds;
      } else {
        // Whole attention: against cuBLAS's two ops together, and the fused fp16 kernel of the
        // same batch.
        r.speedup_vs_fp16 = (base_qk + base_sv) * r.batch / r.microseconds;
        if (auto f = fused_us.find(r.batch); f != fused_us.end()) {
          r.speedup_vs_fused = f->second / r.microseconds;
        }
      }
      report.rows.push_back(r);
    }
  }
  return report;
}

}  // namespace kvlab::cuda
