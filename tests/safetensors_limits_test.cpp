// safetensors files from a hostile source: nesting, sizes and counts beyond the limits are refused
// with a ValueError in bounded time, error messages quote keys safely, a pipe is read no further
// than the memory budget, and a failed save leaves the old file as it was.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "engine/limits.h"
#include "modules/modules.h"
#include "tests/safetensors_files.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

std::string tmp_path(const std::string& name) {
  return "/tmp/td_st_limits_test_" + std::to_string(::getpid()) + "_" + name + ".safetensors";
}
const std::string kEntry = R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})";

// The message of the ValueError that loading `bytes` raises ("" when it loads), and the seconds
// it took.
std::pair<std::string, double> load_error(const std::string& name, const std::string& bytes) {
  const std::string path = tmp_path(name);
  write_bytes(path, bytes);
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  try {
    TensorDict::load_safetensors(path);
  } catch (const ValueError& e) {
    msg = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::remove(path.c_str());
  return {msg, s};
}
}  // namespace

TEST_CASE("safetensors limits: JSON nested 150,000 deep is refused, not a stack overflow") {
  const int d = 150000;
  const std::string deep = std::string(d, '[') + std::string(d, ']');
  // the reproducer of the report: a deep value, then another key
  auto [msg, s] = load_error(
      "deep", file_of(R"({"deep":)" + deep + R"(,"w":)" + kEntry + "}", std::string(4, '\0')));
  CHECK(has(msg, "nests deeper than 64 levels"));
  CHECK(has(msg, "td_st_limits_test"));
  auto [meta_msg, s2] =
      load_error("deep_meta", file_of(R"({"__metadata__":{"x":)" + deep + "}}", ""));
  CHECK(has(meta_msg, "nests deeper than 64 levels"));
  // brackets inside strings do not count, and a header at the limit loads
  const std::string in_string = std::string(100, '[');
  auto [ok_msg, s3] =
      load_error("brackets_in_string",
                 file_of(R"({"__metadata__":{"x":")" + in_string + R"("},"w":)" + kEntry + "}",
                         std::string(4, '\0')));
  CHECK(ok_msg == "");
}

TEST_CASE("safetensors limits: many entries load in linear time, long dotted keys are refused") {
  // 40,000 entries took 14 s when every insertion searched the entries before it
  const int n = 40000;
  std::string header = "{";
  for (int i = 0; i < n; ++i) {
    header += "\"layer" + std::to_string(i) + ".w\":{\"dtype\":\"F32\",\"shape\":[1],";
    header +=
        "\"data_offsets\":[" + std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]},";
  }
  header.back() = '}';
  const std::string path = tmp_path("many");
  write_bytes(path, file_of(header, std::string(4 * n, '\0')));
  const auto t0 = std::chrono::steady_clock::now();
  TensorDict d = TensorDict::load_safetensors(path);
  const std::vector<std::string> keys = d.keys(true, true);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::remove(path.c_str());
  CHECK(d.size() == static_cast<size_t>(n));
  REQUIRE(keys.size() == static_cast<size_t>(n));
  CHECK(keys[n - 1] == "layer" + std::to_string(n - 1) + ".w");
  CHECK(s < 10.0);  // generous: sanitizer builds; the quadratic load took minutes there

  // one key of 40,000 parts (80 KB) took 6 s and 1.3 GB; past 256 parts it is refused
  std::string parts;
  for (int i = 0; i < 40000; ++i) parts += (i ? ".a" : "a");
  auto [msg, t] = load_error(
      "parts", file_of("{\"" + parts.substr(0, 4000) + "\":" + kEntry + "}", std::string(4, '\0')));
  CHECK(has(msg, "more than 256 dot-separated parts"));
  CHECK(msg.size() < 400);  // the key is quoted in part
  auto [long_msg, t2] = load_error("long", file_of("{\"" + parts + "\":" + kEntry + "}", ""));
  CHECK(has(long_msg, "longer than the limit of 4096 bytes"));
  CHECK(has(long_msg, "... (79999 bytes)"));
  // 256 parts load, nested 256 deep
  const std::string k256 = parts.substr(0, 2 * 256 - 1);
  const std::string path256 = tmp_path("k256");
  write_bytes(path256, file_of("{\"" + k256 + "\":" + kEntry + "}", std::string(4, '\0')));
  CHECK(TensorDict::load_safetensors(path256).keys(true, true) == std::vector<std::string>{k256});
  std::remove(path256.c_str());
  // a shape of 65 dims, a batch size of 65 dims
  std::string dims = "[1";
  for (int i = 0; i < 64; ++i) dims += ",1";
  dims += "]";
  auto [dims_msg, t3] = load_error(
      "dims", file_of(R"({"w":{"dtype":"F32","shape":)" + dims + R"(,"data_offsets":[0,4]}})",
                      std::string(4, '\0')));
  CHECK(has(dims_msg, "65 dims, beyond the limit of 64"));
  auto [bs_msg, t4] =
      load_error("bs", file_of(R"({"__metadata__":{"td.batch_size":")" + dims + R"("}})", ""));
  CHECK(has(bs_msg, "malformed 'td.batch_size'"));
}

TEST_CASE("safetensors limits: keys in messages are escaped and capped") {
  // a NUL in a key (valid JSON as \u0000) ended the message there
  auto [msg, s] = load_error("nul", file_of(R"({"a\u0000b": 3})", ""));
  CHECK(has(msg, "entry 'a\\x00b' is not an object"));
  CHECK(msg.find('\0') == std::string::npos);
  // a 4,000-byte key (under the length limit) is quoted in its first 100 bytes
  auto [long_msg, t] =
      load_error("long_key", file_of("{\"" + std::string(4000, 'k') + "\": 3}", ""));
  CHECK(has(long_msg, "'" + std::string(100, 'k') + "'... (4000 bytes) is not an object"));
  CHECK(long_msg.size() < 300);
  CHECK(quote_key("it's") == "'it\\'s'");
  CHECK(quote_key(std::string("\x01\x7f", 2)) == "'\\x01\\x7f'");
  // TensorDict's own errors quote the same way
  TensorDict d;
  d.set("a", ones({1}));
  check_throws_mentioning<KeyError>([&] { d.get(std::string("b\0c", 3)); }, "key 'b\\x00c'");
}

TEST_CASE("safetensors limits: a pipe is read no further than the memory budget") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::signal(SIGPIPE, SIG_IGN);  // the writer sees EPIPE when the loader stops reading
  // a valid header, then endless data
  const std::string head = file_of(R"({"w":)" + kEntry + "}", "");
  std::thread writer([&] {
    std::string block(1 << 16, '\0');
    bool ok = ::write(fds[1], head.data(), head.size()) == static_cast<ssize_t>(head.size());
    while (ok) ok = ::write(fds[1], block.data(), block.size()) > 0;
    ::close(fds[1]);
  });
  set_memory_budget(int64_t{8} << 20);
  std::string msg;
  try {
    TensorDict::load_safetensors("/dev/fd/" + std::to_string(fds[0]));
  } catch (const ValueError& e) {
    msg = e.what();
  }
  set_memory_budget(0);
  ::close(fds[0]);
  writer.join();
  CHECK(has(msg, "more data than the memory budget of 8388608 bytes"));
}

namespace {
// Forks a child that runs f and exits with its result (0..255); the parent returns it, or -1 when
// the child died of a signal.
int in_child(const std::function<int()>& f) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = f();
    } catch (...) {
      rc = 98;
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
// Files in dir whose name holds ".td-tmp-": temporary files a save left behind.
int leftovers(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().find(".td-tmp-") != std::string::npos) ++n;
  return n;
}
}  // namespace

TEST_CASE("safetensors: a save that fails leaves the old file intact and no temporary file") {
  const std::string dir = "/tmp/td_st_atomic_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/out.safetensors";
  TensorDict small;
  small.set("w", arange(0, 1000, 1).to(kFloat32));
  small.save_safetensors(path);
  const std::string before = read_bytes(path);
  REQUIRE(before.size() > 4000);
  TensorDict big;
  big.set("w", zeros({100000}));  // 400 KB: beyond the limit below
  // a file size limit of 64 KB: write() fails with EFBIG once SIGXFSZ is ignored
  const int rc = in_child([&] {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{64 << 10, 64 << 10};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) return 2;
    try {
      big.save_safetensors(path);
    } catch (const RuntimeError& e) {
      return has(e.what(), "failed writing '" + path + "'") ? 0 : 3;
    }
    return 4;
  });
  CHECK(rc == 0);
  CHECK(read_bytes(path) == before);
  CHECK(leftovers(dir) == 0);
  CHECK(TensorDict::load_safetensors(path).get("w").numel() == 1000);

  // a full filesystem: a 256 KB tmpfs in a mount namespace of the child's own; skipped where
  // mounting is not permitted (not root, or a container without CAP_SYS_ADMIN)
  const int full = in_child([&] {
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=256k") != 0) return 77;
    small.save_safetensors(path);
    const std::string old = read_bytes(path);
    try {
      big.save_safetensors(path);
      return 4;
    } catch (const RuntimeError& e) {
      if (!has(e.what(), path)) return 3;
    }
    if (read_bytes(path) != old) return 5;
    return leftovers(dir) == 0 ? 0 : 6;
  });
  if (full == 77)
    MESSAGE("full-filesystem case skipped: mounting a tmpfs is not permitted here");
  else
    CHECK(full == 0);
  // a successful save replaces the file and keeps its mode
  std::filesystem::permissions(path, std::filesystem::perms::owner_read |
                                         std::filesystem::perms::owner_write |
                                         std::filesystem::perms::group_read);
  big.save_safetensors(path);
  CHECK(TensorDict::load_safetensors(path).get("w").numel() == 100000);
  CHECK((std::filesystem::status(path).permissions() & std::filesystem::perms::all) ==
        (std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
         std::filesystem::perms::group_read));
  CHECK(leftovers(dir) == 0);
  std::filesystem::remove_all(dir);
}
