// Fuzz target: `tdvmap run`'s command line. The bytes are split at newlines into arguments after
// "tdvmap run", parsed by CLI11 as the tool does (the command is not run), and every --input /
// --in-dim value goes through parse_run_inputs.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/tdvmap/common.h"
#include "tools/tdvmap/run_args.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"tdvmap", "run"}, inputs, in_dims;
  std::string current;
  for (size_t i = 0; i <= size; ++i) {
    if (i == size || data[i] == '\n') {
      args.push_back(current);
      // a line "i:VALUE" or "d:VALUE" is also a direct --input / --in-dim value
      if (current.rfind("i:", 0) == 0) inputs.push_back(current.substr(2));
      if (current.rfind("d:", 0) == 0) in_dims.push_back(current.substr(2));
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  try {
    (void)tdvmap::parse_run_inputs(inputs, in_dims);
  } catch (const tdvmap::UsageError&) {
  }
  CLI::App app{"tdvmap"};
  app.require_subcommand(1);
  // the command owns the options its flags write to: it must outlive the parse
  const tdvmap::Command run = tdvmap::add_run_command(app);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
  } catch (const tdvmap::UsageError&) {
  }
  return 0;
}
