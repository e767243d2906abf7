// The byte-level BPE tokenizer on a small tokenizer.json written here: the 256 byte pieces, a
// few merges in both forms, added tokens; merges as GPT-2 applies them, decode(encode(x)) == x
// for any bytes, and malformed files as errors.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <nlohmann/json.hpp>

#include "file_test_util.h"
#include "kvlab/engine/model/hf_tokenizer.h"

namespace kvlab {
namespace {

using nlohmann::json;

// GPT-2's bytes_to_unicode, written out again independently of the engine.
std::string byte_piece(int b) {
  static const std::vector<std::string> pieces = [] {
    std::vector<std::string> out(256);
    int extra = 0;
    for (int i = 0; i < 256; ++i) {
      const bool keep = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174);
      const int cp = keep ? i : 256 + extra++;
      std::string s;
      if (cp < 0x80) {
        s += static_cast<char>(cp);
      } else {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
      }
      out[static_cast<std::size_t>(i)] = s;
    }
    return out;
  }();
  return pieces[static_cast<std::size_t>(b)];
}

// Ids 0..255: the bytes; then the merged pieces; then the added tokens.
json tokenizer_json(bool array_merges = false, bool prefix_space = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_piece(b)] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"l", "l"}, {"e", "ll"}, {"Ġ", "w"}, {"o", "r"}};
  json merge_list = json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    vocab[a + b] = id++;
    if (array_merges) {
      merge_list.push_back({a, b});
    } else {
      merge_list.push_back(a + " " + b);
    }
  }
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 300}, {"content", "<s>"}, {"special", true}},
            {{"id", 301}, {"content", "</s>"}, {"special", true}},
            {{"id", 302}, {"content", "<|endoftext|>"}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", prefix_space}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

HfTokenizer make(const json& j) {
  auto t = HfTokenizer::parse(j.dump(), "test tokenizer.json");
  EXPECT_TRUE(t.ok()) << t.message();
  return std::move(t).value();
}

std::vector<int> ids_of(const HfTokenizer& t, const std::vector<std::string>& pieces) {
  std::vector<int> out;
  for (const auto& p : pieces) out.push_back(t.id_of(p));
  return out;
}

TEST(HfTokenizer, MergesByRankWithSpacesOnTheFollowingWord) {
  for (const bool array_form : {false, true}) {
    SCOPED_TRACE(array_form ? "[a, b] merges" : "\"a b\" merges");
    const HfTokenizer t = make(tokenizer_json(array_form));
    EXPECT_EQ(t.bos(), 300);
    EXPECT_EQ(t.eos(), 301);
    EXPECT_EQ(t.vocab_size(), 303);
    // "the" has no "t he" merge; " the" goes Ġ t -> Ġt, h e -> he, Ġt he -> Ġthe.
    EXPECT_EQ(t.encode("the the").value(), ids_of(t, {"t", "he", "Ġthe"}));
    EXPECT_EQ(t.encode("hello world", true, true).value(),
              (std::vector<int>{300, t.id_of("he"), t.id_of("ll"), t.id_of("o"), t.id_of("Ġw"),
                                t.id_of("or"), t.id_of("l"), t.id_of("d"), 301}));
    // Two spaces: the first stands alone, the second goes with the word (GPT-2's \s+(?!\S)).
    EXPECT_EQ(t.encode("a  the").value(), ids_of(t, {"a", "Ġ", "Ġthe"}));
    // Contractions split off before the letters.
    EXPECT_EQ(t.encode("he's").value(), ids_of(t, {"he", "'", "s"}));
  }
}

TEST(HfTokenizer, AddedTokensAreMatchedLiterally) {
  const HfTokenizer t = make(tokenizer_json());
  const auto ids = t.encode("the<|endoftext|> the</s>").value();
  EXPECT_EQ(ids, (std::vector<int>{t.id_of("t"), t.id_of("he"), 302, t.id_of("Ġthe"), 301}));
  EXPECT_EQ(t.decode(ids), "the<|endoftext|> the</s>");
  EXPECT_EQ(t.decode(ids, true), "the the");
  EXPECT_EQ(t.decode({-1, 9999, t.id_of("Ġthe")}), " the");  // unknown ids skipped
}

TEST(HfTokenizer, PrefixSpace) {
  const HfTokenizer t = make(tokenizer_json(false, true));
  EXPECT_EQ(t.encode("the").value(), ids_of(t, {"Ġthe"}));
  EXPECT_EQ(t.decode(t.encode("the").value()), " the");
}

TEST(HfTokenizer, DecodeEncodeRoundTripsAnyBytes) {
  const HfTokenizer t = make(tokenizer_json());
  const std::vector<std::string> texts = {
      "",
      "Once upon a time, there was a little girl named Lily. She's 3 years old!",
      "  leading and trailing  ",
      "tabs\tand\nnew\n\nlines \n end",
      "caf\xC3\xA9 na\xC3\xAFve \xF0\x9F\x98\x80 \xE4\xB8\xAD\xE6\x96\x87",
      "it's they're we've I'm you'll he'd '' 'x",
      "1234 56.78 -9e10 (x+y)*z == {a: [b]}",
      std::string("nul\0byte", 8),
      "\xFF\xFE invalid \xC3 utf-8 \x80"};
  for (const auto& text : texts) {
    const auto ids = t.encode(text);
    ASSERT_TRUE(ids.ok()) << ids.message();
    EXPECT_EQ(t.decode(*ids), text);
  }
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255), len(0, 64), kind(0, 3);
  for (int i = 0; i < 200; ++i) {
    std::string text;
    const int n = len(rng);
    for (int k = 0; k < n; ++k) {
      // Mostly text-like bytes, with spaces and arbitrary bytes mixed in.
      const int c = kind(rng);
      text += static_cast<char>(c == 0 ? ' ' : c == 1 ? byte(rng) : "thelowr'"[byte(rng) % 8]);
    }
    const auto ids = t.encode(text);
    ASSERT_TRUE(ids.ok()) << ids.message();
    EXPECT_EQ(t.decode(*ids), text);
  }
}

TEST(HfTokenizer, MalformedFilesAreErrors) {
  const auto parse = [](const json& j) { return HfTokenizer::parse(j.dump(), "tok.json"); };
  EXPECT_FALSE(HfTokenizer::parse("{\"model\": ", "tok.json").ok());
  json j = tokenizer_json();
  j["model"].erase("vocab");
  auto r = parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("model.vocab"), std::string::npos) << r.message();
  j = tokenizer_json();
  j["model"]["merges"].push_back("a b c");
  r = parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("merge 7"), std::string::npos) << r.message();
  j = tokenizer_json();
  j["model"]["vocab"]["x"] = "seven";
  EXPECT_FALSE(parse(j).ok());
  // SentencePiece-style (Llama 2) tokenizers are refused rather than mis-encoded.
  j = tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "▁"}};
  j["decoder"] = nullptr;
  r = parse(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("byte-level"), std::string::npos) << r.message();
  // A vocabulary without the byte 'z': encoding it is an error naming the piece.
  j = tokenizer_json();
  j["model"]["vocab"].erase("z");
  const HfTokenizer t = make(j);
  const auto ids = t.encode("lazy");
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.message().find("'z'"), std::string::npos) << ids.message();
  // From a file.
  const auto dir = file_test::scratch_dir("hf_tok");
  std::ofstream(dir / "tokenizer.json") << tokenizer_json().dump();
  EXPECT_TRUE(HfTokenizer::load((dir / "tokenizer.json").string()).ok());
  r = HfTokenizer::load((dir / "absent.json").string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.message().find("absent.json"), std::string::npos);
}

}  // namespace
}  // namespace kvlab
