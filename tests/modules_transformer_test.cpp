// TransformerEncoderLayer and TransformerEncoder against PyTorch 1.13 (golden files in
// tests/data/modules/transformer*.safetensors): each argument, both masks, unbatched input, the
// encoder with and without a final norm, stacked sets under functional_vmap; parameter names,
// dropout under vmap and errors.
#include <doctest/doctest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "modules/modules.h"
#include "tests/functional_vmap_helpers.h"
#include "tests/modules_golden.h"
#include "tests/test_util.h"
#include "vmap/vmap.h"

using namespace td;
using namespace td::test;

namespace {

// The names the golden script wrote as character codes, '\n' between names.
std::vector<std::string> names_of(const Tensor& codes) {
  std::vector<std::string> out(1);
  for (int64_t c : codes.to_vector<int64_t>()) {
    if (c == '\n')
      out.emplace_back();
    else
      out.back() += static_cast<char>(c);
  }
  return out;
}

std::vector<std::string> param_names(const nn::Module& m) {
  std::vector<std::string> out;
  for (auto& [n, p] : m.named_parameters()) out.push_back(n);
  return out;
}

struct LayerCase {
  const char* name;
  std::string activation;
  double eps;
  bool batch_first, norm_first;
};

}  // namespace

TEST_CASE("golden: TransformerEncoderLayer, each argument and mask") {
  TensorDict g = golden("transformer_layer");
  const Tensor causal = g.get("causal"), float_mask = g.get("float_mask"), kpm = g.get("kpm");
  for (const LayerCase& c :
       {LayerCase{"seq_first", "relu", 1e-5, false, false},
        LayerCase{"batch_first", "relu", 1e-5, true, false},
        LayerCase{"norm_first", "relu", 1e-5, true, true},
        LayerCase{"gelu", "gelu", 1e-5, true, false}, LayerCase{"eps", "relu", 0.5, true, false},
        LayerCase{"gelu_norm_first_seq", "gelu", 1e-3, false, true}}) {
    CAPTURE(c.name);
    auto m = std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.1, c.activation, c.eps,
                                                           c.batch_first, c.norm_first);
    auto guard = g.get_dict(c.name).to_module(*m);
    m->eval();
    const Tensor src = g.get(c.batch_first ? "src_bf" : "src_sf");
    // outputs are stored batch first
    auto run = [&](const ValueDict& kw) {
      Tensor y = (*m)({src}, kw).tensor();
      return c.batch_first ? y : y.transpose(0, 1);
    };
    auto want = [&](const std::string& key) { return g.get(key + "." + c.name); };
    check_close(run({}), want("output"), "no mask");
    check_close(run({{"src_mask", float_mask}}), want("output_float_mask"), "float src_mask");
    check_close(run({{"src_mask", causal}}), want("output_causal"), "bool src_mask");
    check_close(run({{"src_key_padding_mask", kpm}}), want("output_kpm"), "key padding");
    check_close(run({{"src_key_padding_mask", g.get("kpm_float")}}), want("output_kpm_float"),
                "float key padding");
    check_close(run({{"src_mask", causal}, {"src_key_padding_mask", kpm}}),
                want("output_causal_kpm"), "bool mask and key padding");
    check_close(run({{"src_mask", float_mask}, {"src_key_padding_mask", kpm}}),
                want("output_float_mask_kpm"), "float mask and key padding");
    // positional masks, None passed explicitly
    check_close(run({{"src_mask", Value()}, {"src_key_padding_mask", Value()}}), want("output"),
                "None masks");
    Tensor u = m->call_method("forward", {g.get("src_bf")[0], causal, kpm[0]}).tensor();
    check_close(u, want("output_unbatched"), "unbatched");
  }
  // torch's parameter names, in torch's order
  nn::TransformerEncoderLayer m(8, 2, 16);
  CHECK(param_names(m) == names_of(g.get("param_names")));
  CHECK(param_names(m) ==
        std::vector<std::string>{"self_attn.in_proj_weight", "self_attn.in_proj_bias",
                                 "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                                 "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
                                 "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"});
  CHECK(m.method_arg_names("forward") ==
        std::vector<std::string>{"src", "src_mask", "src_key_padding_mask"});
  CHECK(m.linear1->weight->shape() == Shape{16, 8});
  CHECK(m.linear2->weight->shape() == Shape{8, 16});
}

TEST_CASE("golden: TransformerEncoder with and without a final norm") {
  TensorDict g = golden("transformer_encoder");
  struct Case {
    const char* name;
    bool batch_first, norm_first, gelu;
    std::optional<double> norm_eps;
  };
  for (const Case& c :
       {Case{"plain", true, false, false, std::nullopt}, Case{"norm", false, false, false, 1e-4},
        Case{"norm_first_gelu", true, true, true, 1e-5}}) {
    CAPTURE(c.name);
    nn::TransformerEncoderLayer layer(8, 2, 16, 0.1, c.gelu ? "gelu" : "relu", 1e-5, c.batch_first,
                                      c.norm_first);
    std::shared_ptr<nn::Module> norm;
    if (c.norm_eps) norm = std::make_shared<nn::LayerNorm>(8, *c.norm_eps);
    auto m = std::make_shared<nn::TransformerEncoder>(layer, 2, norm);
    CHECK(param_names(*m) == names_of(g.get(std::string("param_names.") + c.name)));
    auto guard = g.get_dict(c.name).to_module(*m);
    m->eval();
    const Tensor src = g.get(c.batch_first ? "src_bf" : "src_sf");
    auto run = [&](const ValueDict& kw) {
      Tensor y = (*m)({src}, kw).tensor();
      return c.batch_first ? y : y.transpose(0, 1);
    };
    auto want = [&](const std::string& key) { return g.get(key + "." + c.name); };
    check_close(run({}), want("output"), "no mask");
    check_close(run({{"mask", g.get("causal")}, {"src_key_padding_mask", g.get("kpm")}}),
                want("output_masks"), "masks");
    check_close((*m)({g.get("src_bf")[1], g.get("causal")}).tensor(), want("output_unbatched"),
                "unbatched");
  }
  CHECK(nn::TransformerEncoder(nn::TransformerEncoderLayer(8, 2), 1).method_arg_names("forward") ==
        std::vector<std::string>{"src", "mask", "src_key_padding_mask"});
}

TEST_CASE("TransformerEncoder's layers are deep copies of the layer") {
  nn::TransformerEncoderLayer layer(8, 2, 16, 0.0, "gelu", 1e-3, true, true);
  layer.eval();
  nn::TransformerEncoder enc(layer, 3);
  REQUIRE(enc.layers.size() == 3);
  const auto mine = layer.named_parameters();
  for (size_t i = 0; i < 3; ++i) {
    const auto& copy = *enc.layers[i];
    CHECK(copy.activation == "gelu");
    CHECK(copy.norm_first);
    CHECK(copy.batch_first);
    CHECK(copy.norm1->eps == 1e-3);
    CHECK_FALSE(copy.is_training());
    CHECK_FALSE(copy.dropout1->is_training());
    const auto theirs = copy.named_parameters();
    REQUIRE(theirs.size() == mine.size());
    for (size_t j = 0; j < mine.size(); ++j) {
      CHECK(equal(theirs[j].second, mine[j].second));                // the same values
      CHECK_FALSE(theirs[j].second.shares_storage(mine[j].second));  // in tensors of its own
    }
  }
  // writing one layer changes neither the others nor the original
  Tensor w = enc.layers[0]->linear1->weight;
  copy_(w, zeros_like(w));
  CHECK_FALSE(equal(enc.layers[1]->linear1->weight, w));
  CHECK_FALSE(equal(layer.linear1->weight, w));
  auto names = param_names(enc);
  CHECK(names.front() == "layers.0.self_attn.in_proj_weight");
  CHECK(names.back() == "layers.2.norm2.bias");
}

TEST_CASE("golden: stacked TransformerEncoderLayer and TransformerEncoder under functional_vmap") {
  TensorDict g = golden("transformer_stacked");
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.1, "relu", 1e-5, true);
  auto encoder = std::make_shared<nn::TransformerEncoder>(
      nn::TransformerEncoderLayer(8, 2, 16, 0.1, "gelu", 1e-5, true), 2,
      std::make_shared<nn::LayerNorm>(8));
  for (const auto& [name, m] : {std::pair<std::string, std::shared_ptr<nn::Module>>{"layer", layer},
                                {"encoder", encoder}}) {
    CAPTURE(name);
    m->eval();
    TensorDict params = g.get_dict(name + ".params").clone();
    params.set_batch_size({3});
    for (std::optional<int64_t> chunk : {std::optional<int64_t>{}, std::optional<int64_t>{2}})
      for (bool loop : {false, true}) {
        CAPTURE(loop);
        Value shared = nn::functional_vmap(
            *m, {.params = params,
                 .kwargs = {{"src", g.get("src")}, {"src_key_padding_mask", g.get("kpm")}},
                 .chunk_size = chunk,
                 .loop = loop});
        Value per_set = nn::functional_vmap(*m, {.params = params,
                                                 .kwargs = {{"src", g.get("src_per_set")}},
                                                 .in_dims = {{"src", 0}},
                                                 .chunk_size = chunk,
                                                 .loop = loop});
        for (int64_t i = 0; i < 3; ++i) {
          check_close(shared.tensor()[i], g.get(name + ".output")[i], "shared src, set " + name);
          check_close(per_set.tensor()[i], g.get(name + ".output_per_set")[i], "per-set src");
        }
      }
  }
}

TEST_CASE("dropout in training under functional_vmap: the same bits chunked, looped, threaded") {
  auto make_layer = [] {
    return std::make_shared<nn::TransformerEncoderLayer>(8, 2, 16, 0.3, "relu", 1e-5, true);
  };
  auto make_encoder = [] {
    return std::make_shared<nn::TransformerEncoder>(
        nn::TransformerEncoderLayer(8, 2, 16, 0.3, "gelu", 1e-5, true, true), 2,
        std::make_shared<nn::LayerNorm>(8));
  };
  for (bool encoder : {false, true}) {
    CAPTURE(encoder);
    std::vector<std::shared_ptr<nn::Module>> nets;
    for (int i = 0; i < 4; ++i)
      nets.push_back(encoder ? std::shared_ptr<nn::Module>(make_encoder())
                             : std::shared_ptr<nn::Module>(make_layer()));
    TensorDict params = TensorDict::from_modules(nets);
    Tensor src = randn({2, 5, 8});
    auto run = [&](std::optional<int64_t> chunk, bool loop, int threads = 1) {
      Threads t(threads);
      manual_seed(11);
      return nn::functional_vmap(*nets[0], {.params = params,
                                            .args = {src},
                                            .randomness = Randomness::Different,
                                            .chunk_size = chunk,
                                            .loop = loop})
          .tensor();
    };
    Tensor base = run(std::nullopt, false);
    for (int64_t c : {1, 2, 4}) CHECK(equal(run(c, false), base));
    CHECK(equal(run(std::nullopt, true), base));
    CHECK(equal(run(std::nullopt, false, 2), base));
    // the masks differ between sets: identical parameters give different outputs
    std::vector<std::shared_ptr<nn::Module>> same(4, nets[0]);
    manual_seed(11);
    Tensor d = nn::functional_vmap(*nets[0], {.params = TensorDict::from_modules(same),
                                              .args = {src},
                                              .randomness = Randomness::Different})
                   .tensor();
    for (int i = 1; i < 4; ++i) CHECK_FALSE(equal(d[i], d[0]));
    // training-mode dropout needs a randomness; eval mode does not draw
    CHECK_THROWS_AS(nn::functional_vmap(*nets[0], {.params = params, .args = {src}}), RuntimeError);
    nets[0]->eval();
    CHECK_NOTHROW(nn::functional_vmap(*nets[0], {.params = params, .args = {src}}));
  }
}

TEST_CASE("TransformerEncoderLayer and TransformerEncoder errors") {
  check_throws_mentioning<ValueError>([] { nn::TransformerEncoderLayer(10, 4); },
                                      "[TransformerEncoderLayer] d_model (10) must be positive "
                                      "and divisible by nhead (4)");
  check_throws_mentioning<ValueError>(
      [] { nn::TransformerEncoderLayer(8, 2, 16, 0.1, "tanh"); },
      "[TransformerEncoderLayer] activation should be \"relu\" or \"gelu\", not \"tanh\"");
  CHECK_THROWS_AS(nn::TransformerEncoderLayer(8, 2, 16, 1.5), ValueError);
  CHECK_THROWS_AS(nn::TransformerEncoderLayer(8, 2, 0), ValueError);
  nn::TransformerEncoderLayer m(8, 2, 16);
  check_throws_mentioning<ValueError>(
      [&] {
        m({zeros({2, 3, 4, 8})});
      },
      "[TransformerEncoderLayer] src must be 2-D (unbatched) or "
      "3-D, got shape [2, 3, 4, 8]");
  check_throws_mentioning<ValueError>(
      [&] {
        m({zeros({5, 2, 6})});
      },
      "src's last dim must be d_model (8), got shape [5, 2, 6]");
  Tensor src = zeros({5, 2, 8});
  check_throws_mentioning<TypeError>(
      [&] {
        m({src}, {{"src_mask", 1.0}});
      },
      "[TransformerEncoderLayer] src_mask must be a Tensor or "
      "None, not float");
  check_throws_mentioning<TypeError>(
      [&] {
        m({src}, {{"src_key_padding_mask", zeros({2, 5}, kInt64)}});
      },
      "only bool and floating types of src_key_padding_mask are supported, got int64");
  // a mask of the wrong shape is MultiheadAttention's error, with both shapes
  check_throws_mentioning<ValueError>(
      [&] {
        m({src}, {{"src_mask", zeros({4, 4})}});
      },
      "attn_mask should have shape [5, 5], got [4, 4]");
  check_throws_mentioning<ValueError>(
      [] { nn::TransformerEncoder(nn::TransformerEncoderLayer(8, 2), 0); },
      "[TransformerEncoder] num_layers must be positive, got 0");
  nn::TransformerEncoder enc(m, 2);
  check_throws_mentioning<TypeError>(
      [&] {
        enc({src}, {{"mask", "x"}});
      },
      "[TransformerEncoder] mask must be a Tensor or None, not str");
  CHECK_THROWS_AS(enc({zeros({8})}), ValueError);
}
