#pragma once
// The inputs of `tdvmap run` as given on the command line: --input NAME=FILE (or FILE, meaning
// input=FILE) and --in-dim NAME=D. Separate from run.cpp so that a fuzz target can reach it.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tdvmap {

struct RunInputs {
  std::vector<std::pair<std::string, std::string>> inputs;  // name, file, in the order given
  std::map<std::string, int64_t> in_dims;                   // name -> the dim of the sets
};

// UsageError (exit 2) quoting the bad flag value: no '=', an empty name or value, an input
// named twice, a dim that is not an integer fitting int64.
RunInputs parse_run_inputs(const std::vector<std::string>& inputs,
                           const std::vector<std::string>& in_dims);

}  // namespace tdvmap
