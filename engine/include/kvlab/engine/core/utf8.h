// UTF-8 checks for the texts users give (quality texts, prompts): one rule and one message for
// the command line and the app.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "kvlab/engine/core/result.h"

namespace kvlab {

// The offset of the first byte of `text` that is not part of a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), or nothing.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// Ok, or "WHAT: not UTF-8 text (byte 0xFF at offset 12 does not belong to a UTF-8 sequence)".
Status check_utf8(std::string_view text, std::string_view what);

}  // namespace kvlab
