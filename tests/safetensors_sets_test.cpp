// Reading only some sets of a file (what each MPI rank reads of an ensemble): a stacked
// safetensors file's range of sets, a per-set input's slice in safetensors and .npy files. Each
// result is checked element by element against the whole file's tensors, and the memory budget
// shows that only the range's bytes are read.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "engine/engine.h"
#include "engine/limits.h"
#include "modules/modules.h"
#include "modules/numpy_files.h"
#include "tests/safetensors_files.h"
#include "tests/test_util.h"

using namespace td;
using namespace td::test;

namespace {

std::string tmp_path(const std::string& name, const char* ext = ".safetensors") {
  return "/tmp/td_sets_test_" + std::to_string(::getpid()) + "_" + name + ext;
}

// Element e of set s of t, which holds `sets` sets, each of its elements in a row.
double at(const Tensor& t, int64_t sets, int64_t s, int64_t e) {
  const int64_t per_set = t.numel() / sets;
  return t.contiguous().reshape({-1}).to(kFloat64)[s * per_set + e].item<double>();
}

// part holds sets [b, e) of whole, whose first nb dims hold the sets, element by element.
void check_sets(const Tensor& whole, int64_t nb, const Tensor& part, SetRange r) {
  REQUIRE(part.dim() == whole.dim() - nb + 1);
  CHECK(part.size(0) == r.size());
  CHECK(part.dtype() == whole.dtype());
  const int64_t sets = shape_numel(Shape(whole.shape().begin(), whole.shape().begin() + nb));
  const int64_t per_set = whole.numel() / sets;
  for (int64_t s = 0; s < r.size(); ++s)
    for (int64_t e = 0; e < per_set; ++e)
      CHECK(at(part, r.size(), s, e) == at(whole, sets, r.begin + s, e));
}

}  // namespace

TEST_CASE("load_safetensors(path, sets): the sets' part of every entry, one or two batch dims") {
  manual_seed(1);
  for (const Shape& batch : {Shape{6}, Shape{2, 3}}) {
    CAPTURE(batch);
    TensorDict d(batch);
    Shape b = batch;
    auto with = [&](std::initializer_list<int64_t> rest) {
      Shape s = b;
      s.insert(s.end(), rest.begin(), rest.end());
      return s;
    };
    d.set("w", randn(with({4, 3})));
    d.set("n.i", arange(0, shape_numel(batch) * 2, 1).reshape(with({2})));
    d.set("n.flag", gt(randn(with({5})), 0.0));
    d.set("d", randn(with({3})).to(kFloat64));
    const std::string path = tmp_path("stacked");
    d.save_safetensors(path);
    for (const SetRange r : {SetRange{0, 0}, SetRange{1, 4}, SetRange{0, 6}, SetRange{2, 3},
                             SetRange{5, 6}, SetRange{3, 3}}) {
      CAPTURE(r.begin);
      CAPTURE(r.end);
      const TensorDict part = TensorDict::load_safetensors(path, r);  // batch from the metadata
      CHECK(part.batch_size() == Shape{r.size()});
      CHECK(part.keys(true, true) == d.keys(true, true));
      for (const auto& [key, t] : d.leaves()) {
        CAPTURE(key);
        check_sets(t, static_cast<int64_t>(batch.size()), part.get(key), r);
      }
    }
    std::remove(path.c_str());
  }
}

TEST_CASE("load_safetensors(path, sets): batch size given, nested extra dims, converted dtypes") {
  // no td metadata: the batch size comes from the argument
  TensorDict plain;
  plain.set("w", arange(0, 24, 1).reshape({4, 3, 2}).to(kFloat32));
  const std::string path = tmp_path("plain");
  plain.save_safetensors(path);
  const TensorDict part = TensorDict::load_safetensors(path, SetRange{1, 3}, {4});
  CHECK(part.get("w").shape() == Shape{2, 3, 2});
  CHECK(part.get("w").to_vector<float>() ==
        std::vector<float>{6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17});
  CHECK_THROWS_WITH_AS(TensorDict::load_safetensors(path, SetRange{0, 1}),
                       doctest::Contains("no batch size to take sets [0, 1) of"), ValueError);
  CHECK_THROWS_WITH_AS(TensorDict::load_safetensors(path, SetRange{3, 5}, {4}),
                       doctest::Contains("sets [3, 5) are not a range within the 4 sets"),
                       ValueError);
  CHECK_THROWS_AS(TensorDict::load_safetensors(path, SetRange{2, 1}, {4}), ValueError);
  CHECK_THROWS_AS(TensorDict::load_safetensors(path, SetRange{-1, 1}, {4}), ValueError);
  // a batch size the file's shapes do not have
  CHECK_THROWS_AS(TensorDict::load_safetensors(path, SetRange{0, 1}, {5}), ValueError);

  // a nested dict with a batch dim of its own beyond its parent's keeps it after the sets
  TensorDict nested({3});
  TensorDict inner({3, 2});
  inner.set("x", arange(0, 12, 1).reshape({3, 2, 2}));
  nested.set("inner", inner);
  const std::string npath = tmp_path("nested");
  nested.save_safetensors(npath);
  const TensorDict np = TensorDict::load_safetensors(npath, SetRange{1, 3});
  CHECK(np.batch_size() == Shape{2});
  CHECK(np.get_dict("inner").batch_size() == Shape{2, 2});
  CHECK(np.get("inner.x").to_vector<int64_t>() == std::vector<int64_t>{4, 5, 6, 7, 8, 9, 10, 11});

  // F16 and I32 entries, converted as the whole load converts them
  std::string data;
  for (uint16_t h : {0x3C00, 0xC000, 0x3800, 0x3400}) data.append(reinterpret_cast<char*>(&h), 2);
  for (int32_t i : {-3, 7, 11, -20}) data.append(reinterpret_cast<char*>(&i), 4);
  const std::string header = R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
                             R"("i":{"dtype":"I32","shape":[4],"data_offsets":[8,24]}})";
  const std::string cpath = tmp_path("convert");
  write_bytes(cpath, file_of(header, data));
  const TensorDict c = TensorDict::load_safetensors(cpath, SetRange{1, 3}, {4});
  CHECK(c.get("h").to_vector<float>() == std::vector<float>{-2.0f, 0.5f});
  CHECK(c.get("i").dtype() == kInt64);
  CHECK(c.get("i").to_vector<int64_t>() == std::vector<int64_t>{7, 11});
  for (const auto& p : {path, npath, cpath}) std::remove(p.c_str());
}

TEST_CASE("load_safetensors(path, sets) reads only the sets' bytes: the memory budget shows it") {
  TensorDict d({64});
  d.set("w", zeros({64, 1024}));  // 256 KiB, 4 KiB per set
  const std::string path = tmp_path("budget");
  d.save_safetensors(path);
  set_memory_budget(64 * 1024);
  CHECK_THROWS_WITH_AS(TensorDict::load_safetensors(path), doctest::Contains("memory budget"),
                       ValueError);
  CHECK_THROWS_WITH_AS(TensorDict::load_safetensors(path, SetRange{0, 32}),
                       doctest::Contains("data bytes of sets [0, 32) are beyond the memory budget"),
                       ValueError);
  const TensorDict part = TensorDict::load_safetensors(path, SetRange{8, 16});
  set_memory_budget(0);
  CHECK(part.get("w").shape() == Shape{8, 1024});
  std::remove(path.c_str());
}

TEST_CASE("safetensors_entries: keys and shapes from the header, in the file's order") {
  TensorDict d;
  d.set("b", zeros({2, 3}));
  d.set("a.x", zeros({4}));
  const std::string path = tmp_path("entries");
  d.save_safetensors(path);
  const auto entries = TensorDict::safetensors_entries(path);
  REQUIRE(entries.size() == 2);
  CHECK(entries[0].first == "b");
  CHECK(entries[0].second == Shape{2, 3});
  CHECK(entries[1].first == "a.x");
  CHECK(entries[1].second == Shape{4});
  CHECK_FALSE(TensorDict::is_torch_file(path));
  CHECK(TensorDict::is_torch_file(std::string(TD_TEST_DATA_DIR) + "/checkpoints/cnn.pt"));
  write_bytes(path, "not a safetensors file");
  CHECK_THROWS_AS(TensorDict::safetensors_entries(path), ValueError);
  std::remove(path.c_str());
}

TEST_CASE("per-set inputs: a range of the sets at any dims, from safetensors and .npy files") {
  manual_seed(2);
  const Tensor a = randn({3, 6, 2});     // 6 sets at dim 1
  const Tensor b = randn({2, 2, 3, 4});  // 6 sets at dims 1, 2
  TensorDict d;
  d.set("a", a);
  const std::string path = tmp_path("input");
  d.save_safetensors(path);
  const std::string npy = tmp_path("input", ".npy");
  save_npy(b, npy);
  for (const SetRange r : {SetRange{0, 6}, SetRange{2, 5}, SetRange{4, 4}}) {
    CAPTURE(r.begin);
    CAPTURE(r.end);
    const Tensor pa = TensorDict::load_safetensors_input(path, r, 6, 1).get("a");
    CHECK(pa.shape() == Shape{3, r.size(), 2});
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t s = 0; s < r.size(); ++s)
        for (int64_t k = 0; k < 2; ++k)
          CHECK(pa[i][s][k].item<float>() == a[i][r.begin + s][k].item<float>());
    const Tensor pb = load_npy_input(npy, r, 6, 1, 2);
    CHECK(pb.shape() == Shape{2, r.size(), 4});
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t s = 0; s < r.size(); ++s)
        for (int64_t k = 0; k < 4; ++k) {
          const int64_t set = r.begin + s;
          CHECK(pb[i][s][k].item<float>() == b[i][set / 3][set % 3][k].item<float>());
        }
  }
  // sets at dim 0 of a Fortran-order array: read whole and sliced, the same values
  const std::string fortran = std::string(TD_TEST_DATA_DIR) + "/numpy/fortran.npy";
  const Tensor f = load_npy(fortran);
  const Tensor pf = load_npy_input(fortran, {1, 2}, f.size(0), 0, 1);
  CHECK(equal(pf, f.narrow(0, 1, 1)));
  // the wrong number of sets, too few dims, a bad range: ValueErrors naming the file and entry
  CHECK_THROWS_WITH_AS(
      TensorDict::load_safetensors_input(path, {0, 1}, 5, 1),
      doctest::Contains("entry 'a' of shape [3, 6, 2]: its dims hold 6 sets, not 5"), ValueError);
  CHECK_THROWS_WITH_AS(TensorDict::load_safetensors_input(path, {0, 1}, 6, 3),
                       doctest::Contains("fewer than 4 dims"), ValueError);
  CHECK_THROWS_WITH_AS(load_npy_input(npy, {0, 7}, 6, 1, 2),
                       doctest::Contains("sets [0, 7) are not a range within the 6 sets"),
                       ValueError);
  CHECK_THROWS_AS(load_npy_input(npy, {0, 1}, 6, -1, 1), ValueError);
  std::remove(path.c_str());
  std::remove(npy.c_str());
}
