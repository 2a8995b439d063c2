// tdvmap stack: per-member parameter files (torch.save state_dicts or safetensors) stacked into
// one safetensors file with batch size [N], for later `tdvmap run --params FILE` calls.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "modules/tensordict.h"
#include "tools/tdvmap/common.h"
#include "tools/tdvmap/member_files.h"

namespace tdvmap {
namespace {

struct StackOptions {
  std::vector<std::string> files;
  std::string key;
  std::string out;
};

int run_stack(const StackOptions& o) {
  const std::vector<std::string> paths = member_files(o.files);
  const td::TensorDict d = td::TensorDict::load_stacked(paths, {.key = o.key});
  d.save_safetensors(o.out);
  std::cout << "stacked " << paths.size() << " members (" << d.leaves().size()
            << " tensors, batch size " << shape_text(d.batch_size()) << ") into " << o.out << "\n";
  return 0;
}

}  // namespace

Command add_stack_command(CLI::App& app) {
  auto o = std::make_shared<StackOptions>();
  CLI::App* sub = app.add_subcommand(
      "stack",
      "Stack per-member parameter files (torch.save state_dicts or safetensors, one per "
      "ensemble member) into one safetensors file of stacked parameters, member i as set i");
  sub->add_option("files", o->files,
                  "Member files in set order, or a directory of them (taken in name order)")
      ->required()
      ->expected(1, -1);
  sub->add_option("--key", o->key,
                  "The state_dict's entry in .pt checkpoints that hold a dict such as "
                  "{'model': state_dict, 'epoch': 3} (default: the one dict of tensors)");
  sub->add_option("--out", o->out, "The stacked safetensors file to write")->required();
  sub->footer(
      "Example:\n"
      "  tdvmap stack --out ensemble.safetensors member_*.pt\n"
      "  tdvmap stack --out ensemble.safetensors --key model checkpoints/");
  return {"stack", [o] { return run_stack(*o); }};
}

}  // namespace tdvmap
