// Stacking per-member files (TensorDict::load_stacked): three PyTorch-trained members of one MLP
// (tests/golden/make_checkpoint_golden.py) stacked and run with functional_vmap must give each
// member's own PyTorch output; members that do not fit name the file and the key.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/tensor_values.h"
#include "tests/test_util.h"
#include "vmap/functional_vmap.h"

using namespace td;
using namespace td::test;

namespace {

std::string data(const std::string& name) {
  return std::string(TD_TEST_DATA_DIR) + "/checkpoints/" + name;
}

// 'path' for a message ('"'" + s' trips GCC 12's false -Wrestrict)
std::string quoted(const std::string& s) {
  std::string q = "'";
  q += s;
  q += "'";
  return q;
}

std::shared_ptr<nn::Sequential> member_mlp() {
  auto seq = std::make_shared<nn::Sequential>();
  seq->push_back(std::make_shared<nn::Linear>(5, 16));
  seq->push_back(std::make_shared<nn::ReLU>());
  seq->push_back(std::make_shared<nn::Linear>(16, 3));
  return seq;
}

}  // namespace

TEST_CASE("load_stacked: N member files run through functional_vmap as PyTorch ran each") {
  if (!torch_checkpoints_supported()) return;
  // .pt and safetensors members mixed
  const std::vector<std::string> files = {data("member_0.pt"), data("member_1.safetensors"),
                                          data("member_2.pt")};
  const TensorDict params = TensorDict::load_stacked(files);
  CHECK(params.batch_size() == Shape{3});
  CHECK(params.get("0.weight").shape() == Shape{3, 16, 5});
  // the same stacked tensors as torch.stack of the members' state_dicts
  const TensorDict stacked = TensorDict::load_safetensors(data("members.stacked.safetensors"));
  for (const auto& [key, t] : stacked.leaves()) {
    INFO(key);
    check_close(params.get(key), t.to_vector<double>(), 1e-12);
  }
  auto model = member_mlp();
  const Tensor x = TensorDict::load_safetensors(data("members.input.safetensors")).get("input");
  const Tensor want =
      TensorDict::load_safetensors(data("members.expected.safetensors")).get("output");
  const Value y = nn::functional_vmap(*model, {.params = params, .args = {x}});
  REQUIRE(y.tensor().shape() == Shape{3, 7, 3});
  check_close(y.tensor(), want.to_vector<double>(), 1e-5);
}

TEST_CASE("load_stacked: expand_identical keeps a tensor equal in every member once") {
  if (!torch_checkpoints_supported()) return;
  const std::string m0 = data("member_0.pt"), m1 = data("member_1.pt");
  const TensorDict same =
      TensorDict::load_stacked({m0, m0, m0}, {.expand_identical = true, .key = {}});
  const Tensor w = same.get("0.weight");
  CHECK(w.shape() == Shape{3, 16, 5});
  CHECK(w.stride(0) == 0);  // one copy, expanded
  const TensorDict mixed =
      TensorDict::load_stacked({m0, m1}, {.expand_identical = true, .key = {}});
  CHECK(mixed.get("0.weight").stride(0) == 80);
  const TensorDict plain = TensorDict::load_stacked({m0, m0});
  CHECK(plain.get("0.weight").stride(0) == 80);
}

TEST_CASE("load_stacked: members that do not stack name the file and the key") {
  if (!torch_checkpoints_supported()) return;
  const std::string m0 = data("member_0.pt");
  check_throws_mentioning<ValueError>(
      [&] {
        (void)TensorDict::load_stacked({m0, data("member_extra_key.pt")});
      },
      quoted(data("member_extra_key.pt")) + " has '2.extra', which " + quoted(m0) +
          " (member 0) has not");
  check_throws_mentioning<ValueError>(
      [&] {
        (void)TensorDict::load_stacked({data("member_extra_key.pt"), m0});
      },
      quoted(m0) + " has no '2.extra'");
  check_throws_mentioning<ValueError>(
      [&] {
        (void)TensorDict::load_stacked({m0, data("member_bad_shape.pt")});
      },
      quoted(data("member_bad_shape.pt")) +
          ": '2.weight' is float32 of shape [4, 16] but float32 of shape [3, 16]");
  check_throws_mentioning<ValueError>([] { (void)TensorDict::load_stacked({}); }, "no files given");
  // a hostile member is the loader's own error
  check_throws_mentioning<ValueError>(
      [&] {
        (void)TensorDict::load_stacked({m0, data("evil_system.pt")});
      },
      "posix.system");
}
