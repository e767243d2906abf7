#include "kvlab/gui/method_about.h"

#include <QObject>

namespace kvlab::gui {

QString method_description(MethodKind kind) {
  switch (kind) {
    case MethodKind::Int8:
      return QObject::tr("Symmetric INT8, one scale max|x|/127 per tensor: the naive baseline.");
    case MethodKind::Int4:
      return QObject::tr("Symmetric INT4, one scale max|x|/7 per tensor: the naive baseline.");
    case MethodKind::Kivi:
      return QObject::tr(
          "KIVI: keys per channel over groups of G tokens, values per token; the newest R tokens "
          "stay fp16.");
    case MethodKind::Fp8E4M3:
    case MethodKind::Fp8E5M2:
      return QObject::tr(
          "FP8 with a per-tensor (or per-head) scale, from the whole tensor or calibrated on the "
          "first tokens.");
    case MethodKind::Tiered:
      return QObject::tr(
          "Age-tiered: newest tokens fp16, the next ones INT8, the oldest at fewer bits.");
    case MethodKind::KvComp:
      return QObject::tr(
          "KVComp blockwise, error-bounded: step = rel_scale × (max − min) of each block channel "
          "(keys) or token (values); uint8 codes.");
    case MethodKind::Q8_0:
      return QObject::tr(
          "llama.cpp q8_0: blocks of 32 values, int8 codes and an fp16 scale (8.5 bits/value).");
    case MethodKind::Q4_0:
      return QObject::tr(
          "llama.cpp q4_0: blocks of 32 values, 4-bit codes and an fp16 scale (4.5 bits/value).");
    case MethodKind::Q4_1:
      return QObject::tr(
          "llama.cpp q4_1: blocks of 32 values, 4-bit codes, an fp16 scale and minimum (5 "
          "bits/value).");
    case MethodKind::Q5_0:
      return QObject::tr(
          "llama.cpp q5_0: blocks of 32 values, 5-bit codes and an fp16 scale (5.5 bits/value).");
    case MethodKind::Q5_1:
      return QObject::tr(
          "llama.cpp q5_1: blocks of 32 values, 5-bit codes, an fp16 scale and minimum (6 "
          "bits/value).");
    case MethodKind::IQ4_NL:
      return QObject::tr(
          "llama.cpp iq4_nl: blocks of 32 values, 4-bit indexes into a fixed non-linear table "
          "and an fp16 scale (4.5 bits/value).");
    case MethodKind::Nvfp4:
      return QObject::tr(
          "NVFP4: E2M1 values, an E4M3 scale per 16 values and one fp32 scale per tensor (4.5 "
          "bits/value).");
    case MethodKind::Mxfp4:
      return QObject::tr(
          "MXFP4: E2M1 values and a power-of-two E8M0 scale per 32 values (4.25 bits/value).");
    case MethodKind::KvQuant:
      return QObject::tr(
          "KVQuant: keys per channel before RoPE, values per token, on non-uniform levels "
          "(k-means or NormalFloat); the largest values kept exactly in a sparse table.");
    case MethodKind::TurboQuant:
      return QObject::tr(
          "TurboQuant: each head vector's norm, then its randomly rotated direction on Lloyd-Max "
          "levels; optionally a 1-bit QJL sketch of the residual.");
  }
  return {};
}

QString method_citation(MethodKind kind) {
  const std::string_view ref = method_reference(kind);
  return QObject::tr("Reference: %1")
      .arg(QString::fromUtf8(ref.data(), static_cast<qsizetype>(ref.size())));
}

}  // namespace kvlab::gui
