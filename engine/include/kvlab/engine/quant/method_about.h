// What each method stores and when to pick it: the one text the CLI (`kvlab methods`), the GUI's
// Method panel and its Help ▸ Methods page all print, so they cannot drift apart.
#pragma once

#include <string>
#include <string_view>

#include "kvlab/engine/quant/method.h"

namespace kvlab {

// One sentence on what the method stores per value.
std::string_view method_summary(MethodKind kind);
// When a user would pick it, and what it costs.
std::string_view method_when_to_use(MethodKind kind);

// The whole page: id, what it stores, the reference it follows (method_reference), when to use
// it, and the parameters that apply, as plain text with blank lines between paragraphs.
std::string method_page(MethodKind kind);

}  // namespace kvlab
