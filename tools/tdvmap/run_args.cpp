#include "tools/tdvmap/run_args.h"

#include <charconv>

#include "engine/limits.h"
#include "tools/tdvmap/common.h"

namespace tdvmap {
namespace {

// Splits NAME=VALUE (UsageError naming the flag otherwise).
std::pair<std::string, std::string> split_pair(const std::string& s, const char* flag) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw UsageError(std::string(flag) + " expects NAME=VALUE, got " + td::quote_key(s));
  return {s.substr(0, eq), s.substr(eq + 1)};
}

}  // namespace

RunInputs parse_run_inputs(const std::vector<std::string>& inputs,
                           const std::vector<std::string>& in_dims) {
  RunInputs out;
  for (const auto& s : inputs) {
    auto pair = s.find('=') == std::string::npos ? std::pair<std::string, std::string>{"input", s}
                                                 : split_pair(s, "--input");
    for (const auto& [name, file] : out.inputs)
      if (name == pair.first) throw UsageError("--input " + td::quote_key(name) + " given twice");
    out.inputs.push_back(std::move(pair));
  }
  for (const auto& s : in_dims) {
    auto [name, dim] = split_pair(s, "--in-dim");
    int64_t d = 0;
    // the whole text: an optional sign, then digits (std::stoll also took leading spaces)
    const char* begin = dim.data() + (dim.size() > 1 && dim[0] == '+' && dim[1] != '-');
    const char* end = dim.data() + dim.size();
    auto [next, ec] = std::from_chars(begin, end, d);
    if (ec != std::errc() || next != end)
      throw UsageError("--in-dim " + td::quote_key(s) + ": " + td::quote_key(dim) +
                       " is not an integer");
    out.in_dims[name] = d;
  }
  return out;
}

}  // namespace tdvmap
