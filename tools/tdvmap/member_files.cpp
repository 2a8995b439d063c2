#include "tools/tdvmap/member_files.h"

#include <algorithm>
#include <filesystem>

#include "tools/tdvmap/common.h"

namespace tdvmap {

std::vector<std::string> member_files(const std::vector<std::string>& args) {
  namespace fs = std::filesystem;
  std::vector<std::string> out;
  for (const std::string& a : args) {
    std::error_code ec;
    if (!fs::is_directory(a, ec)) {
      out.push_back(a);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(a, ec)) {
      const std::string name = e.path().filename().string();
      const std::string ext = e.path().extension().string();
      if (name.empty() || name[0] == '.' || e.is_directory(ec)) continue;
      if (ext == ".pt" || ext == ".pth" || ext == ".bin" || ext == ".safetensors")
        found.push_back(e.path().string());
    }
    if (ec) throw UsageError("cannot list directory '" + a + "': " + ec.message());
    if (found.empty())
      throw UsageError("directory '" + a +
                       "' holds no .pt, .pth, .bin or .safetensors file to stack");
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

}  // namespace tdvmap
