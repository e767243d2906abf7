#include "quality/quality_configs.h"

#include <QObject>

namespace kvlab::gui {

namespace {

QualityChoice method_choice(const char* id, const char* name, MethodConfig method,
                            bool checked_at_start = true) {
  QualityChoice c{QString::fromLatin1(id), QString::fromUtf8(name), {}};
  c.config.method = method;
  c.checked_at_start = checked_at_start;
  return c;
}

constexpr bool kOptIn = false;

MethodConfig kind(MethodKind k) {
  MethodConfig m;
  m.kind = k;
  return m;
}

MethodConfig kivi(int bits) {
  MethodConfig m = kind(MethodKind::Kivi);
  m.bits = bits;
  return m;
}

MethodConfig with_bits(MethodKind k, int bits) {
  MethodConfig m = kind(k);
  m.bits = bits;
  return m;
}

// KIVI with its group steps and minimums in fp32 instead of the reference's fp16: the fidelity
// comparison separates the method's error from the parameters' rounding.
MethodConfig kivi_f32(int bits) {
  MethodConfig m = kivi(bits);
  m.param_dtype = DType::F32;
  return m;
}

// KVComp is meant to be entropy coded (Jiang et al. 2025, Sec. 3.3): Huffman over its codes.
MethodConfig kvcomp(double rel_scale) {
  MethodConfig m = kind(MethodKind::KvComp);
  m.rel_scale = rel_scale;
  m.codec = CodecKind::Huffman;
  return m;
}

QualityChoice eviction_choice(const char* id, const char* name, EvictionPolicy policy,
                              double fraction) {
  QualityChoice c{QString::fromLatin1(id), QString::fromUtf8(name), {}};
  c.config.method.reset();
  EvictionConfig e;  // the CLI's defaults: 4 sinks, H2O's budget half recent tokens
  e.policy = policy;
  e.budget = Budget{fraction, true};
  c.config.eviction = e;
  return c;
}

}  // namespace

const std::vector<QualityChoice>& quality_choices() {
  static const std::vector<QualityChoice> choices = {
      method_choice("int8", "INT8", kind(MethodKind::Int8)),
      method_choice("int4", "INT4", kind(MethodKind::Int4)),
      method_choice("kivi-4", "KIVI-4", kivi(4)),
      method_choice("kivi-2", "KIVI-2", kivi(2)),
      method_choice("kivi-2-f32", "KIVI-2 fp32 params", kivi_f32(2), kOptIn),
      method_choice("fp8-e4m3", "FP8 E4M3", kind(MethodKind::Fp8E4M3)),
      // llama.cpp's cache types with its default Hadamard rotation (attn_rot).
      method_choice("q8_0", "q8_0", kind(MethodKind::Q8_0), kOptIn),
      method_choice("q4_0", "q4_0", kind(MethodKind::Q4_0), kOptIn),
      method_choice("iq4_nl", "iq4_nl", kind(MethodKind::IQ4_NL), kOptIn),
      method_choice("nvfp4", "NVFP4", kind(MethodKind::Nvfp4), kOptIn),
      method_choice("mxfp4", "MXFP4", kind(MethodKind::Mxfp4), kOptIn),
      method_choice("kvquant-3", "KVQuant-3", with_bits(MethodKind::KvQuant, 3), kOptIn),
      method_choice("turboquant-3", "TurboQuant-3", with_bits(MethodKind::TurboQuant, 3), kOptIn),
      method_choice("kvcomp-0.02", "KVComp 0.02 + Huffman", kvcomp(0.02)),
      method_choice("kvcomp-0.05", "KVComp 0.05 + Huffman", kvcomp(0.05)),
      method_choice("kvcomp-0.1", "KVComp 0.1 + Huffman", kvcomp(0.1)),
      eviction_choice("h2o-50", "H2O 50%", EvictionPolicy::H2O, 0.5),
      eviction_choice("h2o-20", "H2O 20%", EvictionPolicy::H2O, 0.2),
      eviction_choice("streaming-50", "StreamingLLM 50%", EvictionPolicy::Streaming, 0.5),
      eviction_choice("streaming-20", "StreamingLLM 20%", EvictionPolicy::Streaming, 0.2),
      eviction_choice("merge-50", "Merge 50%", EvictionPolicy::Merge, 0.5),
  };
  return choices;
}

const QualityChoice* find_quality_choice(const QString& id) {
  for (const QualityChoice& c : quality_choices()) {
    if (c.id == id) return &c;
  }
  return nullptr;
}

std::string quality_run_method(const QualityConfig& config) {
  const auto& method = config.method;
  const auto& eviction = config.eviction;
  if (eviction && method) return eviction_label(*eviction) + " + " + method_label(*method);
  if (eviction) return eviction_label(*eviction);
  return method ? method_label(*method) : std::string("none");
}

QString quality_choice_tooltip(const QualityChoice& choice) {
  const QString label = QString::fromStdString(quality_run_method(choice.config));
  if (choice.config.eviction) {
    return QObject::tr(
               "%1: eviction in the loop; every KV head keeps its tokens through the "
               "policy and attention reads only the kept ones")
        .arg(label);
  }
  return QObject::tr(
             "%1: attention reads the whole prefix quantized and dequantized again "
             "after each token")
      .arg(label);
}

QString quality_short_name(const std::string& run_method) {
  for (const QualityChoice& c : quality_choices()) {
    if (quality_run_method(c.config) == run_method) return c.name;
  }
  return QString::fromStdString(run_method);
}

}  // namespace kvlab::gui
