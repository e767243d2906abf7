// The planner's memory model (see kv_memory.h for what is counted).
#include "kvlab/planners/kv_memory.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "kvlab/engine/core/names.h"
#include "kvlab/engine/quant/kivi.h"
#include "kvlab/planners/memory_formula.h"

namespace kvlab::planners {
namespace {

constexpr std::uint64_t kScaleBytes = 4;  // one float
// KIVI's step and minimum per group, fp16 as its reference keeps them (kivi.h).
constexpr int kKiviParamBytes = KiviShape{}.param_bytes;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) {
  return (a + b - 1) / b;
}

std::string thousands(std::int64_t v) {
  const std::string digits = std::to_string(v < 0 ? -v : v);
  std::string s = v < 0 ? "-" : "";
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

std::string bytes_text(double b) {
  return b < 65536 ? fmt::format("{} B", thousands(static_cast<std::int64_t>(std::llround(b))))
                   : format_bytes(b);
}

Result<double> parse_number(std::string_view t) {
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc{} || end != t.data() + t.size() || !std::isfinite(v)) {
    return make_error("not a number");
  }
  return v;
}

constexpr LayerKind kKinds[] = {LayerKind::Full, LayerKind::Sliding, LayerKind::Chunked,
                                LayerKind::Linear};

// Layers of each kind in each pipeline stage.
struct Stage {
  int count[4] = {0, 0, 0, 0};
  int of(LayerKind k) const { return count[static_cast<int>(k)]; }
  int total() const { return count[0] + count[1] + count[2] + count[3]; }
};

std::vector<Stage> stages(const ModelSpec& m, int pp) {
  std::vector<Stage> out(static_cast<std::size_t>(pp));
  for (int l = 0; l < m.layers; ++l) {
    // Stage sizes differ by at most one layer, larger stages first.
    const int s = static_cast<int>(static_cast<std::int64_t>(l) * pp / m.layers);
    out[s].count[static_cast<int>(m.layer_kind(l))] += 1;
  }
  return out;
}

std::int64_t paged(std::int64_t tokens, int page) {
  return static_cast<std::int64_t>(ceil_div(static_cast<std::uint64_t>(tokens), page)) * page;
}

// Bytes of one layer holding `tokens` tokens on one GPU.
std::uint64_t layer_bytes(const ModelSpec& m, const Scheme& s, int heads, std::int64_t tokens) {
  if (m.is_mla()) return scheme_tensor_bytes(s, true, tokens, 1, m.head_dim);
  return scheme_tensor_bytes(s, true, tokens, heads, m.head_dim) +
         scheme_tensor_bytes(s, false, tokens, heads, m.head_dim);
}

double value_bytes(const Scheme& s) {
  switch (s.kind) {
    case SchemeKind::Fp16:
      return 2.0;
    case SchemeKind::Fp8:
    case SchemeKind::Int8:
      return 1.0;
    case SchemeKind::Int4:
      return 0.5;
    case SchemeKind::Kivi:
      return s.bits / 8.0 + 2.0 * kKiviParamBytes / s.group_size;
    case SchemeKind::Measured:
      return s.measured_bits_per_value / 8.0;
    case SchemeKind::Engine:  // at a 128-wide head over 4,096 tokens
      return static_cast<double>(
                 method_tensor_bytes(s.method, TensorRole::Key, 4096, 1, 128).value_or(0)) /
             (4096.0 * 128.0);
  }
  return 2.0;
}

// The engine methods the planner offers, by scheme id.
struct EngineScheme {
  std::string_view id;
  MethodKind kind;
  int bits;
  SchemeKernel kernel;
};
constexpr EngineScheme kEngineSchemes[] = {
    {"q8_0", MethodKind::Q8_0, 8, SchemeKernel::Fp8},
    {"q4_0", MethodKind::Q4_0, 4, SchemeKernel::Packed},
    {"q4_1", MethodKind::Q4_1, 4, SchemeKernel::Packed},
    {"q5_0", MethodKind::Q5_0, 5, SchemeKernel::Packed},
    {"q5_1", MethodKind::Q5_1, 5, SchemeKernel::Packed},
    {"iq4_nl", MethodKind::IQ4_NL, 4, SchemeKernel::Packed},
    {"nvfp4", MethodKind::Nvfp4, 4, SchemeKernel::Packed},
    {"mxfp4", MethodKind::Mxfp4, 4, SchemeKernel::Packed},
    {"kvquant2", MethodKind::KvQuant, 2, SchemeKernel::Packed},
    {"kvquant3", MethodKind::KvQuant, 3, SchemeKernel::Packed},
    {"kvquant4", MethodKind::KvQuant, 4, SchemeKernel::Packed},
    {"turboquant2", MethodKind::TurboQuant, 2, SchemeKernel::Packed},
    {"turboquant3", MethodKind::TurboQuant, 3, SchemeKernel::Packed},
    {"turboquant4", MethodKind::TurboQuant, 4, SchemeKernel::Packed},
};

}  // namespace

std::vector<std::string_view> scheme_ids() {
  std::vector<std::string_view> ids = {"fp16", "bf16",  "fp8",   "int8",
                                       "int4", "kivi2", "kivi4", "kvcomp"};
  for (const auto& e : kEngineSchemes) ids.push_back(e.id);
  return ids;
}

Result<Scheme> parse_scheme(std::string_view id) {
  Scheme s;
  s.id = std::string(id);
  std::string_view base = id;
  std::string_view rest;
  if (const auto plus = id.find('+'); plus != std::string_view::npos) {
    base = id.substr(0, plus);
    rest = id.substr(plus + 1);
  }
  if (base == "fp16" || base == "bf16") {
    s.kind = SchemeKind::Fp16, s.bits = 16, s.label = std::string(base);
  } else if (base == "fp8") {
    s.kind = SchemeKind::Fp8, s.bits = 8, s.label = "fp8", s.kernel = SchemeKernel::Fp8;
  } else if (base == "int8") {
    s.kind = SchemeKind::Int8, s.bits = 8, s.label = "int8", s.kernel = SchemeKernel::Fp8;
  } else if (base == "int4") {
    s.kind = SchemeKind::Int4, s.bits = 4, s.label = "int4", s.kernel = SchemeKernel::Packed;
  } else if (base == "kivi2" || base == "kivi4") {
    s.kind = SchemeKind::Kivi, s.bits = base == "kivi2" ? 2 : 4;
    s.kernel = SchemeKernel::Packed;
    s.label = fmt::format("kivi-{} G=32 R=128", s.bits);
  } else if (base == "kvcomp") {
    s = measured_scheme(s.id, "kvcomp huffman", kKvCompDefaultBits, SchemeKernel::Huffman);
  } else if (const auto* e = std::find_if(std::begin(kEngineSchemes), std::end(kEngineSchemes),
                                          [&](const EngineScheme& x) { return x.id == base; });
             e != std::end(kEngineSchemes)) {
    s.kind = SchemeKind::Engine;
    s.bits = e->bits;
    s.kernel = e->kernel;
    s.method.kind = e->kind;
    s.method.bits = e->bits;
    s.label = method_label(s.method);
  } else {
    const auto ids = scheme_ids();
    return make_error(unknown_name_message("scheme", base, {ids.begin(), ids.end()}) +
                      "; or run:ID, each optionally +evict:N or +evict:F and +offload");
  }
  // The options after '+', in any order: evict:BUDGET, offload.
  while (id.find('+') != std::string_view::npos) {
    const auto plus = rest.find('+');
    std::string_view part = rest.substr(0, plus);
    if (part == "offload") {
      s.offload = true;
      s.label += " + host offload";
    } else if (part.rfind("evict:", 0) == 0) {
      if (s.evict_tokens || s.evict_fraction) {
        return make_error(fmt::format("scheme '{}': one eviction budget at most", id));
      }
      part.remove_prefix(6);
      const bool pct = !part.empty() && part.back() == '%';
      auto v = parse_number(pct ? part.substr(0, part.size() - 1) : part);
      if (!v || !(*v > 0)) {
        return make_error(
            fmt::format("scheme '{}': the eviction budget must be a positive number", id));
      }
      const double f = pct ? *v / 100 : *v;
      if (pct || f < 1) {
        if (f > 1)
          return make_error(fmt::format("scheme '{}': a budget fraction is at most 100%", id));
        s.evict_fraction = f;
        s.label += fmt::format(" + evict to {:g}%", f * 100);
      } else {
        if (f != std::floor(f)) {
          return make_error(fmt::format("scheme '{}': a token budget is a whole number", id));
        }
        s.evict_tokens = static_cast<std::int64_t>(f);
        s.label += fmt::format(" + evict to {} tokens", thousands(*s.evict_tokens));
      }
    } else {
      return make_error(fmt::format(
          "scheme '{}': after '+' expected evict:N (tokens), evict:F (fraction) or offload", id));
    }
    if (plus == std::string_view::npos) break;
    rest = rest.substr(plus + 1);
  }
  return s;
}

Scheme measured_scheme(std::string id, std::string label, double bits_per_value,
                       SchemeKernel kernel) {
  Scheme s;
  s.id = std::move(id);
  s.label = std::move(label);
  s.kind = SchemeKind::Measured;
  s.measured_bits_per_value = bits_per_value;
  s.bits = static_cast<int>(std::ceil(bits_per_value));
  s.kernel = kernel;
  return s;
}

Status Deployment::validate(const ModelSpec& m) const {
  if (tp < 1 || tp > 1024)
    return make_error(fmt::format("--tp {}: must be between 1 and 1024", tp));
  if (pp < 1 || pp > m.layers) {
    return make_error(
        fmt::format("--pp {}: must be between 1 and the model's {} layers", pp, m.layers));
  }
  if (!m.is_mla() && m.kv_heads % tp != 0 && tp % m.kv_heads != 0) {
    return make_error(fmt::format("--tp {}: must divide the {} KV heads or be a multiple of them",
                                  tp, m.kv_heads));
  }
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1)) {
    return make_error(fmt::format("--util {}: must be in (0, 1]", gpu_memory_utilization));
  }
  if (page_tokens < 1 || page_tokens > 65536) {
    return make_error(fmt::format("--page {}: must be between 1 and 65536 tokens", page_tokens));
  }
  if (!weights_dtype.empty()) {
    if (auto b = dtype_bytes(weights_dtype); !b) return make_error("--weights: " + b.message());
  }
  return Ok{};
}

int kv_heads_per_gpu(const ModelSpec& m, int tp) {
  if (m.is_mla()) return 1;
  return m.kv_heads >= tp ? m.kv_heads / tp : 1;  // tp > kv_heads: each GPU holds a replica
}

std::uint64_t scheme_tensor_bytes(const Scheme& s, bool key, std::int64_t tokens, int heads,
                                  int dim) {
  const std::uint64_t t = static_cast<std::uint64_t>(std::max<std::int64_t>(0, tokens));
  const std::uint64_t n = t * heads * dim;
  switch (s.kind) {
    case SchemeKind::Fp16:
      return 2 * n;
    case SchemeKind::Fp8:
    case SchemeKind::Int8:
      return n + kScaleBytes + kTensorHeaderBytes;
    case SchemeKind::Int4:
      return ceil_div(n, 2) + kScaleBytes + kTensorHeaderBytes;
    case SchemeKind::Measured:
      return static_cast<std::uint64_t>(
          std::ceil(static_cast<double>(n) * s.measured_bits_per_value / 8));
    case SchemeKind::Engine:
      return method_tensor_bytes(s.method, key ? TensorRole::Key : TensorRole::Value, t, heads, dim)
          .value_or(2 * n);
    case SchemeKind::Kivi:
      return kivi_tensor_bytes(
                 KiviShape{t, static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(dim),
                           s.bits, s.group_size, s.residual},
                 key ? TensorRole::Key : TensorRole::Value)
          .total();
  }
  return 2 * n;
}

std::int64_t layer_tokens(const ModelSpec& m, const Scheme& s, int layer, std::int64_t context) {
  return kind_tokens(m, s, m.layer_kind(layer), context);
}

std::int64_t kind_tokens(const ModelSpec& m, const Scheme& s, LayerKind kind,
                         std::int64_t context) {
  std::int64_t t = m.kind_tokens(kind, context);
  if (t == 0) return 0;
  if (s.evict_tokens) t = std::min(t, *s.evict_tokens);
  if (s.evict_fraction) {
    t = std::min(t, std::max<std::int64_t>(1, std::llround(*s.evict_fraction * context)));
  }
  return t;
}

KvLayout kv_layout(const ModelSpec& m, const Scheme& s, const Deployment& d, std::int64_t context) {
  KvLayout out;
  out.heads = kv_heads_per_gpu(m, d.tp);
  std::uint64_t bytes[4] = {0, 0, 0, 0};
  for (LayerKind k : kKinds) {
    if (k == LayerKind::Linear || m.layers_of(k) == 0) continue;
    const std::int64_t kept = kind_tokens(m, s, k, context);
    bytes[static_cast<int>(k)] = layer_bytes(m, s, out.heads, paged(kept, d.page_tokens));
  }
  for (const Stage& st : stages(m, d.pp)) {
    std::uint64_t b = 0;
    std::int64_t tokens = 0;
    for (LayerKind k : kKinds) {
      b += st.of(k) * bytes[static_cast<int>(k)];
      tokens += st.of(k) * kind_tokens(m, s, k, context);
    }
    if (b >= out.bytes_per_sequence) {
      out.bytes_per_sequence = b;
      out.layer_tokens = tokens;
      out.layers = st.total() - st.of(LayerKind::Linear);
    }
  }
  return out;
}

std::uint64_t kv_bytes_per_sequence(const ModelSpec& m, const Scheme& s, const Deployment& d,
                                    std::int64_t context) {
  return kv_layout(m, s, d, context).bytes_per_sequence;
}

double kv_bytes_per_token(const ModelSpec& m, const Scheme& s) {
  const double per_layer =
      m.is_mla() ? static_cast<double>(m.head_dim) : 2.0 * m.kv_heads * m.head_dim;
  return per_layer * (m.layers - m.layers_of(LayerKind::Linear)) * value_bytes(s);
}

std::uint64_t weights_bytes_total(const ModelSpec& m, const Deployment& d) {
  if (m.weights_bytes > 0 && d.weights_dtype.empty()) return m.weights_bytes;
  const auto b = dtype_bytes(d.weights_dtype.empty() ? m.weights_dtype : d.weights_dtype);
  // Rounded, not truncated: 8.03e9 × 2 is 16,059,999,999.999998 in binary floating point.
  return static_cast<std::uint64_t>(std::llround(m.params_billion * 1e9 * (b ? *b : 2.0)));
}

std::uint64_t weights_bytes_per_gpu(const ModelSpec& m, const Deployment& d) {
  return ceil_div(weights_bytes_total(m, d), static_cast<std::uint64_t>(d.tp) * d.pp);
}

WeightsRead weights_read(const ModelSpec& m) {
  WeightsRead w;
  if (m.experts <= 0 || !m.is_moe()) return w;
  const double share = static_cast<double>(m.experts_per_token) / m.experts;
  if (share >= 1) return w;
  const double p = m.params_billion, a = m.active_params();
  w.routed = std::min(p, (p - a) / (1 - share)) / p;
  w.always = 1 - w.routed;
  w.expert_share = share;
  return w;
}

double weights_read_fraction(const ModelSpec& m, double tokens) {
  return weights_read(m).fraction(tokens);
}

std::string explain_kv(const ModelSpec& m, const Scheme& s, const Deployment& d,
                       std::int64_t context, int batch) {
  std::string out;
  const auto line = [&](std::string text) { out += text + "\n"; };
  line(fmt::format("{} · {} · context {} tokens · batch {} · TP {} · PP {}", m.name, s.label,
                   thousands(context), batch, d.tp, d.pp));
  const int heads = kv_heads_per_gpu(m, d.tp);
  const double vb = value_bytes(s);
  const std::string vb_text =
      s.kind == SchemeKind::Kivi
          ? fmt::format("({} bits / 8 + 2 × {} B fp16 step and minimum / {} group) bytes", s.bits,
                        kKiviParamBytes, s.group_size)
          : fmt::format("{:g} {}", vb, vb == 1 ? "byte" : "bytes");
  if (m.is_mla()) {
    line(
        fmt::format("MLA latent per token per layer = ({} kv_lora_rank + {} rope) × {} = {} "
                    "(one latent for all heads; not split by TP)",
                    m.kv_lora_rank, m.qk_rope_head_dim, vb_text, bytes_text(m.head_dim * vb)));
  } else if (d.tp > 1) {
    line(m.kv_heads >= d.tp
             ? fmt::format("KV heads per GPU = {} kv_heads / TP {} = {}", m.kv_heads, d.tp, heads)
             : fmt::format("KV heads per GPU = 1: TP {} is more than the {} kv_heads, so each "
                           "GPU holds a replica",
                           d.tp, m.kv_heads));
  }
  const auto st = stages(m, d.pp);
  const Stage biggest = *std::max_element(
      st.begin(), st.end(), [](const Stage& a, const Stage& b) { return a.total() < b.total(); });
  if (d.pp > 1) {
    line(fmt::format("layers per GPU = {} layers / PP {} → {} on the largest stage", m.layers, d.pp,
                     biggest.total()));
  }
  const bool mixed = biggest.of(LayerKind::Full) != biggest.total();
  if (biggest.of(LayerKind::Linear) > 0) {
    line(fmt::format("{} linear-attention layers keep no KV (a fixed-size state instead)",
                     biggest.of(LayerKind::Linear)));
  }
  std::uint64_t total = 0;
  for (LayerKind kind : kKinds) {
    const int n = biggest.of(kind);
    if (n == 0 || kind == LayerKind::Linear) continue;
    const std::int64_t kept = kind_tokens(m, s, kind, context);
    const std::int64_t pages = paged(kept, d.page_tokens);
    const std::uint64_t bytes = n * layer_bytes(m, s, heads, pages);
    total += bytes;
    std::string tokens_text = thousands(kept) + " tokens";
    if (kind == LayerKind::Sliding) {
      tokens_text += fmt::format(" (window {})", thousands(*m.sliding_window));
    }
    if (kind == LayerKind::Chunked)
      tokens_text += fmt::format(" (chunk {})", thousands(m.chunk_size));
    if (kept < m.kind_tokens(kind, context)) tokens_text += " (eviction budget)";
    if (pages != kept) {
      tokens_text += fmt::format(" → {} in pages of {}", thousands(pages), d.page_tokens);
    }
    const std::string kind_text =
        kind == LayerKind::Full
            ? (mixed ? " full-attention" : "")
            : fmt::format(" {}",
                          kind == LayerKind::Sliding ? "sliding-window" : "chunked-attention");
    const std::string exact =
        s.kind == SchemeKind::Kivi
            ? fmt::format(" (exact, with the newest {} tokens in fp16 and per-tensor headers)",
                          s.residual)
            : "";
    if (m.is_mla()) {
      line(fmt::format("{}{} layers × {} × {} latent × {} = {}{}", n, kind_text, tokens_text,
                       m.head_dim, vb_text, bytes_text(static_cast<double>(bytes)), exact));
    } else {
      line(fmt::format("2 (K and V) × {}{} layers × {} kv_heads × {} head_dim × {} × {} = {}{}", n,
                       kind_text, heads, m.head_dim, tokens_text, vb_text,
                       bytes_text(static_cast<double>(bytes)), exact));
    }
  }
  const int gpus = d.tp * d.pp;
  line(fmt::format("= {} per sequence{}", bytes_text(static_cast<double>(total)),
                   gpus > 1 ? " on each GPU" : ""));
  line(fmt::format("× batch {} = {} of KV cache{}", batch,
                   bytes_text(static_cast<double>(total) * batch), gpus > 1 ? " on each GPU" : ""));
  if (gpus > 1) {
    // The whole deployment: every GPU holds its own share (or a replica) of the same sequences.
    line(fmt::format("× {} GPUs = {} of KV cache in the whole deployment", gpus,
                     bytes_text(static_cast<double>(total) * batch * gpus)));
  }
  return out;
}

}  // namespace kvlab::planners
