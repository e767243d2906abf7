// The llama2.c tokenizer: SentencePiece-style BPE over scored pieces with byte fallback.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>

#include "kvlab/engine/model/llama_model.h"

namespace kvlab {

LlamaTokenizer LlamaTokenizer::from_pieces(std::vector<std::string> pieces,
                                           std::vector<float> scores) {
  // SentencePiece writes a space as U+2581 ("▁"); llama2.c's export (and this tokenizer) uses
  // the space itself.
  static constexpr std::string_view kSpace = "\xE2\x96\x81";
  for (auto& p : pieces) {
    if (p.find(kSpace) == std::string::npos) continue;
    std::string out;
    for (std::size_t i = 0; i < p.size();) {
      if (p.compare(i, kSpace.size(), kSpace) == 0) {
        out += ' ';
        i += kSpace.size();
      } else {
        out += p[i++];
      }
    }
    p = std::move(out);
  }
  LlamaTokenizer t;
  t.m_pieces = std::move(pieces);
  t.m_scores = std::move(scores);
  t.m_scores.resize(t.m_pieces.size());
  return t;
}

Result<LlamaTokenizer> LlamaTokenizer::load_llama2c(const std::filesystem::path& file, int vocab) {
  const std::string path = file.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open the tokenizer", path));
  const auto read = [&](void* p, std::size_t n) {
    return static_cast<bool>(in.read(static_cast<char*>(p), static_cast<std::streamsize>(n)));
  };
  std::int32_t max_len = 0;
  if (!read(&max_len, 4) || max_len <= 0 || max_len > 1 << 16) {
    return make_error(fmt::format("{}: not a llama2.c tokenizer (bad max token length)", path));
  }
  LlamaTokenizer t;
  t.m_pieces.resize(static_cast<std::size_t>(vocab));
  t.m_scores.resize(static_cast<std::size_t>(vocab));
  for (int i = 0; i < vocab; ++i) {
    std::int32_t len = 0;
    if (!read(&t.m_scores[i], 4) || !read(&len, 4)) {
      return make_error(fmt::format("{}: ends at token {} of {}", path, i, vocab));
    }
    if (len < 0 || len > max_len) {
      return make_error(fmt::format("{}: token {} has length {} (max {})", path, i, len, max_len));
    }
    t.m_pieces[i].resize(static_cast<std::size_t>(len));
    if (len > 0 && !read(t.m_pieces[i].data(), static_cast<std::size_t>(len))) {
      return make_error(fmt::format("{}: ends inside token {}", path, i));
    }
  }
  return t;
}

std::vector<int> LlamaTokenizer::encode(const std::string& text, bool bos, bool eos) const {
  std::unordered_map<std::string, int> index;
  for (int i = 0; i < vocab(); ++i) index.emplace(m_pieces[i], i);
  std::vector<int> out;
  if (bos) out.push_back(kBos);
  if (vocab() == 0) {  // nothing to encode into (a damaged tokenizer)
    if (eos) out.push_back(kEos);
    return out;
  }
  std::vector<int> ids;
  // SentencePiece's dummy prefix: a leading space unless the text is empty.
  const std::string s = text.empty() ? text : " " + text;
  for (std::size_t i = 0; i < s.size();) {
    // One UTF-8 character (at most 4 bytes; continuation bytes are 10xxxxxx).
    std::size_t n = 1;
    while (i + n < s.size() && n < 4 && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    const auto it = index.find(s.substr(i, n));
    if (it != index.end()) {
      ids.push_back(it->second);
    } else {
      // Byte fallback: pieces 3..258 are the bytes <0x00>..<0xFF>. A vocabulary without them
      // (fewer than 259 pieces: a small or damaged tokenizer) gives <unk> instead of an id past
      // its end.
      for (std::size_t k = 0; k < n; ++k) {
        const int byte_id = static_cast<unsigned char>(s[i + k]) + 3;
        ids.push_back(byte_id < vocab() ? byte_id : 0);
      }
    }
    i += n;
  }
  // Merge the best-scoring adjacent pair until none is in the vocabulary.
  for (;;) {
    float best = -1e30f;
    int best_id = -1;
    std::size_t best_at = 0;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      const auto it = index.find(m_pieces[ids[i]] + m_pieces[ids[i + 1]]);
      if (it != index.end() && m_scores[it->second] > best) {
        best = m_scores[it->second], best_id = it->second, best_at = i;
      }
    }
    if (best_id < 0) break;
    ids[best_at] = best_id;
    ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (eos) out.push_back(kEos);
  return out;
}

std::string LlamaTokenizer::decode(int previous, int token) const {
  if (token < 0 || token >= vocab()) return {};
  std::string piece = m_pieces[token];
  if (previous == kBos && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
  unsigned byte = 0;
  if (piece.size() == 6 && std::sscanf(piece.c_str(), "<0x%02X>", &byte) == 1) {
    return std::string(1, static_cast<char>(byte));
  }
  return piece;
}

}  // namespace kvlab
