#include "kvlab/engine/core/utf8.h"

#include <fmt/format.h>

namespace kvlab {

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (b < 0x80) {
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      n = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 2;
      if (b == 0xE0) lo = 0xA0;  // overlong
      if (b == 0xED) hi = 0x9F;  // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 3;
      if (b == 0xF0) lo = 0x90;  // overlong
      if (b == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return i;
    }
    for (std::size_t k = 1; k <= n; ++k) {
      if (i + k >= text.size()) return i;
      const auto c = static_cast<unsigned char>(text[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return i;
    }
    i += n + 1;
  }
  return std::nullopt;
}

Status check_utf8(std::string_view text, std::string_view what) {
  const auto bad = first_invalid_utf8(text);
  if (!bad) return Ok{};
  return make_error(fmt::format(
      "{}: not UTF-8 text (byte 0x{:02X} at offset {} does not belong to a UTF-8 sequence)", what,
      static_cast<unsigned char>(text[*bad]), *bad));
}

std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  std::size_t cut = max_bytes;
  // Back over continuation bytes (10xxxxxx) to the first byte of the character the cut splits.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  while (!text.empty()) {
    const auto bad = first_invalid_utf8(text);
    if (!bad) {
      out.append(text);
      break;
    }
    out.append(text.substr(0, *bad));
    out.append("\xEF\xBF\xBD");  // U+FFFD
    text.remove_prefix(*bad + 1);
  }
  return out;
}

std::string terminal_text(std::string_view text) {
  const std::string valid = valid_utf8(text);
  std::string out;
  out.reserve(valid.size());
  for (std::size_t i = 0; i < valid.size(); ++i) {
    const auto c = static_cast<unsigned char>(valid[i]);
    // C1 controls U+0080..U+009F are the two bytes C2 80..C2 9F in UTF-8.
    if (c == 0xC2 && i + 1 < valid.size()) {
      const auto next = static_cast<unsigned char>(valid[i + 1]);
      if (next >= 0x80 && next <= 0x9F) {
        out += fmt::format("\\u{:04x}", next);
        ++i;
        continue;
      }
    }
    if (c >= 0x20 && c != 0x7F) {
      out += static_cast<char>(c);
      continue;
    }
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case 0:
        out += "\\0";
        break;
      case 0x1B:
        out += "\\e";
        break;
      default:
        out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

std::string terminal_lines(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t from = 0;
  while (true) {
    const std::size_t end = text.find('\n', from);
    out += terminal_text(text.substr(from, end == std::string_view::npos ? end : end - from));
    if (end == std::string_view::npos) break;
    out += '\n';
    from = end + 1;
  }
  return out;
}

}  // namespace kvlab
