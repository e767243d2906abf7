// The compression methods a user can pick, their parameters, and the factory that builds the
// quantizer for a configuration (validating every parameter with a clear message).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/core/result.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab {

enum class MethodKind { Int8, Int4, Kivi, Fp8E4M3, Fp8E5M2, Tiered, KvComp };

struct MethodConfig {
  MethodKind kind = MethodKind::Kivi;
  // KIVI (Liu et al. 2024): bits 2 or 4, group size G, recent R tokens in fp16.
  int bits = 2;
  int group_size = 32;
  int residual = 128;
  // FP8: one scale per tensor, or one per KV head.
  bool per_head_scale = false;
  // Age-tiered: the newest `residual` tokens fp16, the next `int8_tokens` INT8, older ones at
  // `old_bits` (4 or 2); groups as KIVI's.
  int int8_tokens = 512;
  int old_bits = 4;
  // KVComp (Jiang et al. 2025): key blocks of `block_size` tokens, per-channel inside a block;
  // values per token; step = rel_scale * (max - min) of the unit.
  int block_size = 64;
  double rel_scale = 0.05;
  // Entropy coding of KVComp's byte codes (KVComp Sec. 3.3), in blocks of `block_size` tokens
  // with one Huffman codebook per layer and K/V built from that tensor's histogram; none when
  // empty.
  std::optional<CodecKind> codec;
};

std::string_view method_id(MethodKind kind);  // "int8", "kivi", "fp8-e4m3", ...
std::vector<std::string_view> method_ids();
Result<MethodKind> parse_method(std::string_view id);
// "none" (no entropy coding), "bitpack", "varwidth" or "huffman".
Result<std::optional<CodecKind>> parse_codec_option(std::string_view id);

// Only the parameters that matter for the method, as JSON (for run records).
std::string method_label(const MethodConfig& config);  // "kivi-2 G=32 R=128"

Result<std::unique_ptr<Quantizer>> make_quantizer(const MethodConfig& config);

}  // namespace kvlab
