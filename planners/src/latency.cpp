// The latency model (see latency.h for what is counted and why).
#include "kvlab/planners/latency.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>

#include <fmt/format.h>

namespace kvlab::planners {
namespace {

// Values in one K (or V) tensor of the H100 measurement: 32,768 tokens × 8 KV heads × 128.
constexpr double kH100Values = 32768.0 * 8 * 128;

double per_second(double values, double microseconds_k, double microseconds_v) {
  return 2 * values / ((microseconds_k + microseconds_v) * 1e-6);
}

// Decode-attention FLOPs per kept token per layer on one GPU, for one sequence: q·k and p·v for
// every query head the GPU holds. MLA attends in the latent (DeepSeek-V2 §2.1.3, absorbed
// projections): q·[latent, rope] and p·latent.
double attention_flops_per_token(const ModelSpec& m, int tp) {
  const double q_heads = std::ceil(static_cast<double>(m.q_heads) / tp);
  if (m.is_mla()) return q_heads * 2.0 * (m.head_dim + m.kv_lora_rank);
  return q_heads * 4.0 * m.head_dim;
}

// fp16 values stored per kept token per layer on one GPU (what decompression produces).
double values_per_token(const ModelSpec& m, int heads) {
  return m.is_mla() ? static_cast<double>(m.head_dim) : 2.0 * heads * m.head_dim;
}

}  // namespace

const KernelRates& default_kernel_rates() {
  static const KernelRates r = [] {
    KernelRates k;
    k.gpu_id = "h100-sxm";
    k.device = "NVIDIA H100 80GB HBM3";
    k.source =
        "kvlab bench gpu on an H100 80GB HBM3 at 32K tokens (docs/PERFORMANCE.md: FP8 16.4 + 19.3 "
        "us and packed 4-bit 14.6 + 24.5 us per layer's K and V after the tensor-core rewrite; "
        "Huffman 81.4 + 134.0 us and encode 100.5 GB/s from "
        "bench/results/gpu_h100_2026-11-23.json)";
    k.fp32_tflops = 67;  // H100 SXM datasheet, non-tensor FP32
    k.fp8 = per_second(kH100Values, 16.4, 19.3);
    k.packed = per_second(kH100Values, 14.6, 24.5);
    k.huffman = per_second(kH100Values, 81.4, 134.0);
    k.huffman_encode = 100.47680812690689e9 / 2;  // GB/s of fp16 input → values/s
    k.context = 32768;
    return k;
  }();
  return r;
}

namespace {

// Fields of a stored benchmark, read without trusting their types.
std::optional<double> number(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  const double v = it->get<double>();
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

std::string text(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

Result<KernelRates> kernel_rates_from_bench(const nlohmann::json& bench, std::string gpu_id,
                                            double fp32_tflops, std::string source) {
  if (!bench.is_object() || !bench.contains("rows") || !bench["rows"].is_array()) {
    return make_error("GPU benchmark: no 'rows' list (expected kvlab bench gpu --json output)");
  }
  KernelRates r;
  r.gpu_id = std::move(gpu_id);
  r.device = text(bench, "device");
  r.source = std::move(source);
  r.fp32_tflops = fp32_tflops;
  r.measured = true;
  for (const auto& row : bench["rows"]) {
    const auto c = number(row, "context");
    if (c && *c > 0 && *c < (1 << 30)) r.context = std::max(r.context, static_cast<int>(*c));
  }
  if (r.context <= 0) return make_error("GPU benchmark: no row has a positive 'context'");
  // Per kernel at the longest context: fp16 values of K plus V over the time of q.K and
  // softmax.V, timed apart (bench gpu: a _qk and a _sv row) or as one decode step (bench cpu:
  // an _attention row, which holds both).
  const auto rate = [&](const std::string& prefix) -> Result<double> {
    double us = 0, values = 0;
    int found = 0;
    for (const auto& row : bench["rows"]) {
      const auto c = number(row, "context");
      if (!c || static_cast<int>(*c) != r.context) continue;
      const std::string kernel = text(row, "kernel");
      const bool whole = kernel == prefix + "_attention";
      if (kernel != prefix + "_qk" && kernel != prefix + "_sv" && !whole) continue;
      const auto t = number(row, "microseconds");
      const auto b = number(row, "fp16_bytes");
      if (!t || !b || !(*t > 0) || !(*b > 0)) {
        return make_error(fmt::format(
            "GPU benchmark: row '{}' at {} tokens needs positive 'microseconds' and 'fp16_bytes'",
            kernel, r.context));
      }
      us += *t;
      values += *b / 2;  // an _attention row counts K and V both
      found += whole ? 2 : 1;
    }
    if (found != 2) return 0.0;  // not measured: the default stands
    return values / (us * 1e-6);
  };
  const KernelRates& d = default_kernel_rates();
  for (auto [prefix, field, fallback] : {std::tuple{"fp8", &r.fp8, d.fp8},
                                         {"packed4", &r.packed, d.packed},
                                         {"huffman", &r.huffman, d.huffman}}) {
    auto v = rate(prefix);
    if (!v) return v.error();
    *field = *v > 0 ? *v : fallback * (fp32_tflops > 0 ? fp32_tflops / d.fp32_tflops : 1.0);
  }
  r.huffman_encode = d.huffman_encode;
  if (bench.contains("encode") && bench["encode"].is_array()) {
    double best = 0;
    for (const auto& e : bench["encode"]) {
      const auto c = number(e, "context");
      const auto g = number(e, "gb_s");
      if (c && g && *c > best && *g > 0) {
        best = *c;
        r.huffman_encode = *g * 1e9 / 2;
      }
    }
  }
  return r;
}

nlohmann::json kernel_rates_to_json(const KernelRates& r) {
  return {{"gpu_id", r.gpu_id},
          {"device", r.device},
          {"source", r.source},
          {"fp32_tflops", r.fp32_tflops},
          {"fp8_values_per_s", r.fp8},
          {"packed_values_per_s", r.packed},
          {"huffman_values_per_s", r.huffman},
          {"huffman_encode_values_per_s", r.huffman_encode},
          {"context", r.context},
          {"measured", r.measured}};
}

DecompressionRate decompression_rate(const Scheme& s, const GpuSpec& gpu, const KernelRates& r) {
  DecompressionRate out;
  double base = 0;
  switch (s.kernel) {
    case SchemeKernel::None:
      out.source = "nothing to decompress";
      return out;
    case SchemeKernel::Fp8:
      base = r.fp8;
      break;
    case SchemeKernel::Packed:
      base = r.packed;
      break;
    case SchemeKernel::Huffman:
      base = r.huffman;
      out.encode_values_per_s = r.huffman_encode;
      break;
  }
  // Another GPU than the one measured: the kernels are bound by their instruction issue more
  // than by memory (docs/PERFORMANCE.md), so the rate moves with the GPU's FP32 throughput.
  double scale = 1;
  if (gpu.id == r.gpu_id || !(gpu.tflops.fp32 > 0) || !(r.fp32_tflops > 0)) {
    out.source =
        fmt::format("{} ({})", r.measured ? "measured on this device" : "default", r.source);
  } else {
    scale = gpu.tflops.fp32 / r.fp32_tflops;
    out.source = fmt::format("{} on {}, × {:.2f} for {}'s FP32 throughput ({:g} / {:g} TFLOPS)",
                             r.measured ? "measured" : "default", r.gpu_id, scale, gpu.id,
                             gpu.tflops.fp32, r.fp32_tflops);
  }
  out.values_per_s = base * scale;
  out.encode_values_per_s *= scale;
  return out;
}

Status Efficiencies::validate() const {
  for (auto [name, v] : {std::pair{"--efficiency", bandwidth},
                         {"--compute-efficiency", compute},
                         {"--link-efficiency", host_link}}) {
    if (!(v > 0 && v <= 1)) return make_error(fmt::format("{} {}: must be in (0, 1]", name, v));
  }
  return Ok{};
}

double StepCost::intensity() const {
  const double bytes = weights_bytes + kv_bytes + host_bytes;
  return bytes > 0 ? (dense_flops + attention_flops) / bytes : 0;
}

double StepCost::achieved_flops() const {
  return seconds > 0 ? (dense_flops + attention_flops) / seconds : 0;
}

double causal_pairs(const ModelSpec& m, LayerKind kind, std::int64_t prompt) {
  const double p = static_cast<double>(prompt);
  const auto triangle = [](double n) { return n * (n + 1) / 2; };
  switch (kind) {
    case LayerKind::Linear:
      return 0;
    case LayerKind::Full:
      return triangle(p);
    case LayerKind::Sliding: {
      const double w = m.sliding_window ? *m.sliding_window : p;
      return p <= w ? triangle(p) : triangle(w) + (p - w) * w;
    }
    case LayerKind::Chunked: {
      const double c = m.chunk_size > 0 ? m.chunk_size : p;
      const double full = std::floor(p / c);
      return full * triangle(c) + triangle(p - full * c);
    }
  }
  return triangle(p);
}

LatencyInputs latency_inputs(const ModelSpec& m, const GpuSpec& g, const Scheme& s,
                             const Deployment& d, std::int64_t context,
                             const DecompressionRate& rate, const Efficiencies& e) {
  LatencyInputs in;
  in.tp = d.tp, in.pp = d.pp;
  in.offload = s.offload;
  in.bw = g.bandwidth_gbs * 1e9 * e.bandwidth;
  const std::string weights_dtype = d.weights_dtype.empty() ? m.weights_dtype : d.weights_dtype;
  in.dense_peak = g.dense_tflops(weights_dtype) * 1e12 * e.compute;
  in.attention_peak = g.tflops.bf16 * 1e12 * e.compute;
  in.link = g.host_link_gbs * 1e9 * e.host_link;
  in.decompress_rate = rate.values_per_s;
  in.weights_bytes = static_cast<double>(weights_bytes_per_gpu(m, d));
  in.weights_read = weights_read(m);
  const double active = m.active_params() * 1e9;
  const KvLayout kv = kv_layout(m, s, d, context);
  in.kv_bytes_per_sequence = static_cast<double>(kv.bytes_per_sequence);
  in.dense_flops_per_sequence = 2 * active / (d.tp * d.pp);
  in.attention_flops_per_sequence =
      attention_flops_per_token(m, d.tp) * static_cast<double>(kv.layer_tokens);
  in.decompress_values_per_sequence =
      s.kernel == SchemeKernel::None
          ? 0
          : static_cast<double>(kv.layer_tokens) * values_per_token(m, kv.heads);

  // ---- Prefill: one prompt of `context` tokens, the stages one after another.
  PrefillCost& p = in.prefill;
  double pairs = 0;  // Σ over layers of the (query, key) pairs, whole model
  for (int l = 0; l < m.layers; ++l) pairs += causal_pairs(m, m.layer_kind(l), context);
  const double prefill_dense = 2 * active * static_cast<double>(context);
  const double prefill_attention = attention_flops_per_token(m, 1) * pairs;
  p.flops = prefill_dense + prefill_attention;
  p.bytes = (in.weights_bytes * in.weights_read.fraction(static_cast<double>(context)) +
             in.kv_bytes_per_sequence) *
            d.pp;
  p.t_compute = in.dense_peak > 0 && in.attention_peak > 0
                    ? (prefill_dense / in.dense_peak + prefill_attention / in.attention_peak) / d.tp
                    : 0;
  p.t_memory = p.bytes / in.bw;
  p.compute_bound = p.t_compute >= p.t_memory;
  if (s.kernel != SchemeKernel::None) {
    // Compressing the new KV: read in fp16 and written as stored; or the encoder's measured rate.
    const double fp16_bytes =
        static_cast<double>(kv.layer_tokens) * values_per_token(m, kv.heads) * 2;
    const double pass = (fp16_bytes + in.kv_bytes_per_sequence) / in.bw;
    const double encode =
        rate.encode_values_per_s > 0 ? fp16_bytes / 2 / rate.encode_values_per_s : 0;
    p.t_compress = std::max(pass, encode) * d.pp;
  }
  p.seconds = std::max(p.t_compute, p.t_memory) + p.t_compress;
  return in;
}

Latency decode_latency(const LatencyInputs& in, int batch, std::uint64_t kv_gpu_capacity) {
  Latency out;
  out.prefill = in.prefill;
  out.ttft_s = in.prefill.seconds;
  StepCost& st = out.step;
  const double b = batch;
  const double kv_total = in.kv_bytes_per_sequence * b;
  double on_gpu = kv_total;
  if (in.offload && kv_total > static_cast<double>(kv_gpu_capacity)) {
    on_gpu = static_cast<double>(kv_gpu_capacity);
    st.host_bytes = kv_total - on_gpu;
  }
  st.weights_bytes = in.weights_bytes * in.weights_read.fraction(b);
  st.kv_bytes = on_gpu;
  st.dense_flops = in.dense_flops_per_sequence * b;
  st.attention_flops = in.attention_flops_per_sequence * b;
  st.decompress_values = in.decompress_values_per_sequence * b;
  st.t_weights = st.weights_bytes / in.bw;
  st.t_dense = in.dense_peak > 0 ? st.dense_flops / in.dense_peak : 0;
  st.t_kv = st.kv_bytes / in.bw;
  st.t_attention = in.attention_peak > 0 ? st.attention_flops / in.attention_peak : 0;
  st.t_decompress = in.decompress_rate > 0 ? st.decompress_values / in.decompress_rate : 0;
  st.t_host = st.host_bytes > 0 ? (in.link > 0 ? st.host_bytes / in.link : INFINITY) : 0;
  // Each part takes its slower side; the step waits on the larger of the two parts' limits.
  const std::pair<double, const char*> dense_side = st.t_dense > st.t_weights
                                                        ? std::pair{st.t_dense, "dense compute"}
                                                        : std::pair{st.t_weights, "weights read"};
  // The decompression rate is a fused kernel's (decode, q·K and softmax·V in one pass), so its
  // time holds the attention's arithmetic too: the larger of the two is charged, not their sum.
  std::pair<double, const char*> attention_side{st.t_kv, "KV read"};
  if (st.t_attention > attention_side.first) attention_side = {st.t_attention, "attention compute"};
  if (st.t_decompress > attention_side.first) attention_side = {st.t_decompress, "decompression"};
  if (st.t_host > attention_side.first) attention_side = {st.t_host, "host link"};
  st.seconds = in.pp * (dense_side.first + attention_side.first);
  st.attention_bound_by = attention_side.second;
  st.bound_by =
      dense_side.first >= attention_side.first ? dense_side.second : attention_side.second;
  st.compute_bound =
      st.t_dense + std::max(st.t_attention, st.t_decompress) > st.t_weights + st.t_kv + st.t_host;
  out.tpot_s = st.seconds;
  out.tokens_per_s_per_user = st.seconds > 0 ? 1 / st.seconds : 0;
  out.tokens_per_s_deployment = b * out.tokens_per_s_per_user;
  out.tokens_per_s_per_gpu = out.tokens_per_s_deployment / (in.tp * in.pp);
  return out;
}

Latency estimate_latency(const ModelSpec& m, const GpuSpec& g, const Scheme& s, const Deployment& d,
                         std::int64_t context, int batch, const DecompressionRate& rate,
                         const Efficiencies& e, std::uint64_t kv_gpu_capacity) {
  return decode_latency(latency_inputs(m, g, s, d, context, rate, e), batch, kv_gpu_capacity);
}

}  // namespace kvlab::planners
