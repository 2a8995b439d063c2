// TensorDict::load_stacked: N per-member files (safetensors or .pt) stacked into one dict with
// batch size [N]. Files are read one at a time and copied into the stacked tensors, so the peak
// is the stacked dict plus one member.
#include <cstring>
#include <unordered_map>

#include "engine/limits.h"
#include "modules/tensordict.h"

namespace td {

TensorDict TensorDict::load_stacked(const std::vector<std::string>& paths,
                                    const LoadStackedOptions& options) {
  if (paths.empty()) throw_error<ValueError>("[load_stacked] no files given");
  const int64_t n = static_cast<int64_t>(paths.size());
  const LoadTorchOptions load{options.key};
  const auto first = load_file(paths[0], load).leaves();
  std::unordered_map<std::string, size_t> index;  // key -> position in first
  int64_t bytes_each = 0;
  for (size_t k = 0; k < first.size(); ++k) {
    index.emplace(first[k].first, k);
    bytes_each +=
        first[k].second.numel() * static_cast<int64_t>(dtype_size(first[k].second.dtype()));
  }
  check_memory_budget("load_stacked", n, bytes_each, "members' tensors");
  std::vector<Tensor> stacked;
  std::vector<bool> identical(first.size(), options.expand_identical);
  for (const auto& [key, t] : first) {
    Shape s = t.shape();
    s.insert(s.begin(), n);
    stacked.push_back(Tensor::empty(s, t.dtype()));
  }
  auto copy_in = [&](size_t k, int64_t i, const Tensor& t) {
    const Tensor c = t.contiguous();
    const size_t nbytes = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
    if (nbytes == 0) return;
    char* dst = static_cast<char*>(stacked[k].raw_data()) + static_cast<size_t>(i) * nbytes;
    std::memcpy(dst, c.raw_data(), nbytes);
    if (identical[k] && i > 0) identical[k] = std::memcmp(dst, stacked[k].raw_data(), nbytes) == 0;
  };
  for (size_t k = 0; k < first.size(); ++k) copy_in(k, 0, first[k].second);
  for (int64_t i = 1; i < n; ++i) {
    const std::string& path = paths[static_cast<size_t>(i)];
    const auto leaves = load_file(path, load).leaves();
    std::vector<bool> seen(first.size(), false);
    for (const auto& [key, t] : leaves) {
      const auto found = index.find(key);
      if (found == index.end())
        throw_error<ValueError>("[load_stacked] '", path, "' has ", quote_key(key), ", which '",
                                paths[0], "' (member 0) has not");
      const Tensor& want = first[found->second].second;
      if (t.shape() != want.shape() || t.dtype() != want.dtype())
        throw_error<ValueError>("[load_stacked] '", path, "': ", quote_key(key), " is ",
                                dtype_name(t.dtype()), " of shape ", shape_str(t.shape()), " but ",
                                dtype_name(want.dtype()), " of shape ", shape_str(want.shape()),
                                " in '", paths[0], "' (member 0)");
      seen[found->second] = true;
      copy_in(found->second, i, t);
    }
    for (size_t k = 0; k < first.size(); ++k)
      if (!seen[k])
        throw_error<ValueError>("[load_stacked] '", path, "' has no ", quote_key(first[k].first),
                                ", which '", paths[0], "' (member 0) has");
  }
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t k = 0; k < first.size(); ++k) {
    Tensor t = stacked[k];
    if (identical[k]) {  // kept once: member 0's copy, expanded over the members
      Shape s = first[k].second.shape();
      s.insert(s.begin(), n);
      t = first[k].second.contiguous().unsqueeze(0).expand(s);
    }
    out.emplace_back(first[k].first, t);
  }
  TensorDict d = from_dotted(std::move(out), [](const std::string& what) {
    throw_error<ValueError>("[load_stacked] ", what);
  });
  d.set_batch_size({n});
  return d;
}

}  // namespace td
