// PyTorch checkpoints (TensorDict::load_torch): files written by torch.save in PyTorch 1.13
// (tests/golden/make_checkpoint_golden.py) compared tensor by tensor with the values PyTorch
// saved beside them, and hostile archives that must end in clean errors.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/engine.h"
#include "engine/limits.h"
#include "modules/modules.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

std::string data(const std::string& name) {
  return std::string(TD_TEST_DATA_DIR) + "/checkpoints/" + name;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string tmp_file(const std::string& name, const std::string& bytes) {
  const std::string path =
      "/tmp/td_torch_checkpoint_test_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Same keys in the same order, same dtypes and shapes, the same bits.
void check_same(const TensorDict& got, const TensorDict& want) {
  const auto g = got.leaves(), w = want.leaves();
  REQUIRE(g.size() == w.size());
  for (size_t i = 0; i < g.size(); ++i) {
    INFO("key " << w[i].first);
    CHECK(g[i].first == w[i].first);
    REQUIRE(g[i].second.dtype() == w[i].second.dtype());
    REQUIRE(g[i].second.shape() == w[i].second.shape());
    const Tensor a = g[i].second.contiguous(), b = w[i].second.contiguous();
    const size_t n = static_cast<size_t>(a.numel()) * dtype_size(a.dtype());
    CHECK(std::string(static_cast<const char*>(a.raw_data()), n) ==
          std::string(static_cast<const char*>(b.raw_data()), n));
  }
}

void check_golden(const std::string& name, const LoadTorchOptions& options = {}) {
  INFO("file " << name);
  check_same(TensorDict::load_torch(data(name + ".pt"), options),
             TensorDict::load_safetensors(data(name + ".expected.safetensors")));
}

}  // namespace

TEST_CASE("load_torch without libzip says so") {
  if (torch_checkpoints_supported()) return;
  check_throws_mentioning<RuntimeError>([] { (void)TensorDict::load_torch(data("mlp.pt")); },
                                        "built without libzip");
}

TEST_CASE("load_torch reads PyTorch 1.13's state_dicts tensor by tensor") {
  if (!torch_checkpoints_supported()) return;
  SUBCASE("an MLP") { check_golden("mlp"); }
  SUBCASE("a CNN with BatchNorm's running stats and num_batches_tracked") {
    check_golden("cnn");
    const TensorDict d = TensorDict::load_torch(data("cnn.pt"));
    CHECK(d.get("1.num_batches_tracked").dtype() == kInt64);
    CHECK(d.get("1.num_batches_tracked").item<int64_t>() == 3);
    CHECK(d.get_dict("0").keys() == std::vector<std::string>{"weight", "bias"});  // nested
  }
  SUBCASE("every dtype: float64, int64, bool, half and bfloat16 (as float32), small ints") {
    check_golden("dtypes");
    const TensorDict d = TensorDict::load_torch(data("dtypes.pt"));
    CHECK(d.get("half").dtype() == kFloat32);
    CHECK(d.get("u8").dtype() == kInt64);
    CHECK(d.get("scalar").shape() == Shape{});
    CHECK(d.get("empty").shape() == Shape{0, 3});
  }
  SUBCASE("views: transposed, strided, sharing one storage at offsets, a Parameter") {
    check_golden("views");
  }
}

TEST_CASE("load_torch finds the state_dict nested in a checkpoint dict") {
  if (!torch_checkpoints_supported()) return;
  // {"model": sd, "epoch": 3, ...}: the one dict of tensors is found, or named
  check_golden("nested");
  check_golden("nested", {.key = "model"});
  // two dicts of tensors: the key picks one, none is an error listing both
  check_golden("two_models", {.key = "model"});
  const TensorDict ema = TensorDict::load_torch(data("two_models.pt"), {.key = "ema"});
  CHECK(ema.get("0.bias").numel() == 8);
  check_throws_mentioning<ValueError>([] { (void)TensorDict::load_torch(data("two_models.pt")); },
                                      "several state_dicts, ['model', 'ema']");
  check_throws_mentioning<ValueError>(
      [] { (void)TensorDict::load_torch(data("nested.pt"), {.key = "optimizer"}); },
      "no entry 'optimizer'");
  check_throws_mentioning<ValueError>(
      [] { (void)TensorDict::load_torch(data("nested.pt"), {.key = "epoch"}); },
      "entry 'epoch' is not a state_dict");
}

TEST_CASE("load_file tells safetensors from .pt by their bytes") {
  if (!torch_checkpoints_supported()) return;
  const std::string pt = tmp_file("mlp_named.safetensors", slurp(data("mlp.pt")));
  check_same(TensorDict::load_file(pt), TensorDict::load_torch(data("mlp.pt")));
  check_same(TensorDict::load_file(data("mlp.expected.safetensors")),
             TensorDict::load_torch(data("mlp.pt")));
  std::remove(pt.c_str());
}

TEST_CASE("load_file: a safetensors header of 0x280 bytes is not taken for a pickle") {
  // its length's first bytes, 0x80 0x02, are a pickle's protocol-2 opening
  std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  header.resize(0x280, ' ');
  std::string bytes(8, '\0');
  bytes[0] = '\x80';
  bytes[1] = '\x02';
  const float v = 1.5f;
  bytes += header + std::string(reinterpret_cast<const char*>(&v), 4);
  const std::string path = tmp_file("header_0x280.safetensors", bytes);
  const TensorDict d = TensorDict::load_file(path);
  CHECK(d.get("a").to_vector<float>() == std::vector<float>{1.5f});
  std::remove(path.c_str());
}

TEST_CASE("hostile .pt files end in clean errors naming the file") {
  if (!torch_checkpoints_supported()) return;
  struct Case {
    const char* file;
    const char* says;
  };
  const Case cases[] = {
      {"evil_system.pt", "calls 'posix.system'"},
      {"evil_eval.pt", "calls '__builtin__.eval'"},  // protocol 2 names Python 2's module
      {"bad_opcode.pt", "opcode 0x49 ('I') is not one a state_dict pickle uses"},
      {"bad_memo.pt", "memo index 7 was never stored"},
      {"bad_underflow.pt", "stack underflow"},
      {"bad_huge_string.pt", "the pickle is truncated"},
      {"bad_missing_storage.pt", "record 'data/0', is missing"},
      {"bad_short_storage.pt", "storage '0' has 12 bytes, not the 6 elements of F32"},
      {"bad_view.pt", "runs beyond its storage '0' of 4 elements"},
      {"legacy.pt", "legacy format"},
      {"mlp.expected.safetensors", "not a readable zip archive"},
  };
  for (const Case& c : cases) {
    INFO(std::string(c.file));
    const std::string path = data(c.file);
    const std::string msg = message_of([&] { (void)TensorDict::load_torch(path); });
    CHECK_MESSAGE(has(msg, c.says), msg);
    CHECK_MESSAGE(has(msg, "[load_torch] '" + path + "'"), msg);
    CHECK_THROWS_AS((void)TensorDict::load_torch(path), ValueError);
  }
}

TEST_CASE("truncated and corrupted archives end in clean errors") {
  if (!torch_checkpoints_supported()) return;
  const std::string whole = slurp(data("cnn.pt"));
  REQUIRE(whole.size() > 1000);
  // every cut: the central directory is at the end, so most cuts lose it
  for (size_t cut : {size_t{0}, size_t{3}, size_t{30}, size_t{200}, whole.size() / 2,
                     whole.size() - 30, whole.size() - 1}) {
    INFO("cut at " << cut);
    const std::string path = tmp_file("cut.pt", whole.substr(0, cut));
    CHECK_THROWS_AS((void)TensorDict::load_torch(path), ValueError);
    std::remove(path.c_str());
  }
  // flipped bytes inside a stored record: the zip's CRC catches them
  std::string flipped = whole;
  const size_t at = flipped.find("cnn/data/0");
  REQUIRE(at != std::string::npos);
  const size_t next = flipped.find("PK", at);  // the record's data ends before the next header
  REQUIRE(next != std::string::npos);
  for (size_t i = next - 8; i < next; ++i) flipped[i] ^= 0x5a;
  const std::string path = tmp_file("flipped.pt", flipped);
  CHECK_THROWS_AS((void)TensorDict::load_torch(path), ValueError);
  std::remove(path.c_str());
  check_throws_mentioning<ValueError>([] { (void)TensorDict::load_torch("/nonexistent.pt"); },
                                      "cannot open the file");
  check_throws_mentioning<ValueError>([] { (void)TensorDict::load_torch("/tmp"); },
                                      "is a directory");
}

TEST_CASE("load_torch checks what a file makes it allocate against the memory budget") {
  if (!torch_checkpoints_supported()) return;
  set_memory_budget(2000);  // cnn.pt's tensors hold more
  const std::string msg = message_of([] { (void)TensorDict::load_torch(data("cnn.pt")); });
  set_memory_budget(0);
  CHECK_MESSAGE(has(msg, "memory budget"), msg);
  CHECK(TensorDict::load_torch(data("cnn.pt")).leaves().size() == 9);
}
