// Writing a TensorDict as a safetensors file (the format: safetensors_format.h): the header entry
// by entry with the batch sizes in "__metadata__", then the data, the whole written atomically.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "engine/ops.h"
#include "modules/file_write.h"
#include "modules/safetensors_format.h"
#include "modules/tensordict.h"

namespace td {

namespace {
using json = nlohmann::json;
using detail::st_dtype;

}  // namespace

void TensorDict::save_safetensors(const std::string& path) const {
  // The header is written entry by entry: a JSON object would look each key up as it is added.
  std::string h = "{";
  std::vector<Tensor> datas;
  uint64_t offset = 0;
  for (const auto& [k, t] : leaves()) {
    if (k == "__metadata__")  // the format's own entry: the tensor would be lost
      throw_error<ValueError>("[save_safetensors] '", path,
                              "': a tensor cannot be named "
                              "'__metadata__', which the format reserves for its metadata");
    try {
      h += json(k).dump();
    } catch (const json::type_error&) {
      throw_error<ValueError>("[save_safetensors] '", path, "': key ", quote_key(k),
                              " is not valid UTF-8, which the format's JSON header needs");
    }
    Tensor c = t.contiguous();
    uint64_t n = static_cast<uint64_t>(c.numel()) * dtype_size(c.dtype());
    h += ":{\"dtype\":" + json(st_dtype(c.dtype())).dump() +
         ",\"shape\":" + json(c.shape()).dump() +
         ",\"data_offsets\":" + json({offset, offset + n}).dump() + "},";
    offset += n;
    datas.push_back(c);
  }
  auto shape_text = [](const Shape& shape) {
    std::ostringstream s;
    s << shape;
    return s.str();
  };
  h += "\"__metadata__\":{\"format\":\"pt\",\"td.batch_size\":" +
       json(shape_text(batch_size_)).dump();
  const std::function<bool(const TensorDict&)> holds_tensor = [&](const TensorDict& d) {
    for (const auto& [k, e] : d.items())
      if (const auto* sub = std::get_if<TensorDict>(&e); !sub || holds_tensor(*sub)) return true;
    return false;
  };
  std::string prefix;  // of the dict note_nested is in
  const std::function<void(const TensorDict&)> note_nested = [&](const TensorDict& d) {
    for (const auto& [k, e] : d.items())
      if (const auto* sub = std::get_if<TensorDict>(&e)) {
        const size_t len = prefix.size();
        prefix += k;
        // extra batch dims, or a dict without tensors, which the entries alone would lose
        if (sub->batch_dims() > d.batch_dims() || !holds_tensor(*sub)) {
          std::string key = "td.batch_size.";
          key += prefix;
          h.append(",").append(json(key).dump()).append(":");
          h.append(json(shape_text(sub->batch_size())).dump());
        }
        prefix += '.';
        note_nested(*sub);
        prefix.resize(len);
      }
  };
  note_nested(*this);
  h += "}}";
  while (h.size() % 8 != 0) h += ' ';  // as the Python package does: aligned data
  uint64_t n = h.size();
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>(n >> (8 * i));
  std::vector<std::pair<const void*, size_t>> pieces = {{len.data(), 8}, {h.data(), h.size()}};
  for (const auto& c : datas)
    pieces.emplace_back(c.raw_data(), static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  write_file_atomically("save_safetensors", path, pieces);
}

}  // namespace td
