// What the memory operations of a Huffman decoder cost on this machine, done one lane at a time
// against done 16 lanes at a time (AVX-512 gathers and scatters). A decoder that keeps one vector
// stream per SIMD lane (vectors of a block are independent streams, docs/FORMAT.md) needs, per
// step of 16 lanes, a gather of the streams' next bytes, a gather from the 4096-entry decode
// table and a scatter of the decoded symbols; the scalar block decoder (codec_streams.cpp) does
// the same work with plain loads and stores, four streams side by side. These rows are the
// measurement behind keeping the scalar decoder (docs/PERFORMANCE.md, "Fused attention on the
// CPU"; the whole analysis is in that file's history, before issue 45).
//
// Items are table lookups (or stores) done. Lookups run as independent dependency chains
// x = table[x], 16 of them in each row, so rows measure throughput, not latency.
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

constexpr std::uint32_t kEntries = 4096;  // the decode table's size (12-bit index)
constexpr std::uint32_t kMask = kEntries - 1;

std::vector<std::uint32_t> make_table() {
  std::vector<std::uint32_t> t(kEntries);
  // Entries are further indices, scattered over the table so no two chains walk in step.
  for (std::uint32_t i = 0; i < kEntries; ++i) t[i] = (i * 2654435761u >> 7) & kMask;
  return t;
}

// The compiler must not turn the scalar rows into gathers of its own.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-tree-vectorize")
#endif

void BM_LookupScalar(benchmark::State& state) {
  const std::vector<std::uint32_t> table = make_table();
  const std::uint32_t* t = table.data();
  std::array<std::uint32_t, 16> x{};
  for (std::uint32_t k = 0; k < 16; ++k) x[k] = k * 97;
  for (auto _ : state) {
    for (int r = 0; r < 4; ++r) {
#pragma GCC unroll 16
      for (int k = 0; k < 16; ++k) x[k] = t[x[k]];
    }
    benchmark::DoNotOptimize(x);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 64);
  state.SetLabel("16 loads");
}

void BM_StoreScalar(benchmark::State& state) {
  std::vector<std::uint8_t> rows(16 * 256 + 8);
  std::uint32_t value = 1;
  for (auto _ : state) {
    for (std::uint32_t at = 0; at < 64; at += 4) {
#pragma GCC unroll 16
      for (std::uint32_t k = 0; k < 16; ++k) {
        std::uint32_t v = value + k;
        __builtin_memcpy(rows.data() + k * 256 + at, &v, 4);
      }
      ++value;
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 256);
  state.SetLabel("16 stores");
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#if defined(__AVX512F__)
void BM_LookupGather(benchmark::State& state) {
  const std::vector<std::uint32_t> table = make_table();
  const auto* t = reinterpret_cast<const int*>(table.data());
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  // Four vectors of 16 chains each: the same 64 lookups per iteration as the scalar row.
  __m512i a = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(97));
  __m512i b = _mm512_add_epi32(a, _mm512_set1_epi32(1));
  __m512i c = _mm512_add_epi32(a, _mm512_set1_epi32(2));
  __m512i d = _mm512_add_epi32(a, _mm512_set1_epi32(3));
  // The masked form with every lane on: GCC's unmasked intrinsic reads an undefined register.
  constexpr __mmask16 kAll = 0xffff;
  for (auto _ : state) {
    a = _mm512_mask_i32gather_epi32(a, kAll, a, t, 4);
    b = _mm512_mask_i32gather_epi32(b, kAll, b, t, 4);
    c = _mm512_mask_i32gather_epi32(c, kAll, c, t, 4);
    d = _mm512_mask_i32gather_epi32(d, kAll, d, t, 4);
    benchmark::DoNotOptimize(a);
    benchmark::DoNotOptimize(b);
    benchmark::DoNotOptimize(c);
    benchmark::DoNotOptimize(d);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 64);
  state.SetLabel("zmm gathers of 16");
}

void BM_StoreScatter(benchmark::State& state) {
  std::vector<std::uint8_t> rows(16 * 256 + 8);
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i row_start = _mm512_mullo_epi32(lanes, _mm512_set1_epi32(256));
  __m512i value = _mm512_add_epi32(lanes, _mm512_set1_epi32(1));
  for (auto _ : state) {
    for (int at = 0; at < 64; at += 4) {
      _mm512_i32scatter_epi32(rows.data(), _mm512_add_epi32(row_start, _mm512_set1_epi32(at)),
                              value, 1);
      value = _mm512_add_epi32(value, _mm512_set1_epi32(1));
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * 256);
  state.SetLabel("zmm scatters of 16");
}

BENCHMARK(BM_LookupGather);
BENCHMARK(BM_StoreScatter);
#endif

BENCHMARK(BM_LookupScalar);
BENCHMARK(BM_StoreScalar);

}  // namespace

BENCHMARK_MAIN();
