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
#include "modules/safetensors_format.h"
#include "modules/tensordict.h"

namespace td {

namespace {
using json = nlohmann::json;
using detail::st_dtype;

[[noreturn]] void write_error(const std::string& path, const char* what, int err) {
  throw_error<RuntimeError>("[save_safetensors] ", what, " '", path, "': ", std::strerror(err));
}

// Writes the pieces to path as a whole or not at all: into a new file beside it, flushed to disk,
// then renamed over it, so a full disk, a size limit or a crash leaves the old file as it was.
// A target that exists and is not a regular file (/dev/null, a pipe) is written in place.
void write_file_atomically(const std::string& path,
                           const std::vector<std::pair<const void*, size_t>>& pieces) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target = path;
  if (fs::is_symlink(target, ec)) {  // replace the file the link names, not the link
    fs::path real = fs::canonical(target, ec);
    if (!ec) target = real;
  }
  struct stat st {};
  const bool exists = ::stat(target.c_str(), &st) == 0;
  const bool in_place = exists && !S_ISREG(st.st_mode);
  static std::atomic<uint64_t> counter{0};
  std::string tmp = target.string();
  if (!in_place) {  // ".NAME.td-tmp-PID-N" beside the target
    std::string name = ".";
    name.append(target.filename().string()).append(".td-tmp-");
    name.append(std::to_string(::getpid())).append("-");
    name.append(std::to_string(counter.fetch_add(1)));
    tmp = (target.parent_path() / name).string();
  }
  const int fd = in_place ? ::open(tmp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC)
                          : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) write_error(path, "cannot open for writing", errno);
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    if (!in_place) ::unlink(tmp.c_str());
    write_error(path, what, err);
  };
  if (exists && !in_place && ::fchmod(fd, st.st_mode & 07777) != 0)
    fail("cannot keep the mode of", errno);
  for (const auto& [data, size] : pieces) {
    const char* p = static_cast<const char*>(data);
    for (size_t left = size; left > 0;) {
      const ssize_t w = ::write(fd, p, left);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("failed writing", w < 0 ? errno : ENOSPC);
      p += w;
      left -= static_cast<size_t>(w);
    }
  }
  if (!in_place && ::fsync(fd) != 0) fail("failed writing to disk (fsync)", errno);
  if (::close(fd) != 0) {
    const int err = errno;
    if (!in_place) ::unlink(tmp.c_str());
    write_error(path, "failed writing (close)", err);
  }
  if (in_place) return;
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    write_error(path, "cannot replace the file", err);
  }
  // the rename itself reaches the disk with the directory's entries
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}
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
  write_file_atomically(path, pieces);
}

}  // namespace td
