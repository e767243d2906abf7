// Names users type: ids compared the way people write them, and "did you mean" suggestions for
// a word that names nothing.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvlab {

// An id as compared: lower case, with '-', '_', '.' and spaces left out, so "llama3-8b",
// "Llama-3-8B" and "llama_3_8b" are one id.
std::string canonical_id(std::string_view id);

// The known names nearest to `word` (edit distance over canonical ids, at most a third of the
// word's length, at least 2), nearest first, at most `max`. Empty when none is near.
std::vector<std::string> nearest_names(std::string_view word, const std::vector<std::string>& known,
                                       std::size_t max = 3);

// "unknown WHAT 'word'; did you mean 'a' or 'b'? (known: ...)": the message every parser of a
// user's id gives. Without a near name the "did you mean" part is left out.
std::string unknown_name_message(std::string_view what, std::string_view word,
                                 const std::vector<std::string>& known);

}  // namespace kvlab
