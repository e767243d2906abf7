// Encode and decode throughput of the code codecs (Huffman, rANS, bitpack, varwidth: FORMAT.md)
// on KVComp's code streams of one llama3-8b-shaped layer (4,096 tokens x 8 KV heads x 128),
// keys and values separately, with the compressed size per code and the stream's order-0
// entropy as counters. The streams come at three relative error bounds: KVComp's default 0.05
// (about 4.1 bits of entropy per code), 0.1 (about 3.1) and 0.2 (about 2.2), since issue 3's
// targets speak of streams of 2-3 bits. Rates are GB/s of decoded codes (one byte each) for both
// directions, so encode and decode compare directly. codec_bench_zstd.cpp adds zstd on the same
// bytes when libzstd is there; bench/codec_report.py turns one JSON run into the table in
// docs/PERFORMANCE.md.
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "codec_bench_data.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::bench {

namespace {

// Benchmarks cannot return an error: a broken setup stops the program with the message.
template <class T>
T must(Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "codec bench: %s: %s\n", what, r.message().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

// Relative error bounds of the streams: role r is keys (even r) or values (odd) at
// kRelScales[r / 2]; the default's streams keep the plain names "key" and "value".
constexpr double kRelScales[] = {0.05, 0.1, 0.2};
static_assert(kCodeStreams == 2 * std::size(kRelScales));

std::vector<CodeStream> make_streams() {
  SyntheticConfig s;
  s.preset = "llama3-8b";
  s.layers = 1;
  s.context = 4096;
  const KvCache cache = must(generate_synthetic(s), "synthetic llama3-8b");
  std::vector<CodeStream> streams;
  for (const double rel : kRelScales) {
    MethodConfig m;
    m.kind = MethodKind::KvComp;
    m.rel_scale = rel;
    const auto quantizer = must(make_quantizer(m), "kvcomp quantizer");
    for (const TensorRole role : {TensorRole::Key, TensorRole::Value}) {
      const Tensor& t = role == TensorRole::Key ? cache.layers[0].key : cache.layers[0].value;
      QuantizedTensor q = must(quantizer->quantize(t.view(), role), "kvcomp quantize");
      CodeStream c;
      c.name = std::string(role_name(role));
      if (rel != kRelScales[0]) c.name += fmt::format("@rel{}", rel);
      c.tokens = q.tokens;
      c.heads = q.heads;
      c.dim = q.dim;
      c.codes.assign(q.codes.begin(), q.codes.end());
      const CodeCounts histogram = count_codes(c.codes);
      c.book = must(choose_codebook(c.codes, c.dim, kvcomp_max_code(rel), histogram, true),
                    "huffman codebook");
      c.single_book = must(HuffmanCodebook::from_histogram(histogram), "single-code codebook");
      c.entropy_bits = shannon_entropy_bits(histogram);
      streams.push_back(std::move(c));
    }
  }
  return streams;
}

CodecConfig codec_config(CodecKind kind) {
  CodecConfig c;
  c.kind = kind;
  return c;
}

EncodedCodes encode(const CodeStream& s, CodecKind kind) {
  return must(encode_codes(s.codes, s.tokens, s.heads, s.dim, codec_config(kind), &s.book),
              "encode codes");
}

void BM_Encode(benchmark::State& state) {
  const auto kind = static_cast<CodecKind>(state.range(0));
  const CodeStream& s = code_stream(static_cast<int>(state.range(1)));
  const EncodedCodes reference = encode(s, kind);
  for (auto _ : state) {
    auto e = encode_codes(s.codes, s.tokens, s.heads, s.dim, codec_config(kind), &s.book);
    benchmark::DoNotOptimize(e);
  }
  report_codec(state, s, std::string(codec_id(kind)), reference.payload_bytes(),
               reference.total_bytes() + codebook_bytes(kind));
}

void BM_Decode(benchmark::State& state) {
  const auto kind = static_cast<CodecKind>(state.range(0));
  const CodeStream& s = code_stream(static_cast<int>(state.range(1)));
  const EncodedCodes e = encode(s, kind);
  std::vector<std::uint8_t> out(s.codes.size());
  for (auto _ : state) {
    Status st = decode_codes(e, &s.book, out);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  if (out != s.codes) state.SkipWithError("decoded codes differ from the input");
  report_codec(state, s, std::string(codec_id(kind)), e.payload_bytes(),
               e.total_bytes() + codebook_bytes(kind));
}

// Where the engine's book codes pairs (docs/FORMAT.md, "Pair symbols": every code below 16, the
// rel 0.1 and 0.2 streams), the same stream through a single-code book beside it
// ("huffman-codes"): what pairs gain in size and speed, measured in the same run.
void BM_EncodeSingleCodes(benchmark::State& state) {
  const CodeStream& s = code_stream(static_cast<int>(state.range(0)));
  if (!s.book.pairs()) {
    state.SkipWithError("the engine codes this stream one code per symbol already");
    return;
  }
  const CodecConfig config = codec_config(CodecKind::Huffman);
  const EncodedCodes reference =
      must(encode_codes(s.codes, s.tokens, s.heads, s.dim, config, &s.single_book), "encode");
  for (auto _ : state) {
    auto e = encode_codes(s.codes, s.tokens, s.heads, s.dim, config, &s.single_book);
    benchmark::DoNotOptimize(e);
  }
  report_codec(state, s, "huffman-codes", reference.payload_bytes(),
               reference.total_bytes() + s.single_book.serialized_bytes());
}

void BM_DecodeSingleCodes(benchmark::State& state) {
  const CodeStream& s = code_stream(static_cast<int>(state.range(0)));
  if (!s.book.pairs()) {
    state.SkipWithError("the engine codes this stream one code per symbol already");
    return;
  }
  const EncodedCodes e = must(encode_codes(s.codes, s.tokens, s.heads, s.dim,
                                           codec_config(CodecKind::Huffman), &s.single_book),
                              "encode");
  std::vector<std::uint8_t> out(s.codes.size());
  for (auto _ : state) {
    Status st = decode_codes(e, &s.single_book, out);
    benchmark::DoNotOptimize(st);
    benchmark::ClobberMemory();
  }
  if (out != s.codes) state.SkipWithError("decoded codes differ from the input");
  report_codec(state, s, "huffman-codes", e.payload_bytes(),
               e.total_bytes() + s.single_book.serialized_bytes());
}

// The rel 0.1 and 0.2 streams, whose codes are all below 16 (1 / rel_scale at most).
void streams_with_pair_books(benchmark::internal::Benchmark* b) {
  for (int role = 2; role < kCodeStreams; ++role) b->Arg(role);
}

void codecs(benchmark::internal::Benchmark* b) {
  for (const CodecKind k :
       {CodecKind::Huffman, CodecKind::Rans, CodecKind::BitPack, CodecKind::VarWidth}) {
    for (int role = 0; role < kCodeStreams; ++role) b->Args({static_cast<int>(k), role});
  }
}

}  // namespace

const CodeStream& code_stream(int role) {
  static const std::vector<CodeStream> streams = make_streams();
  return streams[static_cast<std::size_t>(role)];
}

void report_codec(benchmark::State& state, const CodeStream& s, const std::string& codec,
                  std::uint64_t payload_bytes, std::uint64_t total_bytes) {
  const auto n = static_cast<double>(s.codes.size());
  state.SetLabel(codec + "/" + s.name);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(s.codes.size()));
  state.counters["payload_bits_per_code"] = 8.0 * static_cast<double>(payload_bytes) / n;
  state.counters["total_bits_per_code"] = 8.0 * static_cast<double>(total_bytes) / n;
  state.counters["entropy_bits_per_code"] = s.entropy_bits;
}

BENCHMARK(BM_Encode)->Apply(codecs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decode)->Apply(codecs)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_EncodeSingleCodes)->Apply(streams_with_pair_books)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeSingleCodes)->Apply(streams_with_pair_books)->Unit(benchmark::kMicrosecond);

}  // namespace kvlab::bench

BENCHMARK_MAIN();
