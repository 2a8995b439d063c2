// safetensors files: round trips of nested TensorDicts of every dtype, files written by
// PyTorch-side scripts, conversions, and a table of corrupted files that must raise ValueError.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/safetensors_files.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

std::string tmp_path(const std::string& name) {
  return "/tmp/td_safetensors_test_" + std::to_string(::getpid()) + "_" + name + ".safetensors";
}
std::string f32_bytes(std::initializer_list<float> v) {
  std::string s;
  for (float f : v) s.append(reinterpret_cast<const char*>(&f), 4);
  return s;
}
}  // namespace

TEST_CASE("safetensors round trip of a nested TensorDict of every dtype") {
  TensorDict d({2});
  d.set("f32", tensor({1.5f, -2.f, 3.25f, 0.f, 1e-30f, -7.f}, {2, 3}));
  d.set("nested.f64", tensor({0.1f, 0.2f}).to(kFloat64).unsqueeze(1).expand({2, 3}));
  d.set("nested.deeper.i64", arange(-4, 4, 1).reshape({2, 2, 2}));
  d.set("nested.deeper.flag", gt(tensor({0.f, 1.f, 1.f, 0.f}, {2, 2}), 0.5));
  d.set("t", tensor({1.f, 2.f, 3.f, 4.f, 5.f, 6.f}, {3, 2}).t());  // non-contiguous
  d.set("empty", zeros({2, 0, 4}));
  std::string path = tmp_path("roundtrip");
  d.save_safetensors(path);
  TensorDict r = TensorDict::load_safetensors(path);
  CHECK(r.batch_size() == Shape{2});  // restored from the metadata
  CHECK(r.keys(true, true) == d.keys(true, true));
  for (const auto& [k, t] : d.leaves()) {
    INFO(k);
    Tensor u = r.get(k);
    CHECK(u.dtype() == t.dtype());
    CHECK(u.shape() == t.shape());
  }
  CHECK(r.get("f32").to_vector<float>() == d.get("f32").to_vector<float>());
  CHECK(r.get("nested.f64").to_vector<double>() == d.get("nested.f64").to_vector<double>());
  CHECK(r.get("nested.deeper.i64").to_vector<int64_t>() ==
        std::vector<int64_t>{-4, -3, -2, -1, 0, 1, 2, 3});
  CHECK(r.get("nested.deeper.flag").to(kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 1, 0});
  CHECK(r.get("t").to_vector<float>() == std::vector<float>{1, 3, 5, 2, 4, 6});
  CHECK(r.get_dict("nested").batch_size() == Shape{2});

  // an explicit batch size wins; one that does not fit is a ValueError naming the file
  CHECK_THROWS_AS(TensorDict::load_safetensors(path, {2, 3}), ValueError);
  CHECK(has(message_of([&] { TensorDict::load_safetensors(path, {2, 3}); }), path));
  CHECK(TensorDict::load_safetensors(path, {2}).batch_size() == Shape{2});
  std::remove(path.c_str());

  TensorDict s;  // batch [], 0-d tensors
  s.set("scalar", scalar_tensor(2.5, kFloat64));
  s.set("i", scalar_tensor(-9, kInt64));
  s.save_safetensors(path);
  TensorDict rs = TensorDict::load_safetensors(path);
  CHECK(rs.batch_size().empty());
  CHECK(rs.get("scalar").dim() == 0);
  CHECK(rs.get("scalar").item<double>() == 2.5);
  CHECK(rs.get("i").item<int64_t>() == -9);
  std::remove(path.c_str());

  // header layout: 8-byte length, JSON, aligned to 8
  TensorDict one;
  one.set("a", tensor({1.f}));
  one.save_safetensors(path);
  std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<unsigned char>(bytes[i])} << (8 * i);
  CHECK(n % 8 == 0);
  CHECK(bytes.size() == 8 + n + 4);
  CHECK(has(bytes.substr(8, n), "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}"));
  std::remove(path.c_str());
}

TEST_CASE("safetensors: a nested dict's extra batch dims survive a save and load") {
  TensorDict b({4});
  b.set("w", ones({4, 3}));
  TensorDict s({4, 5});
  s.set("q", ones({4, 5, 7}));
  s.set("t", TensorDict({{"r", ones({4, 5, 2, 3})}}, {4, 5, 2}));
  b.set("s", s);
  b.set("u.v", ones({4, 1}));  // a nested dict with the root's batch size only
  const std::string path = tmp_path("nested_batch");
  b.save_safetensors(path);
  const TensorDict l = TensorDict::load_safetensors(path);
  CHECK(l.batch_size() == Shape{4});
  CHECK(l.get_dict("s").batch_size() == Shape{4, 5});
  CHECK(l.get_dict("s.t").batch_size() == Shape{4, 5, 2});
  CHECK(l.get_dict("u").batch_size() == Shape{4});
  // a stale or wrong entry in the metadata names the key
  write_bytes(path, file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("__metadata__":{"td.batch_size":"[1]","td.batch_size.a":"[1]"}})",
                            f32_bytes({1})));
  check_throws_mentioning<ValueError>([&] { TensorDict::load_safetensors(path); },
                                      "batch size for 'a', which is not a nested dict");
  write_bytes(path, file_of(R"({"n.a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                            R"("__metadata__":{"td.batch_size":"[1]","td.batch_size.n":"[1,3]"}})",
                            f32_bytes({1})));
  check_throws_mentioning<ValueError>([&] { TensorDict::load_safetensors(path); },
                                      "the batch size of 'n'");
  std::remove(path.c_str());
}

TEST_CASE("safetensors: nested dicts without tensors survive a save and load") {
  TensorDict d({2});
  d.set("w", ones({2, 3}));
  d.set("e", TensorDict({2}));
  TensorDict n({2});
  n.set("deep", TensorDict({2, 4}));
  d.set("n", n);  // holds only an empty dict
  const std::string path = tmp_path("empty_dicts");
  d.save_safetensors(path);
  const TensorDict l = TensorDict::load_safetensors(path);
  CHECK(l.keys() == std::vector<std::string>{"w", "e", "n"});
  CHECK(l.get_dict("e").items().empty());
  CHECK(l.get_dict("e").batch_size() == Shape{2});
  CHECK(l.get_dict("n").keys() == std::vector<std::string>{"deep"});
  CHECK(l.get_dict("n.deep").batch_size() == Shape{2, 4});
  CHECK(l.get_dict("n.deep").items().empty());
  // loaded with another batch size, the empty dicts take it
  const TensorDict r = TensorDict::load_safetensors(path, {2, 3});
  CHECK(r.get_dict("e").batch_size() == Shape{2, 3});
  CHECK(r.get_dict("n.deep").batch_size() == Shape{2, 3});
  std::remove(path.c_str());
}

TEST_CASE("safetensors: an empty entry with large dims before its zero loads") {
  // the size guard used to multiply the dims before the zero and compare with the data size
  std::string path = tmp_path("empty_only");
  write_bytes(path,
              file_of(R"({"x":{"dtype":"F32","shape":[2,2,2,0,3],"data_offsets":[0,0]}})", ""));
  TensorDict r = TensorDict::load_safetensors(path);
  CHECK(r.get("x").shape() == Shape{2, 2, 2, 0, 3});
  TensorDict d({4});  // td's own writer
  d.set("w", zeros({4, 5, 0}));
  d.save_safetensors(path);
  CHECK(TensorDict::load_safetensors(path).get("w").shape() == Shape{4, 5, 0});
  std::remove(path.c_str());
}

TEST_CASE("safetensors: a file written by the PyTorch-side script loads with nesting") {
  TensorDict g =
      TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/modules/mlp.safetensors");
  CHECK(g.keys() == std::vector<std::string>{"module", "input", "output"});
  CHECK(g.get("module.0.weight").shape() == Shape{8, 3});
  CHECK(g.get("module.4.bias").shape() == Shape{2});
}

TEST_CASE("safetensors: F16, BF16, I32, I16, I8, U8 are converted") {
  std::string data;
  for (uint16_t h : {0x3C00, 0xC000, 0x3800, 0x0001}) data.append(reinterpret_cast<char*>(&h), 2);
  for (uint16_t h : {0x3F80, 0xC040}) data.append(reinterpret_cast<char*>(&h), 2);  // 1, -3
  for (int32_t i : {-3, 7}) data.append(reinterpret_cast<char*>(&i), 4);
  for (int16_t i : {-300}) data.append(reinterpret_cast<char*>(&i), 2);
  data += static_cast<char>(-5);
  data += static_cast<char>(200);
  std::string header = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]},)"
                       R"("i":{"dtype":"I32","shape":[2],"data_offsets":[12,20]},)"
                       R"("s":{"dtype":"I16","shape":[1],"data_offsets":[20,22]},)"
                       R"("c":{"dtype":"I8","shape":[1],"data_offsets":[22,23]},)"
                       R"("u":{"dtype":"U8","shape":[1],"data_offsets":[23,24]}})";
  std::string path = tmp_path("convert");
  write_bytes(path, file_of(header, data));
  TensorDict d = TensorDict::load_safetensors(path);
  auto h = d.get("h").to_vector<float>();
  CHECK(d.get("h").dtype() == kFloat32);
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 0.5f);
  CHECK(h[3] == doctest::Approx(5.960464477539063e-08));  // smallest subnormal half
  CHECK(d.get("b").to_vector<float>() == std::vector<float>{1, -3});
  CHECK(d.get("i").dtype() == kInt64);
  CHECK(d.get("i").to_vector<int64_t>() == std::vector<int64_t>{-3, 7});
  CHECK(d.get("s").item<int64_t>() == -300);
  CHECK(d.get("c").item<int64_t>() == -5);
  CHECK(d.get("u").item<int64_t>() == 200);
  std::remove(path.c_str());
}

TEST_CASE("safetensors: a file truncated at any byte raises ValueError") {
  TensorDict d;
  d.set("w", tensor({1.f, 2.f, 3.f}));
  d.set("n.b", arange(4));
  std::string path = tmp_path("trunc");
  d.save_safetensors(path);
  std::string full = read_bytes(path);
  for (size_t len = 0; len < full.size(); ++len) {
    INFO("truncated to ", len, " of ", full.size(), " bytes");
    write_bytes(path, full.substr(0, len));
    CHECK_THROWS_AS(TensorDict::load_safetensors(path), ValueError);
    CHECK(has(message_of([&] { TensorDict::load_safetensors(path); }), path));
  }
  write_bytes(path, full);
  CHECK(TensorDict::load_safetensors(path).get("n.b").to_vector<int64_t>() ==
        std::vector<int64_t>{0, 1, 2, 3});
  std::remove(path.c_str());
}

TEST_CASE("safetensors: corrupted files raise ValueError naming the file and the problem") {
  const std::string ok_data = f32_bytes({1, 2, 3});
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;  // part of the message
  };
  const std::string big = le64(uint64_t{1} << 40);
  std::vector<Case> cases = {
      {"empty file", "", "truncated"},
      {"short length", std::string(5, '\0'), "truncated"},
      {"length beyond file", le64(100) + "{}", "beyond"},
      {"huge length", big + "{}", "beyond"},
      {"bad json", file_of("{\"a\": ", ok_data), "not valid JSON"},
      {"json not an object", file_of("[1, 2]", ok_data), "not a JSON object"},
      {"entry not an object", file_of(R"({"a": 1})", ok_data), "'a'"},
      {"no dtype", file_of(R"({"a":{"shape":[3],"data_offsets":[0,12]}})", ok_data), "dtype"},
      {"no shape", file_of(R"({"a":{"dtype":"F32","data_offsets":[0,12]}})", ok_data), "shape"},
      {"no offsets", file_of(R"({"a":{"dtype":"F32","shape":[3]}})", ok_data), "data_offsets"},
      {"offsets not numbers",
       file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":["0","12"]}})", ok_data),
       "data_offsets"},
      {"three offsets",
       file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,4,12]}})", ok_data),
       "data_offsets"},
      {"negative offset",
       file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[-4,12]}})", ok_data),
       "data_offsets"},
      {"unknown dtype",
       file_of(R"({"a":{"dtype":"Q7","shape":[3],"data_offsets":[0,12]}})", ok_data), "'Q7'"},
      {"negative dim",
       file_of(R"({"a":{"dtype":"F32","shape":[-3],"data_offsets":[0,12]}})", ok_data), "shape"},
      {"fractional dim",
       file_of(R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,12]}})", ok_data), "shape"},
      {"huge shape",
       file_of(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],)"
               R"("data_offsets":[0,12]}})",
               ok_data),
       "shape"},
      {"end beyond data",
       file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", ok_data),
       "out of range"},
      {"begin after end",
       file_of(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", ok_data),
       "out of range"},
      {"size mismatch",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,12]}})", ok_data), "needs 8"},
      {"wrong element size",
       file_of(R"({"a":{"dtype":"F64","shape":[3],"data_offsets":[0,12]}})", ok_data), "F64"},
      {"overlap",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               ok_data),
       "overlap"},
      {"overlap behind an empty entry",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               ok_data),
       "the data of 'a' [0, 8) and 'b' [4, 12) overlap"},
      {"empty entry inside another's data",
       file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
               R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
               ok_data),
       "the data of 'a' [0, 12) and 'e' [4, 4) overlap"},
      {"hole between entries",
       file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
               ok_data),
       "data bytes [4, 8) belong to no entry"},
      {"hole before the first entry",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", ok_data),
       "data bytes [0, 4) belong to no entry"},
      {"bytes after the last entry",
       file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", ok_data),
       "data bytes [8, 12) after the last entry"},
      {"data and no entry", file_of("{}", ok_data), "data bytes [0, 12) after the last entry"},
      {"duplicate key leaving a hole",  // JSON readers keep the last of two equal keys
       file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               ok_data),
       "data bytes [0, 4) belong to no entry"},
      {"byte-order mark", file_of("\xEF\xBB\xBF{}", ""), "does not start with '{'"},
      {"leading space", file_of(" {}", ""), "does not start with '{'"},
      {"NUL padding", file_of(std::string("{}\0\0", 4), ""), "not valid JSON"},
      {"metadata value not a string", file_of(R"({"__metadata__": {"format": 1}})", ""),
       "__metadata__ 'format' is not a string"},
      {"batch size metadata with junk",
       file_of(R"({"__metadata__": {"td.batch_size": "[3abc]"}})", ""), "td.batch_size"},
      {"batch size metadata with a trailing comma",
       file_of(R"({"__metadata__": {"td.batch_size": "[3,]"}})", ""), "td.batch_size"},
      {"empty shape overflowing int64",
       file_of(R"({"a":{"dtype":"F32","shape":[9223372036854775807,9223372036854775807,0],)"
               R"("data_offsets":[0,0]}})",
               ""),
       "entry 'a': [empty] shape"},
      {"bytes overflowing 64 bits",
       file_of(R"({"a":{"dtype":"F64","shape":[1,4611686018427387904],"data_offsets":[0,12]}})",
               ok_data),
       "needs more than 2^64"},
      {"bad bool",
       file_of(R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})",
               std::string("\x01\x02", 2)),
       "BOOL"},
      {"key clash",
       file_of(R"({"a.b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               ok_data),
       "'a'"},
      {"key clash reversed",
       file_of(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("a.b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               ok_data),
       "'a"},
      {"bad key", file_of(R"({"a..b":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", ok_data),
       "a..b"},
      {"metadata not an object", file_of(R"({"__metadata__": 3})", ""), "__metadata__"},
      {"bad batch size metadata", file_of(R"({"__metadata__": {"td.batch_size": "[x]"}})", ""),
       "batch_size"},
      {"batch size metadata that does not fit",
       file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
               R"("__metadata__": {"td.batch_size": "[4]"}})",
               ok_data),
       "[4]"},
  };
  std::string path = tmp_path("corrupt");
  for (const auto& c : cases) {
    INFO(c.name);
    write_bytes(path, c.bytes);
    CHECK_THROWS_AS(TensorDict::load_safetensors(path), ValueError);
    std::string msg = message_of([&] { TensorDict::load_safetensors(path); });
    CHECK(has(msg, path));
    CHECK(has(msg, c.expect));
  }
  // a valid file with the same data loads, and a batch size that does not fit is a ValueError
  write_bytes(path, file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", ok_data));
  CHECK(TensorDict::load_safetensors(path).get("a").to_vector<float>() ==
        std::vector<float>{1, 2, 3});
  CHECK_THROWS_AS(TensorDict::load_safetensors(path, {2}), ValueError);
  std::remove(path.c_str());
  CHECK_THROWS_AS(TensorDict::load_safetensors("/nonexistent/dir/file.safetensors"), ValueError);
  CHECK_THROWS_AS(TensorDict().save_safetensors("/nonexistent/dir/file.safetensors"), RuntimeError);
  // a directory, and a device read no further than its header (/dev/zero: length 0, no JSON)
  check_throws_mentioning<ValueError>([] { TensorDict::load_safetensors("/tmp"); },
                                      "'/tmp': is a directory");
  check_throws_mentioning<ValueError>([] { TensorDict::load_safetensors("/dev/zero"); },
                                      "not valid JSON");
}

TEST_CASE("safetensors: what cannot be saved is refused, and a failed write is reported") {
  TensorDict d;
  d.set("x", tensor({3.f}));
  const std::string path = tmp_path("refused");
  // the last bytes reach /dev/full at close: the write failed, which the close reports
  check_throws_mentioning<RuntimeError>([&] { d.save_safetensors("/dev/full"); },
                                        "[save_safetensors] failed writing '/dev/full'");
  TensorDict m;
  m.set("__metadata__", tensor({1.f, 2.f}));  // would be overwritten by the format's metadata
  check_throws_mentioning<ValueError>([&] { m.save_safetensors(path); },
                                      "cannot be named '__metadata__'");
  TensorDict u;
  u.set("k\xff", tensor({1.f}));
  check_throws_mentioning<ValueError>([&] { u.save_safetensors(path); }, "is not valid UTF-8");
  // a nested '__metadata__' is a dotted key, which the format keeps
  TensorDict n;
  n.set("a.__metadata__", tensor({4.f}));
  n.save_safetensors(path);
  CHECK(TensorDict::load_safetensors(path).get("a.__metadata__").item<float>() == 4.f);
  std::remove(path.c_str());
}
