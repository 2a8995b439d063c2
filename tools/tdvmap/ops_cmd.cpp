// tdvmap ops: every op with its family and whether vmap has a native batching rule for it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "engine/dispatch.h"
#include "tools/tdvmap/common.h"
#include "vmap/rules/rules.h"

namespace tdvmap {
namespace {

int run_ops(bool json) {
  td::ensure_batch_rules();
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  int native = 0;
  const int n = td::num_ops();
  if (!json) std::printf("%-16s %-10s %s\n", "op", "family", "batching");
  for (int i = 0; i < n; ++i) {
    const td::OpId op = static_cast<td::OpId>(i);
    const td::OpInfo& info = td::op_info(op);
    const bool has_rule = td::batch_rule(op) != nullptr;
    native += has_rule;
    const char* rule = has_rule ? "native" : "fallback";
    if (json)
      out.push_back({{"op", info.name}, {"family", td::family_name(info.family)}, {"rule", rule}});
    else
      std::printf("%-16s %-10s %s\n", info.name.c_str(), td::family_name(info.family), rule);
  }
  if (json) {
    std::cout << out.dump(2) << std::endl;
  } else {
    std::printf("# %d ops: %d native", n, native);
    if (native < n) std::printf(", %d through the per-set fallback loop", n - native);
    std::printf("\n");
  }
  return 0;
}

}  // namespace

Command add_ops_command(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand(
      "ops",
      "List every op with its family and whether its batching rule is native or the "
      "per-set fallback");
  sub->add_flag("--json", *json, "Print a JSON array of {op, family, rule}");
  sub->footer("Example:\n  tdvmap ops\n  tdvmap ops --json");
  return {"ops", [json] { return run_ops(*json); }};
}

}  // namespace tdvmap
