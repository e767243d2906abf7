// The code streams the codec benchmarks share: one layer of the synthetic llama3-8b preset at
// 4,096 tokens, quantized by KVComp at three relative error bounds, keys and values separately,
// with the per-layer Huffman codebook built from the stream's own codes (the prefill, KVComp
// Sec. 3.3) as the engine builds it, and a single-code book beside it.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>
#include <vector>

#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/quant/quantizer.h"

namespace kvlab::bench {

struct CodeStream {
  std::string name;  // "key" or "value"
  int tokens = 0, heads = 0, dim = 0;
  std::vector<std::uint8_t> codes;  // [token][head][dim]
  HuffmanCodebook book;             // the engine's choice (choose_codebook): pairs where codes < 16
  HuffmanCodebook single_book;      // one code per symbol, whatever the codes
  double entropy_bits = 0.0;        // order-0 Shannon entropy per code
};

// role 0: keys, 1: values, at KVComp's default bound (rel 0.05); roles 2..5 the same at rel 0.1
// and 0.2 (codec_bench.cpp). Built once per process.
constexpr int kCodeStreams = 6;
const CodeStream& code_stream(int role);

// Decoded code bytes per second, the stream's entropy, and the compressed size per code:
// `payload_bytes` alone and `total_bytes` with all metadata and codebooks.
void report_codec(benchmark::State& state, const CodeStream& s, const std::string& codec,
                  std::uint64_t payload_bytes, std::uint64_t total_bytes);

}  // namespace kvlab::bench
