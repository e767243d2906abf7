// Decode-time attention straight from the compressed cache against the plain fp16 path (issue 3):
// one query per query head with the llama3-8b head shape (8 KV heads, 32 query heads, head_dim
// 128) over one layer of the synthetic llama3-8b preset at 4K, 16K and 32K tokens. q.K
// (fused_attention_logits vs fp16_attention_logits) and softmax.V (fused_attention_values vs
// fp16_attention_values) are timed apart. The compressed paths read a CompressedKvCache filled by
// one prefill: KVComp's Huffman streams with the cache defaults (B=64, rel=0.05: about 4.1 bits
// of entropy per code), the same at rel=0.1 and rel=0.2 (about 3.1 and 2.2 bits, the "2-3 bits"
// streams issue 3's targets speak of; there every code fits 4 bits and the cache codes pairs of
// codes, docs/FORMAT.md "Pair symbols"), and 4-bit fixed-width packing at rel=0.07 (above 1/15,
// so every code fits 4 bits). The context is a multiple of the block size, so nothing waits in
// the fp16 buffer and every token is decoded.
// All paths run the same register-blocked AVX2/FMA loops, with 16-lane AVX-512 registers where
// the build has them (engine/src/fused_kernels.h): the fp16 one converts rows with F16C and
// prefetches the rows of its next chunk, the compressed ones multiply integer codes with the
// dequantization folded into the query or the weights, so the ratios measure what reading codes
// costs against reading halves, not loop quality.
// Items are tokens processed; bytes are the stored K (or V) bytes the path reads.
// bench/fused_attention_report.py turns one JSON run into the table in docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab::bench {

namespace {

constexpr int kMaxContext = 32768;
constexpr int kQueryHeads = 32;

enum Path : int { kFp16 = 0, kHuffman = 1, kPacked = 2, kHuffmanCoarse = 3, kHuffmanCoarser = 4 };

const char* path_name(int path) {
  switch (path) {
    case kHuffman:
      return "huffman";
    case kPacked:
      return "bitpack4";
    case kHuffmanCoarse:
      return "huffman-rel0.1";
    case kHuffmanCoarser:
      return "huffman-rel0.2";
    default:
      return "fp16";
  }
}

// Benchmarks cannot return an error: a broken setup stops the program with the message.
template <class T>
T must(Result<T> r, const char* what) {
  if (!r) {
    std::fprintf(stderr, "fused attention bench: %s: %s\n", what, r.message().c_str());
    std::exit(1);
  }
  return std::move(*r);
}

void must(const Status& st, const char* what) {
  if (!st) {
    std::fprintf(stderr, "fused attention bench: %s: %s\n", what, st.message().c_str());
    std::exit(1);
  }
}

// One layer at kMaxContext tokens, generated once; shorter contexts take its first tokens.
struct Layer {
  int kv_heads = 0, head_dim = 0;
  KvCache cache;
  std::vector<float> q;  // the last decode-time query, [kQueryHeads][head_dim]
};

const Layer& layer() {
  static const Layer l = [] {
    SyntheticConfig s;
    s.preset = "llama3-8b";
    s.layers = 1;
    s.context = kMaxContext;
    Layer out;
    out.cache = must(generate_synthetic(s), "synthetic llama3-8b");
    out.kv_heads = out.cache.shape.kv_heads;
    out.head_dim = out.cache.shape.head_dim;
    const Tensor& query = out.cache.layers[0].query;
    const std::vector<float> all = query.view().to_float();
    const std::size_t n = static_cast<std::size_t>(kQueryHeads) * out.head_dim;
    if (query.heads() != kQueryHeads || all.size() < n) {
      std::fprintf(stderr, "fused attention bench: the preset has no %d-head queries\n",
                   kQueryHeads);
      std::exit(1);
    }
    out.q.assign(all.end() - static_cast<std::ptrdiff_t>(n), all.end());
    return out;
  }();
  return l;
}

// Everything one context needs: the fp16 rows, both compressed caches and the softmax
// probabilities the value benchmarks weight with (from the fp16 path, the same for all three).
struct Context {
  int tokens = 0;
  std::vector<std::uint16_t> keys, values;
  std::unique_ptr<CompressedKvCache> huffman, packed, huffman_coarse, huffman_coarser;
  std::vector<float> probs;

  Fp16KvView fp16() const {
    const Layer& l = layer();
    return Fp16KvView{tokens, l.kv_heads, l.head_dim, keys, values};
  }
  const CompressedKvCache& compressed(int path) const {
    switch (path) {
      case kHuffman:
        return *huffman;
      case kHuffmanCoarse:
        return *huffman_coarse;
      case kHuffmanCoarser:
        return *huffman_coarser;
      default:
        return *packed;
    }
  }
};

std::vector<std::uint16_t> fp16_prefix(const Tensor& t, int tokens) {
  std::vector<std::uint16_t> out(static_cast<std::size_t>(tokens) * t.heads() * t.dim());
  std::memcpy(out.data(), t.data(), out.size() * sizeof(std::uint16_t));
  return out;
}

std::unique_ptr<CompressedKvCache> compress(const CompressedCacheConfig& config, int tokens) {
  const Layer& l = layer();
  auto cache = std::make_unique<CompressedKvCache>(
      must(CompressedKvCache::create(config, l.kv_heads, l.head_dim), "compressed cache"));
  must(cache->prefill(l.cache.layers[0].key.view().token_range(0, tokens),
                      l.cache.layers[0].value.view().token_range(0, tokens)),
       "prefill");
  return cache;
}

const Context& context(int tokens) {
  static std::map<int, Context> contexts;
  auto it = contexts.find(tokens);
  if (it != contexts.end()) return it->second;
  const Layer& l = layer();
  if (l.cache.layers[0].key.dtype() != DType::F16) {
    std::fprintf(stderr, "fused attention bench: the synthetic cache is not fp16\n");
    std::exit(1);
  }
  Context c;
  c.tokens = tokens;
  c.keys = fp16_prefix(l.cache.layers[0].key, tokens);
  c.values = fp16_prefix(l.cache.layers[0].value, tokens);
  CompressedCacheConfig huffman;  // KVComp defaults
  c.huffman = compress(huffman, tokens);
  CompressedCacheConfig coarse;
  coarse.rel_scale = 0.1;
  c.huffman_coarse = compress(coarse, tokens);
  CompressedCacheConfig coarser;
  coarser.rel_scale = 0.2;
  c.huffman_coarser = compress(coarser, tokens);
  CompressedCacheConfig packed;
  packed.codec = CodecKind::BitPack;
  packed.bitpack_width = 4;
  packed.rel_scale = 0.07;
  c.packed = compress(packed, tokens);
  c.probs.resize(static_cast<std::size_t>(kQueryHeads) * tokens);
  must(fp16_attention_logits(c.fp16(), l.q, kQueryHeads, c.probs), "fp16 logits");
  softmax_rows(c.probs, kQueryHeads);
  return contexts.emplace(tokens, std::move(c)).first->second;
}

// Stored bytes a compressed path reads for K or V: coded streams with their metadata and the
// quantization parameters (the view's float steps and minimums).
std::uint64_t stored_bytes(const CompressedKvView& v, bool keys) {
  const EncodedCodes* e = keys ? v.keys : v.values;
  const auto params =
      keys ? v.key_steps.size() + v.key_mins.size() : v.value_steps.size() + v.value_mins.size();
  return (e != nullptr ? e->total_bytes() : 0) + params * sizeof(float);
}

void report(benchmark::State& state, const Context& c, int path, std::uint64_t bytes) {
  state.SetLabel(path_name(path));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * c.tokens);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
  state.counters["context"] = c.tokens;
}

void BM_AttentionLogits(benchmark::State& state) {
  const int path = static_cast<int>(state.range(0));
  const Context& c = context(static_cast<int>(state.range(1)));
  const Layer& l = layer();
  std::vector<float> logits(static_cast<std::size_t>(kQueryHeads) * c.tokens);
  std::uint64_t bytes = c.keys.size() * sizeof(std::uint16_t);
  const CompressedKvView view = path == kFp16 ? CompressedKvView{} : c.compressed(path).view();
  if (path != kFp16) bytes = stored_bytes(view, true);
  for (auto _ : state) {
    Status st = path == kFp16 ? fp16_attention_logits(c.fp16(), l.q, kQueryHeads, logits)
                              : fused_attention_logits(view, l.q, kQueryHeads, logits);
    if (!st) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(logits.data());
    benchmark::ClobberMemory();
  }
  report(state, c, path, bytes);
}

void BM_AttentionValues(benchmark::State& state) {
  const int path = static_cast<int>(state.range(0));
  const Context& c = context(static_cast<int>(state.range(1)));
  const Layer& l = layer();
  std::vector<float> out(static_cast<std::size_t>(kQueryHeads) * l.head_dim);
  std::uint64_t bytes = c.values.size() * sizeof(std::uint16_t);
  const CompressedKvView view = path == kFp16 ? CompressedKvView{} : c.compressed(path).view();
  if (path != kFp16) bytes = stored_bytes(view, false);
  for (auto _ : state) {
    Status st = path == kFp16 ? fp16_attention_values(c.fp16(), c.probs, kQueryHeads, out)
                              : fused_attention_values(view, c.probs, kQueryHeads, out);
    if (!st) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  report(state, c, path, bytes);
}

void paths(benchmark::internal::Benchmark* b) {
  for (const int tokens : {4096, 16384, 32768}) {
    for (const int path : {kFp16, kHuffman, kHuffmanCoarse, kHuffmanCoarser, kPacked}) {
      b->Args({path, tokens});
    }
  }
}

}  // namespace

BENCHMARK(BM_AttentionLogits)->Apply(paths)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionValues)->Apply(paths)->Unit(benchmark::kMicrosecond);

}  // namespace kvlab::bench

BENCHMARK_MAIN();
