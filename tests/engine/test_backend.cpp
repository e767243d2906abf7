// The Backend interface: the CPU backend gives the same bytes and outputs as the engine's free
// functions on boundary and seeded random sizes; make_backend() picks by name, "auto" falls back
// to the CPU when the CUDA factory fails or is absent, "cuda" without one says kvlab was built
// without CUDA, an unknown name lists the valid ones; compress_cache records the backend it is
// given and where each stage ran (the CPU for every stage unless the backend runs the layers
// itself) in the report and its JSON.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/random.h"
#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/io/report_json.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/synthetic.h"
#include "tensor_test_util.h"

namespace kvlab {
namespace {

// Registers a CUDA factory for one test and removes it afterwards, so the tests stay independent
// of each other and of whether the machine has a GPU.
class FactoryGuard {
 public:
  explicit FactoryGuard(BackendFactory f) { register_cuda_backend(f); }
  ~FactoryGuard() { register_cuda_backend(nullptr); }
  FactoryGuard(const FactoryGuard&) = delete;
  FactoryGuard& operator=(const FactoryGuard&) = delete;
};

// Wraps the CPU backend under another id and counts the encodes that reach it.
class CountingBackend final : public Backend {
 public:
  static inline int encodes = 0;
  std::string id() const override { return "counting"; }
  std::string device_name() const override { return "test device"; }
  Result<EncodedCodes> encode_codes(std::span<const std::uint8_t> codes, int tokens, int heads,
                                    int dim, const CodecConfig& config,
                                    const HuffmanCodebook* book) override {
    ++encodes;
    return m_cpu->encode_codes(codes, tokens, heads, dim, config, book);
  }
  Status fused_attention(const CompressedKvView& cache, std::span<const float> q, int q_heads,
                         std::span<float> out) override {
    return m_cpu->fused_attention(cache, q, q_heads, out);
  }

 private:
  std::unique_ptr<Backend> m_cpu = make_cpu_backend();
};

Result<std::unique_ptr<Backend>> no_gpu_factory() {
  return make_error("CUDA: no usable GPU (test: no driver)");
}

Result<std::unique_ptr<Backend>> counting_factory() {
  return std::unique_ptr<Backend>(std::make_unique<CountingBackend>());
}

void expect_same_encoding(const EncodedCodes& a, const EncodedCodes& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.bitpack_width, b.bitpack_width);
  EXPECT_EQ(a.payload, b.payload);
  EXPECT_EQ(a.block_offsets, b.block_offsets);
  EXPECT_EQ(a.vector_bits, b.vector_bits);
}

TEST(Backend, IdsAreAutoCpuCuda) {
  std::vector<std::string> ids;
  for (std::string_view id : backend_ids()) ids.emplace_back(id);
  EXPECT_EQ(ids, (std::vector<std::string>{"auto", "cpu", "cuda"}));
}

TEST(Backend, CpuEncodesTheSameBytesAsTheFreeFunction) {
  auto cpu = make_cpu_backend();
  EXPECT_EQ(cpu->id(), "cpu");
  EXPECT_FALSE(cpu->device_name().empty());
  constexpr int kBlock = 16, kHeads = 2, kDim = 24;
  detail::Rng sizes(5);
  std::vector<int> token_counts{0, 1, kBlock - 1, kBlock, kBlock + 1, 3 * kBlock};
  for (int i = 0; i < 4; ++i) token_counts.push_back(1 + static_cast<int>(sizes.below(200)));
  for (int tokens : token_counts) {
    detail::Rng rng(100 + tokens);
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(tokens) * kHeads * kDim);
    for (auto& c : codes) c = static_cast<std::uint8_t>(std::lround(7 + 2 * rng.normal()) & 15);
    auto book = HuffmanCodebook::from_histogram(count_codes(codes));
    ASSERT_TRUE(book.ok()) << book.message();
    for (CodecKind kind : {CodecKind::BitPack, CodecKind::VarWidth, CodecKind::Huffman}) {
      const CodecConfig config{kind, kBlock, 0};
      auto want = encode_codes(codes, tokens, kHeads, kDim, config, &*book);
      auto got = cpu->encode_codes(codes, tokens, kHeads, kDim, config, &*book);
      ASSERT_EQ(want.ok(), got.ok()) << tokens << " " << codec_id(kind);
      if (!want.ok()) {
        EXPECT_EQ(want.message(), got.message());
        continue;
      }
      SCOPED_TRACE(testing::Message() << tokens << " tokens, " << codec_id(kind));
      expect_same_encoding(*want, *got);
    }
  }
  // The same errors too: Huffman needs a book.
  const std::vector<std::uint8_t> codes(kHeads * kDim, 3);
  const CodecConfig huffman{CodecKind::Huffman, kBlock, 0};
  auto want = encode_codes(codes, 1, kHeads, kDim, huffman, nullptr);
  auto got = cpu->encode_codes(codes, 1, kHeads, kDim, huffman, nullptr);
  ASSERT_FALSE(want.ok());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(want.message(), got.message());
}

// A compressed cache of `prefill` tokens plus `appends` decode steps (some left in the buffer).
CompressedKvCache build_cache(CodecKind codec, int prefill, int appends, int kv_heads, int dim) {
  CompressedCacheConfig c;
  c.block_size = 16;
  c.buffer_size = 32;
  c.codec = codec;
  c.rel_scale = codec == CodecKind::BitPack ? 0.07 : 0.05;
  c.bitpack_width = codec == CodecKind::BitPack ? 4 : 0;
  const int total = prefill + appends;
  detail::Rng rng(total * 31 + kv_heads);
  std::vector<float> k(static_cast<std::size_t>(total) * kv_heads * dim), v(k.size());
  for (float& x : k) x = static_cast<float>(rng.normal());
  for (float& x : v) x = static_cast<float>(0.5 * rng.normal() + 0.1);
  const Tensor keys = Tensor::from_float(k, DType::F16, total, kv_heads, dim);
  const Tensor values = Tensor::from_float(v, DType::F16, total, kv_heads, dim);
  auto cache = CompressedKvCache::create(c, kv_heads, dim);
  EXPECT_TRUE(cache.ok()) << cache.message();
  EXPECT_TRUE(
      cache->prefill(keys.view().token_range(0, prefill), values.view().token_range(0, prefill)));
  for (int t = prefill; t < total; ++t) {
    EXPECT_TRUE(cache->append(tensor_test::row_of(keys, t), tensor_test::row_of(values, t)));
  }
  return std::move(*cache);
}

TEST(Backend, CpuFusedAttentionEqualsTheFreeFunction) {
  auto cpu = make_cpu_backend();
  constexpr int kKvHeads = 2, kDim = 32;
  struct Case {
    CodecKind codec;
    int prefill, appends, group;
  };
  const Case cases[] = {{CodecKind::Huffman, 64, 0, 1},  {CodecKind::Huffman, 64, 21, 4},
                        {CodecKind::Huffman, 5, 3, 2},   {CodecKind::BitPack, 48, 17, 4},
                        {CodecKind::BitPack, 100, 1, 8}, {CodecKind::Huffman, 0, 1, 1}};
  for (const Case& p : cases) {
    SCOPED_TRACE(testing::Message() << codec_id(p.codec) << " prefill " << p.prefill << " + "
                                    << p.appends << ", group " << p.group);
    const CompressedKvCache cache = build_cache(p.codec, p.prefill, p.appends, kKvHeads, kDim);
    const int q_heads = kKvHeads * p.group;
    detail::Rng rng(p.prefill + p.appends);
    std::vector<float> q(static_cast<std::size_t>(q_heads) * kDim);
    for (float& x : q) x = static_cast<float>(1.5 * rng.normal());
    std::vector<float> want(q.size()), got(q.size()), scratch;
    ASSERT_TRUE(fused_attention(cache.view(), q, q_heads, want, scratch));
    const Status st = cpu->fused_attention(cache.view(), q, q_heads, got);
    ASSERT_TRUE(st) << st.message();
    EXPECT_EQ(got, want);
  }
  // Bad shapes are the free function's errors.
  const CompressedKvCache cache = build_cache(CodecKind::Huffman, 32, 0, kKvHeads, kDim);
  std::vector<float> q(3 * kDim), out(3 * kDim);
  const Status st = cpu->fused_attention(cache.view(), q, 3, out);
  ASSERT_FALSE(st);
  EXPECT_NE(st.message().find("query heads"), std::string::npos) << st.message();
}

TEST(Backend, UnknownNameListsTheValidOnes) {
  auto b = make_backend("bogus");
  ASSERT_FALSE(b.ok());
  for (const char* name : {"'bogus'", "auto", "cpu", "cuda"}) {
    EXPECT_NE(b.message().find(name), std::string::npos) << b.message();
  }
}

TEST(Backend, CudaWithoutARegisteredLibrarySaysBuiltWithoutCuda) {
  auto b = make_backend("cuda");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.message(), kBuiltWithoutCuda);
  EXPECT_NE(b.message().find("built without CUDA"), std::string::npos);
}

TEST(Backend, AutoWithoutAGpuIsAWorkingCpuBackend) {
  auto b = make_backend("auto");  // this test program registers no CUDA library
  ASSERT_TRUE(b.ok()) << b.message();
  EXPECT_EQ((*b)->id(), "cpu");
  const std::vector<std::uint8_t> codes(2 * 8 * 4, 5);
  auto e = (*b)->encode_codes(codes, 8, 2, 4, CodecConfig{CodecKind::BitPack, 4, 0}, nullptr);
  ASSERT_TRUE(e.ok()) << e.message();
  EXPECT_EQ(e->bitpack_width, 4);

  // A CUDA library whose factory finds no GPU: "auto" still runs on the CPU, "cuda" gives the
  // factory's reason.
  const FactoryGuard guard(&no_gpu_factory);
  auto fallback = make_backend("auto");
  ASSERT_TRUE(fallback.ok()) << fallback.message();
  EXPECT_EQ((*fallback)->id(), "cpu");
  auto cuda = make_backend("cuda");
  ASSERT_FALSE(cuda.ok());
  EXPECT_EQ(cuda.message(), "CUDA: no usable GPU (test: no driver)");
}

TEST(Backend, AutoAndCudaTakeTheRegisteredFactoryWhenItWorks) {
  const FactoryGuard guard(&counting_factory);
  for (const char* id : {"auto", "cuda"}) {
    auto b = make_backend(id);
    ASSERT_TRUE(b.ok()) << b.message();
    EXPECT_EQ((*b)->id(), "counting") << id;
  }
  auto cpu = make_backend("cpu");
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ((*cpu)->id(), "cpu");
}

KvCache tiny_cache() {
  SyntheticConfig c;
  c.preset = "tiny";
  c.context = 100;
  auto r = generate_synthetic(c);
  EXPECT_TRUE(r.ok()) << r.message();
  return std::move(*r);
}

TEST(Backend, CpuRunsEveryStageAndTheReportSaysWhere) {
  const KvCache cache = tiny_cache();
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.codec = CodecKind::Huffman;
  auto on_cpu = compress_cache(cache, m);  // no backend: the CPU
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.message();
  EXPECT_EQ(on_cpu->backend, "cpu");
  EXPECT_EQ(on_cpu->device, make_cpu_backend()->device_name());
  for (Stage stage : kStages) {
    EXPECT_EQ(on_cpu->stage_backends[static_cast<std::size_t>(stage)], "cpu") << stage_id(stage);
    EXPECT_TRUE(make_cpu_backend()->has_stage(stage, m, cache));
  }
  EXPECT_FALSE(make_cpu_backend()->runs_layers(m, cache));
  // "quantize: cpu 0.00 s, code: cpu ..., dequantize: cpu ..., metrics: cpu ..."
  const std::string summary = stage_summary(*on_cpu);
  EXPECT_EQ(summary.rfind("quantize: cpu ", 0), 0u) << summary;
  for (const char* part : {", code: cpu ", ", dequantize: cpu ", ", metrics: cpu "}) {
    EXPECT_NE(summary.find(part), std::string::npos) << summary;
  }

  // Without a codec there is no code stage.
  MethodConfig kivi;
  auto plain = compress_cache(cache, kivi);
  ASSERT_TRUE(plain.ok()) << plain.message();
  EXPECT_EQ(plain->stage_backends[static_cast<std::size_t>(Stage::Code)], "");
  EXPECT_EQ(stage_summary(*plain).find("code:"), std::string::npos);
}

TEST(Backend, ADeviceBackendWithoutAPipelineLeavesTheWholeRunToTheCpu) {
  // A backend that has no stage of its own (a GPU whose kernels lack the method): the run is the
  // CPU's on all its threads, its encoder included, and the report names the backend chosen and
  // the CPU for every stage.
  const KvCache cache = tiny_cache();
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.codec = CodecKind::Huffman;
  auto on_cpu = compress_cache(cache, m);
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.message();
  CountingBackend counting;
  CountingBackend::encodes = 0;
  EXPECT_FALSE(counting.has_stage(Stage::Quantize, m, cache));
  auto on_counting = compress_cache(cache, m, {}, &counting);
  ASSERT_TRUE(on_counting.ok()) << on_counting.message();
  EXPECT_EQ(CountingBackend::encodes, 0);
  EXPECT_EQ(on_counting->backend, "counting");
  EXPECT_EQ(on_counting->device, "test device");
  for (Stage stage : kStages) {
    EXPECT_EQ(on_counting->stage_backends[static_cast<std::size_t>(stage)], "cpu");
  }
  EXPECT_EQ(on_counting->bytes.total(), on_cpu->bytes.total());
  EXPECT_EQ(on_counting->codec.codec_bytes, on_cpu->codec.codec_bytes);
  EXPECT_EQ(on_counting->threads, on_cpu->threads);
  EXPECT_FALSE(counting.run_layers(LayerRunRequest{cache, m, *make_quantizer(m).value(), {}}, {}));
  // Not silently: the report says which backend and stage sent the run to the CPU, and why; the
  // stage summary (what the CLI and the GUI print) and the saved record carry it.
  EXPECT_EQ(on_counting->backend_fallback, "counting: quantize: counting has no quantize stage");
  EXPECT_NE(stage_summary(*on_counting).find("(not on counting: quantize: counting has no"),
            std::string::npos)
      << stage_summary(*on_counting);
  EXPECT_TRUE(on_cpu->backend_fallback.empty());
  EXPECT_EQ(stage_summary(*on_cpu).find("not on"), std::string::npos);
  const nlohmann::json j = report_to_json(*on_counting);
  ASSERT_TRUE(j.contains("backend_fallback")) << j.dump();
  auto back = report_from_json(j);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->backend_fallback, on_counting->backend_fallback);
  EXPECT_FALSE(report_to_json(*on_cpu).contains("backend_fallback"));
}

TEST(Backend, ReportJsonCarriesTheBackendAndOldRecordsStillLoad) {
  MethodConfig m;
  auto r = compress_cache(tiny_cache(), m);
  ASSERT_TRUE(r.ok()) << r.message();
  nlohmann::json j = report_to_json(*r);
  ASSERT_TRUE(j.contains("backend"));
  EXPECT_EQ(j["backend"]["id"], "cpu");
  EXPECT_EQ(j["backend"]["device"], r->device);
  auto back = report_from_json(j);
  ASSERT_TRUE(back.ok()) << back.message();
  EXPECT_EQ(back->backend, "cpu");
  EXPECT_EQ(back->device, r->device);

  j.erase("backend");  // a run saved before backends existed
  auto old = report_from_json(j);
  ASSERT_TRUE(old.ok()) << old.message();
  EXPECT_TRUE(old->backend.empty());
  EXPECT_FALSE(report_to_json(*old).contains("backend"));

  j["backend"] = {{"id", 3}};
  EXPECT_FALSE(report_from_json(j).ok());
  j.erase("backend");

  // Where each stage ran: kept, and absent from records saved before stages were recorded.
  ASSERT_TRUE(j.contains("stage_backends"));
  EXPECT_EQ(j["stage_backends"]["quantize"], "cpu");
  EXPECT_FALSE(j["stage_backends"].contains("code"));  // no codec
  auto staged = report_from_json(j);
  ASSERT_TRUE(staged.ok()) << staged.message();
  EXPECT_EQ(staged->stage_backends, r->stage_backends);
  j.erase("stage_backends");
  auto unstaged = report_from_json(j);
  ASSERT_TRUE(unstaged.ok()) << unstaged.message();
  EXPECT_EQ(stage_summary(*unstaged), "");
}

}  // namespace
}  // namespace kvlab
