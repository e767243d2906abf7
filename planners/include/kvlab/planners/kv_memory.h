// The planner's memory model: bytes of KV cache per sequence under a storage scheme and a
// deployment (tensor and pipeline parallelism, paged allocation), weights, and the formula
// written out with the numbers in it.
//
// What is counted, per GPU:
//  - every layer the GPU holds (pipeline parallelism: layers split into `pp` stages, the largest
//    stage is what must fit);
//  - per layer, the tokens it keeps: all of them, at most `sliding_window` on a sliding-window
//    layer, at most the scheme's eviction budget; rounded up to whole pages of `page_tokens`;
//  - per token, K and V of the KV heads the GPU holds: kv_heads / tp, or one replicated head when
//    tp > kv_heads; an MLA latent is not split by tp;
//  - the scheme's bytes: fp16/bf16 2 bytes per value; fp8 and int8 1 byte plus one float scale
//    per tensor; int4 half a byte plus a scale; KIVI as the engine's quantizer allocates it
//    (codes, a float scale and minimum per group, the newest `residual` tokens in fp16, a 28-byte
//    header per tensor); the engine's byte formula of a llama.cpp block type, NVFP4, MXFP4,
//    KVQuant or TurboQuant (method_tensor_bytes); or a measured bits per value from a saved
//    compression run.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/planners/catalog.h"

namespace kvlab::planners {

// Engine: one of the engine's methods whose bytes are a formula (method_tensor_bytes(): the
// llama.cpp block types, NVFP4, MXFP4, KVQuant, TurboQuant).
enum class SchemeKind : std::uint8_t { Fp16, Fp8, Int8, Int4, Kivi, Measured, Engine };

// Which of the engine's attention kernels reads the stored KV (latency.h): none for fp16, the
// FP8 kernel (int8 is assumed to cost the same: one byte and a scale per value), the packed
// low-bit kernel (int4, KIVI), or the Huffman-stream kernel (KVComp).
enum class SchemeKernel : std::uint8_t { None, Fp8, Packed, Huffman };

struct Scheme {
  std::string id;  // "fp16", "kivi2", "run:12", "int4+evict:0.25"
  std::string label;
  SchemeKind kind = SchemeKind::Fp16;
  int bits = 16;
  int group_size = 32, residual = 128;  // KIVI
  double measured_bits_per_value = 0;   // Measured
  MethodConfig method;                  // Engine
  // Eviction: at most this many tokens per layer, or this fraction of the context.
  std::optional<std::int64_t> evict_tokens;
  std::optional<double> evict_fraction;
  SchemeKernel kernel = SchemeKernel::None;
  // Keep what does not fit in GPU memory in host memory, read over the host link every step.
  bool offload = false;
};

// KVComp with Huffman codes at rel_scale 0.05, as `kvlab bench gpu` measured it on an H100: 5.03
// bits per value with every stream byte, bit count and block offset (the bytes its attention
// kernels read at 32K, bench/results/gpu_h100_2026-11-23.json). A saved run of your own data
// (run:ID) gives your model's figure.
inline constexpr double kKvCompDefaultBits = 5.03;

// "fp16" (or "bf16"), "fp8", "int8", "int4", "kivi2", "kivi4", "kvcomp", the engine formats
// "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "nvfp4", "mxfp4", and "kvquant2".."kvquant4",
// "turboquant2".."turboquant4" (kSchemeIds), each optionally followed
// by "+evict:N" (tokens) or "+evict:F" (fraction < 1) or "+evict:25%", and by "+offload". "run:ID"
// is resolved by the caller (it needs the runs store): use measured_scheme().
Result<Scheme> parse_scheme(std::string_view id);
// Every built-in scheme id parse_scheme() accepts.
std::vector<std::string_view> scheme_ids();
Scheme measured_scheme(std::string id, std::string label, double bits_per_value,
                       SchemeKernel kernel = SchemeKernel::Packed);

struct Deployment {
  int tp = 1, pp = 1;
  double gpu_memory_utilization = 0.9;        // the serving engine's share of the GPU's memory
  std::uint64_t reserve_bytes = 1ull << 30;   // activations, CUDA graphs, runtime: not for KV
  int page_tokens = 16;                       // KV allocated in pages of this many tokens
  std::uint64_t host_bytes = 256ull << 30;    // host memory per GPU for offloaded KV
  std::string weights_dtype;                  // empty: the model's own
  Status validate(const ModelSpec& m) const;  // names the option
};

// KV heads one GPU holds (after tensor parallelism, with replication).
int kv_heads_per_gpu(const ModelSpec& m, int tp);

// Bytes one tensor (K or V) of `tokens` tokens × `heads` × `dim` takes under the scheme
// (eviction not applied). For KIVI this is the engine's allocation for the same shape.
std::uint64_t scheme_tensor_bytes(const Scheme& s, bool key, std::int64_t tokens, int heads,
                                  int dim);

// Tokens a layer keeps for a sequence of `context` tokens (window, chunk, eviction; no pages);
// 0 on a linear-attention layer.
std::int64_t layer_tokens(const ModelSpec& m, const Scheme& s, int layer, std::int64_t context);
std::int64_t kind_tokens(const ModelSpec& m, const Scheme& s, LayerKind kind, std::int64_t context);

// One sequence's KV on the most loaded GPU: bytes (pages included), the KV heads it holds, the
// layers with KV it holds, and the tokens summed over those layers (no pages), which is what an
// attention step reads and multiplies with.
struct KvLayout {
  std::uint64_t bytes_per_sequence = 0;
  int heads = 0, layers = 0;
  std::int64_t layer_tokens = 0;
};
KvLayout kv_layout(const ModelSpec& m, const Scheme& s, const Deployment& d, std::int64_t context);

// KV bytes of one sequence on the most loaded GPU.
std::uint64_t kv_bytes_per_sequence(const ModelSpec& m, const Scheme& s, const Deployment& d,
                                    std::int64_t context);
// KV bytes per token for the whole model (all its KV heads and layers, as if on one GPU; no pages,
// no window, no eviction; linear-attention layers hold none): the headline number, e.g. 327,680
// for Llama-3-70B in fp16, whatever the TP.
double kv_bytes_per_token(const ModelSpec& m, const Scheme& s);

std::uint64_t weights_bytes_total(const ModelSpec& m, const Deployment& d);
std::uint64_t weights_bytes_per_gpu(const ModelSpec& m, const Deployment& d);

// The share of the weights a forward pass over `tokens` tokens reads. Dense: all. Mixture of
// experts with E routed experts, k per token: the always-on part S = P − X plus the experts the
// tokens route to, X × (1 − (1 − k/E)^tokens) with X = (P − A) / (1 − k/E) the routed experts'
// parameters (P all parameters, A active per token; routing assumed uniform, so a step of one
// token reads A and a large batch reads nearly all P). As fractions of P: `always` + `routed` ×
// touched(tokens), so that a sweep computes the split once and each batch with one pow().
struct WeightsRead {
  double always = 1, routed = 0, expert_share = 0;  // dense: 1, 0, 0
  // Inline: a sweep calls it for every scenario.
  double fraction(double tokens) const {
    if (routed <= 0 || tokens <= 0) return 1.0;
    return std::clamp(always + routed * (1 - std::pow(1 - expert_share, tokens)), 0.0, 1.0);
  }
};
WeightsRead weights_read(const ModelSpec& m);
double weights_read_fraction(const ModelSpec& m, double tokens);

// The formula with the numbers substituted at every step, one step per line.
std::string explain_kv(const ModelSpec& m, const Scheme& s, const Deployment& d,
                       std::int64_t context, int batch);

}  // namespace kvlab::planners
