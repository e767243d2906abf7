// Byte-level BPE tokenizers from a Hugging Face tokenizer.json (GPT-2, Llama 3, Qwen2, ...):
// model.vocab (piece -> id), model.merges (as "a b" strings or [a, b] arrays, rank = position),
// the GPT-2 byte-to-unicode mapping (every byte is a printable character in the pieces, a space
// is "Ġ"), and added_tokens (special tokens matched literally in the text, BOS and EOS).
//
// Limits:
//  - Pre-tokenization is GPT-2's pattern (with digits split one by one first, for GGUF
//    vocabularies whose pre-tokenizer does so) ('s 't 're 've 'm 'll 'd, ' ?letters+', ' ?digits+',
//    ' ?other+', whitespace runs) with ASCII classes; every byte >= 0x80 counts as a letter.
//    Tokenizers with another pattern (Llama 3 splits digits in threes, Qwen2 one by one) may get
//    other ids for the same text, but decode(encode(text)) == text holds for any text whose
//    bytes the vocabulary covers.
//  - No normalizers; add_prefix_space of a ByteLevel pre-tokenizer is honoured.
//  - SentencePiece-style BPE (Metaspace "▁", byte_fallback: Llama 1/2, Mistral) is refused.
//  - BOS/EOS are found by name among the added tokens (<s>, <|begin_of_text|>, ...;
//    </s>, <|end_of_text|>, <|endoftext|>, <|im_end|>, ...), or are -1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kvlab/engine/core/result.h"

namespace kvlab {

class HfTokenizer {
 public:
  // Reads `path` (a tokenizer.json); errors name the file and the field.
  static Result<HfTokenizer> load(const std::filesystem::path& path);
  // The same from the JSON text; `label` names it in messages.
  static Result<HfTokenizer> parse(std::string_view json_text, const std::string& label);

  // The same from a vocabulary given piece by piece, as a GGUF file's tokenizer.ggml.* holds it
  // ("gpt2" kind): pieces by id (byte-mapped like tokenizer.json's), their GGUF token types
  // (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte; control tokens are
  // special added tokens, user-defined ones plain added tokens, both matched literally in the
  // text), merges "a b" in rank order, and the BOS/EOS ids (-1: none). With split_digits, every
  // digit is a word of its own before GPT-2's pattern runs (llama.cpp's "smollm", "qwen2", ...
  // pre-tokenizers; Hugging Face's Digits(individual_digits)).
  struct Vocabulary {
    std::vector<std::string_view> pieces;
    std::vector<std::int64_t> types;
    std::vector<std::string_view> merges;
    int bos = -1, eos = -1;
    bool split_digits = false;
  };
  static Result<HfTokenizer> from_vocabulary(const Vocabulary& vocabulary,
                                             const std::string& label);

  // The ids of `text`, with BOS first / EOS last when asked and the tokenizer has them. An error
  // names a piece the vocabulary lacks (a vocabulary without some of the 256 bytes).
  Result<std::vector<int>> encode(std::string_view text, bool bos = false, bool eos = false) const;
  // The text of `ids`; special added tokens are left out when `skip_special`. Unknown ids are
  // skipped.
  std::string decode(const std::vector<int>& ids, bool skip_special = false) const;

  int bos() const { return m_bos; }  // -1 when none
  int eos() const { return m_eos; }  // -1 when none
  // One more than the largest id (vocabulary and added tokens).
  int vocab_size() const { return static_cast<int>(m_pieces.size()); }
  int id_of(const std::string& piece) const;  // -1 when absent
  const std::string& piece(int id) const { return m_pieces.at(static_cast<std::size_t>(id)); }

 private:
  struct Added {
    std::string content;
    int id;
    bool special;
  };
  enum class PieceKind : std::uint8_t { Bpe, Added, Special };
  Status encode_word(std::string_view word, std::vector<int>& out) const;

  std::unordered_map<std::string, int> m_vocab;       // piece (byte-mapped) -> id
  std::unordered_map<std::string, int> m_merge_rank;  // a + '\xff' + b -> rank
  std::vector<std::string> m_pieces;                  // id -> piece ("" when unused)
  std::vector<PieceKind> m_kind;                      // id -> what the piece is
  std::vector<Added> m_added;                         // longest first
  bool m_prefix_space = false;
  bool m_split_digits = false;
  int m_bos = -1, m_eos = -1;
};

}  // namespace kvlab
