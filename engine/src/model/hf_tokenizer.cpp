// Byte-level BPE from tokenizer.json (see hf_tokenizer.h).
#include "kvlab/engine/model/hf_tokenizer.h"
#include "kvlab/engine/io/json_text.h"

#include <algorithm>
#include <array>
#include <climits>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace kvlab {
namespace {

using json = nlohmann::json;

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// GPT-2's bytes_to_unicode (openai/gpt-2 src/encoder.py): printable bytes stand for themselves,
// the other 68 are moved to U+0100 onwards, in byte order.
struct ByteMap {
  std::array<std::string, 256> to_char;  // byte -> UTF-8 of its character
  std::array<int, 512> to_byte{};        // code point -> byte, or -1
  ByteMap() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const int cp = printable ? b : 256 + extra++;
      append_utf8(to_char[static_cast<std::size_t>(b)], static_cast<std::uint32_t>(cp));
      to_byte[static_cast<std::size_t>(cp)] = b;
    }
  }
};
const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

// The length of the UTF-8 sequence starting with `lead` (1 for a stray byte).
std::size_t utf8_length(unsigned char lead) {
  if (lead >= 0xF0) return 4;
  if (lead >= 0xE0) return 3;
  if (lead >= 0xC0) return 2;
  return 1;
}

// Decodes the code point at s[i] (advancing i); a malformed sequence yields its first byte.
std::uint32_t next_code_point(std::string_view s, std::size_t& i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const std::size_t n = utf8_length(lead);
  if (n == 1 || i + n > s.size()) return s[i++] & 0xFF;
  std::uint32_t cp = lead & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

enum class CharClass { Space, Letter, Digit, Other };
CharClass class_of(char ch) {
  const auto c = static_cast<unsigned char>(ch);
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
    return CharClass::Space;
  }
  if (c >= 0x80 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::Letter;
  if (c >= '0' && c <= '9') return CharClass::Digit;
  return CharClass::Other;
}

// GPT-2's pre-tokenizer pattern with ASCII classes:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
std::vector<std::string_view> split_words(std::string_view s) {
  std::vector<std::string_view> words;
  std::size_t i = 0;
  const auto run_end = [&](std::size_t from, CharClass c) {
    while (from < s.size() && class_of(s[from]) == c) ++from;
    return from;
  };
  while (i < s.size()) {
    if (s[i] == '\'') {
      std::size_t n = 0;
      for (std::string_view tail : {"re", "ve", "ll", "s", "t", "m", "d"}) {
        if (s.substr(i + 1, tail.size()) == tail) {
          n = tail.size() + 1;
          break;
        }
      }
      if (n > 0) {
        words.push_back(s.substr(i, n));
        i += n;
        continue;
      }
    }
    const CharClass c = class_of(s[i]);
    std::size_t end;
    if (c != CharClass::Space) {
      end = run_end(i, c);
    } else if (s[i] == ' ' && i + 1 < s.size() && class_of(s[i + 1]) != CharClass::Space) {
      end = run_end(i + 1, class_of(s[i + 1]));  // the space goes with the word after it
    } else {
      end = run_end(i, CharClass::Space);
      // \s+(?!\S): leave the last white space to the word that follows, when there is one.
      if (end < s.size() && end - i > 1) --end;
    }
    words.push_back(s.substr(i, end - i));
    i = end;
  }
  return words;
}

// Finds {"type": type} anywhere in `j`.
bool has_type(const json& j, std::string_view type) {
  if (j.is_object()) {
    if (const auto t = j.find("type"); t != j.end() && t->is_string() && *t == type) return true;
    for (const auto& [k, v] : j.items()) {
      if (has_type(v, type)) return true;
    }
  } else if (j.is_array()) {
    for (const auto& v : j) {
      if (has_type(v, type)) return true;
    }
  }
  return false;
}

std::string merge_key(std::string_view a, std::string_view b) {
  std::string key(a);
  key += '\xff';  // never inside UTF-8 text
  key += b;
  return key;
}

}  // namespace

Result<HfTokenizer> HfTokenizer::load(const std::filesystem::path& file) {
  const std::string path = file.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", path));
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

Result<HfTokenizer> HfTokenizer::parse(std::string_view json_text, const std::string& label) {
  json j;
  try {
    j = json::parse(json_text.begin(), json_text.end());
  } catch (const json::exception& e) {
    return make_error(fmt::format("{}: not valid JSON: {}", label, e.what()));
  }
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object()) {
    return make_error(fmt::format("{}: no \"model\" object", label));
  }
  const json& model = j["model"];
  if (model.value("type", "BPE") != "BPE") {
    return make_error(
        fmt::format("{}: model type {} is not BPE", label, kvlab::json_text(model["type"])));
  }
  if (model.value("byte_fallback", false) || has_type(j, "Metaspace") ||
      !(has_type(j["pre_tokenizer"], "ByteLevel") || has_type(j["decoder"], "ByteLevel"))) {
    return make_error(fmt::format(
        "{}: not a byte-level BPE tokenizer (SentencePiece-style Metaspace/byte_fallback "
        "tokenizers are not supported)",
        label));
  }
  HfTokenizer t;
  const auto set_piece = [&](int id, const std::string& piece, PieceKind kind) {
    if (static_cast<std::size_t>(id) >= t.m_pieces.size()) {
      t.m_pieces.resize(static_cast<std::size_t>(id) + 1);
      t.m_kind.resize(static_cast<std::size_t>(id) + 1);
    }
    t.m_pieces[static_cast<std::size_t>(id)] = piece;
    t.m_kind[static_cast<std::size_t>(id)] = kind;
  };
  const auto valid_id = [](const json& v) {
    return v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() < (1 << 24);
  };
  const auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) {
    return make_error(fmt::format("{}: model.vocab is missing or not an object", label));
  }
  for (const auto& [piece, id] : vocab->items()) {
    if (!valid_id(id)) {
      return make_error(fmt::format("{}: model.vocab['{}'] is not a valid id", label, piece));
    }
    t.m_vocab.emplace(piece, id.get<int>());
    set_piece(id.get<int>(), piece, PieceKind::Bpe);
  }
  const auto merges = model.find("merges");
  if (merges == model.end() || !merges->is_array()) {
    return make_error(fmt::format("{}: model.merges is missing or not an array", label));
  }
  int rank = 0;
  for (const auto& m : *merges) {
    std::string a, b;
    if (m.is_string()) {  // "a b"
      const std::string& s = m.get_ref<const std::string&>();
      const auto space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return make_error(fmt::format("{}: merge {} is not two pieces", label, rank));
      }
      a = s.substr(0, space), b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      a = m[0].get<std::string>(), b = m[1].get<std::string>();  // ["a", "b"]
    } else {
      return make_error(fmt::format("{}: merge {} is neither \"a b\" nor [a, b]", label, rank));
    }
    t.m_merge_rank.emplace(merge_key(a, b), rank++);  // the first listing of a pair wins
  }
  if (const auto added = j.find("added_tokens"); added != j.end() && added->is_array()) {
    for (const auto& a : *added) {
      if (!a.is_object() || !a.contains("id") || !valid_id(a["id"]) || !a.contains("content") ||
          !a["content"].is_string() || a["content"].get_ref<const std::string&>().empty()) {
        return make_error(
            fmt::format("{}: an added_tokens entry lacks a valid id or content", label));
      }
      Added tok{a["content"].get<std::string>(), a["id"].get<int>(), a.value("special", false)};
      set_piece(tok.id, tok.content, tok.special ? PieceKind::Special : PieceKind::Added);
      t.m_vocab[tok.content] = tok.id;
      t.m_added.push_back(std::move(tok));
    }
  }
  std::stable_sort(t.m_added.begin(), t.m_added.end(), [](const Added& x, const Added& y) {
    return x.content.size() > y.content.size();
  });
  if (const auto pre = j.find("pre_tokenizer"); pre != j.end() && pre->is_object()) {
    t.m_prefix_space =
        pre->value("type", "") == "ByteLevel" && pre->value("add_prefix_space", false);
  }
  for (const char* name : {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>"}) {
    if (t.m_bos < 0) t.m_bos = t.id_of(name);
  }
  for (const char* name :
       {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>", "<|im_end|>", "<|eot_id|>"}) {
    if (t.m_eos < 0) t.m_eos = t.id_of(name);
  }
  return t;
}

Result<HfTokenizer> HfTokenizer::from_vocabulary(const Vocabulary& v, const std::string& label) {
  if (v.pieces.empty()) return make_error(fmt::format("{}: the vocabulary is empty", label));
  if (v.types.size() != v.pieces.size()) {
    return make_error(
        fmt::format("{}: {} token types for {} tokens", label, v.types.size(), v.pieces.size()));
  }
  const int n = static_cast<int>(v.pieces.size());
  if (v.bos >= n || v.eos >= n) {
    return make_error(
        fmt::format("{}: BOS {} or EOS {} is outside the {} tokens", label, v.bos, v.eos, n));
  }
  HfTokenizer t;
  t.m_pieces.resize(v.pieces.size());
  t.m_kind.assign(v.pieces.size(), PieceKind::Bpe);
  for (int id = 0; id < n; ++id) {
    const std::string piece(v.pieces[static_cast<std::size_t>(id)]);
    const std::int64_t type = v.types[static_cast<std::size_t>(id)];
    t.m_pieces[static_cast<std::size_t>(id)] = piece;
    if ((type == 3 || type == 4) && !piece.empty()) {  // control / user-defined: added tokens
      t.m_kind[static_cast<std::size_t>(id)] = type == 3 ? PieceKind::Special : PieceKind::Added;
      t.m_added.push_back(Added{piece, id, type == 3});
    }
    t.m_vocab.emplace(piece, id);  // the first id of a piece wins
  }
  int rank = 0;
  for (const std::string_view m : v.merges) {
    const auto space = m.find(' ');
    if (space == std::string_view::npos || m.find(' ', space + 1) != std::string_view::npos) {
      return make_error(fmt::format("{}: merge {} (\"{}\") is not two pieces", label, rank, m));
    }
    t.m_merge_rank.emplace(merge_key(m.substr(0, space), m.substr(space + 1)), rank++);
  }
  std::stable_sort(t.m_added.begin(), t.m_added.end(), [](const Added& x, const Added& y) {
    return x.content.size() > y.content.size();
  });
  t.m_bos = v.bos, t.m_eos = v.eos;
  t.m_split_digits = v.split_digits;
  return t;
}

int HfTokenizer::id_of(const std::string& piece) const {
  const auto it = m_vocab.find(piece);
  return it == m_vocab.end() ? -1 : it->second;
}

Status HfTokenizer::encode_word(std::string_view word, std::vector<int>& out) const {
  std::vector<std::string> symbols;
  for (const char ch : word) symbols.push_back(byte_map().to_char[static_cast<unsigned char>(ch)]);
  // BPE (Sennrich et al. 2016) as GPT-2 applies it: merge the best-ranked adjacent pair, every
  // occurrence left to right, until no listed pair is left.
  while (symbols.size() > 1) {
    int best = INT_MAX;
    std::size_t at = 0;
    for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = m_merge_rank.find(merge_key(symbols[i], symbols[i + 1]));
      if (it != m_merge_rank.end() && it->second < best) best = it->second, at = i;
    }
    if (best == INT_MAX) break;
    const std::string a = symbols[at], b = symbols[at + 1];
    std::vector<std::string> merged;
    for (std::size_t i = 0; i < symbols.size(); ++i) {
      if (i + 1 < symbols.size() && symbols[i] == a && symbols[i + 1] == b) {
        merged.push_back(a + b);
        ++i;
      } else {
        merged.push_back(std::move(symbols[i]));
      }
    }
    symbols = std::move(merged);
  }
  for (const auto& s : symbols) {
    const int id = id_of(s);
    if (id < 0) return make_error(fmt::format("tokenizer: piece '{}' is not in the vocabulary", s));
    out.push_back(id);
  }
  return Ok{};
}

Result<std::vector<int>> HfTokenizer::encode(std::string_view text, bool bos, bool eos) const {
  std::vector<int> ids;
  if (bos && m_bos >= 0) ids.push_back(m_bos);
  const auto encode_plain = [&](std::string_view part) -> Status {
    if (part.empty()) return Ok{};
    std::string prefixed;
    if (m_prefix_space && class_of(part[0]) != CharClass::Space) {
      prefixed.reserve(part.size() + 1);
      prefixed.push_back(' ');
      prefixed.append(part);
      part = prefixed;
    }
    if (!m_split_digits) {
      for (const auto word : split_words(part)) KVLAB_TRY(encode_word(word, ids));
      return Ok{};
    }
    // Each digit is a word; GPT-2's pattern runs on the text between digits.
    std::size_t from = 0;
    for (std::size_t i = 0; i <= part.size(); ++i) {
      if (i < part.size() && class_of(part[i]) != CharClass::Digit) continue;
      for (const auto word : split_words(part.substr(from, i - from))) {
        KVLAB_TRY(encode_word(word, ids));
      }
      if (i < part.size()) KVLAB_TRY(encode_word(part.substr(i, 1), ids));
      from = i + 1;
    }
    return Ok{};
  };
  // Added tokens are matched literally first (longest first); the text between them is BPE'd.
  std::size_t start = 0, i = 0;
  while (i < text.size()) {
    const Added* hit = nullptr;
    for (const auto& a : m_added) {
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    KVLAB_TRY(encode_plain(text.substr(start, i - start)));
    ids.push_back(hit->id);
    i += hit->content.size();
    start = i;
  }
  KVLAB_TRY(encode_plain(text.substr(start)));
  if (eos && m_eos >= 0) ids.push_back(m_eos);
  return ids;
}

std::string HfTokenizer::decode(const std::vector<int>& ids, bool skip_special) const {
  std::string out;
  for (const int id : ids) {
    if (id < 0 || id >= vocab_size()) continue;
    const std::string& piece = m_pieces[static_cast<std::size_t>(id)];
    const PieceKind kind = m_kind[static_cast<std::size_t>(id)];
    if (kind != PieceKind::Bpe) {  // added tokens are literal text
      if (kind == PieceKind::Added || !skip_special) out += piece;
      continue;
    }
    for (std::size_t i = 0; i < piece.size();) {
      const std::size_t from = i;
      const std::uint32_t cp = next_code_point(piece, i);
      const int byte = cp < byte_map().to_byte.size() ? byte_map().to_byte[cp] : -1;
      if (byte >= 0) {
        out += static_cast<char>(byte);
      } else {
        out.append(piece, from, i - from);  // not a mapped byte: keep the character as is
      }
    }
  }
  return out;
}

}  // namespace kvlab
