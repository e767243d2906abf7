// What each compression method does, in one line, and where it comes from (the engine's
// method_reference()): the text under the Method panel's picker.
#pragma once

#include <QString>

#include "kvlab/engine/quant/method.h"

namespace kvlab::gui {

// One sentence on what the method stores.
QString method_description(MethodKind kind);
// The reference the engine follows, "Reference: KIVI (Liu et al. 2024, arXiv:2402.02750; ...)".
QString method_citation(MethodKind kind);

}  // namespace kvlab::gui
