// The kvlab command line, run as a user would: exit codes, one-line errors, --json fields,
// and the runs database across invocations.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "kvlab/engine/eviction/eviction.h"
#include "kvlab/engine/eviction/eviction_json.h"

namespace {

using kvlab::cli_test::Output;

Output run(const std::string& args) {
  return kvlab::cli_test::run_kvlab(args);
}

std::string tmp(const std::string& name) {
  std::filesystem::create_directories(KVLAB_TEST_TMPDIR);
  const std::string path = std::string(KVLAB_TEST_TMPDIR) + "/" + name;
  std::filesystem::remove(path);
  return path;
}

TEST(Cli, HelpOnEveryCommand) {
  for (const char* c : {"",
                        "compress",
                        "runs",
                        "runs list",
                        "runs show",
                        "runs export",
                        "runs report",
                        "runs delete",
                        "runs import",
                        "sweep",
                        "sources",
                        "sources export-synthetic",
                        "sources info",
                        "bench",
                        "bench codec",
                        "bench run",
                        "stream",
                        "evict",
                        "plan",
                        "plan sweep",
                        "models",
                        "models list",
                        "models import",
                        "gpus",
                        "gpus list",
                        "gpus add",
                        "gpus remove"}) {
    const Output o = run(std::string(c) + " --help");
    EXPECT_EQ(o.code, 0) << c;
    EXPECT_NE(o.out.find("Usage"), std::string::npos) << c;
  }
}

TEST(Cli, CompressJsonHasTheDocumentedFields) {
  const Output o = run("compress --source synthetic:tiny --context 200 --method kivi --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  for (const char* k : {"ratio", "bits_per_value", "bytes", "error", "per_layer"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  for (const char* k : {"mse", "max_abs", "snr_db", "logit_rmse", "softmax_kl",
                        "attn_output_rel_error", "attn_output_cosine"}) {
    EXPECT_TRUE(j["error"].contains(k)) << k;
  }
  EXPECT_EQ(j["per_layer"].size(), 2u);
  EXPECT_NEAR(j["ratio"].get<double>() * j["bits_per_value"].get<double>(), 16.0, 1e-9);
}

TEST(Cli, BadInputGivesOneLineAndNonZeroExit) {
  const std::pair<const char*, const char*> cases[] = {
      {"compress --method kivi --bits 3 --source synthetic:tiny", "--bits must be 2 or 4"},
      {"compress --method zip --source synthetic:tiny", "unknown method 'zip'"},
      {"compress --source synthetic:tiny --context 0", "--context"},
      {"compress --source synthetic:nope", "unknown synthetic preset"},
      {"compress --source file:/does/not/exist.safetensors", "/does/not/exist.safetensors"},
      {"compress --source ftp:x", "expected synthetic:PRESET or file:PATH"},
      {"compress --method kvcomp --rel-scale 0.0001 --source synthetic:tiny", "--rel-scale"},
  };
  for (const auto& [args, want] : cases) {
    const Output o = run(args);
    EXPECT_NE(o.code, 0) << args;
    EXPECT_NE(o.out.find(want), std::string::npos) << args << "\n" << o.out;
    EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
  }
  EXPECT_EQ(run("frobnicate").code, 2);
}

TEST(Cli, SaveListShowExportDelete) {
  const std::string db = tmp("cli-runs.sqlite");
  const std::string dbo = " --db " + db;
  const Output saved =
      run("compress --source synthetic:tiny --context 100 --method int4 --save --json" + dbo);
  ASSERT_EQ(saved.code, 0) << saved.out;
  const auto j = nlohmann::json::parse(saved.out);
  const int id = j["run_id"].get<int>();

  const Output list = run("runs list --json" + dbo);
  ASSERT_EQ(list.code, 0) << list.out;
  const auto runs = nlohmann::json::parse(list.out);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["id"].get<int>(), id);
  EXPECT_DOUBLE_EQ(runs[0]["ratio"].get<double>(), j["ratio"].get<double>());

  const std::string csv = tmp("run.csv");
  ASSERT_EQ(run("runs export " + std::to_string(id) + " --format csv --out " + csv + dbo).code, 0);
  std::ifstream f(csv);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("metrics.ratio"), std::string::npos);
  EXPECT_NE(text.find("metrics.error.mse"), std::string::npos);

  const Output shown = run("runs show " + std::to_string(id) + " --json" + dbo);
  ASSERT_EQ(shown.code, 0);
  EXPECT_EQ(nlohmann::json::parse(shown.out)["metrics"]["ratio"], j["ratio"]);

  // The HTML report holds the run's numbers and its per-layer charts; an unknown id fails.
  const std::string html_path = tmp("run.html");
  ASSERT_EQ(run("runs report " + std::to_string(id) + " --out " + html_path + dbo).code, 0);
  std::ifstream hf(html_path);
  const std::string html((std::istreambuf_iterator<char>(hf)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("<!DOCTYPE html>"), std::string::npos);
  EXPECT_NE(html.find("Compression ratio per layer"), std::string::npos);
  EXPECT_NE(html.find("<th>method</th><td>int4</td>"), std::string::npos);
  const Output missing = run("runs report 424242" + dbo);
  EXPECT_NE(missing.code, 0);
  EXPECT_NE(missing.out.find("424242"), std::string::npos) << missing.out;

  EXPECT_EQ(run("runs delete " + std::to_string(id) + dbo).code, 0);
  const Output gone = run("runs show " + std::to_string(id) + dbo);
  EXPECT_NE(gone.code, 0);
  EXPECT_NE(gone.out.find("not found"), std::string::npos) << gone.out;
}

TEST(Cli, ExportSyntheticThenCompressTheFile) {
  const std::string file = tmp("tiny.safetensors");
  const Output w = run("sources export-synthetic --preset tiny --context 64 --out " + file);
  ASSERT_EQ(w.code, 0) << w.out;
  const Output a = run("compress --source file:" + file + " --method int8 --json");
  const Output b = run("compress --source synthetic:tiny --context 64 --method int8 --json");
  ASSERT_EQ(a.code, 0) << a.out;
  ASSERT_EQ(b.code, 0) << b.out;
  // The file holds the same cache (queries included), so the metrics agree exactly.
  const auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["error"], jb["error"]);
  EXPECT_EQ(ja["bytes"], jb["bytes"]);
  const Output info = run("sources info " + file);
  EXPECT_EQ(info.code, 0);
  EXPECT_NE(info.out.find("64"), std::string::npos);
}

TEST(Cli, KvCompWithHuffmanReportsTheCodecNumbers) {
  const Output o =
      run("compress --source synthetic:tiny --context 200 --method kvcomp --codec huffman --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  for (const char* k :
       {"entropy_bits_per_code", "payload_bits_per_code", "metadata_bytes", "codebook_bytes"}) {
    EXPECT_TRUE(j.contains(k)) << k;
    EXPECT_TRUE(j["per_layer"][1].contains(k)) << k;
  }
  EXPECT_GE(j["payload_bits_per_code"].get<double>(), j["entropy_bits_per_code"].get<double>());
  const Output bad = run("compress --source synthetic:tiny --method kivi --codec huffman");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("only kvcomp"), std::string::npos) << bad.out;
}

TEST(Cli, BenchCodecMeasuresAllThreeCodecsAndFusedAttention) {
  // 200 tokens: three whole blocks of 64 compressed, the last 8 in the fp16 buffer.
  const Output o = run("bench codec --context 128 --seconds 0.01 --fused-contexts 128,200 --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  int ours = 0;
  for (const auto& r : j["codecs"]) {
    const std::string codec = r["codec"].get<std::string>();
    if (codec == "bitpack" || codec == "varwidth" || codec == "huffman") ++ours;
    EXPECT_GT(r["decode_gb_s"].get<double>(), 0.0) << codec;
    EXPECT_GE(r["payload_bits_per_code"].get<double>(), r["entropy_bits_per_code"].get<double>())
        << codec;
  }
  EXPECT_EQ(ours, 6);  // keys and values, three codecs each (zstd rows come on top when built in)
  // At the default rel_scale 0.05 codes reach 20: one code per Huffman symbol. At 0.2 they stay
  // below 16 and the engine's book codes pairs, within 3% of the entropy.
  for (const auto& r : j["codecs"]) {
    if (r["codec"] == "huffman") {
      EXPECT_EQ(r["symbols"], "codes");
    }
  }
  const Output coarse =
      run("bench codec --context 128 --seconds 0.01 --rel-scale 0.2 --no-fused --json");
  ASSERT_EQ(coarse.code, 0) << coarse.out;
  int pair_rows = 0;
  const auto coarse_json = nlohmann::json::parse(coarse.out);
  for (const auto& r : coarse_json["codecs"]) {
    if (r["codec"] != "huffman") continue;
    EXPECT_EQ(r["symbols"], "pairs");
    EXPECT_LE(r["payload_bits_per_code"].get<double>(),
              1.03 * r["entropy_bits_per_code"].get<double>());
    ++pair_rows;
  }
  EXPECT_EQ(pair_rows, 2);
  const auto& fused = j["fused_attention"];
  ASSERT_EQ(fused.size(), 6u);  // two contexts, three paths each
  for (std::size_t i = 0; i < fused.size(); ++i) {
    const auto& r = fused[i];
    EXPECT_EQ(r["context"].get<int>(), i < 3 ? 128 : 200);
    EXPECT_GT(r["qk_us"].get<double>(), 0.0);
    EXPECT_GT(r["sv_us"].get<double>(), 0.0);
    if (r["path"] == "fp16") {
      EXPECT_DOUBLE_EQ(r["qk_vs_fp16"].get<double>(), 1.0);
    } else {
      EXPECT_NEAR(r["qk_vs_fp16"].get<double>(),
                  fused[i - (i % 3)]["qk_us"].get<double>() / r["qk_us"].get<double>(), 1e-9);
    }
  }
  const Output none = run("bench codec --context 128 --seconds 0.01 --no-fused --json");
  ASSERT_EQ(none.code, 0) << none.out;
  EXPECT_TRUE(nlohmann::json::parse(none.out)["fused_attention"].empty());
  EXPECT_NE(run("bench codec --seconds 0").code, 0);
  EXPECT_NE(run("bench codec --fused-contexts 0").code, 0);
}

TEST(Cli, BenchRunTimesEveryMethodBesideItsFloorAndLeavesNoFiles) {
  const auto dir = std::filesystem::path(KVLAB_TEST_TMPDIR) / "bench_run";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const Output o =
      run("bench run --preset tiny --layers 3 --contexts 256,512 --methods "
          "int8,kvcomp-huffman --json --dir " +
          dir.string());
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["runs"].size(), 4u);  // two contexts, two methods each
  for (std::size_t i = 0; i < 4; ++i) {
    const auto& r = j["runs"][i];
    EXPECT_EQ(r["context"].get<int>(), i < 2 ? 256 : 512);
    EXPECT_EQ(r["method"].get<std::string>(), i % 2 == 0 ? "int8" : "kvcomp-huffman");
    EXPECT_EQ(r["layers"].get<int>(), 3);
    EXPECT_EQ(r["backend"], "cpu");  // --backends' default
    EXPECT_EQ(r["stage_backends"]["quantize"], "cpu");
    EXPECT_GT(r["floor_s"].get<double>(), 0.0);
    EXPECT_NEAR(r["x_floor"].get<double>(), r["run_s"].get<double>() / r["floor_s"].get<double>(),
                1e-9);
    EXPECT_GT(r["peak_bytes"].get<double>(), 0.0);
    // tiny: 2 KV heads x 16 dims, fp16 K and V.
    EXPECT_EQ(r["source_bytes"].get<std::uint64_t>(), 3ull * 2 * (i < 2 ? 256 : 512) * 2 * 16 * 2);
  }
  EXPECT_NEAR(j["runs"][0]["ratio"].get<double>(), 2.0, 0.01);  // int8 with its scales
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a source file was left behind";
  const Output bad = run("bench run --methods int8,fast");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("'fast'"), std::string::npos) << bad.out;

  // Both backends side by side, the source in memory: here the second is an unknown name, a
  // one-line error before any work.
  const Output twin =
      run("bench run --preset tiny --layers 2 --contexts 128 --methods int8 "
          "--in-memory --backends cpu,gpu0 --json");
  EXPECT_EQ(twin.code, 1);
  EXPECT_NE(twin.out.find("--backends gpu0: unknown backend"), std::string::npos) << twin.out;
  const Output in_memory =
      run("bench run --preset tiny --layers 2 --contexts 128 --methods int8 "
          "--in-memory --json --dir " +
          dir.string());
  ASSERT_EQ(in_memory.code, 0) << in_memory.out;
  EXPECT_TRUE(nlohmann::json::parse(in_memory.out)["runs"][0]["in_memory"].get<bool>());
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

TEST(Cli, StreamReportsMemoryOverDecodeSteps) {
  const std::string common =
      "stream --source synthetic:tiny --context 160 --prefill 64 --block-size 16 "
      "--buffer-size 32 --codec huffman --every 16";
  const Output o = run(common + " --json");
  ASSERT_EQ(o.code, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  const auto& points = j["points"];
  ASSERT_EQ(points.size(), 7u);  // steps 0, 16, ..., 96
  EXPECT_EQ(points.front()["tokens"], 64);
  EXPECT_EQ(points.back()["step"], 96);
  EXPECT_EQ(points.back()["tokens"], 160);
  for (const auto& p : points) {
    EXPECT_EQ(p["total"].get<std::uint64_t>(),
              p["payload"].get<std::uint64_t>() + p["metadata"].get<std::uint64_t>() +
                  p["codebooks"].get<std::uint64_t>() + p["quant_params"].get<std::uint64_t>() +
                  p["buffer"].get<std::uint64_t>());
    EXPECT_GT(p["ratio"].get<double>(), 1.0);
  }
  const Output table = run(common);
  ASSERT_EQ(table.code, 0) << table.out;
  for (const char* k : {"step", "tokens", "compressed", "buffer", "meta+books", "ratio"}) {
    EXPECT_NE(table.out.find(k), std::string::npos) << k;
  }
  const std::string dbo = " --db " + tmp("stream.sqlite");
  const Output saved = run(common + " --json --save" + dbo);
  ASSERT_EQ(saved.code, 0) << saved.out;
  const auto id = nlohmann::json::parse(saved.out)["run_id"].get<long long>();
  const Output show = run("runs show " + std::to_string(id) + dbo);
  EXPECT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("stream"), std::string::npos) << show.out;
  const Output bad = run("stream --source synthetic:tiny --context 64 --prefill 65");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("prefill"), std::string::npos) << bad.out;
  const Output bad_codec = run("stream --source synthetic:tiny --codec varwidth");
  EXPECT_NE(bad_codec.code, 0);
  EXPECT_NE(bad_codec.out.find("varwidth"), std::string::npos) << bad_codec.out;
}

// The tiny preset at 256 tokens with 16 decode steps: small enough to simulate in a moment.
const std::string kEvictTiny = "evict --source synthetic:tiny --context 256 --steps 16";

nlohmann::json evict_json(const std::string& args) {
  const Output o = run(kEvictTiny + " " + args + " --json");
  EXPECT_EQ(o.code, 0) << args << "\n" << o.out;
  return o.code == 0 ? nlohmann::json::parse(o.out) : nlohmann::json::object();
}

TEST(Cli, EvictHelpExplainsBudgetsAndEveryPolicy) {
  const Output o = run("evict --help");
  ASSERT_EQ(o.code, 0) << o.out;
  for (const char* k : {"full",
                        "window",
                        "streaming",
                        "h2o",
                        "threshold",
                        "importance",
                        "merge",
                        "token count",
                        "fraction",
                        "--budget",
                        "--layer-budgets",
                        "--sinks",
                        "--recent-fraction",
                        "--protect",
                        "--merge-similarity",
                        "--needle",
                        "--quant",
                        "--bits",
                        "--steps",
                        "--save"}) {
    EXPECT_NE(o.out.find(k), std::string::npos) << k;
  }
}

TEST(Cli, EvictH2oOnTheTinyPresetReportsEveryField) {
  const auto j = evict_json("--policy h2o --budget 0.25");
  ASSERT_FALSE(j.empty());
  for (const char* k : {"kept_tokens", "memory_bytes", "full_memory_bytes", "memory_ratio",
                        "attention_mass_retained", "attn_output_rel_error", "attn_output_cosine",
                        "needle_retained", "needle_in_top_k", "per_layer", "per_step", "seconds"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["policy"], "h2o");
  EXPECT_EQ(j["tokens"], 256);
  EXPECT_EQ(j["steps"], 16);
  EXPECT_EQ(j["per_layer"].size(), 2u);
  EXPECT_EQ(j["per_step"]["context"].size(), 16u);
  const double mass = j["attention_mass_retained"].get<double>();
  EXPECT_GT(mass, 0.0);
  EXPECT_LE(mass, 1.0 + 1e-6);
  EXPECT_GE(j["attn_output_rel_error"].get<double>(), 0.0);
  EXPECT_LE(j["attn_output_cosine"].get<double>(), 1.0 + 1e-9);
  // A quarter of the 256 tokens at the last step.
  EXPECT_NEAR(j["kept_tokens"].get<double>(), 64.0, 1.0);
  EXPECT_LT(j["memory_bytes"].get<double>(), j["full_memory_bytes"].get<double>());
  EXPECT_NEAR(j["memory_ratio"].get<double>(), 4.0, 0.1);
  // The synthetic source knows its needle, so the needle numbers are fractions, not null.
  EXPECT_TRUE(j["needle_retained"].is_number());
  EXPECT_GE(j["needle_retained"].get<double>(), 0.0);
  EXPECT_LE(j["needle_retained"].get<double>(), 1.0);

  // A token count budget keeps that many tokens.
  const auto count = evict_json("--policy window --budget 100");
  ASSERT_FALSE(count.empty());
  EXPECT_NEAR(count["kept_tokens"].get<double>(), 100.0, 1e-9);
}

TEST(Cli, EvictFullIsTheReference) {
  const auto j = evict_json("--policy full");
  ASSERT_FALSE(j.empty());
  EXPECT_NEAR(j["attention_mass_retained"].get<double>(), 1.0, 1e-6);
  EXPECT_NEAR(j["attn_output_rel_error"].get<double>(), 0.0, 1e-6);
  EXPECT_NEAR(j["attn_output_cosine"].get<double>(), 1.0, 1e-6);
  EXPECT_NEAR(j["kept_tokens"].get<double>(), 256.0, 1e-9);
  EXPECT_EQ(j["needle_retained"].get<double>(), 1.0);
}

TEST(Cli, EvictEveryPolicyRunsAndPrintsATable) {
  for (const char* p : {"window", "streaming", "threshold", "importance", "merge"}) {
    const Output o = run(kEvictTiny + " --policy " + p);
    ASSERT_EQ(o.code, 0) << p << "\n" << o.out;
    for (const char* k : {"policy", "kept tokens", "memory", "attention mass", "rel. error",
                          "cosine", "needle", "layer", "time"}) {
      EXPECT_NE(o.out.find(k), std::string::npos) << p << ": " << k << "\n" << o.out;
    }
    EXPECT_NE(o.out.find(p), std::string::npos) << o.out;
  }
}

TEST(Cli, EvictWithKiviQuantizationSavesMoreMemory) {
  const auto plain = evict_json("--policy h2o --budget 0.5");
  const auto quant = evict_json("--policy h2o --budget 0.5 --quant kivi --residual 32");
  ASSERT_FALSE(plain.empty());
  ASSERT_FALSE(quant.empty());
  EXPECT_LT(quant["memory_bytes"].get<double>(), plain["memory_bytes"].get<double>());
  EXPECT_GT(quant["quant_bytes_per_token"].get<double>(), 0.0);
  EXPECT_NE(quant["label"].get<std::string>().find("kivi"), std::string::npos) << quant["label"];
  // Same policy, same kept count: only the storage of a kept token changed.
  EXPECT_NEAR(quant["kept_tokens"].get<double>(), plain["kept_tokens"].get<double>(), 1e-9);
}

TEST(Cli, EvictFileSourceNeedsNeedleForNeedleNumbers) {
  const std::string file = tmp("evict-tiny.safetensors");
  const Output w =
      run("sources export-synthetic --preset tiny --context 128 --queries 8 --out " + file);
  ASSERT_EQ(w.code, 0) << w.out;
  const Output a = run("evict --source file:" + file + " --steps 8 --json");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_TRUE(nlohmann::json::parse(a.out)["needle_retained"].is_null());
  const Output b = run("evict --source file:" + file + " --steps 8 --needle 47 --json");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_TRUE(nlohmann::json::parse(b.out)["needle_retained"].is_number());
}

TEST(Cli, EvictSaveShowListExport) {
  const std::string dbo = " --db " + tmp("evict.sqlite");
  const Output saved = run(kEvictTiny + " --policy merge --budget 0.3 --json --save" + dbo);
  ASSERT_EQ(saved.code, 0) << saved.out;
  const auto j = nlohmann::json::parse(saved.out);
  const auto id = j["run_id"].get<long long>();

  const Output full = run("runs show " + std::to_string(id) + " --json" + dbo);
  ASSERT_EQ(full.code, 0) << full.out;
  const auto r = nlohmann::json::parse(full.out);
  EXPECT_EQ(r["kind"], "eviction");
  EXPECT_EQ(r["metrics"]["kept_tokens"], j["kept_tokens"]);
  EXPECT_EQ(r["params"]["policy"], "merge");
  EXPECT_EQ(r["params"]["source"]["context"], 256);
  auto config = kvlab::eviction_config_from_json(r["params"]);
  ASSERT_TRUE(config) << config.message();
  EXPECT_EQ(config->steps, 16);
  ASSERT_TRUE(r["artifacts"].contains("eviction_map"));
  auto maps = kvlab::eviction_maps_from_json(r["artifacts"]["eviction_map"]);
  ASSERT_TRUE(maps) << maps.message();
  ASSERT_EQ(maps->size(), 2u);  // layers
  for (const auto& layer : *maps) {
    ASSERT_FALSE(layer.empty());
    for (const auto& m : layer) {
      EXPECT_EQ(m.steps, 16);
      EXPECT_EQ(m.positions, 256);
    }
  }
  auto report = kvlab::eviction_report_from_json(r["metrics"]);
  ASSERT_TRUE(report) << report.message();

  const Output show = run("runs show " + std::to_string(id) + dbo);
  ASSERT_EQ(show.code, 0) << show.out;
  for (const char* k : {"eviction", "merge", "memory", "attention mass", "eviction_map"}) {
    EXPECT_NE(show.out.find(k), std::string::npos) << k << "\n" << show.out;
  }

  const Output list = run("runs list --json" + dbo);
  ASSERT_EQ(list.code, 0) << list.out;
  const auto runs = nlohmann::json::parse(list.out);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0]["kind"], "eviction");
  EXPECT_DOUBLE_EQ(runs[0]["ratio"].get<double>(), j["memory_ratio"].get<double>());
  EXPECT_DOUBLE_EQ(runs[0]["attn_output_rel_error"].get<double>(),
                   j["attn_output_rel_error"].get<double>());
  const Output table = run("runs list" + dbo);
  ASSERT_EQ(table.code, 0) << table.out;
  EXPECT_NE(table.out.find("merge"), std::string::npos) << table.out;

  const std::string csv = tmp("evict.csv");
  ASSERT_EQ(run("runs export " + std::to_string(id) + " --format csv --out " + csv + dbo).code, 0);
  std::ifstream f(csv);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("metrics.attention_mass_retained"), std::string::npos);
  EXPECT_NE(text.find("params.policy"), std::string::npos);
  const Output exported = run("runs export " + std::to_string(id) + " --format json" + dbo);
  ASSERT_EQ(exported.code, 0);
  EXPECT_TRUE(nlohmann::json::parse(exported.out)["artifacts"].contains("eviction_map"));
}

TEST(Cli, EvictBadInputNamesTheOption) {
  const std::pair<std::string, const char*> cases[] = {
      {kEvictTiny + " --policy lru", "--policy"},
      {kEvictTiny + " --policy lru", "unknown eviction policy 'lru'"},
      {kEvictTiny + " --budget lots", "--budget"},
      {kEvictTiny + " --budget 1.5", "--budget"},
      {kEvictTiny + " --budget -3", "--budget"},
      {"evict --source synthetic:tiny --context 256 --steps 256", "--steps"},
      {"evict --source synthetic:tiny --context 256 --steps 0", "--steps"},
      {kEvictTiny + " --quant zip", "--quant"},
      {kEvictTiny + " --quant kivi --bits 3", "--bits"},
      {kEvictTiny + " --layer-budgets 0.5", "--layer-budgets"},
      {kEvictTiny + " --layer-budgets 0.5,x", "--layer-budgets"},
      {kEvictTiny + " --needle 999", "--needle"},
      {kEvictTiny + " --policy importance --protect 300", "--protect"},
      {kEvictTiny + " --merge-similarity 2", "--merge-similarity"},
  };
  for (const auto& [args, want] : cases) {
    const Output o = run(args);
    EXPECT_NE(o.code, 0) << args;
    EXPECT_NE(o.out.find(want), std::string::npos) << args << "\n" << o.out;
    EXPECT_EQ(o.out.find('\n'), o.out.size() - 1) << "one line: " << o.out;
    EXPECT_EQ(o.out.rfind("kvlab: ", 0), 0u) << o.out;
  }
}

}  // namespace
