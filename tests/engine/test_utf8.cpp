// UTF-8 checking of the texts users give, against cases worked out by hand from RFC 3629
// (section 4's table of well-formed byte sequences) and Markus Kuhn's decoder stress test.
#include "kvlab/engine/core/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace kvlab {
namespace {

TEST(Utf8, WellFormedTextHasNoBadByte) {
  for (const std::string& text :
       {std::string(), std::string("plain ASCII"),
        std::string("\xC2\x80 \xDF\xBF"),                  // 2 bytes, ends
        std::string("\xE0\xA0\x80 \xED\x9F\xBF"),          // 3 bytes, E0/ED
        std::string("\xEF\xBF\xBF \xE2\x82\xAC"),          // U+FFFF, €
        std::string("\xF0\x90\x80\x80 \xF4\x8F\xBF\xBF"),  // U+10000..10FFFF
        std::string("na\xC3\xAFve caf\xC3\xA9"), std::string("a\0b", 3)}) {
    EXPECT_FALSE(first_invalid_utf8(text).has_value()) << text;
    EXPECT_TRUE(check_utf8(text, "t").ok());
  }
}

TEST(Utf8, IllFormedSequencesAreFoundAtTheirFirstByte) {
  struct Case {
    std::string text;
    std::size_t offset;
  };
  const Case cases[] = {
      {"ab\x80", 2},                // a lone continuation byte
      {"\xC0\xAF", 0},              // overlong '/' (C0 and C1 never appear)
      {"x\xC1\xBF", 1},             // overlong
      {"\xE0\x80\xAF", 0},          // overlong three-byte form
      {"\xED\xA0\x80", 0},          // a UTF-16 surrogate, U+D800
      {"\xF0\x80\x80\xAF", 0},      // overlong four-byte form
      {"\xF4\x90\x80\x80", 0},      // U+110000, past the last code point
      {"\xF5\x80\x80\x80", 0},      // F5..FF never appear
      {"ok \xFF", 3},               //
      {"\xE2\x82", 0},              // cut short at the end
      {"\xC3\xA9\xE2\x28\xA1", 2},  // a bad second byte after a good sequence
      {"\xF0\x9F\x98", 0},          // a four-byte sequence missing its last byte
  };
  for (const Case& c : cases) {
    const auto bad = first_invalid_utf8(c.text);
    ASSERT_TRUE(bad.has_value()) << c.offset;
    EXPECT_EQ(*bad, c.offset);
  }
  const Status s = check_utf8("ok \xFF", "--text-file t.txt");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "--text-file t.txt: not UTF-8 text (byte 0xFF at offset 3 does not belong to a UTF-8 "
            "sequence)");
}

TEST(Utf8, ValidUtf8ReplacesEachBadByteAndKeepsGoodText) {
  EXPECT_EQ(valid_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(valid_utf8("x\xFFy"), "x\xEF\xBF\xBDy");
  EXPECT_EQ(valid_utf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // cut short: each byte
  EXPECT_EQ(valid_utf8(std::string_view("a\0b", 3)), std::string("a\0b", 3));  // NUL is UTF-8
  EXPECT_EQ(valid_utf8(""), "");
  for (const char* bad : {"\xC0\xAF", "\xED\xA0\x80", "\xF5\x80\x80\x80", "\xF0\x9F\x98"}) {
    EXPECT_FALSE(first_invalid_utf8(valid_utf8(bad)).has_value()) << bad;
  }
}

TEST(Utf8, TerminalTextIsOneLineWithoutControls) {
  EXPECT_EQ(terminal_text("plain é"), "plain é");
  EXPECT_EQ(terminal_text("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(terminal_text("\x1b[31mred"), "\\e[31mred");
  EXPECT_EQ(terminal_text(std::string_view("cut\0here", 8)), "cut\\0here");
  EXPECT_EQ(terminal_text("\x07\x7f"), "\\x07\\x7f");
  EXPECT_EQ(terminal_text("\xC2\x9B"), "\\u009b");  // C1 CSI, as UTF-8
  EXPECT_EQ(terminal_text("x\xFFy"), "x\xEF\xBF\xBDy");
}

}  // namespace
TEST(Utf8, TerminalLinesKeepLineBreaksAndEscapeTheRest) {
  EXPECT_EQ(terminal_lines("Once upon a time.\nThe end.\n"), "Once upon a time.\nThe end.\n");
  EXPECT_EQ(terminal_lines("red \x1b[31m\nx\ty"), "red \\e[31m\nx\\ty");
  EXPECT_EQ(terminal_lines(""), "");
}

}  // namespace kvlab
