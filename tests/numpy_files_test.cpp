// NumPy files: .npy and .npz written by NumPy (tests/golden/make_numpy_golden.py) load as
// expected, td's own files round-trip, and hostile files end in clear errors.
#include "modules/numpy_files.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "engine/engine.h"
#include "modules/tensordict.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

std::string data(const std::string& name) {
  return std::string(TD_TEST_DATA_DIR) + "/numpy/" + name;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && (a.numel() == 0 || equal(a, b));
}

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("td_numpy_test_" + name)).string();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// An .npy file with the given header dict literal and data bytes (version 1.0).
std::string npy(const std::string& dict, const std::string& payload) {
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + payload;
}

}  // namespace

TEST_CASE("load_npy: NumPy's files, every dtype td reads, C and Fortran order, 0-d and empty") {
  const TensorDict want = TensorDict::load_safetensors(data("expected.safetensors"));
  for (const std::string name :
       {"f4", "f8", "i8", "b1", "f2", "i4", "i2", "i1", "u1", "fortran", "scalar", "empty"}) {
    CAPTURE(name);
    const Tensor got = load_npy(data(name + ".npy"));
    CHECK(same(got, want.get(name)));
  }
}

TEST_CASE("load_npz and save_npz without libzip say so") {
  if (npz_supported()) return;
  check_throws_mentioning<RuntimeError>([] { load_npz(data("mixed.npz")); }, "without libzip");
  check_throws_mentioning<RuntimeError>([] { save_npz(TensorDict(), tmp_path("x.npz")); },
                                        "without libzip");
}

TEST_CASE("load_npz: np.savez and np.savez_compressed, dotted names nest") {
  if (!npz_supported()) return;
  const TensorDict want = TensorDict::load_safetensors(data("expected.safetensors"));
  const TensorDict mixed = load_npz(data("mixed.npz"));
  CHECK(same(mixed.get("x"), want.get("f4")));
  CHECK(same(mixed.get("mask"), want.get("b1")));
  CHECK(same(mixed.get("a.b"), want.get("i4")));
  const TensorDict packed = load_npz(data("compressed.npz"));
  CHECK(same(packed.get("y"), want.get("f8")));
  CHECK(same(packed.get("z"), want.get("fortran")));
}

TEST_CASE("save_npy and save_npz round-trip every dtype, views included") {
  const Tensor base = randn({3, 4});
  const std::vector<Tensor> tensors = {
      base,     base.transpose(0, 1),    base.to(kFloat64), full({2, 2}, 7, kInt64),
      base > 0, tensor({2.5f}, Shape{}), zeros({0, 5})};
  const std::string p = tmp_path("round.npy");
  for (size_t i = 0; i < tensors.size(); ++i) {
    CAPTURE(i);
    save_npy(tensors[i], p);
    CHECK(same(load_npy(p), tensors[i].contiguous()));
    // NumPy's layout: the data starts on a 64-byte boundary
    std::ifstream f(p, std::ios::binary);
    std::string head(10, '\0');
    f.read(head.data(), 10);
    const size_t hlen = static_cast<unsigned char>(head[8]) | static_cast<unsigned char>(head[9])
                                                                  << 8;
    CHECK((10 + hlen) % 64 == 0);
  }
  std::remove(p.c_str());
  if (!npz_supported()) return;
  TensorDict d;
  d.set("x", base);
  d.set("nested.mask", base > 0);
  d.set("nested.ids", full({3}, -4, kInt64));
  const std::string z = tmp_path("round.npz");
  save_npz(d, z);
  const TensorDict back = load_npz(z);
  CHECK(same(back.get("x"), base));
  CHECK(same(back.get("nested.mask"), base > 0));
  CHECK(same(back.get("nested.ids"), full({3}, -4, kInt64)));
  std::remove(z.c_str());
}

TEST_CASE("hostile .npy and .npz files end in clear errors naming the file") {
  const std::string p = tmp_path("bad.npy");
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  auto refused = [&](const std::string& bytes, const std::string& what) {
    CAPTURE(what);
    write_bytes(p, bytes);
    check_throws_mentioning<ValueError>([&] { load_npy(p); }, what);
  };
  refused("not numpy at all", "no \\x93NUMPY magic");
  refused(std::string("\x93NUMPY\x01\x00\xff\x7f{", 11), "runs beyond the end of the file");
  refused(npy(f4, std::string(7, '\0')), "needs 8 data bytes, the file holds 7");
  refused(npy("{'descr': '|O', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
          "object arrays are not supported");
  refused(npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0')),
          "big-endian");
  refused(npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", ""),
          "structured dtypes");
  refused(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", ""),
          "unsupported dtype '<c8'");
  refused(
      npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", ""),
      "overflows");
  refused(npy("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", ""),
          "fortran_order must be True or False");
  refused(npy("{'descr': '<f4', 'shape': (2,), }", ""), "needs 'descr', 'fortran_order'");
  refused(npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", ""),
          "unknown key 'x'");
  // version 2.0: a 4-byte header length, here past the 64 KiB limit
  refused(std::string("\x93NUMPY\x02\x00\x70\x11\x01\x00", 12) + std::string(70000, ' '),
          "header length 70000 is beyond the limit");
  check_throws_mentioning<ValueError>([] { load_npy("/no/such/file.npy"); }, "cannot open");
  check_throws_mentioning<ValueError>([] { load_npy("/tmp"); }, "is a directory");
  std::remove(p.c_str());
  if (!npz_supported()) return;
  // an .npz that is not a zip
  write_bytes(p, "PK\x03\x04 broken");
  check_throws_mentioning<ValueError>([&] { load_npz(p); }, "cannot open as a zip archive");
  std::remove(p.c_str());
}
