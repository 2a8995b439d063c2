#pragma once
// The per-member parameter files of `run --params` and `stack`: files as given, a directory's
// checkpoint files sorted by name.
#include <string>
#include <vector>

namespace tdvmap {

// Each argument a file, or a directory standing for its .pt, .pth, .bin and .safetensors files
// (not hidden ones) in name order; UsageError for a directory without any.
std::vector<std::string> member_files(const std::vector<std::string>& args);

}  // namespace tdvmap
