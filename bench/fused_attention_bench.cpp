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
// BM_DecodeStep (below) runs a whole decode step over all 32 layers, out of cache.
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
#include "kvlab/engine/core/threads.h"
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
  // One core: the kernels' own cost, in CPU time (a long cache is otherwise shared among the
  // engine's threads, whose time the benchmark's thread does not see).
  const auto limit = limit_threads(1);
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
  // One core: the kernels' own cost, in CPU time (a long cache is otherwise shared among the
  // engine's threads, whose time the benchmark's thread does not see).
  const auto limit = limit_threads(1);
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

// ---- A whole decode step, as serving runs it (issue 24) --------------------------------------
// One query per query head through all 32 layers of llama3-8b at kStepContext tokens: the fp16
// rows (1 GiB of K and V), the Huffman streams or the 4-bit packed codes of every layer, far more
// than any last-level cache holds, so each step reads them from memory, as a server's decode step
// does. Layers run side by side on 1 or 2 threads (for_each_item, as the engine runs them). Beside
// it, the machine's read bandwidth on the same threads: a sum over a buffer of the fp16 size.
// Bytes are the stored bytes a step reads; a path at the read bandwidth is bound by memory, one
// well below it by its arithmetic.
constexpr int kStepContext = 8192;
constexpr int kModelLayers = 32;

struct ModelCache {
  std::vector<std::vector<std::uint16_t>> keys, values;
  std::vector<std::unique_ptr<CompressedKvCache>> huffman, packed;
  std::vector<std::vector<float>> q;  // per layer, [kQueryHeads][head_dim]
  int kv_heads = 0, head_dim = 0;
};

const ModelCache& model_cache() {
  static const ModelCache m = [] {
    SyntheticConfig s;
    s.preset = "llama3-8b";
    s.layers = kModelLayers;
    s.context = kStepContext;
    const KvCache cache = must(generate_synthetic(s), "synthetic llama3-8b, 32 layers");
    ModelCache out;
    out.kv_heads = cache.shape.kv_heads;
    out.head_dim = cache.shape.head_dim;
    out.keys.resize(kModelLayers);
    out.values.resize(kModelLayers);
    out.huffman.resize(kModelLayers);
    out.packed.resize(kModelLayers);
    out.q.resize(kModelLayers);
    CompressedCacheConfig huffman;
    CompressedCacheConfig packed;
    packed.codec = CodecKind::BitPack;
    packed.bitpack_width = 4;
    packed.rel_scale = 0.07;
    must(for_each_item(kModelLayers, {}, "layer",
                       [&](int l, ItemProgress&) -> Status {
                         const LayerKv& lkv = cache.layers[static_cast<std::size_t>(l)];
                         out.keys[l] = fp16_prefix(lkv.key, kStepContext);
                         out.values[l] = fp16_prefix(lkv.value, kStepContext);
                         for (auto [config, slot] :
                              {std::pair{&huffman, &out.huffman[l]}, {&packed, &out.packed[l]}}) {
                           auto c = CompressedKvCache::create(*config, out.kv_heads, out.head_dim);
                           if (!c) return c.error();
                           KVLAB_TRY(c->prefill(lkv.key.view(), lkv.value.view()));
                           *slot = std::make_unique<CompressedKvCache>(std::move(*c));
                         }
                         const std::vector<float> all = lkv.query.view().to_float();
                         const std::size_t n = static_cast<std::size_t>(kQueryHeads) * out.head_dim;
                         out.q[l].assign(all.end() - static_cast<std::ptrdiff_t>(n), all.end());
                         return Ok{};
                       }),
         "32 compressed layers");
    return out;
  }();
  return m;
}

void BM_DecodeStep(benchmark::State& state) {
  const int path = static_cast<int>(state.range(0));
  const auto limit = limit_threads(static_cast<int>(state.range(1)));
  const ModelCache& m = model_cache();
  std::vector<std::vector<float>> out(kModelLayers), scratch(kModelLayers);
  for (auto& o : out) o.resize(static_cast<std::size_t>(kQueryHeads) * m.head_dim);
  std::uint64_t bytes = 0;
  for (int l = 0; l < kModelLayers; ++l) {
    if (path == kFp16) {
      bytes += (m.keys[l].size() + m.values[l].size()) * sizeof(std::uint16_t);
    } else {
      const CompressedKvView v = (path == kHuffman ? m.huffman : m.packed)[l]->view();
      bytes += stored_bytes(v, true) + stored_bytes(v, false);
    }
  }
  for (auto _ : state) {
    const Status st = for_each_item(kModelLayers, {}, "layer", [&](int l, ItemProgress&) {
      const auto i = static_cast<std::size_t>(l);
      if (path == kFp16) {
        const Fp16KvView kv{kStepContext, m.kv_heads, m.head_dim, m.keys[i], m.values[i]};
        return fp16_attention(kv, m.q[i], kQueryHeads, out[i], scratch[i]);
      }
      const CompressedKvView v = (path == kHuffman ? m.huffman : m.packed)[i]->view();
      return fused_attention(v, m.q[i], kQueryHeads, out[i], scratch[i]);
    });
    if (!st) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(path_name(path));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
  state.counters["threads"] = static_cast<double>(state.range(1));
  state.counters["context"] = kStepContext;
  state.counters["layers"] = kModelLayers;
}

// The read bandwidth on 1 or 2 threads: 64-bit sums over a buffer of the step's fp16 size.
void BM_MemoryRead(benchmark::State& state) {
  const auto limit = limit_threads(static_cast<int>(state.range(0)));
  const std::size_t n = static_cast<std::size_t>(kModelLayers) * 2 * kStepContext * 8 * 128 / 4;
  static std::vector<std::uint64_t> buffer(n, 1);  // 1 GiB
  const std::size_t chunk = n / 64;
  for (auto _ : state) {
    std::vector<std::uint64_t> sums(64);
    (void)for_each_item(64, {}, "chunk", [&](int c, ItemProgress&) -> Status {
      std::uint64_t sum = 0;
      const std::uint64_t* p = buffer.data() + static_cast<std::size_t>(c) * chunk;
      for (std::size_t i = 0; i < chunk; ++i) sum += p[i];
      sums[static_cast<std::size_t>(c)] = sum;
      return Ok{};
    });
    benchmark::DoNotOptimize(sums.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(n * sizeof(std::uint64_t)));
  state.counters["threads"] = static_cast<double>(state.range(0));
}

void step_paths(benchmark::internal::Benchmark* b) {
  for (const int threads : {1, 2}) {
    for (const int path : {kFp16, kHuffman, kPacked}) b->Args({path, threads});
  }
}

}  // namespace

BENCHMARK(BM_AttentionLogits)->Apply(paths)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AttentionValues)->Apply(paths)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DecodeStep)->Apply(step_paths)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MemoryRead)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace kvlab::bench

BENCHMARK_MAIN();
