// kvlab bench codec: measures the three code-stream codecs on KVComp codes of the synthetic
// llama3-8b preset, side by side in one run, and prints speeds and the ratios the issue asks for.
// The Google Benchmark programs in bench/ (with zstd beside them) are the reference; this is the
// same measurement for a user without a build tree.
// kvlab bench gpu: the CUDA kernels against cuBLAS fp16 (kvlab::run_gpu_bench_json, which is an
// error when kvlab was built without CUDA or no GPU is usable).
#include <chrono>
#include <memory>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "kvlab/app/backends.h"
#include "kvlab/engine/code_codec.h"
#include "kvlab/engine/method.h"

namespace kvlab::cli {

namespace {

struct BenchOptions {
  int context = 4096;
  double rel_scale = 0.05;
  int block_size = 64;
  double seconds = 0.3;  // per measurement
  bool json = false;
};

// Runs `fn` repeatedly for at least `seconds`; returns seconds per call.
template <class Fn>
double time_per_call(double seconds, Fn&& fn) {
  using Clock = std::chrono::steady_clock;
  int calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    fn();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return elapsed / calls;
}

int run_codec_bench(const BenchOptions& o) {
  SyntheticConfig s;
  s.preset = "llama3-8b";
  s.layers = 1;
  s.context = o.context;
  auto cache = generate_synthetic(s, terminal_progress());
  if (!cache) return fail(cache.message());
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.rel_scale = o.rel_scale;
  m.block_size = o.block_size;
  auto quantizer = make_quantizer(m);
  if (!quantizer) return fail(quantizer.message());

  nlohmann::json rows = nlohmann::json::array();
  for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    const Tensor& t = role == TensorRole::Key ? cache->layers[0].key : cache->layers[0].value;
    auto q = (*quantizer)->quantize(t.view(), role);
    if (!q) return fail(q.message());
    const CodeCounts counts = count_codes(q->codes);
    auto book = HuffmanCodebook::from_histogram(counts);
    if (!book) return fail(book.message());
    const double entropy = shannon_entropy_bits(counts);
    std::vector<std::uint8_t> out(q->codes.size());
    for (CodecKind kind : {CodecKind::BitPack, CodecKind::VarWidth, CodecKind::Huffman}) {
      const CodecConfig config{kind, o.block_size, 0};
      Result<EncodedCodes> encoded = make_error("not run");
      const double enc_s = time_per_call(o.seconds, [&] {
        encoded = encode_codes(q->codes, q->tokens, q->heads, q->dim, config, &*book);
      });
      if (!encoded) return fail(encoded.message());
      Status decoded = Ok{};
      const double dec_s =
          time_per_call(o.seconds, [&] { decoded = decode_codes(*encoded, &*book, out); });
      if (!decoded) return fail(decoded.message());
      if (out != q->codes)
        return fail(fmt::format("{}: decode differs from the input", codec_id(kind)));
      const double n = static_cast<double>(q->codes.size());
      const double book_bytes = kind == CodecKind::Huffman ? book->serialized_bytes() : 0.0;
      rows.push_back({{"tensor", role_name(role)},
                      {"codec", std::string(codec_id(kind))},
                      {"encode_gb_s", n / enc_s / 1e9},
                      {"decode_gb_s", n / dec_s / 1e9},
                      {"payload_bits_per_code", 8.0 * encoded->payload_bytes() / n},
                      {"total_bits_per_code", 8.0 * (encoded->total_bytes() + book_bytes) / n},
                      {"entropy_bits_per_code", entropy}});
    }
  }
  if (o.json) {
    fmt::print("{}\n", rows.dump(2));
    return 0;
  }
  fmt::print(
      "KVComp codes (rel_scale {:g}, block {}) of synthetic llama3-8b, {} tokens, one core\n\n",
      o.rel_scale, o.block_size, o.context);
  fmt::print("{:<7} {:<9} {:>11} {:>11} {:>13} {:>11} {:>9} {:>16}\n", "tensor", "codec",
             "encode GB/s", "decode GB/s", "payload b/code", "total b/code", "entropy",
             "payload/entropy");
  for (const auto& r : rows) {
    fmt::print("{:<7} {:<9} {:>11.3f} {:>11.3f} {:>13.3f} {:>11.3f} {:>9.3f} {:>16.3f}\n",
               r["tensor"].get<std::string>(), r["codec"].get<std::string>(),
               r["encode_gb_s"].get<double>(), r["decode_gb_s"].get<double>(),
               r["payload_bits_per_code"].get<double>(), r["total_bits_per_code"].get<double>(),
               r["entropy_bits_per_code"].get<double>(),
               r["payload_bits_per_code"].get<double>() / r["entropy_bits_per_code"].get<double>());
  }
  fmt::print(
      "\ntargets: Huffman decode >= 1.5 GB/s, encode >= 0.5 GB/s, payload within 3% of the "
      "entropy\n");
  for (const auto& r : rows) {
    if (r["codec"] != "huffman") continue;
    fmt::print(
        "{:<6} huffman: decode {:.2f}x of 1.5 GB/s, encode {:.2f}x of 0.5 GB/s, payload "
        "{:+.1f}% over entropy\n",
        r["tensor"].get<std::string>(), r["decode_gb_s"].get<double>() / 1.5,
        r["encode_gb_s"].get<double>() / 0.5,
        100.0 *
            (r["payload_bits_per_code"].get<double>() / r["entropy_bits_per_code"].get<double>() -
             1.0));
  }
  return 0;
}

struct GpuBenchCliOptions {
  GpuBenchRequest request;
  bool json = false;
};

int run_gpu_bench_command(const GpuBenchCliOptions& o) {
  auto result = run_gpu_bench_json(o.request);
  if (!result) return fail("bench gpu: " + result.message());
  const nlohmann::json& j = *result;
  if (o.json) {
    fmt::print("{}\n", j.dump(2));
    return 0;
  }
  fmt::print("GPU kernels on {}, a Llama-3-8B layer (8 KV heads, 32 query heads, head_dim 128)\n",
             j["device"].get<std::string>());
  fmt::print("device-to-device copy {:.1f} GB/s (read + written: the bandwidth ceiling)\n\n",
             j["copy_gb_s"].get<double>());
  fmt::print("{:<22} {:>8} {:>11} {:>10} {:>13} {:>15}\n", "kernel", "context", "time (us)",
             "GB/s read", "GB/s fp16-eq", "vs cuBLAS fp16");
  for (const auto& r : j["rows"]) {
    fmt::print("{:<22} {:>8} {:>11.2f} {:>10.1f} {:>13.1f} {:>14.2f}x\n",
               r["kernel"].get<std::string>(), r["context"].get<int>(),
               r["microseconds"].get<double>(), r["gb_s_read"].get<double>(),
               r["gb_s_fp16_equiv"].get<double>(), r["speedup_vs_cublas_fp16"].get<double>());
  }
  fmt::print("\nGPU compression (quantize + Huffman encode of K and V), GB/s of fp16 input\n");
  fmt::print("{:>8} {:>10}\n", "context", "GB/s");
  for (const auto& e : j["encode"]) {
    fmt::print("{:>8} {:>10.1f}\n", e["context"].get<int>(), e["gb_s"].get<double>());
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand("bench", "Measure the engine's speed on this machine");
  bench->require_subcommand(1);
  CLI::App* codec = bench->add_subcommand(
      "codec", "Encode/decode speed and size of bitpack, varwidth and Huffman on KVComp codes");
  codec->add_option("--context", o->context, "tokens of synthetic llama3-8b (one layer)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  codec->add_option("--rel-scale", o->rel_scale, "KVComp step as a fraction of the range")
      ->capture_default_str();
  codec->add_option("--block-size", o->block_size, "tokens per block")->capture_default_str();
  codec->add_option("--seconds", o->seconds, "time per measurement")
      ->check(CLI::Range(0.01, 60.0))
      ->capture_default_str();
  codec->add_flag("--json", o->json, "print the measurements as JSON");
  codec->callback([o] { exit_code() = run_codec_bench(*o); });

  auto g = std::make_shared<GpuBenchCliOptions>();
  CLI::App* gpu = bench->add_subcommand(
      "gpu",
      "Time the GPU kernels (fused attention on compressed streams, GPU compression) against "
      "cuBLAS fp16; needs a GPU and kvlab built with CUDA");
  gpu->add_option("--contexts", g->request.contexts, "context lengths in tokens: N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 22))
      ->capture_default_str();
  gpu->add_option("--repeats", g->request.repeats, "timed launches per kernel")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  gpu->add_flag("--json", g->json, "print the measurements as JSON");
  gpu->callback([g] { exit_code() = run_gpu_bench_command(*g); });
}

}  // namespace kvlab::cli
