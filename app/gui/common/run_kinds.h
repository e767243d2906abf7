// What the GUI does with each kind of stored run (the store's RunKind; run_records.h names them).
#pragma once

#include <optional>
#include <string_view>

#include "kvlab/store/run_records.h"

namespace kvlab::gui {

// The kinds a page can show again: compression, eviction, quality and plan runs.
bool opens_on_a_page(std::optional<RunKind> kind);
// The same for a stored run's kind as written in the database.
bool opens_on_a_page(std::string_view kind_id);
// The kinds the Runs page filters by, in its order.
inline constexpr RunKind kListedRunKinds[] = {RunKind::Compression, RunKind::Eviction,
                                              RunKind::Quality,     RunKind::Plan,
                                              RunKind::Stream,      RunKind::Generate};

}  // namespace kvlab::gui
