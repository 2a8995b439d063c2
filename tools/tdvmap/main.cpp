// tdvmap: the command-line face of td::nn::functional_vmap (demo, bench, ops, run, stack).
// Exit status: 0 success, 2 usage error, 1 runtime error; errors are one line on stderr.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "engine/kernels/isa.h"
#include "tools/tdvmap/common.h"
#include "tools/tdvmap/model_spec.h"

namespace {

// Keeps an error message on one line.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}

// The version, and the kernels' instruction-set level (tools/check.sh reads "this CPU runs").
std::string version_text() {
  std::string levels;
  for (const auto& l : td::supported_isas()) levels += (levels.empty() ? "" : " ") + l;
  return std::string("tdvmap ") + TD_VERSION + "\nkernels: " + td::kernel_isa() +
         " (this CPU runs " + levels + "; TD_ISA=baseline|avx2|avx512 caps the choice)";
}

// Under mpirun every rank meets the same error (td::mpi raises one rank's on all): rank 0 says it.
bool says_errors() { return tdvmap::launched_ranks().rank == 0; }

int fail(int status, const std::string& message) {
  if (says_errors()) std::cerr << "tdvmap: error: " << one_line(message) << "\n";
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tdvmap: run one module over many stacked parameter sets in one batched call "
      "(td::nn::functional_vmap)."};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text);
  app.footer(
      "Examples:\n"
      "  tdvmap demo\n"
      "  tdvmap bench --workload mlp32_shared\n"
      "  tdvmap ops\n"
      "  tdvmap run --model 'Sequential(Linear(64,256), ReLU(), Linear(256,10))' \\\n"
      "      --params ensemble.safetensors --input input=x.safetensors --out y.safetensors\n"
      "  tdvmap stack --out ensemble.safetensors member_*.pt\n"
      "Run 'tdvmap SUBCOMMAND --help' for a subcommand's options.");
  std::vector<tdvmap::Command> commands;
  try {
    commands.push_back(tdvmap::add_demo_command(app));
    commands.push_back(tdvmap::add_bench_command(app));
    commands.push_back(tdvmap::add_ops_command(app));
    commands.push_back(tdvmap::add_run_command(app));
    commands.push_back(tdvmap::add_stack_command(app));
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    // CLI11 calls a misspelt subcommand a missing one
    if (argc > 1 && argv[1][0] != '-' &&
        std::none_of(commands.begin(), commands.end(),
                     [&](const tdvmap::Command& c) { return c.name == argv[1]; }))
      return fail(2, std::string("unknown subcommand '") + argv[1] +
                         "': demo, bench, ops, run or stack (see 'tdvmap --help')");
    return fail(2, std::string(e.what()) + " (see 'tdvmap --help')");
  } catch (const std::exception& e) {
    return fail(1, e.what());
  }

  try {
    for (const auto& c : commands)
      if (app.got_subcommand(c.name)) return c.run();
    return fail(2, "no subcommand given (see 'tdvmap --help')");
  } catch (const tdvmap::UsageError& e) {
    return fail(2, e.what());
  } catch (const tdvmap::SpecError& e) {
    if (says_errors())
      std::cerr << "tdvmap: error: " << one_line(e.what()) << "\n"
                << tdvmap::spec_caret(e) << std::flush;
    return 2;
  } catch (const std::exception& e) {
    return fail(1, e.what());
  } catch (...) {
    return fail(1, "unknown error");
  }
}
