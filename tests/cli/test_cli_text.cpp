// Issue 42: no input breaks a command, a terminal or a database. Text that is not UTF-8 (a label,
// a path, a model's metadata, a token that ends inside a character) is text everywhere it goes;
// bytes from files reach the terminal escaped and on one line; counts have upper bounds named in
// the message; NaN weights are named as the cause.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_support.h"
#include "kvlab/engine/core/utf8.h"
#include "kvlab/engine/quant/method.h"
#include "kvlab/engine/quant/method_about.h"
#include "kvlab/planners/kv_memory.h"

namespace kvlab {
namespace {

using cli_test::Output;
using cli_test::run_kvlab;

std::string tmp(const std::string& name) {
  const auto dir = std::filesystem::path(KVLAB_TEST_TMPDIR);
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == s.size() - 1;
}

TEST(CliText, ARunLabelledWithInvalidBytesKeepsTheDatabaseReadable) {
  const std::string db = tmp("text-runs.sqlite");
  std::filesystem::remove(db);
  const std::string dbo = " --db " + db;
  // printf makes the bytes: 'x', 0xFF, 'y'.
  const Output saved = run_kvlab(
      "compress --source synthetic:tiny --context 64 --method int8 "
      "--save --json --label \"$(printf 'x\\377y')\"" +
      dbo);
  ASSERT_EQ(saved.code, 0) << saved.out;
  const int id = nlohmann::json::parse(saved.out)["run_id"].get<int>();
  for (const std::string& args : std::vector<std::string>{
           "runs list --json", "runs show " + std::to_string(id) + " --json"}) {
    const Output o = run_kvlab(args + dbo);
    ASSERT_EQ(o.code, 0) << args << ": " << o.out;
    EXPECT_FALSE(first_invalid_utf8(o.out).has_value()) << args;
    EXPECT_TRUE(nlohmann::json::accept(o.out)) << args;
    EXPECT_NE(o.out.find("x\xEF\xBF\xBDy"), std::string::npos) << args << ": " << o.out;
  }
  const std::string out = tmp("text-run.json");
  const Output exported = run_kvlab("runs export " + std::to_string(id) + " --out " + out + dbo);
  ASSERT_EQ(exported.code, 0) << exported.out;
  std::ifstream f(out);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(nlohmann::json::accept(text));
  const Output listed = run_kvlab("runs list" + dbo);
  EXPECT_EQ(listed.code, 0) << listed.out;

  // A database written by an older kvlab (or edited outside it) may hold any bytes: its label is
  // set to 'x', 0xFF, 'y' behind kvlab's back, and every command still reads it.
  const std::string edit =
      "python3 -c \"import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
      "c.execute('UPDATE runs SET label=CAST(X\\'78FF79\\' AS TEXT), "
      "notes=CAST(X\\'1B5B33316D\\' AS TEXT)'); c.commit()\" " +
      db;
  ASSERT_EQ(std::system(edit.c_str()), 0) << edit;
  for (const std::string& args :
       std::vector<std::string>{"runs list --json", "runs show " + std::to_string(id) + " --json",
                                "runs list", "runs show " + std::to_string(id),
                                "runs export " + std::to_string(id) + " --out " + out}) {
    const Output o = run_kvlab(args + dbo);
    EXPECT_EQ(o.code, 0) << args << ": " << o.out;
    EXPECT_FALSE(first_invalid_utf8(o.out).has_value()) << args;
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << args;
  }
}

TEST(CliText, GeneratedTokensThatEndInsideACharacterAreJsonText) {
  const std::string model = KVLAB_SMOLLM2;
  if (!std::filesystem::exists(model)) {
    const char* required = std::getenv("KVLAB_REQUIRE_TEST_DATA");
    if (required && std::string(required) == "1") FAIL() << model << " is missing";
    GTEST_SKIP() << model << " is missing (scripts/test_data.sh fetches it)";
  }
  for (const std::string& prompt : std::vector<std::string>{
           "The Greek alphabet: α β γ δ ε ζ η θ ι κ λ μ", "日本語の文章 🙂"}) {
    for (const std::string& command :
         std::vector<std::string>{"generate --tokens 2", "capture --max-tokens 2 --out " +
                                                             tmp("text-capture.safetensors")}) {
      const Output o =
          run_kvlab(command + " --model " + model + " --prompt '" + prompt + "' --json");
      ASSERT_EQ(o.code, 0) << command << " / " << prompt << "\n" << o.out;
      EXPECT_FALSE(first_invalid_utf8(o.out).has_value());
      EXPECT_TRUE(nlohmann::json::accept(o.out)) << o.out;
    }
  }
}

TEST(CliText, ADamagedRowIsListedAndShownWithWhatCanBeReadAndFlagged) {
  const std::string db = tmp("damaged-runs.sqlite");
  std::filesystem::remove(db);
  const std::string dbo = " --db " + db;
  for (const char* method : {"int8", "int4"}) {
    ASSERT_EQ(
        run_kvlab(std::string("compress --source synthetic:tiny --context 64 --save --method ") +
                  method + dbo)
            .code,
        0);
  }
  const std::string edit =
      "python3 -c \"import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute('UPDATE runs "
      "SET metrics_json=\\'{broken\\', params_json=\\'[1\\' WHERE id=1'); c.commit()\" " +
      db;
  ASSERT_EQ(std::system(edit.c_str()), 0) << edit;
  const Output list = run_kvlab("runs list --json" + dbo);
  ASSERT_EQ(list.code, 0) << list.out;
  const auto runs = nlohmann::json::parse(list.out);
  ASSERT_EQ(runs.size(), 2u);  // the damaged row does not hide the other
  const auto& damaged = runs[0]["id"] == 1 ? runs[0] : runs[1];
  EXPECT_EQ(damaged["damage"], "metrics is not valid JSON");
  EXPECT_EQ(damaged["method"], "int8");
  const Output text = run_kvlab("runs list" + dbo);
  ASSERT_EQ(text.code, 0) << text.out;
  EXPECT_NE(text.out.find("[damaged]"), std::string::npos) << text.out;
  const Output show = run_kvlab("runs show 1" + dbo);
  ASSERT_EQ(show.code, 0) << show.out;
  EXPECT_NE(show.out.find("damaged metrics is not valid JSON; params is not valid JSON"),
            std::string::npos)
      << show.out;
}

// GGUF bytes written by hand, little-endian as the format stores them.
struct GgufBytes {
  std::string b = "GGUF";
  void u32(std::uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); }
  void u64(std::uint64_t v) { b.append(reinterpret_cast<const char*>(&v), 8); }
  void str(const std::string& s) {
    u64(s.size());
    b += s;
  }
  // Version 3, the counts, and the two string keys every file here starts with.
  void header(std::uint64_t tensors, std::uint64_t keys, const std::string& name) {
    u32(3);
    u64(tensors);
    u64(keys);
    key_str("general.architecture", "llama");
    key_str("general.name", name);
  }
  void key_str(const std::string& key, const std::string& value) {
    str(key);
    u32(8);  // string
    str(value);
  }
  void key_u32(const std::string& key, std::uint32_t v) {
    str(key);
    u32(4);  // uint32
    u32(v);
  }
};

// A GGUF file of metadata only: general.name holding byte 0x87, and a key with an escape
// sequence and a newline in it.
std::string write_bad_gguf() {
  GgufBytes g;
  g.header(0, 3, "caf\x87 model");
  g.key_u32("evil\x1b[31mkey\nnext", 7);
  const std::string path = tmp("bad-text.gguf");
  std::ofstream(path, std::ios::binary) << g.b;
  return path;
}

TEST(CliText, GgufMetadataThatIsNotUtf8IsTextAndReachesTheTerminalEscaped) {
  const std::string path = write_bad_gguf();
  const Output j = run_kvlab("sources info " + path + " --json");
  ASSERT_EQ(j.code, 0) << j.out;
  EXPECT_FALSE(first_invalid_utf8(j.out).has_value());
  EXPECT_TRUE(nlohmann::json::accept(j.out));
  const Output t = run_kvlab("sources info " + path + " --metadata");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_EQ(t.out.find('\x1b'), std::string::npos) << "a raw escape reached the terminal";
  EXPECT_NE(t.out.find("evil\\e[31mkey\\nnext"), std::string::npos) << t.out;
  EXPECT_FALSE(first_invalid_utf8(t.out).has_value());
}

// The planner reads a GGUF's general.name as the model's name: a llama file of one layer (two
// heads of 64, one KV head) and one F32 tensor, named with byte 0x87 and an escape sequence.
TEST(CliText, AGgufModelsNameReachesThePlannersOutputsAsText) {
  GgufBytes g;
  std::string& b = g.b;
  g.header(1, 7, "caf\x87 \x1b[31mred\nmodel");
  g.key_u32("llama.block_count", 1);
  g.key_u32("llama.embedding_length", 128);
  g.key_u32("llama.attention.head_count", 2);
  g.key_u32("llama.attention.head_count_kv", 1);
  g.key_u32("llama.context_length", 65536);
  g.str("token_embd.weight");  // [4 rows × 128] F32 at offset 0
  g.u32(2);
  g.u64(128);
  g.u64(4);
  g.u32(0);
  g.u64(0);
  b.resize((b.size() + 31) / 32 * 32, '\0');  // the data section starts aligned to 32
  b.append(4 * 128 * 4, '\0');
  const std::string path = tmp("bad-name.gguf");
  std::ofstream(path, std::ios::binary) << b;
  for (const std::string& args : {"plan --model " + path + " --explain", "models import " + path,
                                  "plan --model " + path + " --json"}) {
    const Output o = run_kvlab(args);
    ASSERT_EQ(o.code, 0) << args << "\n" << o.out;
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << args << ": a raw escape: " << o.out;
    EXPECT_FALSE(first_invalid_utf8(o.out).has_value()) << args;
  }
  EXPECT_NE(run_kvlab("plan --model " + path).out.find("\\e[31mred\\nmodel"), std::string::npos);
}

// A config.json names its model after its folder: a folder named with byte 0x87 and an escape
// sequence reaches the planner's outputs as text on one line.
TEST(CliText, AConfigFoldersNameReachesThePlannersOutputsAsText) {
  const std::filesystem::path dir = std::filesystem::path(tmp("configs")) / "caf\x87 \x1b[31mred";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(
      std::string(KVLAB_SOURCE_DIR) + "/tests/fuzz/corpus/hf_config/llama-3.1-8b.json",
      dir / "config.json", std::filesystem::copy_options::overwrite_existing);
  const std::string path = "\"" + (dir / "config.json").string() + "\"";
  for (const std::string& args :
       {"plan --model " + path, "plan --model " + path + " --json", "models import " + path}) {
    const Output o = run_kvlab(args);
    ASSERT_EQ(o.code, 0) << args << "\n" << o.out;
    EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << args << ": a raw escape: " << o.out;
    EXPECT_FALSE(first_invalid_utf8(o.out).has_value()) << args;
  }
  EXPECT_NE(run_kvlab("plan --model " + path).out.find("caf\xEF\xBF\xBD \\e[31mred on"),
            std::string::npos);
}

TEST(CliText, AnErrorNamingAPathWithControlBytesStaysOneLine) {
  const Output o = run_kvlab("compress --source \"file:/nope/a$(printf '\\033[31m\\nb').npy\"");
  EXPECT_NE(o.code, 0);
  EXPECT_TRUE(one_line(o.out)) << o.out;
  EXPECT_EQ(o.out.find('\x1b'), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("a\\e[31m\\nb.npy"), std::string::npos) << o.out;
}

TEST(CliText, CountsHaveUpperBoundsNamedInTheMessage) {
  const std::string model = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";
  const Output big = run_kvlab("quality --model " + model + " --sample 2147483647");
  EXPECT_NE(big.code, 0);
  EXPECT_NE(big.out.find("1048576"), std::string::npos) << big.out;

  const std::string plan = tmp("big-sample-sweep.json");
  std::ofstream(plan) << R"({"kind": "quality", "models": [")" << model
                      << R"("], "texts": ["sampled:99999999999"], "max_tokens": 64,
                           "methods": [{"method": "int8"}]})";
  const Output sweep = run_kvlab("sweep " + plan + " --db " + tmp("big-sample.sqlite"));
  EXPECT_NE(sweep.code, 0);
  EXPECT_NE(sweep.out.find("from 2 to 1048576"), std::string::npos) << sweep.out;
}

// stories260K with its layer-0 attention norm weights (after the token embeddings) set to NaN.
std::string nan_model() {
  const std::string src = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";
  std::ifstream in(src, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::int32_t header[7];
  std::memcpy(header, bytes.data(), sizeof(header));  // dim, hidden, layers, heads, kv, vocab, seq
  const std::size_t norms = sizeof(header) + static_cast<std::size_t>(std::abs(header[5])) *
                                                 static_cast<std::size_t>(header[0]) * 4;
  const std::uint32_t nan_bits = 0x7fc00000u;
  for (int i = 0; i < header[0]; ++i) std::memcpy(bytes.data() + norms + 4 * i, &nan_bits, 4);
  const std::string path = tmp("stories260K-nan.bin");
  std::ofstream(path, std::ios::binary) << bytes;
  std::filesystem::copy_file(std::string(KVLAB_MODELS_DIR) + "/stories260K/tok512.bin",
                             tmp("tok512.bin"), std::filesystem::copy_options::overwrite_existing);
  return path;
}

TEST(CliText, NanWeightsAreNamedAsTheCause) {
  if (!std::filesystem::exists(std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin")) {
    GTEST_SKIP() << "stories260K not found";
  }
  const std::string model = nan_model();
  const std::string tok = " --tokenizer " + tmp("tok512.bin");
  for (const std::string& args : std::vector<std::string>{
           "generate --model " + model + tok + " --prompt Once --tokens 2",
           "capture --model " + model + tok + " --prompt Once --out " + tmp("nan.safetensors"),
           "quality --model " + model + tok + " --sample 64 --policy h2o --budget 50%"}) {
    const Output o = run_kvlab(args);
    EXPECT_NE(o.code, 0) << args << "\n" << o.out;
    EXPECT_NE(o.out.find("not finite"), std::string::npos) << args << "\n" << o.out;
    EXPECT_NE(o.out.find("weights hold NaN"), std::string::npos) << args << "\n" << o.out;
    EXPECT_EQ(o.out.find("nothing to attend"), std::string::npos) << args << "\n" << o.out;
  }
}

// Issue 43, item 7: a file named .gguf that is not one is called that, not an "unsupported file
// type '.gguf'" (sources info reads real GGUF files); a real GGUF given as a cache says to
// capture from it.
TEST(CliText, AGgufIsNamedForWhatItIs) {
  const std::string fake = tmp("fake.gguf");
  std::ofstream(fake) << "a text file, not a model\n";
  const Output info = run_kvlab("sources info " + fake);
  EXPECT_NE(info.code, 0);
  EXPECT_NE(info.out.find("named .gguf but not a GGUF file"), std::string::npos) << info.out;
  EXPECT_EQ(info.out.find("unsupported file type"), std::string::npos) << info.out;

  const std::string model = tmp("header-only.gguf");
  std::ofstream(model, std::ios::binary) << "GGUF" << std::string(60, '\0');
  const Output compress = run_kvlab("compress --source file:" + model + " --method int8");
  EXPECT_NE(compress.code, 0);
  EXPECT_NE(compress.out.find("a GGUF model, not a KV cache"), std::string::npos) << compress.out;
  EXPECT_NE(compress.out.find("kvlab capture --model " + model), std::string::npos) << compress.out;
}

// Issue 43, item 6: help lists every method and scheme, from the registries that define them;
// `kvlab methods ID` prints the page the GUI's Help shows.
TEST(CliText, HelpListsEveryMethodAndScheme) {
  const Output compress = run_kvlab("compress --help");
  const Output quality = run_kvlab("quality --help");
  for (const auto id : method_ids()) {
    EXPECT_NE(compress.out.find(std::string(id)), std::string::npos) << id;
    EXPECT_NE(quality.out.find(std::string(id)), std::string::npos) << id;
  }
  const Output plan = run_kvlab("plan --help");
  for (const auto id : planners::scheme_ids()) {
    EXPECT_NE(plan.out.find(std::string(id)), std::string::npos) << id << "\n" << plan.out;
  }
  const Output list = run_kvlab("methods");
  EXPECT_EQ(list.code, 0) << list.out;
  for (const auto id : method_ids()) {
    const MethodKind kind = parse_method(id).value();
    EXPECT_NE(list.out.find(std::string(method_summary(kind))), std::string::npos) << id;
  }
  const Output kivi = run_kvlab("methods kivi");
  EXPECT_EQ(kivi.code, 0) << kivi.out;
  EXPECT_EQ(kivi.out, method_page(MethodKind::Kivi));
  EXPECT_NE(kivi.out.find("arXiv:2402.02750"), std::string::npos) << kivi.out;
  const Output bad = run_kvlab("methods kiwi");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("kivi"), std::string::npos) << bad.out;
}

// Issue 48, part 2: --target-se stops scoring once the standard error is small enough, and says
// so; a negative target is refused by the option.
TEST(CliText, QualityStopsAtATargetStandardError) {
  const std::string model = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "stories260K not found";
  const Output o = run_kvlab("quality --model " + model +
                             " --sample 1260 --window 64 --method int4 --target-se 1000");
  EXPECT_EQ(o.code, 0) << o.out;
  EXPECT_NE(o.out.find("stopped after 8 windows"), std::string::npos) << o.out;
  EXPECT_NE(o.out.find("in 8 windows of 64 positions"), std::string::npos) << o.out;
  const Output bad = run_kvlab("quality --model " + model + " --target-se -1");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--target-se"), std::string::npos) << bad.out;
}

// Issue 48, part 2: a longer human-written text under a permissive licence that every Debian
// system ships (base-files' GPL-3, ~35 KB), scored in overlapping windows until the standard
// error of INT4's perplexity change is within half a point; the report says how many windows
// and tokens the interval rests on.
TEST(CliText, QualityScoresALongLicenceTextUntilTheTargetError) {
  const std::string model = std::string(KVLAB_MODELS_DIR) + "/stories260K/stories260K.bin";
  const std::string gpl = "/usr/share/common-licenses/GPL-3";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "stories260K not found";
  if (!std::filesystem::exists(gpl)) GTEST_SKIP() << gpl << " not found (base-files)";
  const Output all = run_kvlab("quality --model " + model + " --text-file " + gpl +
                               " --window 128 --stride 64 --method int4 --json");
  ASSERT_EQ(all.code, 0) << all.out;
  const auto whole = nlohmann::json::parse(all.out);
  const int windows = whole.at("windows").get<int>();
  EXPECT_GT(windows, 100) << "GPL-3 is some 14k tokens of this model's tokenizer";
  EXPECT_EQ(whole.at("stride").get<int>(), 64);
  EXPECT_EQ(whole.at("tokens").get<int>(), 127 + (windows - 1) * 64);
  EXPECT_FALSE(whole.at("reached_target_se").get<bool>());
  // A target a little above the whole text's error: reached part-way, after whole batches of 8.
  const double target = 100 * 1.5 * whole.at("perplexity_change_se").get<double>();
  const Output part = run_kvlab("quality --model " + model + " --text-file " + gpl +
                                " --window 128 --stride 64 --method int4 --json --target-se " +
                                std::to_string(target));
  ASSERT_EQ(part.code, 0) << part.out;
  const auto early = nlohmann::json::parse(part.out);
  EXPECT_TRUE(early.at("reached_target_se").get<bool>());
  const int used = early.at("windows").get<int>();
  EXPECT_LT(used, windows);
  EXPECT_EQ(used % 8, 0);
  EXPECT_LE(100 * early.at("perplexity_change_se").get<double>(), target);
  EXPECT_EQ(early.at("tokens").get<int>(), 127 + (used - 1) * 64);
}

}  // namespace
}  // namespace kvlab
