// JSON as text, in one place: a string that is not valid UTF-8 (a label, a path, a model's
// metadata or a generated token can hold any bytes) is written with U+FFFD for each bad byte
// (valid_utf8's rule) instead of nlohmann's exception, so no record can make a command abort or
// a database unreadable. Every program writes JSON through this, never json::dump.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvlab {

// `j` as text: compact with indent -1, else pretty-printed with `indent` spaces.
inline std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvlab
