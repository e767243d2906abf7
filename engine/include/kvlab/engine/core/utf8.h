// Text from outside (files, model output, paths, labels) as the rest of the program may hold it:
// UTF-8 checks for the texts users give (quality texts, prompts), one rule and one message for the
// command line and the app; and the one place where bytes that are not UTF-8 become text
// (valid_utf8) and where text becomes safe for a terminal (terminal_text).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "kvlab/engine/core/result.h"

namespace kvlab {

// The offset of the first byte of `text` that is not part of a well-formed UTF-8 sequence
// (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF), or nothing.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

// Ok, or "WHAT: not UTF-8 text (byte 0xFF at offset 12 does not belong to a UTF-8 sequence)".
Status check_utf8(std::string_view text, std::string_view what);

// `text` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD
// (the replacement character), each on its own; valid text comes back unchanged. For JSON,
// SQLite and the GUI, which hold text, not bytes. Keep the original bytes where they still
// matter (a path to open).
std::string valid_utf8(std::string_view text);

// The longest prefix of `text` of at most `max_bytes` bytes that does not end inside a UTF-8
// sequence: where text is shortened for display, the cut never splits a character.
std::string_view utf8_prefix(std::string_view text, std::size_t max_bytes);

// `text` for one line of a terminal: valid_utf8, then every control character written as an
// escape (\n, \t, \r, \0, \e and \xNN for the other C0 and C1 controls and DEL), so a
// message from a file can neither break the line, cut it short, nor recolour the terminal.
std::string terminal_text(std::string_view text);
// The same for text of many lines (a model's story): its line breaks kept, every other control
// character escaped as terminal_text() escapes it.
std::string terminal_lines(std::string_view text);

}  // namespace kvlab
