// zstd (levels 1 and 19) on the same raw code bytes as the codec benchmarks: the general-purpose
// coder a user would otherwise pick. Compressed size counts zstd's whole frame (its own headers
// and Huffman/FSE tables), so "payload" and "total" are the same. zstd's Huffman-only literal
// mode (ZSTD_c_literalCompressionMode) sits behind ZSTD_STATIC_LINKING_ONLY, outside the stable
// public API, and even then zstd still looks for matches, so it is not benchmarked.
// Built only when libzstd is found (bench/CMakeLists.txt).
#include <zstd.h>

#include <memory>
#include <vector>

#include "codec_bench_data.h"

namespace kvlab::bench {

namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

// Compresses the stream's codes at `level`; an empty vector on error.
std::vector<std::uint8_t> compress(ZSTD_CCtx* ctx, const CodeStream& s, int level) {
  std::vector<std::uint8_t> out(ZSTD_compressBound(s.codes.size()));
  const std::size_t n =
      ZSTD_compressCCtx(ctx, out.data(), out.size(), s.codes.data(), s.codes.size(), level);
  if (ZSTD_isError(n)) return {};
  out.resize(n);
  return out;
}

void BM_ZstdCompress(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  const CodeStream& s = code_stream(static_cast<int>(state.range(1)));
  const std::unique_ptr<ZSTD_CCtx, CCtxFree> ctx(ZSTD_createCCtx());
  std::vector<std::uint8_t> out;
  for (auto _ : state) {
    out = compress(ctx.get(), s, level);
    benchmark::DoNotOptimize(out.data());
  }
  if (out.empty()) state.SkipWithError("zstd compression failed");
  report_codec(state, s, "zstd-" + std::to_string(level), out.size(), out.size());
}

void BM_ZstdDecompress(benchmark::State& state) {
  const int level = static_cast<int>(state.range(0));
  const CodeStream& s = code_stream(static_cast<int>(state.range(1)));
  const std::unique_ptr<ZSTD_CCtx, CCtxFree> cctx(ZSTD_createCCtx());
  const std::unique_ptr<ZSTD_DCtx, DCtxFree> dctx(ZSTD_createDCtx());
  const std::vector<std::uint8_t> packed = compress(cctx.get(), s, level);
  std::vector<std::uint8_t> out(s.codes.size());
  std::size_t n = 0;
  for (auto _ : state) {
    n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(), packed.data(), packed.size());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  if (packed.empty() || ZSTD_isError(n) || out != s.codes) {
    state.SkipWithError("zstd round trip failed");
  }
  report_codec(state, s, "zstd-" + std::to_string(level), packed.size(), packed.size());
}

void levels(benchmark::internal::Benchmark* b) {
  for (const int level : {1, 19}) {
    for (int role = 0; role < kCodeStreams; ++role) b->Args({level, role});
  }
}

}  // namespace

BENCHMARK(BM_ZstdCompress)->Apply(levels)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ZstdDecompress)->Apply(levels)->Unit(benchmark::kMicrosecond);

}  // namespace kvlab::bench
