#include "modules/file_write.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/errors.h"

namespace td {

namespace {
[[noreturn]] void write_error(const char* op, const std::string& path, const char* what, int err) {
  throw_error<RuntimeError>("[", op, "] ", what, " '", path, "': ", std::strerror(err));
}

}  // namespace

void write_file_atomically(const char* op, const std::string& path,
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
  if (fd < 0) write_error(op, path, "cannot open for writing", errno);
  auto fail = [&](const char* what, int err) {
    ::close(fd);
    if (!in_place) ::unlink(tmp.c_str());
    write_error(op, path, what, err);
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
    write_error(op, path, "failed writing (close)", err);
  }
  if (in_place) return;
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    write_error(op, path, "cannot replace the file", err);
  }
  // the rename itself reaches the disk with the directory's entries
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace td
