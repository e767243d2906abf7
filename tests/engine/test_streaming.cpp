// Runs that stream a cache layer by layer instead of holding it whole: tensors that borrow a
// mapped file's bytes, caches written a batch of layers at a time, and the peak memory of a
// compression against the formula it should follow (issue 24, part 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "file_test_util.h"
#include "kvlab/engine/core/aligned.h"
#include "kvlab/engine/core/process_memory.h"
#include "kvlab/engine/core/tensor.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/sources/cache_file.h"
#include "kvlab/engine/sources/synthetic.h"

namespace kvlab {
namespace {

using file_test::read_bytes;
using file_test::scratch_dir;

TEST(Tensor, CopiesOwnTheirBytesAndAWriteToABorrowedTensorCopiesItFirst) {
  Tensor a(DType::F32, 3, 2, 4);
  a.set(1, 1, 2, 5.0f);
  Tensor b = a;
  b.set(1, 1, 2, 7.0f);
  EXPECT_EQ(a.at(1, 1, 2), 5.0f);
  EXPECT_EQ(b.at(1, 1, 2), 7.0f);
  Tensor moved = std::move(b);
  EXPECT_EQ(moved.at(1, 1, 2), 7.0f);
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): a moved-from tensor is empty
  EXPECT_EQ(b.data(), nullptr);

  // Bytes someone else owns, as a mapped file's are.
  auto owner = std::make_shared<std::vector<float>>(24, 1.5f);
  const auto* bytes = reinterpret_cast<const std::byte*>(owner->data());
  Tensor borrowed = Tensor::borrowed(owner, bytes, DType::F32, 3, 2, 4);
  EXPECT_TRUE(borrowed.is_borrowed());
  EXPECT_EQ(borrowed.data(), bytes);
  EXPECT_EQ(borrowed.at(2, 1, 3), 1.5f);
  Tensor shared = borrowed;  // a copy reads the same bytes
  EXPECT_EQ(shared.data(), bytes);
  borrowed.set(0, 0, 0, -2.0f);
  EXPECT_FALSE(borrowed.is_borrowed());
  EXPECT_NE(borrowed.data(), bytes);
  EXPECT_EQ(borrowed.at(0, 0, 0), -2.0f);
  EXPECT_EQ(borrowed.at(2, 1, 3), 1.5f);
  EXPECT_EQ((*owner)[0], 1.5f) << "the write reached the borrowed bytes";
  EXPECT_EQ(shared.at(0, 0, 0), 1.5f);
}

TEST(Tensor, LargeTensorsStartZeroedAndKeepWhatIsWritten) {
  // 8 MiB: above the size that gets an anonymous mapping of its own.
  Tensor zero(DType::F16, 4096, 8, 128);
  const std::vector<float> floats = zero.view().to_float();
  EXPECT_TRUE(std::all_of(floats.begin(), floats.end(), [](float v) { return v == 0.0f; }));
  std::vector<float> values(zero.elements());
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000) / 8;
  const Tensor t = Tensor::from_float(values, DType::F32, 4096, 8, 128);
  const Tensor copy = t;
  EXPECT_EQ(std::memcmp(copy.data(), values.data(), t.nbytes()), 0);
  EXPECT_EQ(t.at(4095, 7, 127), values.back());
}

SyntheticConfig small_config(int layers, int context) {
  SyntheticConfig c;
  c.preset = "llama3-8b";
  c.layers = layers;
  c.context = context;
  c.seed = 7;
  return c;
}

// `c` written to DIR/c.safetensors layer by layer, then loaded (read in place).
Result<KvCache> written_and_loaded(const std::filesystem::path& dir, const SyntheticConfig& c) {
  KVLAB_TRY(save_synthetic_file(c, dir / "c.safetensors"));
  return load_cache_file(dir / "c.safetensors");
}

TEST(Streaming, ACacheWrittenLayerByLayerIsTheFileOfTheWholeCache) {
  const auto dir = scratch_dir("by_layer");
  const SyntheticConfig c = small_config(5, 600);
  // On one thread and on several, batches of one or more layers: the same bytes as the whole
  // cache generated in memory and saved at once.
  ASSERT_TRUE(save_synthetic_file(c, dir / "streamed.safetensors").ok());
  {
    const auto one = limit_threads(1);
    ASSERT_TRUE(save_synthetic_file(c, dir / "one_thread.safetensors").ok());
  }
  auto whole = generate_synthetic(c);
  ASSERT_TRUE(whole.ok()) << whole.message();
  ASSERT_TRUE(save_cache_file(*whole, dir / "whole.safetensors").ok());
  const auto expected = read_bytes(dir / "whole.safetensors");
  EXPECT_EQ(read_bytes(dir / "streamed.safetensors"), expected);
  EXPECT_EQ(read_bytes(dir / "one_thread.safetensors"), expected);
}

TEST(Streaming, AFileCacheIsReadInPlaceAndBytesInMemoryAreCopied) {
  const auto dir = scratch_dir("in_place");
  const SyntheticConfig c = small_config(3, 300);
  auto mapped = written_and_loaded(dir, c);
  ASSERT_TRUE(mapped.ok()) << mapped.message();
  auto generated = generate_synthetic(c);
  ASSERT_TRUE(generated.ok());
  for (std::size_t l = 0; l < mapped->layers.size(); ++l) {
    const LayerKv& m = mapped->layers[l];
    const LayerKv& g = generated->layers[l];
    for (const auto& [got, want] :
         {std::pair{&m.key, &g.key}, {&m.value, &g.value}, {&m.query, &g.query}}) {
      EXPECT_TRUE(got->is_borrowed()) << "layer " << l;
      ASSERT_EQ(got->nbytes(), want->nbytes());
      EXPECT_EQ(std::memcmp(got->data(), want->data(), got->nbytes()), 0) << "layer " << l;
    }
  }
  // The mapping outlives the cache it came from through any copy of a tensor.
  const Tensor key = mapped->layers[2].key;
  mapped = make_error("dropped");
  EXPECT_EQ(std::memcmp(key.data(), generated->layers[2].key.data(), key.nbytes()), 0);

  const auto bytes = read_bytes(dir / "c.safetensors");
  auto copied = load_cache_bytes(std::as_bytes(std::span(bytes)), "c.safetensors");
  ASSERT_TRUE(copied.ok()) << copied.message();
  EXPECT_FALSE(copied->layers[0].key.is_borrowed());
}

TEST(Streaming, ACancelledWriteLeavesNoFile) {
  const auto dir = scratch_dir("cancel");
  int calls = 0;
  const Status s = save_synthetic_file(small_config(6, 200), dir / "c.safetensors",
                                       [&](double, std::string_view) { return ++calls < 2; });
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "c.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "c.safetensors.tmp"));
}

// A compression of a cache read in place holds, per thread, the layer's source bytes being read,
// its codes, and a tile of each reconstruction (reconstructions are made and measured a tile at
// a time); never the whole cache, nor a layer in float. Its reported peak must follow that
// formula, and the source's pages it read must be given back by the end.
TEST(Streaming, PeakMemoryOfACompressionFollowsTheFormula) {
  const auto dir = scratch_dir("peak");
  const SyntheticConfig c = small_config(16, 4096);
  auto cache = written_and_loaded(dir, c);
  ASSERT_TRUE(cache.ok()) << cache.message();
  MethodConfig int8;
  int8.kind = MethodKind::Int8;
  auto report = compress_cache(*cache, int8);
  ASSERT_TRUE(report.ok()) << report.message();

  const std::uint64_t elements = cache->layers[0].key.elements();  // K (or V) of one layer
  const std::uint64_t per_thread = 2 * elements * 2                // the layer's fp16 source
                                   + 2 * elements * 1;             // its int8 codes
  // Thread stacks, scales, histograms, the tiles (256 KiB each), the allocator.
  std::uint64_t slack = 48ull << 20;
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer keeps freed heap blocks resident in its quarantine (256 MiB by default)
  // and adds shadow memory: still less than the whole cache in float (512 MiB).
  slack += 256ull << 20;
#endif
  const std::uint64_t formula = static_cast<std::uint64_t>(report->threads) * per_thread + slack;
  ASSERT_GT(report->memory_peak_bytes, 0u) << "the kernel gave no memory figures";
  ASSERT_GE(report->memory_peak_bytes, report->memory_start_bytes);
  const std::uint64_t grew = report->memory_peak_bytes - report->memory_start_bytes;
  EXPECT_LE(grew, formula) << "grew " << (grew >> 20) << " MiB; formula " << (formula >> 20)
                           << " MiB on " << report->threads << " threads";
  // The pages read were given back: memory now is near where it began, not 256 MiB (every
  // layer's source pages) above it.
  const std::uint64_t source = cache->stored_bytes();
  EXPECT_LT(process_memory().resident_bytes, report->memory_start_bytes + source / 2);
}

// While a run keeps freed buffers, one freed is handed out again for the same length, its pages
// written already (no fault, no zeroing); another length gets a mapping of its own; when the run
// ends the kept buffers are unmapped and their memory given back.
TEST(Streaming, FreedBuffersAreKeptForTheRunThenGivenBack) {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  const std::uint64_t before = process_memory().resident_bytes;
  {
    const detail::KeepFreedBuffers keep;
    const void* first = nullptr;
    {
      HugePageBytes a(kBytes);
      std::memset(a.data(), 7, kBytes);
      first = a.data();
    }
    EXPECT_GE(process_memory().resident_bytes, before + kBytes / 2) << "not kept";
    HugePageBytes b(kBytes);
    EXPECT_EQ(b.data(), first);
    EXPECT_EQ(b[kBytes / 2], 7) << "not the same pages";
    HugePageBytes c(kBytes + 4096);
    EXPECT_NE(c.data(), first);
  }
  EXPECT_LT(process_memory().resident_bytes, before + kBytes / 2) << "not given back";
}

}  // namespace
}  // namespace kvlab
