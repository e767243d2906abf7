#include "common/run_kinds.h"

namespace kvlab::gui {

bool opens_on_a_page(std::optional<RunKind> kind) {
  return kind == RunKind::Compression || kind == RunKind::Eviction || kind == RunKind::Quality ||
         kind == RunKind::Plan;
}

bool opens_on_a_page(std::string_view kind_id) {
  return opens_on_a_page(run_kind_from_id(kind_id));
}

}  // namespace kvlab::gui
