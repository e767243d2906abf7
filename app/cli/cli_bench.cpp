// kvlab bench codec: measures the three code-stream codecs (and zstd, when kvlab was built with
// libzstd) on KVComp codes of the synthetic llama3-8b preset, side by side in one run, then
// decode-time attention straight from the compressed cache (Huffman and 4-bit packed) against
// the fp16 path at several contexts, and prints speeds and the ratios issue 3 asks for. The
// Google Benchmark programs in bench/ are the reference; this is the same measurement for a user
// without a build tree.
// kvlab bench gpu: the CUDA kernels against cuBLAS fp16 (kvlab::run_gpu_bench_json, which is an
// error when kvlab was built without CUDA or no GPU is usable).
// kvlab bench cpu: the same decode attention on this CPU, read from the runner's stored caches
// (kv_store.h), in the JSON form of bench gpu, so the planner can charge a CPU its own rates.
// kvlab bench run: whole compression runs beside their memory floor (cli_bench_run.cpp).
#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "cli_plan_support.h"
#include "kvlab/app/backends.h"
#include "kvlab/engine/attention/fused_attention.h"
#include "kvlab/engine/codec/code_codec.h"
#include "kvlab/engine/codec/compressed_cache.h"
#include "kvlab/engine/core/backend.h"
#include "kvlab/engine/core/dtype.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/model/llama_model.h"
#include "kvlab/engine/quant/compress.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/sources/synthetic.h"

#if KVLAB_HAVE_ZSTD
#include <zstd.h>
#endif

namespace kvlab::cli {

namespace {

struct BenchOptions {
  int context = 4096;
  double rel_scale = 0.05;
  int block_size = 64;
  double seconds = 0.3;  // per measurement
  // Contexts of the fused attention part; empty skips it.
  std::vector<int> fused_contexts{4096, 16384, 32768};
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

// One codec row: speeds in GB/s of decoded codes, sizes in bits per code.
nlohmann::json codec_row(TensorRole role, const std::string& codec, double codes, double enc_s,
                         double dec_s, double payload_bytes, double total_bytes, double entropy) {
  return {{"tensor", role_name(role)},
          {"codec", codec},
          {"encode_gb_s", codes / enc_s / 1e9},
          {"decode_gb_s", codes / dec_s / 1e9},
          {"payload_bits_per_code", 8.0 * payload_bytes / codes},
          {"total_bits_per_code", 8.0 * total_bytes / codes},
          {"entropy_bits_per_code", entropy}};
}

#if KVLAB_HAVE_ZSTD
// zstd at `level` on the same code bytes: the general-purpose coder a user would otherwise pick.
Result<nlohmann::json> zstd_row(TensorRole role, std::span<const std::uint8_t> codes, int level,
                                double entropy, double seconds) {
  std::vector<std::uint8_t> frame(ZSTD_compressBound(codes.size()));
  std::size_t size = 0;
  const double enc_s = time_per_call(seconds, [&] {
    size = ZSTD_compress(frame.data(), frame.size(), codes.data(), codes.size(), level);
  });
  if (ZSTD_isError(size)) {
    return make_error(fmt::format("zstd -{}: {}", level, ZSTD_getErrorName(size)));
  }
  std::vector<std::uint8_t> out(codes.size());
  std::size_t got = 0;
  const double dec_s = time_per_call(
      seconds, [&] { got = ZSTD_decompress(out.data(), out.size(), frame.data(), size); });
  if (ZSTD_isError(got) || got != codes.size() ||
      !std::equal(out.begin(), out.end(), codes.begin(), codes.end())) {
    return make_error(fmt::format("zstd -{}: decompressed bytes differ from the input", level));
  }
  const double n = static_cast<double>(codes.size());
  return codec_row(role, fmt::format("zstd-{}", level), n, enc_s, dec_s, static_cast<double>(size),
                   static_cast<double>(size), entropy);
}
#endif

Result<nlohmann::json> codec_rows(const BenchOptions& o, const KvCache& cache) {
  MethodConfig m;
  m.kind = MethodKind::KvComp;
  m.rel_scale = o.rel_scale;
  m.block_size = o.block_size;
  auto quantizer = make_quantizer(m);
  if (!quantizer) return quantizer.error();
  nlohmann::json rows = nlohmann::json::array();
  for (TensorRole role : {TensorRole::Key, TensorRole::Value}) {
    const Tensor& full = role == TensorRole::Key ? cache.layers[0].key : cache.layers[0].value;
    auto q = (*quantizer)->quantize(full.view().token_range(0, o.context), role);
    if (!q) return q.error();
    const CodeCounts counts = count_codes(q->codes);
    // As `kvlab compress` builds it.
    auto book = choose_codebook(q->codes, q->dim, kvcomp_max_code(o.rel_scale), counts);
    if (!book) return book.error();
    const double entropy = shannon_entropy_bits(counts);
    const double n = static_cast<double>(q->codes.size());
    std::vector<std::uint8_t> out(q->codes.size());
    for (CodecKind kind : {CodecKind::BitPack, CodecKind::VarWidth, CodecKind::Huffman}) {
      const CodecConfig config{kind, o.block_size, 0};
      Result<EncodedCodes> encoded = make_error("not run");
      const double enc_s = time_per_call(o.seconds, [&] {
        encoded = encode_codes(q->codes, q->tokens, q->heads, q->dim, config, &*book);
      });
      if (!encoded) return encoded.error();
      Status decoded = Ok{};
      const double dec_s =
          time_per_call(o.seconds, [&] { decoded = decode_codes(*encoded, &*book, out); });
      if (!decoded) return decoded.error();
      if (!std::equal(out.begin(), out.end(), q->codes.begin(), q->codes.end())) {
        return make_error(fmt::format("{}: decode differs from the input", codec_id(kind)));
      }
      const double book_bytes = kind == CodecKind::Huffman ? book->serialized_bytes() : 0.0;
      rows.push_back(codec_row(role, std::string(codec_id(kind)), n, enc_s, dec_s,
                               static_cast<double>(encoded->payload_bytes()),
                               static_cast<double>(encoded->total_bytes()) + book_bytes, entropy));
      if (kind == CodecKind::Huffman) rows.back()["symbols"] = book->pairs() ? "pairs" : "codes";
    }
#if KVLAB_HAVE_ZSTD
    for (int level : {1, 19}) {
      auto row = zstd_row(role, q->codes, level, entropy, o.seconds);
      if (!row) return row.error();
      rows.push_back(std::move(*row));
    }
#endif
  }
  return rows;
}

// The halves of an fp16 tensor's first `tokens` tokens ([token][head][dim], so a prefix of its
// storage), read in place.
std::span<const std::uint16_t> fp16_prefix(const Tensor& t, int tokens) {
  return {reinterpret_cast<const std::uint16_t*>(t.data()),
          static_cast<std::size_t>(tokens) * t.heads() * t.dim()};
}

// One decode step's attention over the first `tokens` tokens, timed per path: q.K and softmax.V
// apart, the fp16 path over the uncompressed halves, the fused paths over a CompressedKvCache
// filled by one prefill (KVComp + Huffman at the bench's rel_scale; 4-bit packing at rel 0.07,
// where every code fits 4 bits).
Result<nlohmann::json> fused_rows(const BenchOptions& o, const KvCache& cache, int tokens) {
  const LayerKv& layer = cache.layers[0];
  const int heads = cache.shape.kv_heads, dim = cache.shape.head_dim;
  const int q_heads = layer.query.heads();
  const std::vector<float> queries = layer.query.view().to_float();
  const std::size_t qn = static_cast<std::size_t>(q_heads) * dim;
  const std::vector<float> q(queries.end() - static_cast<std::ptrdiff_t>(qn), queries.end());
  const Fp16KvView fp16{tokens, heads, dim, fp16_prefix(layer.key, tokens),
                        fp16_prefix(layer.value, tokens)};

  std::vector<float> logits(static_cast<std::size_t>(q_heads) * tokens);
  std::vector<float> out(qn);
  KVLAB_TRY(fp16_attention_logits(fp16, q, q_heads, logits));
  std::vector<float> probs = logits;
  softmax_rows(probs, q_heads);

  CompressedCacheConfig huffman;
  huffman.rel_scale = o.rel_scale;
  huffman.block_size = o.block_size;
  huffman.buffer_size = o.block_size;
  CompressedCacheConfig packed = huffman;
  packed.codec = CodecKind::BitPack;
  packed.bitpack_width = 4;
  packed.rel_scale = 0.07;

  nlohmann::json rows = nlohmann::json::array();
  double fp16_qk = 0, fp16_sv = 0;
  for (const char* path : {"fp16", "huffman", "bitpack4"}) {
    const std::string name = path;
    const bool plain = name == "fp16";
    std::optional<CompressedKvCache> compressed;
    CompressedKvView view;
    if (!plain) {
      auto created = CompressedKvCache::create(name == "huffman" ? huffman : packed, heads, dim);
      if (!created) return created.error();
      compressed.emplace(std::move(*created));
      if (Status st = compressed->prefill(layer.key.view().token_range(0, tokens),
                                          layer.value.view().token_range(0, tokens));
          !st) {
        return st.error();
      }
      view = compressed->view();
    }
    Status st = Ok{};
    const double qk_s = time_per_call(o.seconds, [&] {
      st = plain ? fp16_attention_logits(fp16, q, q_heads, logits)
                 : fused_attention_logits(view, q, q_heads, logits);
    });
    if (!st) return st.error();
    const double sv_s = time_per_call(o.seconds, [&] {
      st = plain ? fp16_attention_values(fp16, probs, q_heads, out)
                 : fused_attention_values(view, probs, q_heads, out);
    });
    if (!st) return st.error();
    if (plain) {
      fp16_qk = qk_s;
      fp16_sv = sv_s;
    }
    rows.push_back({{"context", tokens},
                    {"path", name},
                    {"qk_us", 1e6 * qk_s},
                    {"qk_vs_fp16", fp16_qk / qk_s},
                    {"sv_us", 1e6 * sv_s},
                    {"sv_vs_fp16", fp16_sv / sv_s}});
  }
  return rows;
}

void print_codec_rows(const BenchOptions& o, const nlohmann::json& rows) {
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
    const std::string tensor = r["tensor"].get<std::string>();
    std::string vs_zstd;
    for (const auto& z : rows) {
      if (z["codec"] == "zstd-1" && z["tensor"] == tensor) {
        vs_zstd = fmt::format(", decode {:.2f}x zstd-1's",
                              r["decode_gb_s"].get<double>() / z["decode_gb_s"].get<double>());
      }
    }
    fmt::print(
        "{:<6} huffman ({}): decode {:.2f}x of 1.5 GB/s, encode {:.2f}x of 0.5 GB/s, payload "
        "{:+.1f}% over entropy{}\n",
        tensor, r.value("symbols", "codes") == "pairs" ? "pair symbols" : "one code per symbol",
        r["decode_gb_s"].get<double>() / 1.5, r["encode_gb_s"].get<double>() / 0.5,
        100.0 *
            (r["payload_bits_per_code"].get<double>() / r["entropy_bits_per_code"].get<double>() -
             1.0),
        vs_zstd);
  }
}

void print_fused_rows(const BenchOptions& o, const nlohmann::json& rows) {
  fmt::print(
      "\nAttention for one decode step straight from the compressed cache, one core "
      "(huffman: rel_scale {:g}; bitpack4: rel_scale 0.07)\n\n",
      o.rel_scale);
  fmt::print("{:>8} {:<9} {:>10} {:>10} {:>14} {:>12}\n", "context", "path", "q.K us", "x fp16",
             "softmax.V us", "x fp16");
  for (const auto& r : rows) {
    fmt::print("{:>8} {:<9} {:>10.0f} {:>9.2f}x {:>14.0f} {:>11.2f}x\n", r["context"].get<int>(),
               r["path"].get<std::string>(), r["qk_us"].get<double>(),
               r["qk_vs_fp16"].get<double>(), r["sv_us"].get<double>(),
               r["sv_vs_fp16"].get<double>());
  }
  fmt::print("\ntargets: bitpack4 >= 1.0x the fp16 speed, huffman >= 0.5x (q.K and softmax.V)\n");
}

int run_codec_bench(const BenchOptions& o) {
  SyntheticConfig s;
  s.preset = "llama3-8b";
  s.layers = 1;
  s.context = o.context;
  for (int c : o.fused_contexts) s.context = std::max(s.context, c);
  auto cache = generate_synthetic(s, terminal_progress());
  if (!cache) return fail("bench codec: " + cache.message());
  if (cache->layers[0].key.dtype() != DType::F16 || !cache->has_queries()) {
    return fail("bench codec: the synthetic llama3-8b cache has no fp16 keys or no queries");
  }
  auto codecs = codec_rows(o, *cache);
  if (!codecs) return fail("bench codec: " + codecs.message());
  nlohmann::json fused = nlohmann::json::array();
  for (int tokens : o.fused_contexts) {
    auto rows = fused_rows(o, *cache, tokens);
    if (!rows)
      return fail(
          fmt::format("bench codec: fused attention at {} tokens: {}", tokens, rows.message()));
    for (auto& r : *rows) fused.push_back(std::move(r));
  }
  if (o.json) {
    fmt::print("{}\n",
               json_text(nlohmann::json{{"codecs", *codecs}, {"fused_attention", fused}}, 2));
    return 0;
  }
  print_codec_rows(o, *codecs);
  if (!fused.empty()) print_fused_rows(o, fused);
  return 0;
}

// What bench gpu and bench cpu share: --json, --save, --gpu-id, --from-json and --db.
struct KernelBenchOptions {
  bool json = false, save = false;
  std::string gpu_id, from_json;
  DbOption db;
};

struct GpuBenchCliOptions {
  GpuBenchRequest request;
  KernelBenchOptions out;
};

// Stores a measurement as a "bench" run of a catalogue device (`what`: "gpu" or "cpu", the
// bench it came from), for the planner's decompression rates (planners/latency.h). The rates are
// read back now, so a file that cannot give them is refused.
int save_kernel_bench(const char* what, const KernelBenchOptions& o, const nlohmann::json& j) {
  if (o.gpu_id.empty()) {
    return fail(fmt::format(
        "bench {} --save: give --gpu-id, the catalogue device this ran on (see 'kvlab gpus "
        "list'; 'kvlab gpus add' enters a machine of your own)",
        what));
  }
  auto user = user_catalogue(o.db);
  if (!user) return fail(user.message());
  auto gpu = planners::find_gpu(o.gpu_id, user->gpus);
  if (!gpu) return fail("--gpu-id: " + gpu.message());
  auto rates = planners::kernel_rates_from_bench(j, gpu->id, gpu->tflops.fp32, "check");
  if (!rates) {
    return fail(fmt::format("bench {}{}: {}", what, o.from_json.empty() ? "" : " " + o.from_json,
                            rates.message()));
  }
  auto store = o.db.open_for_saving();
  if (!store) return fail(store.message());
  NewRun run;
  run.kind = "bench";
  run.source = j.value("device", std::string("?"));
  run.method = fmt::format("{} kernels", what);
  run.label = fmt::format("{} kernel rates", gpu->id);
  run.params = {{"gpu_id", gpu->id}, {"from_json", o.from_json}};
  run.metrics = j;
  run.metrics["rates"] = planners::kernel_rates_to_json(*rates);
  auto id = store->save_run(run);
  if (!id) return fail(id.message());
  fmt::print(stderr,
             "saved run {}: the planner now charges decompression on {} at FP8 {:.2f}, packed "
             "{:.2f}, Huffman {:.2f} T values/s\n",
             *id, gpu->id, rates->fp8 / 1e12, rates->packed / 1e12, rates->huffman / 1e12);
  return 0;
}

// A measurement `kvlab bench gpu|cpu --json` wrote, read back for --from-json.
Result<nlohmann::json> read_kernel_bench(const char* what, const std::string& path) {
  auto text = read_text_file("--from-json", path);
  if (!text) return text.error();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    return make_error(fmt::format("--from-json {}: not valid JSON: {}", path, e.what()));
  }
  if (!j.is_object() || !j.contains("device") || !j["device"].is_string() ||
      !j.contains("copy_gb_s") || !j.contains("rows") || !j.contains("encode")) {
    return make_error(
        fmt::format("--from-json {}: not the output of 'kvlab bench {} --json' (needs "
                    "device, copy_gb_s, rows and encode)",
                    path, what));
  }
  return j;
}

// bench `what`'s measurement into `j`: read from --from-json or taken now by `run`, then stored
// with --save. 0, or the exit code once the error is printed.
template <class Run>
int kernel_bench_measurement(const char* what, const KernelBenchOptions& o, Run&& run,
                             nlohmann::json& j) {
  if (!o.from_json.empty()) {
    auto read = read_kernel_bench(what, o.from_json);
    if (!read) return fail(read.message());
    j = std::move(*read);
  } else {
    Result<nlohmann::json> result = run();
    if (!result) return fail(fmt::format("bench {}: {}", what, result.message()));
    j = std::move(*result);
  }
  return o.save ? save_kernel_bench(what, o, j) : 0;
}

int run_gpu_bench_command(const GpuBenchCliOptions& o) {
  nlohmann::json j;
  if (int rc = kernel_bench_measurement(
          "gpu", o.out, [&] { return run_gpu_bench_json(o.request); }, j);
      rc != 0) {
    return rc;
  }
  // Parts whose kernels failed were left out (run_gpu_bench): said on stderr either way.
  for (const auto& s : j.value("skipped", nlohmann::json::array())) {
    fmt::print(stderr, "kvlab bench gpu: left out {}\n", s.get<std::string>());
  }
  if (o.out.json) {
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  fmt::print("GPU kernels on {}, a Llama-3-8B layer (8 KV heads, 32 query heads, head_dim 128)\n",
             j["device"].get<std::string>());
  fmt::print("device-to-device copy {:.1f} GB/s (read + written: the bandwidth ceiling)\n\n",
             j["copy_gb_s"].get<double>());
  fmt::print("{:<22} {:>8} {:>11} {:>10} {:>7} {:>13} {:>15} {:>15}\n", "kernel", "context",
             "time (us)", "GB/s read", "% copy", "GB/s fp16-eq", "vs cuBLAS fp16", "vs fused fp16");
  for (const auto& r : j["rows"]) {
    const double fused = r.value("speedup_vs_fp16_fused", 0.0);
    fmt::print("{:<22} {:>8} {:>11.2f} {:>10.1f} {:>6.0f}% {:>13.1f} {:>14.2f}x {:>15}\n",
               r["kernel"].get<std::string>(), r["context"].get<int>(),
               r["microseconds"].get<double>(), r["gb_s_read"].get<double>(),
               100.0 * r.value("copy_fraction", 0.0), r["gb_s_fp16_equiv"].get<double>(),
               r["speedup_vs_cublas_fp16"].get<double>(),
               fused > 0 ? fmt::format("{:.2f}x", fused) : std::string("-"));
  }
  fmt::print("\nGPU compression (quantize + Huffman encode of K and V), GB/s of fp16 input\n");
  fmt::print("{:>8} {:>10}\n", "context", "GB/s");
  for (const auto& e : j["encode"]) {
    fmt::print("{:>8} {:>10.1f}\n", e["context"].get<int>(), e["gb_s"].get<double>());
  }
  return 0;
}

struct CpuBenchCliOptions {
  KernelBenchOptions out;
  std::vector<int> contexts{8192, 32768};
  int steps = 12;
  std::string backend = "cpu";  // where the decode steps attend (kvlab generate --backend)
};

// Bytes read + written per second by a copy of 256 MiB spread over the engine's threads: the
// bandwidth ceiling the rows are measured against (best of three).
double cpu_copy_gb_s() {
  constexpr std::size_t kBytes = std::size_t{256} << 20;
  const std::vector<std::uint8_t> from(kBytes, 1);
  std::vector<std::uint8_t> to(kBytes);
  const int parts = std::max(1, worker_threads()) * 4;
  const std::size_t part = kBytes / static_cast<std::size_t>(parts);
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    (void)for_each_item(parts, {}, "copy", [&](int i, ItemProgress&) -> Status {
      const std::size_t at = static_cast<std::size_t>(i) * part;
      std::memcpy(to.data() + at, from.data() + at, part);
      return Ok{};
    });
    best = std::min(
        best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return 2.0 * static_cast<double>(kBytes) / best / 1e9;
}

// One row kind of the CPU bench: the planner's kernel class and the stored cache that stands for
// it (FP8 E4M3 for the fp8 class, which also takes int8 and q8_0; plain INT4 for the packed
// 4-bit class; KVComp + Huffman).
struct CpuBenchCache {
  const char* kernel;
  const char* method;  // run_bench_method's id; nullptr: fp16
};
constexpr std::array<CpuBenchCache, 4> kCpuBenchCaches{{{"fp16_attention", nullptr},
                                                        {"fp8_attention", "fp8-e4m3"},
                                                        {"packed4_attention", "int4"},
                                                        {"huffman_attention", "kvcomp-huffman"}}};
// With --backend cuda: the stored caches whose rows the GPU's decode kernel reads in place
// (row_attention.h), the store's decode steps attending there as `kvlab generate --backend cuda`
// runs them: each step appends its row to the GPU's copy, uploads the query and reads the output
// back.
constexpr std::array<CpuBenchCache, 4> kGpuRowBenchCaches{{{"fp16_rows", nullptr},
                                                           {"fp8_rows", "fp8-e4m3"},
                                                           {"q4_0_rows", "q4_0"},
                                                           {"nvfp4_rows", "nvfp4"}}};

// Decode steps of a Llama-3-8B layer (synthetic llama3-8b: 8 KV heads, 32 query heads, head_dim
// 128) read from each stored cache, as `kvlab generate --method` reads them, on every core: the
// context stored with KvStore::append (timed as the cache's encoding), then `steps` decode steps
// (each appends a token and attends over every stored one), the median step kept. At 32K one
// layer's fp16 cache is 128 MiB, beyond any CPU cache, as every layer's is when serving.
Result<nlohmann::json> run_cpu_bench(const CpuBenchCliOptions& o) {
  if (o.contexts.empty()) return make_error("--contexts: give at least one");
  const bool gpu = o.backend == "cuda";
  if (!gpu && o.backend != "cpu") {
    return make_error(fmt::format("--backend {}: cpu or cuda", o.backend));
  }
  if (gpu && o.out.save) {
    return make_error(
        "--save with --backend cuda: the planner's GPU rates come from 'kvlab bench gpu'");
  }
  if (gpu) {
    // Fails here, with the reason, before the synthetic layer is made.
    auto probe = make_backend("cuda");
    if (!probe) return make_error(fmt::format("--backend cuda: {}", probe.message()));
  }
  const int longest = *std::max_element(o.contexts.begin(), o.contexts.end());
  SyntheticConfig sc;
  sc.layers = 1;
  sc.context = longest + o.steps;
  auto cache = generate_synthetic(sc, terminal_progress());
  if (!cache) return cache.error();
  const LayerKv& layer = cache->layers[0];
  LlamaConfig model;
  model.layers = 1, model.heads = layer.query.heads(), model.kv_heads = cache->shape.kv_heads;
  model.dim = model.heads * cache->shape.head_dim, model.hidden_dim = 1, model.vocab = 1;
  model.seq_len = sc.context;
  const std::size_t kv = static_cast<std::size_t>(model.kv_dim());
  const std::vector<float> queries = layer.query.view().to_float();
  const std::vector<float> q(queries.end() - model.dim, queries.end());
  auto device = make_backend("cpu");
  nlohmann::json rows = nlohmann::json::array(), encode = nlohmann::json::array();
  const double copy = cpu_copy_gb_s();
  std::string where = "cpu";  // the decode steps' attention: the GPU's name with --backend cuda
  for (const int context : o.contexts) {
    const std::vector<float> keys = layer.key.view().token_range(0, context + o.steps).to_float();
    const std::vector<float> values =
        layer.value.view().token_range(0, context + o.steps).to_float();
    double fp16_us = 0;
    for (const CpuBenchCache& c : gpu ? kGpuRowBenchCaches : kCpuBenchCaches) {
      std::optional<MethodConfig> method;
      if (c.method) {
        auto m = run_bench_method(c.method);
        if (!m) return m.error();
        method = *m;
      }
      auto made = make_store_on(o.backend, model, method, context + o.steps);
      if (!made) return made.error();
      std::unique_ptr<KvStore> store = std::move(*made);
      // Copies: a store may write over the rows it is given.
      std::vector<float> k(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(context * kv));
      std::vector<float> v(values.begin(),
                           values.begin() + static_cast<std::ptrdiff_t>(context * kv));
      const auto start = std::chrono::steady_clock::now();
      KVLAB_TRY(store->append(0, 0, context, k.data(), v.data()));
      const double encode_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::vector<double> step_us;
      std::vector<float> out(static_cast<std::size_t>(model.dim)), kr(kv), vr(kv);
      std::uint64_t bytes_read = 0;
      for (int t = 0; t < o.steps; ++t) {
        const auto row = static_cast<std::ptrdiff_t>((context + t) * kv);
        std::copy(keys.begin() + row, keys.begin() + row + static_cast<std::ptrdiff_t>(kv),
                  kr.begin());
        std::copy(values.begin() + row, values.begin() + row + static_cast<std::ptrdiff_t>(kv),
                  vr.begin());
        const auto t0 = std::chrono::steady_clock::now();
        KVLAB_TRY(store->append_and_attend(0, context + t, 1, q.data(), kr.data(), vr.data(),
                                           out.data()));
        step_us.push_back(
            1e6 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        bytes_read += store->bytes();
      }
      std::sort(step_us.begin(), step_us.end());
      const double us = step_us[step_us.size() / 2];
      const double read = static_cast<double>(bytes_read) / o.steps;
      const double fp16 = 4.0 * static_cast<double>(context) * static_cast<double>(kv);
      if (!c.method) fp16_us = us;
      const double gb_s_read = read / (us * 1e-6) / 1e9;
      rows.push_back({{"kernel", c.kernel},
                      {"context", context},
                      {"batch", 1},
                      {"cache", store->label()},
                      {"decode_attention", where = store->decode_attention()},
                      {"microseconds", us},
                      {"bytes_read", read},
                      {"fp16_bytes", fp16},
                      {"gb_s_read", gb_s_read},
                      {"gb_s_fp16_equiv", fp16 / (us * 1e-6) / 1e9},
                      {"speedup_vs_fp16_fused", fp16_us > 0 ? fp16_us / us : 1.0},
                      {"copy_fraction", copy > 0 ? gb_s_read / copy : 0.0}});
      if (c.method && std::string_view(c.kernel) == "huffman_attention") {
        encode.push_back({{"context", context},
                          {"gb_s", 2.0 * static_cast<double>(context * kv) * 2 / encode_s / 1e9}});
      }
    }
  }
  return nlohmann::json{{"device", device ? (*device)->device_name() : std::string("CPU")},
                        {"decode_attention", where},
                        {"threads", worker_threads()},
                        {"copy_gb_s", copy},
                        {"rows", std::move(rows)},
                        {"encode", std::move(encode)}};
}

int run_cpu_bench_command(const CpuBenchCliOptions& o) {
  nlohmann::json j;
  if (int rc = kernel_bench_measurement(
          "cpu", o.out, [&] { return run_cpu_bench(o); }, j);
      rc != 0) {
    return rc;
  }
  if (o.out.json) {
    fmt::print("{}\n", json_text(j, 2));
    return 0;
  }
  fmt::print(
      "Decode attention read from the stored caches on {}, a Llama-3-8B layer (8 KV heads, 32 "
      "query heads, head_dim 128), one step's median\n",
      j.value("decode_attention", "cpu") == "cpu" ? j["device"].get<std::string>()
                                                  : j["decode_attention"].get<std::string>());
  fmt::print("copy {:.1f} GB/s (read + written: the bandwidth ceiling)\n\n",
             j["copy_gb_s"].get<double>());
  fmt::print("{:<18} {:<31} {:>8} {:>11} {:>10} {:>7} {:>13} {:>9}\n", "kernel", "cache", "context",
             "time (us)", "GB/s read", "% copy", "GB/s fp16-eq", "vs fp16");
  for (const auto& r : j["rows"]) {
    fmt::print("{:<18} {:<31} {:>8} {:>11.0f} {:>10.1f} {:>6.0f}% {:>13.1f} {:>8.2f}x\n",
               r["kernel"].get<std::string>(), r.value("cache", std::string("?")),
               r["context"].get<int>(), r["microseconds"].get<double>(),
               r["gb_s_read"].get<double>(), 100.0 * r.value("copy_fraction", 0.0),
               r["gb_s_fp16_equiv"].get<double>(), r.value("speedup_vs_fp16_fused", 0.0));
  }
  fmt::print("\nKVComp + Huffman encoding of the context, GB/s of fp16 input\n");
  fmt::print("{:>8} {:>10}\n", "context", "GB/s");
  for (const auto& e : j["encode"]) {
    fmt::print("{:>8} {:>10.2f}\n", e["context"].get<int>(), e["gb_s"].get<double>());
  }
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* bench = app.add_subcommand("bench", "Measure the engine's speed on this machine");
  bench->require_subcommand(1);
  CLI::App* codec = bench->add_subcommand(
      "codec",
      "Encode/decode speed and size of bitpack, varwidth, Huffman (and zstd) on KVComp codes, "
      "then attention straight from compressed keys and values against fp16");
  codec->add_option("--context", o->context, "tokens of synthetic llama3-8b (one layer)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  codec->add_option("--rel-scale", o->rel_scale, "KVComp step as a fraction of the range")
      ->capture_default_str();
  codec->add_option("--block-size", o->block_size, "tokens per block")->capture_default_str();
  codec->add_option("--seconds", o->seconds, "time per measurement")
      ->check(CLI::Range(0.01, 60.0))
      ->capture_default_str();
  codec
      ->add_option("--fused-contexts", o->fused_contexts,
                   "contexts in tokens for fused attention against fp16: N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  codec->add_flag_callback(
      "--no-fused", [o] { o->fused_contexts.clear(); }, "skip the fused attention part");
  codec->add_flag("--json", o->json, "print the measurements as JSON");
  codec->callback([o] { exit_code() = run_codec_bench(*o); });

  auto g = std::make_shared<GpuBenchCliOptions>();
  CLI::App* gpu = bench->add_subcommand(
      "gpu",
      "Time the GPU kernels (fused attention on compressed streams, GPU compression) against a "
      "fused fp16 decode kernel and cuBLAS fp16; needs a GPU and kvlab built with CUDA");
  gpu->add_option("--contexts", g->request.contexts, "context lengths in tokens: N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(1, 1 << 22))
      ->capture_default_str();
  gpu->add_option("--batches", g->request.batches,
                  "sequences per step: per launch of the one-pass decode kernels, and launches "
                  "back to back of the kernels that take one layer a launch: N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  gpu->add_option("--repeats", g->request.repeats, "timed launches per kernel")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  gpu->add_flag("--json", g->out.json, "print the measurements as JSON");
  gpu->add_flag("--save", g->out.save,
                "store the measurement in the runs database: the planner then charges "
                "decompression on that GPU at these rates");
  gpu->add_option("--gpu-id", g->out.gpu_id,
                  "with --save: the catalogue GPU this is (e.g. h100-sxm)");
  gpu->add_option("--from-json", g->out.from_json,
                  "read a measurement 'kvlab bench gpu --json' wrote (on another machine) instead "
                  "of running one; with --save, store it");
  g->out.db.add_to(*gpu);
  gpu->callback([g] { exit_code() = run_gpu_bench_command(*g); });

  auto c = std::make_shared<CpuBenchCliOptions>();
  CLI::App* cpu = bench->add_subcommand(
      "cpu",
      "Time decode attention read from the stored caches (fp16, FP8, INT4, KVComp + Huffman) on "
      "this CPU, as 'bench gpu' times the GPU kernels; --save lets the planner charge this "
      "machine its own rates");
  cpu->add_option("--contexts", c->contexts, "context lengths in tokens: N,N,...")
      ->delimiter(',')
      ->check(CLI::Range(64, 1 << 20))
      ->capture_default_str();
  cpu->add_option("--steps", c->steps, "timed decode steps per cache (the median is kept)")
      ->check(CLI::Range(1, 10000))
      ->capture_default_str();
  cpu->add_option("--backend", c->backend,
                  "where the decode steps attend: cpu, or cuda (the store's rows copied to the "
                  "GPU as they are written and read there by the fused decode kernel, as 'kvlab "
                  "generate --backend cuda' runs them: fp16, FP8, q4_0 and NVFP4 caches)")
      ->capture_default_str();
  cpu->add_flag("--json", c->out.json, "print the measurements as JSON");
  cpu->add_flag("--save", c->out.save,
                "store the measurement in the runs database: the planner then charges "
                "decompression on that device (--gpu-id) at these rates");
  cpu->add_option("--gpu-id", c->out.gpu_id,
                  "with --save: the catalogue device this machine is (see 'kvlab gpus add')");
  cpu->add_option("--from-json", c->out.from_json,
                  "read a measurement 'kvlab bench cpu --json' wrote instead of running one; with "
                  "--save, store it");
  c->out.db.add_to(*cpu);
  cpu->callback([c] { exit_code() = run_cpu_bench_command(*c); });

  add_bench_run_command(*bench);
}

}  // namespace kvlab::cli
