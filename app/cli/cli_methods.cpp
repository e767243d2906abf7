// kvlab methods: every compression method the engine has, what it stores, the paper or code it
// follows and when to use it. The same text is the GUI's Help ▸ Methods page.
#include <fmt/format.h>

#include "cli_common.h"
#include "kvlab/engine/io/json_text.h"
#include "kvlab/engine/quant/method_about.h"

namespace kvlab::cli {

void add_methods_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "methods", "The compression methods: what each stores, its reference and when to use it");
  auto id = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  cmd->add_option("method", *id, "one method's whole page (default: a line per method)");
  cmd->add_flag("--json", *json, "print JSON");
  cmd->callback([id, json] {
    exit_code() = [&]() -> int {
      std::vector<MethodKind> kinds;
      if (id->empty()) {
        for (const auto m : method_ids()) kinds.push_back(parse_method(m).value());
      } else {
        auto kind = parse_method(*id);
        if (!kind) return fail(kind.message());
        kinds.push_back(*kind);
      }
      if (*json) {
        nlohmann::json out = nlohmann::json::array();
        for (const MethodKind k : kinds) {
          out.push_back({{"id", method_id(k)},
                         {"stores", method_summary(k)},
                         {"reference", method_reference(k)},
                         {"when_to_use", method_when_to_use(k)}});
        }
        fmt::print("{}\n", json_text(id->empty() ? out : out[0], 2));
        return 0;
      }
      if (!id->empty()) {
        fmt::print("{}", method_page(kinds[0]));
        return 0;
      }
      for (const MethodKind k : kinds) fmt::print("{:<11} {}\n", method_id(k), method_summary(k));
      fmt::print("\n'kvlab methods ID' gives one method's reference and when to use it.\n");
      return 0;
    }();
  });
}

}  // namespace kvlab::cli
