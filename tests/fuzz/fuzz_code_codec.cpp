// Fuzz target: the compressed code stream (code_codec.h, docs/FORMAT.md), in the layout of
// codec_fuzz_input.h. Validates it, decodes the whole tensor and single vectors, and appends a
// token. Properties (docs/STYLE.md "Property tests for codecs"): corrupt input gives an error,
// never a crash; a stream that decodes still decodes after an append, to the same codes followed
// by the appended ones.
#include <algorithm>
#include <vector>

#include "codec_fuzz_input.h"
#include "fuzz_target.h"

using namespace kvlab;

namespace {

constexpr long long kMaxCodes = 1 << 20;

// The tensor's codes, sized from its (possibly corrupt) header as a caller would; nullopt when
// decode_codes refuses the stream or the size is absurd.
std::optional<std::vector<std::uint8_t>> decode_all(const EncodedCodes& e,
                                                    const HuffmanCodebook* book) {
  const long long n = static_cast<long long>(e.tokens) * e.heads * e.dim;
  std::vector<std::uint8_t> out(n > 0 && n < kMaxCodes ? static_cast<std::size_t>(n) : 0);
  const Status st = decode_codes(e, book, out);
  if (!st.ok()) {
    FUZZ_REQUIRE(!st.message().empty(), "an error without a message");
    return std::nullopt;
  }
  return out;
}

}  // namespace

extern "C" int KVLAB_FUZZ_ENTRY(const std::uint8_t* data, std::size_t size) {
  auto input = fuzz::read_codec_fuzz_input({data, size});
  if (!input) return 0;
  const EncodedCodes& e = input->encoded;
  const HuffmanCodebook* book = input->book ? &*input->book : nullptr;
  const bool valid = validate_encoded(e).ok();
  const auto decoded = decode_all(e, book);
  // A decode of the declared size that passes is only possible for a structurally valid stream.
  if (decoded && !decoded->empty()) FUZZ_REQUIRE(valid, "decoded an invalid stream");

  std::vector<std::uint8_t> vec(e.dim > 0 ? static_cast<std::size_t>(e.dim) : 0);
  for (const auto& [t, h] : {std::pair{0, 0}, {e.tokens - 1, e.heads - 1}, {e.tokens, 0}}) {
    (void)decode_vector(e, book, t, h, vec);
  }

  if (e.heads <= 0 || e.dim <= 0) return 0;
  EncodedCodes grown = e;
  const std::vector<std::uint8_t> more(static_cast<std::size_t>(e.heads) * e.dim, 3);
  if (!append_tokens(grown, more, 1, book).ok() || !decoded || decoded->empty()) return 0;
  const auto after = decode_all(grown, book);
  FUZZ_REQUIRE(after.has_value(), "a decodable stream stopped decoding after an append");
  FUZZ_REQUIRE(after->size() == decoded->size() + more.size(), "size after an append");
  FUZZ_REQUIRE(std::equal(decoded->begin(), decoded->end(), after->begin()),
               "an append changed earlier codes");
  FUZZ_REQUIRE(std::equal(more.begin(), more.end(), after->begin() + decoded->size()),
               "the appended codes read back differently");
  return 0;
}
