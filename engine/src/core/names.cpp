#include "kvlab/engine/core/names.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <numeric>
#include <utility>

namespace kvlab {

namespace {

// Optimal string alignment distance (Levenshtein plus swapping two neighbours, the commonest
// typing slip), two rows of the table at a time.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> before(b.size() + 1), previous(b.size() + 1), current(b.size() + 1);
  std::iota(previous.begin(), previous.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        current[j] = std::min(current[j], before[j - 2] + 1);
      }
    }
    std::swap(before, previous);
    std::swap(previous, current);
  }
  return previous[b.size()];
}

}  // namespace

std::string canonical_id(std::string_view id) {
  std::string out;
  out.reserve(id.size());
  for (const char c : id) {
    if (c == '-' || c == '_' || c == '.' || c == ' ') continue;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

std::vector<std::string> nearest_names(std::string_view word, const std::vector<std::string>& known,
                                       std::size_t max) {
  const std::string want = canonical_id(word);
  const std::size_t limit = std::max<std::size_t>(2, want.size() / 3);
  std::vector<std::pair<std::size_t, std::string>> near;
  for (const std::string& name : known) {
    const std::string have = canonical_id(name);
    std::size_t d = edit_distance(want, have);
    // A prefix ("kiv" for "kivi", "llama" for "llama3-8b") is near too.
    if (want.size() >= 3 && have.rfind(want, 0) == 0) d = std::min<std::size_t>(d, 1);
    if (d <= limit) near.emplace_back(d, name);
  }
  std::stable_sort(near.begin(), near.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& [d, name] : near) {
    if (out.size() == max) break;
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(std::move(name));
  }
  return out;
}

std::string unknown_name_message(std::string_view what, std::string_view word,
                                 const std::vector<std::string>& known) {
  std::string message = fmt::format("unknown {} '{}'", what, word);
  const auto near = nearest_names(word, known);
  if (!near.empty()) {
    std::string list;
    for (std::size_t i = 0; i < near.size(); ++i) {
      if (i > 0) list += i + 1 == near.size() ? " or " : ", ";
      list += "'" + near[i] + "'";
    }
    message += fmt::format("; did you mean {}?", list);
  }
  return message + fmt::format(" (known: {})", fmt::join(known, ", "));
}

}  // namespace kvlab
