// functional_vmap against PyTorch 1.13 (functorch vmap over combine_state_for_ensemble), on
// golden data made by tests/golden/make_functional_vmap_golden.py.
#include <doctest/doctest.h>

#include "engine/engine.h"
#include "modules/modules.h"
#include "vmap/vmap.h"

using namespace td;

namespace {

struct Golden {
  TensorDict params;
  TensorDict file;
};

Golden load(const std::string& name) {
  TensorDict file =
      TensorDict::load_safetensors(std::string(TD_TEST_DATA_DIR) + "/functional_vmap/" + name +
                                   ".safetensors");
  TensorDict params = file.get_dict("params").clone();
  params.set_batch_size({params.leaves().front().second.size(0)});
  return {params, file};
}

void check_close(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  CHECK(allclose(got, want.to(got.dtype()), 1e-5, 1e-6));
}

// Runs the module over the golden params with the golden inputs as kwargs.
Value run(nn::Module& m, const Golden& g, const std::vector<std::string>& per_set = {},
          std::optional<int64_t> chunk = std::nullopt, bool loop = false) {
  ValueDict kwargs;
  for (const auto& [k, t] : g.file.get_dict("input").leaves()) kwargs.set(k, t);
  std::map<std::string, int64_t> in_dims;
  for (const auto& k : per_set) in_dims[k] = 0;
  return nn::functional_vmap(m, {.params = g.params, .kwargs = kwargs, .in_dims = in_dims,
                                 .chunk_size = chunk, .loop = loop});
}

std::shared_ptr<nn::Sequential> seq(std::vector<std::shared_ptr<nn::Module>> mods) {
  return std::make_shared<nn::Sequential>(mods);
}

void check_all_ways(nn::Module& m, const std::string& name,
                    const std::vector<std::string>& per_set = {}) {
  Golden g = load(name);
  for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{2}})
    for (bool loop : {false, true}) {
      CAPTURE(name);
      CAPTURE(loop);
      Value out = run(m, g, per_set, chunk, loop);
      if (out.is_list()) {
        for (size_t i = 0; i < out.list().size(); ++i)
          check_close(out.list()[i].tensor(), g.file.get("output." + std::to_string(i)));
      } else {
        check_close(out.tensor(), g.file.get("output"));
      }
    }
}

}  // namespace

TEST_CASE("golden: MLP with shared and per-set inputs") {
  auto m = seq({std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::ReLU>(),
                std::make_shared<nn::Linear>(8, 3)});
  m->eval();
  check_all_ways(*m, "mlp_shared");
  check_all_ways(*m, "mlp_per_set", {"input"});
}

TEST_CASE("golden: LayerNorm MLP") {
  auto m = seq({std::make_shared<nn::Linear>(4, 8), std::make_shared<nn::LayerNorm>(Shape{8}),
                std::make_shared<nn::GELU>(), std::make_shared<nn::Linear>(8, 2)});
  m->eval();
  check_all_ways(*m, "layernorm_mlp");
}

TEST_CASE("golden: BatchNorm1d in eval and in training (outputs and running stats)") {
  auto m = seq({std::make_shared<nn::Linear>(4, 6), std::make_shared<nn::BatchNorm1d>(6),
                std::make_shared<nn::ReLU>()});
  m->eval();
  check_all_ways(*m, "batchnorm_eval");
  m->train();
  for (bool loop : {false, true}) {
    Golden g = load("batchnorm_train");
    Value out = run(*m, g, {"input"}, std::nullopt, loop);
    check_close(out.tensor(), g.file.get("output"));
    check_close(g.params.get("1.running_mean"), g.file.get("after.1.running_mean"));
    check_close(g.params.get("1.running_var"), g.file.get("after.1.running_var"));
    CHECK(equal(g.params.get("1.num_batches_tracked"), g.file.get("after.1.num_batches_tracked")));
  }
}

TEST_CASE("golden: CNN") {
  auto m = seq({std::make_shared<nn::Conv2d>(2, 4, 3, 1, 1), std::make_shared<nn::ReLU>(),
                std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Flatten>(),
                std::make_shared<nn::Linear>(16, 3)});
  m->eval();
  check_all_ways(*m, "cnn");
}

TEST_CASE("golden: Embedding") {
  auto m = std::make_shared<nn::Embedding>(10, 4);
  check_all_ways(*m, "embedding");
}

TEST_CASE("golden: MultiheadAttention returns (output, weights)") {
  auto m = std::make_shared<nn::MultiheadAttention>(8, 2, 0.0, true, true);
  m->eval();
  check_all_ways(*m, "mha");
}
