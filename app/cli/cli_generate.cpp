// kvlab generate: run a real model on a prompt and continue it greedily, timing the prefill and
// the decode; optionally write the logits (to compare with another implementation). With
// --method M the runner holds its cache as method M's reference engine stores it (kv_store.h:
// KVComp's streaming cache, KIVI's groups and fp16 window, llama.cpp's blocks, ...) and attention
// reads the stored form; --compare runs the same prompt with the fp16 cache in the same
// process and reports the speeds side by side and where the greedy texts part.
#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/core/process_memory.h"
#include "kvlab/engine/core/threads.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/model/generate.h"
#include "kvlab/engine/model/kv_store.h"
#include "kvlab/engine/model/model_capture.h"

namespace kvlab::cli {
namespace {

struct GenerateOptions {
  std::string model, tokenizer, prompt, prompt_file, ids, logits_out;
  int tokens = 32, threads = 0, prompt_tokens = 0, batch = 0;
  bool chat = false, stepwise = false, json = false, compare = false, save = false;
  std::string label;
  DbOption db;
  std::string method = "none";
  MethodOptions method_options;
  int buffer = 128;             // kvcomp: the fp16 buffer's tokens
  std::string backend = "cpu";  // where decode steps attend: cpu, cuda, auto
};

// One greedy run (its tokens and times) and the cache it held at the end.
struct Generation {
  GreedyRun run;
  std::uint64_t cache_bytes = 0, fp16_bytes = 0;
  std::uint64_t peak_resident = 0;  // the process's peak resident memory during this run
  std::string decode_attention = "cpu";
  std::uint64_t decode_copy_bytes = 0;
};

int run_generate(const GenerateOptions& o) {
  const int given = !o.prompt.empty() + !o.prompt_file.empty() + !o.ids.empty();
  if (given != 1) {
    return fail(
        "give the prompt with exactly one of --prompt TEXT, --prompt-file FILE or "
        "--ids 1,2,3");
  }
  if (o.tokens < 0) return fail(fmt::format("--tokens {}: must not be negative", o.tokens));
  if (o.stepwise && o.batch > 1) {
    return fail(fmt::format("--stepwise runs the prompt one token at a time: not with --batch {}",
                            o.batch));
  }
  const int batch = o.stepwise ? 1 : o.batch;
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "auto") {
    return fail(fmt::format("--backend {}: cpu, cuda or auto", o.backend));
  }
  if (o.backend != "cpu" && o.method == "none") {
    return fail(fmt::format(
        "--backend {}: the runner's own float32 cache attends on the CPU; give a --method (fp16 "
        "for the fp16 cache)",
        o.backend));
  }
  if (o.threads < 0 || o.threads > 1024) {
    return fail(fmt::format("--threads {}: must be 0 (every core) to 1024", o.threads));
  }
  std::optional<MethodConfig> method;
  if (o.method != "none" && o.method != "fp16") {
    MethodOptions options = o.method_options;
    if (o.method == "kvcomp") {
      // KVComp's streaming cache appends to Huffman, rANS or BitPack streams; Huffman unless
      // chosen.
      if (options.codec == "none") options.codec = "huffman";
      if (options.codec != "huffman" && options.codec != "bitpack" && options.codec != "rans") {
        return fail(fmt::format(
            "--codec {}: huffman, rans or bitpack (the codes KVComp's streaming cache appends to)",
            options.codec));
      }
    }
    auto resolved = options.resolve(o.method, "--method");
    if (!resolved) return fail(resolved.message());
    method = *resolved;
  }
  if (o.compare && !method) {
    return fail("--compare needs a --method other than none and fp16 (it runs the fp16 cache)");
  }
  auto db = o.db.open_if(o.save);  // before the long work: a bad --db fails at once
  if (!db) return fail(db.message());
  const auto thread_limit = limit_threads(o.threads);
  auto loaded = load_model(o.model, o.tokenizer);
  if (!loaded) return fail(loaded.message());
  const LlamaModel& model = loaded->model;
  std::vector<int> ids;
  if (!o.ids.empty()) {
    std::stringstream ss(o.ids);
    for (std::string item; std::getline(ss, item, ',');) {
      try {
        std::size_t used = 0;
        ids.push_back(std::stoi(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } catch (const std::exception&) {
        return fail(fmt::format("--ids: '{}' is not a token id", item));
      }
    }
  } else {
    std::string text = o.prompt;
    if (!o.prompt_file.empty()) {
      auto read = read_text_file("--prompt-file", o.prompt_file);
      if (!read) return fail(read.message());
      text = std::move(*read);
    }
    if (o.chat) {
      auto wrapped = chat_prompt(*loaded, text);
      if (!wrapped) return fail(fmt::format("{}: {}", o.model, wrapped.message()));
      text = *wrapped;
    }
    auto encoded = loaded->encode(text);
    if (!encoded) return fail(encoded.message());
    ids = std::move(*encoded);
  }
  if (ids.empty()) return fail("the prompt has no tokens");
  if (o.prompt_tokens > 0) {
    if (static_cast<int>(ids.size()) < o.prompt_tokens) {
      return fail(fmt::format("--prompt-tokens {}: the prompt has only {} tokens", o.prompt_tokens,
                              ids.size()));
    }
    ids.resize(static_cast<std::size_t>(o.prompt_tokens));
  }
  const int limit = model.config().seq_len;
  if (static_cast<int>(ids.size()) + o.tokens > limit) {
    return fail(fmt::format("{} prompt tokens and {} more pass the model's {} positions",
                            ids.size(), o.tokens, limit));
  }
  std::ofstream logits_file;
  if (!o.logits_out.empty()) {
    logits_file.open(o.logits_out, std::ios::binary | std::ios::trunc);
    if (!logits_file) return fail(fmt::format("--logits-out {}: cannot write it", o.logits_out));
  }
  const auto write_logits = [&](const std::vector<float>& l) {
    if (logits_file.is_open()) {
      logits_file.write(reinterpret_cast<const char*>(l.data()),
                        static_cast<std::streamsize>(l.size() * sizeof(float)));
    }
  };
  // A run of the model over the prompt and `tokens` greedy steps, its cache stored by `store`
  // (null: the runner's own float32 cache).
  const auto generate = [&](const std::shared_ptr<KvStore>& store,
                            bool write) -> Result<Generation> {
    reset_peak_resident();  // the model is loaded: from here the run's own memory counts
    auto state = model.new_state();
    state.kv_store = store;
    GreedyConfig config;
    config.tokens = o.tokens;
    config.prefill_chunk = batch;  // --stepwise: one at a time, every position's logits
    config.eos = loaded->eos;
    config.trim_after_prefill = true;
    GreedyHooks hooks;
    if (write) {
      hooks.on_prefill = [&](int done, const std::vector<float>& logits) {
        if (o.stepwise || done == static_cast<int>(ids.size())) write_logits(logits);
        return true;
      };
    }
    auto greedy = generate_greedy(model, state, ids, config, hooks);
    if (!greedy) return greedy.error();
    Generation g{std::move(*greedy)};
    const std::uint64_t stored_tokens = static_cast<std::uint64_t>(state.pos);
    g.fp16_bytes = 2ull * 2ull * stored_tokens *
                   static_cast<std::uint64_t>(model.config().kv_dim()) *
                   static_cast<std::uint64_t>(model.config().layers);
    g.cache_bytes = store ? store->bytes() : 2 * g.fp16_bytes;  // the runner keeps float32
    g.peak_resident = process_memory().peak_resident_bytes;
    if (store) {
      g.decode_attention = store->decode_attention();
      g.decode_copy_bytes = store->decode_copy_bytes();
    }
    return g;
  };
  // The fp16 cache as a serving engine holds it: the same stored-cache code as the methods.
  const int max_tokens = static_cast<int>(ids.size()) + o.tokens;
  // --backend: where the stores' decode steps attend (make_store_on).
  const auto make_store =
      [&](const std::optional<MethodConfig>& m,
          const CompressedCacheConfig& kvcomp) -> Result<std::shared_ptr<KvStore>> {
    auto made = make_store_on(o.backend, model.config(), m, max_tokens, kvcomp);
    if (!made) {
      return make_error(o.backend == "cpu"
                            ? made.message()
                            : fmt::format("--backend {}: {}", o.backend, made.message()));
    }
    return std::shared_ptr<KvStore>(std::move(*made));
  };
  const auto fp16_store = [&]() { return make_store(std::nullopt, {}); };
  std::shared_ptr<KvStore> store;
  if (o.method == "fp16") {
    auto made = fp16_store();
    if (!made) return fail(made.message());
    store = std::move(*made);
  }
  if (method) {
    CompressedCacheConfig kvcomp;
    kvcomp.buffer_size = o.buffer;
    // Sized for the whole run up front, as llama.cpp allocates its context.
    auto made = make_store(method, kvcomp);
    if (!made) return fail(fmt::format("--method {}: {}", o.method, made.message()));
    store = std::move(*made);
  }
  auto run = generate(store, true);
  if (!run) return fail(run.message());
  const std::string cache_label = store ? store->label() : std::string("float32");
  const bool stored = store != nullptr;
  store.reset();  // the fp16 run's peak memory does not hold this run's cache
  std::optional<Generation> fp16;
  if (o.compare && stored) {
    auto baseline = fp16_store();
    if (!baseline) return fail(baseline.message());
    auto plain = generate(*baseline, false);
    if (!plain) return fail(plain.message());
    fp16 = std::move(*plain);
  }
  const auto measured = [&](const Generation& g, const std::string& cache) {
    GenerateMeasurement m;
    m.model = o.model;
    m.prompt_ids = ids;
    m.generated_ids = g.run.generated;
    m.text = loaded->decode(g.run.generated);
    m.prefill_seconds = g.run.prefill_s, m.decode_seconds = g.run.decode_s;
    m.prefill_batch = batch;
    m.decode_steps = g.run.steps;
    m.threads = worker_threads();
    m.cache = cache;
    m.cache_bytes = g.cache_bytes, m.fp16_bytes = g.fp16_bytes;
    m.peak_resident_bytes = g.peak_resident;
    m.decode_attention = g.decode_attention;
    m.decode_copy_bytes = g.decode_copy_bytes;
    return m;
  };
  const GenerateMeasurement measurement = measured(*run, cache_label);
  std::optional<GenerateMeasurement> fp16_measurement;
  if (fp16) fp16_measurement = measured(*fp16, "fp16");
  nlohmann::json j = generate_result(measurement, fp16_measurement ? &*fp16_measurement : nullptr);
  const std::vector<int>& generated = run->run.generated;
  const std::string& text = measurement.text;
  const double prefill_s = run->run.prefill_s, decode_s = run->run.decode_s;
  const int steps = run->run.steps;
  const double prefill_tps = j["prefill_tokens_per_second"].get<double>();
  const double decode_tps = j["decode_tokens_per_second"].get<double>();
  const int agree = fp16 ? j["greedy_tokens_agreeing"].get<int>() : 0;
  const double vs_fp16 = fp16 ? j["decode_speed_vs_fp16"].get<double>() : 0;
  const NewRun saved = generate_run(j, method, o.label);
  return save_and_print(db->get(), saved, j, o.json, [&] {
    fmt::print("{}\n\n", terminal_lines(text));  // a model's text: no escape reaches the terminal
    fmt::print(
        "prefill  {} tokens in {:.3f} s ({:.1f} tokens/s{})\n", ids.size(), prefill_s, prefill_tps,
        o.stepwise                                          ? ", one at a time"
        : batch > 0 && batch < static_cast<int>(ids.size()) ? fmt::format(", {} at a time", batch)
                                                            : std::string());
    fmt::print("decode   {} tokens in {:.3f} s ({:.1f} tokens/s)\n", steps, decode_s, decode_tps);
    fmt::print("threads  {}\n", worker_threads());
    if (run->decode_attention != "cpu") {
      fmt::print(
          "attend   decode steps on {} over its copy of the cache ({:.2f} MiB there); the "
          "prompt on the CPU\n",
          run->decode_attention, run->decode_copy_bytes / (1024.0 * 1024.0));
    }
    constexpr double kMiB = 1024.0 * 1024.0;
    fmt::print("cache    {}: {:.2f} MiB held for {:.2f} MiB of fp16 ({:.2f}x)\n", cache_label,
               run->cache_bytes / kMiB, run->fp16_bytes / kMiB,
               static_cast<double>(run->fp16_bytes) / std::max<std::uint64_t>(run->cache_bytes, 1));
    fmt::print("memory   {:.1f} MiB resident at the peak (model included)\n",
               run->peak_resident / kMiB);
    if (fp16) {
      fmt::print(
          "fp16     prefill {:.1f} tokens/s, decode {:.1f} tokens/s: {} decodes at {:.2f}x\n",
          fp16->run.prefill_tokens_per_s(ids.size()), fp16->run.decode_tokens_per_s(), cache_label,
          vs_fp16);
      fmt::print("fp16     {:.2f} MiB held, {:.1f} MiB resident at the peak\n",
                 fp16->cache_bytes / kMiB, fp16->peak_resident / kMiB);
      fmt::print("greedy   {} of {} generated tokens agree with fp16's before the texts part{}\n",
                 agree, generated.size(),
                 agree == static_cast<int>(generated.size()) ? " (they never do)" : "");
    }
  });
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand(
      "generate",
      "Run a real model (GGUF file, llama2.c checkpoint or Hugging Face folder) on a prompt and "
      "continue it greedily; prints the text and the prefill and decode speeds");
  cmd->add_option("--model", o->model, "a .gguf file, a llama2.c checkpoint or a HF folder")
      ->required();
  cmd->add_option("--tokenizer", o->tokenizer, "tokenizer (llama2.c and HF models only)");
  cmd->add_option("--prompt", o->prompt, "the prompt text");
  cmd->add_option("--prompt-file", o->prompt_file, "a file holding the prompt");
  cmd->add_option("--ids", o->ids, "the prompt as token ids, comma-separated (no BOS added)");
  cmd->add_option("--prompt-tokens", o->prompt_tokens,
                  "keep the first N tokens of the prompt (a context of a chosen length from a long "
                  "text; 0: all)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  cmd->add_flag("--chat", o->chat, "wrap the prompt as a user turn of the model's chat template");
  cmd->add_option("--tokens", o->tokens, "tokens to generate")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--threads", o->threads, "worker threads (0: every core)")->capture_default_str();
  cmd->add_option("--logits-out", o->logits_out,
                  "write the logits as raw little-endian float32: [vocab] after the prompt, or "
                  "[prompt tokens][vocab] with --stepwise");
  cmd->add_flag("--stepwise", o->stepwise,
                "run the prompt one token at a time (the decode path) instead of as one batch");
  cmd->add_option("--batch", o->batch,
                  "prompt tokens per forward pass, as llama.cpp's micro-batch (-ub): the "
                  "prefill's activations take N rows, not the whole prompt's; a stored cache's "
                  "later chunks attend over it a tile at a time, and per-tensor scales and "
                  "KVComp's codebooks come from the first chunk (0: the whole prompt at once)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--method", o->method,
                  "the cache the runner holds: none (its float cache), fp16 (fp16 rows, read by "
                  "the fused fp16 kernel on every core), or a method stored as its reference "
                  "engine stores it and read by the attention in that form: kvcomp, kivi, int8, "
                  "int4, fp8-e4m3, fp8-e5m2, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, nvfp4, mxfp4 "
                  "(with --rotation, its rows stored rotated and the query turned instead)")
      ->capture_default_str();
  o->method_options.add_to(*cmd);
  cmd->add_option("--buffer", o->buffer,
                  "kvcomp: tokens the fp16 buffer holds before a flush (a multiple of the block "
                  "size)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--backend", o->backend,
                  "where each decode step's attention runs: cpu, cuda (the GPU's fused decode "
                  "kernel over its own copy of the stored rows, appended as they are written; "
                  "fp16, fp8-e4m3, q8_0, q4_0 and nvfp4 caches, head_dim 64, 128 or 256), or "
                  "auto (cuda where it can, else cpu); the model and the prompt run on the CPU")
      ->capture_default_str();
  cmd->add_flag("--compare", o->compare,
                "also run the prompt with the fp16 cache (--method fp16) in this process: speeds "
                "side by side and where the greedy texts part");
  cmd->add_flag("--json", o->json, "print JSON");
  cmd->add_flag("--save", o->save,
                "save the run (kind \"generate\": speeds, cache bytes, peak memory, the fp16 "
                "run's with --compare) to the runs database; the planner takes its bits per "
                "value as --scheme run:ID");
  cmd->add_option("--label", o->label, "label for the saved run");
  o->db.add_to(*cmd);
  cmd->callback([o] { exit_code() = run_generate(*o); });
}

}  // namespace kvlab::cli
